"""A campaign: the per-shape loop (agent.loop.shape_loop.ShapeLoop) over a list of shapes, resumable, on every
GPU given.

Work layout. Shapes run in parallel lanes (two per GPU: while one lane's candidate is on the GPU, the other is
proposing and compiling). The evaluator's WorkerPool holds one worker process per GPU and hands each evaluation to
an idle one. Every batch of proposals is sent to a compile pool (one nvcc per CPU core) the moment it arrives, so
by the time the loop asks to evaluate candidate i, candidates i+1.. are already building; the evaluator then finds
them in its content-hash build cache.

Resume. The loop checkpoints after every node and archives each evaluation the moment it finishes (and looks every
source up by hash before evaluating it), so running the same command again after a kill continues where each
shape stopped and repeats no finished evaluation. The campaign's own extras (seeds from the global archive, final
measurements in each mode) are keyed the same way.

Archives. runs/<run>/archive.sqlite holds this run's variants; the global archive (~/.cache/cuda-l2/archive.sqlite
or $CUDAL2_ARCHIVE) collects every run's variants. A new shape is seeded with the global archive's best kernel for
it and for its nearest shapes, re-evaluated here (a number measured elsewhere is never trusted).

The GPU is reached only through a `Seam` (compile, evaluate); tests replace it with recorded results.
"""
from __future__ import annotations

import json
import math
import os
import re
import threading
import time
import traceback
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from agent.campaign.db import RUN_RECORD, UNRECORDED, CampaignDB, run_record
from agent.campaign.progress import PROGRESS_BASELINES, Progress, ShapeProgress
from agent.resources import code_commit
from agent.shapes import Shape, shape_str
from evaluator.contract import MODES
from evaluator.record import BEST_NVIDIA, NOT_ABOUT_THE_KERNEL, EvalResult
from evaluator.session import GPUChoiceError, GPUSession

SEED_PROPOSER = "seed:global-archive"
TWIN_PROPOSER = "cold-twin"  # a leader's variant for a cold single call, played in COLD_MODE's tournament
FINAL_MODES = ("offline", "server")
# Rounds of a tournament of leaders: each is a shuffled pass over every leader and baseline (power-steady on a big
# shape: ~0.19 s a callable in the quick profile), and a leader's figure is its median per-round speedup.
TOURNAMENT_ROUNDS = 15
# A mode tournament also plays each other family's best leader within this fraction of the fastest: a cold single
# call costs each family differently (H200, 1024x2048x64 and 128x16384x64: cp.async kernels kept 0.90-0.92 of their
# separated figure in server mode, TMA kernels 0.84-0.87), so a family behind in the search can win there.
MODE_FAMILY_SLACK = 0.85


def mode_players(ranked: list, top: int) -> list:
    """The top `top` of `ranked`, then the best of each family they lack (a kernel of no family counts as one) whose
    pooled speedup is within MODE_FAMILY_SLACK of the fastest's, in ranking order."""
    lead = list(ranked[:top])
    if not lead:
        return lead
    floor = MODE_FAMILY_SLACK * max(v.extra["pooled_speedup"] for v in lead)
    seen = {v.family for v in lead}
    for v in ranked[top:]:
        if v.family not in seen and v.extra["pooled_speedup"] >= floor:
            lead.append(v)
            seen.add(v.family)
    return lead


def global_archive_path() -> Path:
    env = os.environ.get("CUDAL2_ARCHIVE")
    if env:
        return Path(env).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "cuda-l2" / "archive.sqlite"


class CampaignError(ValueError):
    """Bad campaign input (exit code 2)."""


# ---------------------------------------------------------------- the GPU seam

class Seam:
    """What the campaign needs from the evaluator. `gpu_name`/`arch` key the archive; `lanes` is the number of
    shapes worked on at once."""
    gpu_name: str = ""
    arch: str | None = None
    lanes: int = 1
    profiles: bool = False  # whether profile() gives Nsight Compute records
    # whether evaluate() takes rivals= and rounds= (evaluator.api.evaluate's): leaders timed in the candidate's rounds
    tournaments: bool = False

    def compile(self, source: str) -> None:  # warm the build cache; errors surface in evaluate()
        pass

    def evaluate(self, source: str, shape: Shape, *, acc: str, mode: str, profile: str,
                 rivals: dict[str, str] | None = None, rounds: int | None = None) -> EvalResult:
        raise NotImplementedError

    def gpu_facts(self) -> dict[str, Any]:
        """What the prompt tells the model about the GPU (SMs, shared memory, L2, clocks)."""
        return {}

    def profile(self, source: str, shape: Shape, *, acc: str, arch: str | None = None) -> dict | None:
        """Nsight Compute record of a candidate (None where profiling is off)."""
        return None

    def close(self) -> None:
        pass


class EvaluatorSeam(GPUSession, Seam):
    """The real evaluator: a GPU session (evaluator.session) over the given GPUs; bad --gpus is bad campaign input."""

    def __init__(self, gpus: list[int], ncu: bool | None = None):
        try:
            super().__init__(gpus, ncu)
        except GPUChoiceError as e:
            raise CampaignError(f"--gpus {e}") from None


# ---------------------------------------------------------------- compile-ahead

class _CompileAhead:
    """Sends every proposed source to the compile pool as soon as it is proposed."""

    def __init__(self, seam: Seam, workers: int):
        self.seam = seam
        self.pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="compile")
        self._futs: dict[str, Future] = {}
        self._lock = threading.Lock()

    def submit(self, source: str) -> Future:
        with self._lock:
            f = self._futs.get(source)
            if f is None:
                f = self._futs[source] = self.pool.submit(self.seam.compile, source)
            return f

    def wait(self, source: str) -> None:
        f = self.submit(source)
        try:
            f.result()
        except Exception:
            pass  # the evaluator compiles again and reports the error as the kernel's status
        with self._lock:
            self._futs.pop(source, None)

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)


class _AheadProposer:
    """A proposer whose proposals start compiling the moment they exist."""

    def __init__(self, inner, ahead: _CompileAhead):
        self.inner, self.ahead, self.name = inner, ahead, inner.name

    def propose(self, context, n):
        props = self.inner.propose(context, n)
        for p in props:
            if p.source:
                self.ahead.submit(p.source)
        return props

    def prompt_for_log(self, context):
        return self.inner.prompt_for_log(context)


# ---------------------------------------------------------------- the campaign

_RUN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def check_run_place(run: str, runs_dir: str | Path) -> None:
    """A run is a folder directly under runs_dir: its name must not climb out of it or hide in it."""
    if not _RUN_NAME.fullmatch(run or ""):
        raise CampaignError(f"run name {run!r}: use letters, digits, '.', '_' and '-', starting with a letter or "
                            "digit (the run folder is RUNS_DIR/NAME; choose it with --run NAME)")
    if Path(runs_dir).exists() and not Path(runs_dir).is_dir():
        raise CampaignError(f"--runs-dir {runs_dir} exists and is not a folder")


@dataclass
class CampaignConfig:
    run: str
    shapes: list[Shape]
    acc: str = "fp32"
    mode: str = "offline"
    profile: str = "quick"  # the search's timing profile
    budget_candidates: int | None = 16
    budget_minutes: float | None = None  # the whole campaign's wall-clock budget
    runs_dir: Path = Path("runs")
    global_archive: Path | None = None  # None: no global archive
    seed_from_global: bool = True
    final_modes: tuple[str, ...] = FINAL_MODES  # re-measure each shape's winner in these modes
    final_repeats: int = 3  # separate evaluations per final mode; reports take their median
    # time this many leaders head to head before the winner is chosen (0: the search's fastest wins)
    confirm_top: int = 3
    # each final mode other than the search's plays its own tournament of the leaders, whose winner it measures:
    # the fastest kernel back to back is not always the fastest in a single cold call (server mode)
    mode_winners: bool = True
    n_per_step: int = 4
    compile_workers: int | None = None
    retrieve: bool = True
    lanes: int | None = None  # shapes worked on at once; None: the seam's (two per GPU)
    ncu: str = "auto"  # as asked (auto, on, off): the seam profiles; the run record keeps it for report headers

    def __post_init__(self):
        check_run_place(self.run, self.runs_dir)
        bad = [m for m in (self.mode, *self.final_modes) if m not in MODES]
        if bad:
            raise CampaignError(f"unknown timing mode(s) {bad} (--mode, --final-modes); use {', '.join(MODES)}")
        if not isinstance(self.final_repeats, int) or self.final_repeats < 1:
            raise CampaignError(f"final_repeats must be a whole number ≥ 1, got {self.final_repeats!r}")

    @property
    def run_dir(self) -> Path:
        return Path(self.runs_dir) / self.run


def _check_run_params(cfg: CampaignConfig, seam: Seam, model_public: dict) -> None:
    """A run is one GPU model, accumulator and search mode; re-running with others would mix incomparable
    numbers in one archive, so it is refused with the way out."""
    path = cfg.run_dir / RUN_RECORD
    now = {"acc": cfg.acc, "mode": cfg.mode, "profile": cfg.profile, "gpu": seam.gpu_name}
    prev = run_record(cfg.run_dir)
    diff = {k: (prev.get(k), v) for k, v in now.items() if prev.get(k) not in (None, v)}
    if diff:
        what = ", ".join(f"{k} was {a!r}, now {b!r}" for k, (a, b) in diff.items())
        raise CampaignError(f"run {cfg.run!r} exists with other settings ({what}); resume it with the same "
                            f"settings or start another with --run NAME")
    shapes = [tuple(s) for s in prev.get("shapes", [])]
    shapes += [s for s in cfg.shapes if s not in shapes]
    # a resumed run may measure with other code: its tables name every commit it ran at
    # (a run whose earlier starts predate the record says so, rather than passing for one made at this commit)
    commits = list(prev.get("commits", [UNRECORDED] if prev else []))
    if (here := code_commit() or "unknown") not in commits[-1:]:
        commits.append(here)
    doc = {**prev, **now, "run": cfg.run, "shapes": [list(s) for s in shapes], "model": model_public,
           "commits": commits, "budget_candidates": cfg.budget_candidates, "budget_minutes": cfg.budget_minutes,
           # what a report's header states about the search (the last invocation's, on a resumed run)
           "n_per_step": cfg.n_per_step, "confirm_top": cfg.confirm_top, "final_repeats": cfg.final_repeats,
           "lanes": cfg.lanes, "ncu": cfg.ncu, "created": prev.get("created", time.time()), "updated": time.time()}
    cfg.run_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=2))
    tmp.replace(path)


def run_campaign(cfg: CampaignConfig, *, seam: Seam, make_proposer: Callable[[], Any],
                 retrieve_fn: Callable | None = None, model_public: dict | None = None, console=None,
                 live: bool | None = None) -> dict[str, Any]:
    """Run or resume the campaign; returns a summary (per-shape outcomes, failures)."""
    from agent.campaign.archive import Archive, source_hash
    from agent.families import COLD_MODE, cold_twin, current_source, render
    from agent.loop.budget import MAX_FAILED_STEPS, LoopBudget
    from agent.loop.shape_loop import ShapeLoop
    from agent.proposers.deadline import EndpointFatal
    from agent.transcript import Transcript

    if not cfg.shapes:
        raise CampaignError("no shapes to run")
    if cfg.budget_candidates is None and cfg.budget_minutes is None:
        raise CampaignError("give a budget: --budget N (candidates per shape) or --minutes M (whole campaign)")
    _check_run_params(cfg, seam, model_public or {})
    run_dir = cfg.run_dir
    archive = Archive(run_dir / "archive.sqlite")
    transcript = Transcript(run_dir / "transcript.jsonl", run=cfg.run)
    gdb = Archive(cfg.global_archive) if cfg.global_archive else None
    cdb = CampaignDB(run_dir / "campaign.sqlite")
    lanes = max(1, min(cfg.lanes or seam.lanes, len(cfg.shapes)))
    # --minutes is for the whole campaign: each lane runs its share of shapes one after another.
    per_shape_minutes = None
    if cfg.budget_minutes is not None:
        per_shape_minutes = cfg.budget_minutes / math.ceil(len(cfg.shapes) / lanes)
    budget = cfg.budget_candidates if cfg.budget_candidates is not None else 10_000
    gpu, acc = seam.gpu_name, cfg.acc

    progress_rows = []
    for s in cfg.shapes:
        p = ShapeProgress(s, budget if cfg.budget_candidates is not None else 0)
        for v in archive.history(gpu, acc, s):  # a resumed run starts from what it has
            p.note(v.result)
        progress_rows.append(p)
    progress = Progress(progress_rows, lanes, console=console, live=live)
    if cfg.budget_candidates is None:
        for p in progress_rows:
            p.budget = max(p.tried, 1)  # unknown under a time budget; shown as tried/tried
    ahead = _CompileAhead(seam, cfg.compile_workers or os.cpu_count() or 1)
    outcomes: dict[Shape, Any] = {}
    failures: dict[Shape, str] = {}

    def evaluate_for(shape: Shape) -> Callable[..., EvalResult]:
        def evaluate_fn(source, shp, *, acc, arch=None, **kw) -> EvalResult:
            t0 = time.monotonic()  # the wait for its compile counts: on big CUTLASS kernels it is most of a step
            ahead.wait(source)
            res = seam.evaluate(source, tuple(shp), acc=acc, mode=cfg.mode, profile=cfg.profile)
            dt = time.monotonic() - t0
            if res.status not in NOT_ABOUT_THE_KERNEL:  # the loop archives these; others are retried later
                progress.event(shape, "eval", res, dt)
            return res
        return evaluate_fn

    def adopt(shape: Shape, src: str, proposer: str, node: str, step: int | None, inp: dict, **origin):
        """Evaluate a source the search did not propose, in the search's mode, and archive it under `proposer` (its
        family, params and parent in `origin`), recorded in the transcript as `node`: the variant, or None where the
        seam could not evaluate it."""
        ahead.submit(src)
        res = evaluate_for(shape)(src, shape, acc=acc)
        if res.status in NOT_ABOUT_THE_KERNEL:
            return None
        vid = archive.add(cfg.run, gpu, acc, shape, src, proposer, res, step=None, **origin)
        transcript.append(thread=f"{gpu}|{acc}|{shape_str(shape)}", shape=shape, step=step, node=node, input=inp,
                          output={"variant_id": vid, "status": res.status,
                                  "speedup": res.speedup("cublaslt-autotune-max") if res.ok else None})
        return archive.get(vid)

    def seed(shape: Shape) -> None:
        """A fresh shape starts from the global archive's best kernels for it and its nearest shapes."""
        if gdb is None or not cfg.seed_from_global or archive.history(gpu, acc, shape):
            return
        picks = []
        own = gdb.best(gpu, acc, shape)
        if own is not None:
            picks.append(own)
        picks += gdb.neighbours(gpu, acc, shape, k=2)
        for v in picks[:3]:
            src = current_source(v.family, v.params, v.read_source())  # an older archive's kernel, today's build
            if archive.find_by_hash(gpu, acc, shape, source_hash(src)) is not None:
                continue
            came = {"from": str(cfg.global_archive), "variant": v.id, "run": v.run, "shape": list(v.shape),
                    "source_hash": v.source_hash}
            adopt(shape, src, SEED_PROPOSER, "seed", 0, came, family=v.family, params=v.params, parent=None)

    def confirm(shape: Shape) -> None:
        """Re-measure the leaders in the search's own mode and profile until the top `confirm_top` by pooled speedup
        all have a second measurement. The fastest of a dozen noisy measurements is partly luck (H200, big shapes:
        23 of 28 leaders measured lower the second time, by up to 2.7%), so the winner is chosen on two.
        For seams that cannot time rivals; the evaluator's own seams play a tournament instead."""
        for _ in range(2 * cfg.confirm_top):
            ranked = archive.ranked(gpu, acc, shape)
            lead = [v for v in ranked[:cfg.confirm_top] if v.extra["measurements"] < 2]
            if len(ranked) < 2 or not lead:
                return
            v = lead[0]
            res = seam.evaluate(v.read_source(), shape, acc=acc, mode=cfg.mode, profile=cfg.profile)
            if res.status in NOT_ABOUT_THE_KERNEL:
                return
            archive.add_remeasure(v.id, res)
            transcript.append(thread=f"{gpu}|{acc}|{shape_str(shape)}", shape=shape, step=None, node="confirm",
                              input={"variant_id": v.id, "mode": cfg.mode},
                              output={"status": res.status, "reason": res.reason[:300],
                                      "speedup": res.speedup("cublaslt-autotune-max") if res.ok else None})

    def play(shape: Shape, lead: list, mode: str, node: str, baseline: str = "cublaslt-autotune-max"):
        """One evaluation of the leaders `lead` in `mode`, the first with every check and the others as its rivals:
        (the result, each variant id's median per-round speedup over `baseline`), recorded in the transcript as
        `node` unless the seam could not evaluate at all."""
        first, rivals = lead[0], {str(v.id): v.read_source() for v in lead[1:]}
        players = [first.read_source(), *rivals.values()]
        for src in players:  # built at once on the pool, not one after another in the worker: after a resume on
            ahead.submit(src)  # another machine the cache is cold, and a CUTLASS leader takes 1-2 minutes
        for src in players:
            ahead.wait(src)
        res = seam.evaluate(players[0], shape, acc=acc, mode=mode, profile=cfg.profile, rivals=rivals,
                            rounds=TOURNAMENT_ROUNDS)
        if res.status in NOT_ABOUT_THE_KERNEL:
            return res, {}
        figures = {int(n) if n != "candidate" else first.id: f for n, f in res.head_to_head(baseline).items()}
        transcript.append(thread=f"{gpu}|{acc}|{shape_str(shape)}", shape=shape, step=None, node=node,
                          input={"variant_ids": [v.id for v in lead], "mode": mode, "rounds": TOURNAMENT_ROUNDS},
                          output={"status": res.status, "reason": res.reason[:300], "refused": res.rivals_refused(),
                                  "figures": {str(i): f for i, f in figures.items()}})
        return res, figures

    def tournament(shape: Shape) -> None:
        """Time the top `confirm_top` leaders in the same rounds of one evaluation (the first with every check, the
        others as its rivals) and let the fastest there be the winner (Archive.ranked). Two evaluations of one big-shape
        kernel differ by 1-4% with the clock of the moment, more than its leaders differ; in the same rounds the clock
        is theirs alike. A leader that fails a check there is dropped and the tournament played again without it."""
        for _ in range(cfg.confirm_top + 1):
            lead = archive.ranked(gpu, acc, shape)[:cfg.confirm_top]
            last = archive.tournament(gpu, acc, shape)
            if len(lead) < 2 or (last and {v.id for v in lead} <= {i for i, _ in last["figures"]}):
                return  # nothing to play, or played already (a resumed run)
            first = lead[0]
            res, figures = play(shape, lead, cfg.mode, "tournament")
            if res.status in NOT_ABOUT_THE_KERNEL:
                return
            refused = res.rivals_refused()
            if not res.ok:  # the leader failed a check on fresh inputs: it leaves the ranking
                archive.add_remeasure(first.id, res)
                continue
            for name, why in refused.items():
                archive.add_remeasure(int(name), EvalResult(
                    status="incorrect", reason=f"tournament: wrong output after a timed batch: {why}",
                    shape=tuple(shape), acc=acc, mode=cfg.mode, profile=cfg.profile))
            if len(figures) < len(lead) - len(refused) or first.id not in figures:
                return  # no round-by-round times came back: the pooled ranking stands
            archive.add_tournament(gpu, acc, shape, figures, res)
            if not refused:
                return

    def cold_twins(shape: Shape, lead: list) -> list:
        """The leaders' cold-call twins (`agent.families.cold_twin`) not among them, each evaluated in the search's
        mode and archived (its parent the leader) before it joins them: a kernel tuned for one cold call may read a
        little slower back to back, where the search ranked it, so the search alone would not play it."""
        out: list = []
        for v in lead:
            q = cold_twin(v.family, v.params, shape)
            if q is None:
                continue
            src = render(v.family, q, shape)
            twin = (archive.find_by_hash(gpu, acc, shape, source_hash(src))
                    or adopt(shape, src, TWIN_PROPOSER, "cold_twin", None, {"of": v.id, "params": q},
                             family=v.family, params=q, parent=v.id))
            if twin is not None and twin.result.ok and twin.id not in {x.id for x in lead + out}:
                out.append(twin)
        return out

    def mode_winner(shape: Shape, mode: str, best):
        """The leader that is fastest in `mode`: the search's winner where the mode is the search's own (or no
        tournament can be played), else the winner of one tournament timed in that mode of the top `confirm_top`
        leaders and other families' best close behind them (`mode_players`), kept in campaign.sqlite, so a resumed
        run does not replay it. A leader whose timed output is wrong there cannot win."""
        if mode == cfg.mode or not cfg.mode_winners or cfg.confirm_top < 2 or not seam.tournaments:
            return best
        known = cdb.get_mode_winner(gpu, acc, shape, mode)
        if known is not None:
            return archive.get(known["variant_id"]) or best
        lead = mode_players(archive.ranked(gpu, acc, shape), cfg.confirm_top)
        if mode == COLD_MODE:
            lead += cold_twins(shape, lead)
        if len(lead) < 2:
            return best
        res, figures = play(shape, lead, mode, "mode_tournament", BEST_NVIDIA)
        if res.status not in NOT_ABOUT_THE_KERNEL:
            cdb.put_mode_tournament(gpu, acc, shape, mode, [v.id for v in lead], res)
        if not res.ok or not figures:  # the leader failed a check there, or no round-by-round times came back:
            return best               # the search's winner stands
        win = max(figures, key=lambda i: (figures[i], i == best.id))
        cdb.put_mode_winner(gpu, acc, shape, mode, win, figures)
        return archive.get(win) or best

    def finalize(shape: Shape) -> None:
        """Confirm the leaders, measure each final mode's winner in that mode (the search used one), and share the
        variants globally."""
        if cfg.confirm_top > 0:
            (tournament if seam.tournaments else confirm)(shape)
        best = archive.best(gpu, acc, shape)
        wins = {}
        if best is not None:
            # the other modes' winners first: a cold twin that server mode's tournament archives (measured once in
            # the search's mode) may outrank the search's leaders, which then play again with it, so that the search
            # mode's finals measure the archive's best and not a kernel it has set aside
            wins = {mode: mode_winner(shape, mode, best) for mode in cfg.final_modes if mode != cfg.mode}
            if cfg.confirm_top > 0 and (now := archive.best(gpu, acc, shape)) is not None and now.id != best.id:
                (tournament if seam.tournaments else confirm)(shape)
                best = archive.best(gpu, acc, shape)
        for mode in cfg.final_modes if best is not None else ():
            win = wins.get(mode, best)
            src = win.read_source()
            for rep in range(cfg.final_repeats):
                if cdb.get_final(gpu, acc, shape, mode, win.source_hash, rep) is not None:
                    continue
                res = seam.evaluate(src, shape, acc=acc, mode=mode, profile=cfg.profile)
                if res.status in NOT_ABOUT_THE_KERNEL:
                    continue
                cdb.put_final(gpu, acc, shape, mode, win.id, win.source_hash, res, rep)
                transcript.append(thread=f"{gpu}|{acc}|{shape_str(shape)}", shape=shape, step=None, node="final",
                                  input={"variant_id": win.id, "mode": mode, "repeat": rep},
                                  output={"status": res.status, "speedups": {n: res.speedup(n) for _, n in
                                                                              PROGRESS_BASELINES}})
        if gdb is not None:
            for v in archive.history(gpu, acc, shape):
                if gdb.find_by_hash(gpu, acc, shape, v.source_hash) is None:
                    gdb.add(cfg.run, gpu, acc, shape, v.read_source(), v.proposer, v.result, family=v.family,
                            params=v.params, step=v.step, parent=None)

    def one(shape: Shape) -> None:
        inner = make_proposer()
        latch = getattr(inner, "latch", None)  # shared by every lane's proposer of the model configuration
        if latch is not None and latch.error is not None:
            failures[shape] = f"not started: {latch.error}"
            progress.event(shape, "failed", error=failures[shape])
            return
        if hasattr(inner, "on_note"):  # a slow or failing endpoint is reported on this lane's line
            inner.on_note = lambda msg: progress.event(shape, "model", note=msg)
        progress.event(shape, "start")
        try:
            seed(shape)
            outcome = ShapeLoop(shape, acc=acc, gpu_name=gpu, arch=seam.arch, run_dir=run_dir,
                                proposer=_AheadProposer(inner, ahead), evaluate_fn=evaluate_for(shape),
                                retrieve_fn=retrieve_fn, archive=archive, transcript=transcript,
                                budget=LoopBudget(candidates=budget, minutes=per_shape_minutes,
                                                  n_per_step=cfg.n_per_step),
                                eval_kwargs={"mode": cfg.mode, "profile": cfg.profile},
                                gpu_facts=seam.gpu_facts(), profile_fn=seam.profile if seam.profiles else None).run()
            finalize(shape)
            outcomes[shape] = outcome
            if outcome.stop_reason == "proposer_failing":
                # the model (its endpoint, key or replies) failed, not the kernels: the run did not do its job
                failures[shape] = (f"the model gave no kernel in {MAX_FAILED_STEPS} steps in a row, last: "
                                   f"{outcome.last_error[:500]}")
                progress.event(shape, "failed", error=failures[shape])
            else:
                progress.event(shape, "done", stop_reason=outcome.stop_reason)
        except EndpointFatal as e:  # the key or the model is wrong: every lane stops at its next request
            failures[shape] = f"stopped: {e}"
            progress.event(shape, "failed", error=failures[shape])
        except Exception as e:  # one shape's failure must not stop the others; the trace goes to the run folder
            failures[shape] = f"{type(e).__name__}: {e}"
            with open(run_dir / "errors.log", "a") as f:
                f.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} {shape_str(shape)}\n{traceback.format_exc()}\n")
            progress.event(shape, "failed", error=failures[shape])

    try:
        with progress, ThreadPoolExecutor(max_workers=lanes, thread_name_prefix="lane") as pool:
            for f in [pool.submit(one, s) for s in cfg.shapes]:
                f.result()
    finally:
        ahead.close()
    summary = {"run": cfg.run, "run_dir": str(run_dir), "gpu": gpu, "acc": acc, "mode": cfg.mode,
               "shapes": {shape_str(s): (o.to_dict() if hasattr(o, "to_dict") else o) for s, o in outcomes.items()},
               "failures": {shape_str(s): e for s, e in failures.items()},
               "model_failures": sorted(shape_str(s) for s, o in outcomes.items() if s in failures)}
    return summary
