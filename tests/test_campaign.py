"""The campaign driver on CPU: the GPU seam answers from results recorded on a GPU (tests/golden), the proposer is
a scripted one that writes distinct contract kernels; archive, transcript, checkpoints and the CLI are real."""
from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from http_servers import RECORDED_RESULTS, kernel_source  # noqa: E402

GOLDEN = Path(__file__).parent / "golden"

from agent.campaign.driver import CampaignConfig, CampaignDB, CampaignError, Seam, run_campaign  # noqa: E402
from agent.proposers.base import Proposal, ProposalContext, Proposer  # noqa: E402
from evaluator.record import EvalResult  # noqa: E402

GPU = "NVIDIA H200"
TAGS = ["naive", "tile128", "broken", "tile128x256", "wrong", "pipelined", "wgmma"]
REPO = Path(__file__).resolve().parents[1]


class ReplaySeam(Seam):
    """The GPU seam: each kernel's result is the one recorded on a GPU for its `// variant:` tag. Every finished
    evaluation is appended (flushed, fsynced) to `log`, so a test can count evaluations across processes."""

    def __init__(self, log: Path, delay: float = 0.0, lanes: int = 2):
        from evaluator.record import EvalResult

        self.recorded = {k: EvalResult.from_dict(v) for k, v in json.loads(RECORDED_RESULTS.read_text()).items()}
        self.log, self.delay, self.lanes = log, delay, lanes
        self.gpu_name, self.arch = GPU, "sm_90a"

    def _write(self, rec: dict) -> None:
        with open(self.log, "a") as f:
            f.write(json.dumps(rec) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def compile(self, source: str) -> None:
        from agent.campaign.archive import source_hash

        self._write({"op": "compile", "hash": source_hash(source), "t": time.monotonic()})

    def evaluate(self, source, shape, *, acc, mode, profile):
        import dataclasses
        import re

        from agent.campaign.archive import source_hash

        time.sleep(self.delay)
        tag = re.search(r"// variant: (\S+)", source).group(1)
        r = dataclasses.replace(self.recorded[tag], shape=tuple(shape), acc=acc, mode=mode, profile=profile,
                                source_hash=source_hash(source), code_length=len(source))
        self._write({"op": "eval", "shape": list(shape), "hash": r.source_hash, "mode": mode, "pid": os.getpid(),
                     "t": time.monotonic()})
        return r


class TournamentSeam(ReplaySeam):
    """ReplaySeam that also answers a tournament, with the rounds of one recorded on a GPU
    (tests/golden/tournament_result.json: the WMMA reference, another build of it, and the naive kernel). The
    recorded kernels go to the leaders in reverse: the leader ranked last gets the fastest one's rounds, so the
    tournament's order is the reverse of the search's. `refuse`: rival names whose timed output the first
    tournament reports wrong."""
    tournaments = True

    def __init__(self, *a, refuse: tuple[str, ...] = (), **kw):
        super().__init__(*a, **kw)
        self.golden = EvalResult.from_json((GOLDEN / "tournament_result.json").read_text())
        self.refuse = set(refuse)

    def evaluate(self, source, shape, *, acc, mode, profile, rivals=None, rounds=None):
        import copy

        r = super().evaluate(source, shape, acc=acc, mode=mode, profile=profile)
        if not rivals:
            return r
        self._write({"op": "tournament", "rivals": list(rivals), "rounds": rounds, "shape": list(shape),
                     "mode": mode})
        g = copy.deepcopy(self.golden)
        timing = g.candidate.detail["timing"]
        h = g.head_to_head()
        fastest_first = sorted(h, key=lambda n: -h[n])
        leaders = ["candidate", *(f"rival:{n}" for n in rivals)]
        old = {n if n == "candidate" else f"rival:{n}": n for n in h}
        rounds_us = {k: v for k, v in timing["rounds_us"].items() if k not in old}
        for leader, kept in zip(reversed(leaders), fastest_first):
            rounds_us[leader] = timing["rounds_us"][next(o for o, n in old.items() if n == kept)]
        refused = {n: "max |C - ref| = 1.5, 0 non-finite" for n in rivals if n in self.refuse}
        self.refuse -= set(refused)
        for n in refused:
            del rounds_us[f"rival:{n}"]
        timing.update(rounds_us=rounds_us, rivals_refused=refused)
        r = copy.deepcopy(r)
        r.candidate.detail["timing"] = timing
        r.rivals = {n: g.rivals["twin"] for n in rivals if n not in refused}
        return r


class ScriptedProposer(Proposer):
    """Distinct contract kernels per (shape, step, index), cycling through the recorded variants."""
    name = "scripted"

    def propose(self, context: ProposalContext, n: int) -> list[Proposal]:
        m, nn, k = context.shape
        out = []
        for i in range(n):
            tag = TAGS[(context.step * n + i + m // 64) % len(TAGS)]
            src = kernel_source(tag, extra=f"// shape {m}x{nn}x{k} step {context.step} candidate {i}\n")
            out.append(Proposal(src, model="scripted", name=f"{tag}-{context.step}-{i}", family="naive"))
        return out


def log_records(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def campaign(tmp_path: Path, shapes, *, budget=6, delay=0.0, lanes=2, global_db=None, run="c1", cfg_lanes=None,
             confirm_top=3, final_repeats=3, seam=None, proposer=None):
    from rich.console import Console

    seam = seam or ReplaySeam(tmp_path / "calls.jsonl", delay=delay, lanes=lanes)
    cfg = CampaignConfig(run=run, shapes=list(shapes), budget_candidates=budget, runs_dir=tmp_path / "runs",
                         global_archive=global_db, n_per_step=2, lanes=cfg_lanes, confirm_top=confirm_top,
                         final_repeats=final_repeats)
    buf = io.StringIO()
    summary = run_campaign(cfg, seam=seam, make_proposer=proposer or ScriptedProposer,
                           console=Console(file=buf, width=200), live=False)
    return cfg, summary, buf.getvalue()


class SlowCompileSeam(ReplaySeam):
    """Compiles take `compile_s` each (as a big CUTLASS kernel's do, against a few seconds to evaluate it)."""

    def __init__(self, *a, compile_s: float = 0.0, **kw):
        super().__init__(*a, **kw)
        self.compile_s = compile_s

    def compile(self, source: str) -> None:
        time.sleep(self.compile_s)
        super().compile(source)


def test_eta_counts_the_wait_for_compiles(tmp_path):
    """The first candidate of a step waits for its batch's compiles; the ETA printed after it counts that wait.
    Measured evaluation time alone put a 4096^3 step of four 100 s CUTLASS compiles at "ETA 2s"."""
    import re

    seam = SlowCompileSeam(tmp_path / "calls.jsonl", lanes=1, compile_s=1.0)
    _, summary, out = campaign(tmp_path, [(64, 64, 64)], budget=4, seam=seam, confirm_top=0, final_repeats=1)
    assert not summary["failures"], summary["failures"]
    first = next(line for line in out.splitlines() if "[64x64x64] eval" in line)
    assert "tried 1/4" in first, first
    eta = int(re.search(r"ETA (\d+)s", first).group(1))
    assert eta >= 3, first  # three candidates left, each costing at least the first one's 1 s compile wait


def test_progress_archive_finals_and_global_seeding(tmp_path):
    from agent.campaign.archive import Archive

    shapes = [(64, 64, 64), (128, 256, 512)]
    gdb = tmp_path / "global" / "archive.sqlite"
    cfg, summary, out = campaign(tmp_path, shapes, budget=6, global_db=gdb)
    assert not summary["failures"], summary["failures"]
    for s in ("64x64x64", "128x256x512"):
        assert f"[{s}] start" in out and f"[{s}] done (budget_candidates)" in out
        assert f"[{s}] eval ok" in out and f"[{s}] eval compile_error" in out
        assert "tried 6/6" in out
    assert "Lt-auto=" in out and "ETA" in out
    arch = Archive(cfg.run_dir / "archive.sqlite")
    for s in shapes:
        hist = arch.history(GPU, "fp32", s)
        assert len(hist) == 6
        best = arch.best(GPU, "fp32", s)
        assert best is not None and best.status == "ok"
    # The three leaders measured twice each (in the search's mode), once: the rerun below evaluates nothing.
    for s in shapes:
        ranked = arch.ranked(GPU, "fp32", s)
        assert [v.extra["measurements"] for v in ranked[:3]] == [2] * min(3, len(ranked))
    assert sum(json.loads(line)["node"] == "confirm" for line in (cfg.run_dir / "transcript.jsonl").open()) >= 4
    # Winner re-measured in both modes, three separate evaluations each; every variant shared with the global archive.
    finals = CampaignDB(cfg.run_dir / "campaign.sqlite").finals()
    assert sorted((tuple(f["shape"]), f["mode"], f["rep"]) for f in finals) == sorted(
        (s, m, r) for s in shapes for m in ("offline", "server") for r in range(3))
    g = Archive(gdb)
    assert g.count() == 12
    # What the benchmark's table states about the search is recorded with the run (scripts/bench_builtin_policy.py).
    made = json.loads((cfg.run_dir / "campaign.json").read_text())
    assert (made["budget_candidates"], made["n_per_step"], made["confirm_top"], made["final_repeats"]) == (6, 2, 3, 3)
    assert (made["lanes"], made["ncu"]) == (cfg.lanes, cfg.ncu)  # how it ran, for the header's command line
    from agent.resources import code_commit

    assert made["commits"] == [code_commit()] and made["commits"][0]  # a resume at the same commit adds none
    # Compile-ahead: every evaluated kernel was sent to the compile pool before its evaluation finished.
    recs = log_records(tmp_path / "calls.jsonl")
    first_compile = {}
    for r in recs:
        if r["op"] == "compile":
            first_compile.setdefault(r["hash"], r["t"])
    evals = [r for r in recs if r["op"] == "eval" and r["mode"] == "offline"]
    assert all(r["hash"] in first_compile and first_compile[r["hash"]] <= r["t"] for r in evals)

    # A second campaign on a new shape is seeded from the global archive (nearest shapes' winners, re-evaluated).
    cfg2, summary2, out2 = campaign(tmp_path, [(64, 64, 128)], budget=2, global_db=gdb, run="c2")
    seeded = [v for v in Archive(cfg2.run_dir / "archive.sqlite").history(GPU, "fp32", (64, 64, 128))
              if v.proposer == "seed:global-archive"]
    assert seeded and all(v.run == "c2" for v in seeded)
    assert any(json.loads(line)["node"] == "seed" for line in (cfg2.run_dir / "transcript.jsonl").open())

    # Rerunning a finished campaign evaluates nothing.
    n_before = len(log_records(tmp_path / "calls.jsonl"))
    campaign(tmp_path, shapes, budget=6, global_db=gdb)
    assert [r for r in log_records(tmp_path / "calls.jsonl")[n_before:] if r["op"] == "eval"] == []


def test_an_unreachable_model_fails_the_campaign_with_its_reason(tmp_path):
    """The real OpenAI backend against a port nothing listens on: the shape stops after three steps without a kernel,
    and the campaign says why and exits non-zero instead of reporting the shape finished."""
    import socket

    from rich.console import Console

    from agent.campaign.cli import finish_campaign
    from agent.campaign.config import ModelConfig

    with socket.socket() as s:  # a free port, closed again: connections to it are refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    model = ModelConfig(backend="openai", base_url=f"http://127.0.0.1:{port}/v1", model_name="m", max_attempts=1,
                        timeout_s=5, backoff_initial_s=0.01)
    cfg = CampaignConfig(run="down", shapes=[(64, 64, 64)], budget_candidates=4, runs_dir=tmp_path / "runs",
                         global_archive=None, n_per_step=2)
    buf = io.StringIO()
    rc = finish_campaign(cfg, ReplaySeam(tmp_path / "calls.jsonl"), model, console=Console(file=buf, width=300),
                         live=False)
    out = buf.getvalue()
    assert rc == 1, out
    assert "[64x64x64] failed" in out and "0 shape(s) finished, 1 failed" in out
    assert "the model gave no kernel in 3 steps in a row" in out and f"127.0.0.1:{port}" in out
    assert "errors.log" not in out  # no trace to point at: the reason is the whole story
    assert log_records(tmp_path / "calls.jsonl") == []
    # The same command once the model answers again: the shape goes on where it stopped, with its whole budget.
    summary = run_campaign(cfg, seam=ReplaySeam(tmp_path / "calls.jsonl"), make_proposer=ScriptedProposer,
                           console=Console(file=io.StringIO()), live=False)
    assert not summary["failures"] and summary["shapes"]["64x64x64"]["candidates"] == 4


def test_confirm_top_zero_keeps_the_search_s_fastest(tmp_path):
    """--confirm-top 0: no second measurements; with one final repeat each shape's winner is measured once per final
    mode only."""
    from agent.campaign.archive import Archive

    shape = (64, 64, 64)
    cfg, summary, _ = campaign(tmp_path, [shape], budget=6, confirm_top=0, final_repeats=1)
    assert not summary["failures"]
    arch = Archive(cfg.run_dir / "archive.sqlite")
    assert all(arch.remeasures(v.id) == [] for v in arch.history(GPU, "fp32", shape))
    evals = Counter(r["hash"] for r in log_records(tmp_path / "calls.jsonl") if r["op"] == "eval")
    assert evals[arch.best(GPU, "fp32", shape).source_hash] == 3  # the search, then offline and server finals
    assert max(evals.values()) == 3 and sum(c > 1 for c in evals.values()) == 1


def test_final_repeats_must_be_at_least_one(tmp_path):
    for bad in (0, -1, 1.5):
        with pytest.raises(CampaignError, match="final_repeats"):
            CampaignConfig(run="r", shapes=[(64, 64, 64)], runs_dir=tmp_path, final_repeats=bad)


def test_a_run_from_before_repeats_keeps_its_finals_as_repeat_0(tmp_path):
    """campaign.sqlite of older runs held one final per mode in `finals`: it is read as repeat 0, so resuming such a
    run measures only repeats 1 and 2 and reports never lose the old figure."""
    import sqlite3

    res = EvalResult(status="ok", shape=(64, 64, 64))
    db = tmp_path / "campaign.sqlite"
    with sqlite3.connect(db) as c:
        c.execute("CREATE TABLE finals (gpu TEXT, acc TEXT, m INT, n INT, k INT, mode TEXT, variant_id INT, "
                  "source_hash TEXT, result TEXT, created_at REAL, PRIMARY KEY (gpu, acc, m, n, k, mode, source_hash))")
        c.execute("INSERT INTO finals VALUES (?,?,?,?,?,?,?,?,?,?)",
                  (GPU, "fp32", 64, 64, 64, "offline", 7, "h", res.to_json(), 1.0))
    cdb = CampaignDB(db)
    [f] = cdb.finals()
    assert (f["rep"], f["variant_id"], f["mode"], f["result"].status) == (0, 7, "offline", "ok")
    assert cdb.get_final(GPU, "fp32", (64, 64, 64), "offline", "h", 0) is not None
    assert cdb.get_final(GPU, "fp32", (64, 64, 64), "offline", "h", 1) is None
    cdb.put_final(GPU, "fp32", (64, 64, 64), "offline", 7, "h", res, 1)
    assert [f["rep"] for f in CampaignDB(db).finals()] == [0, 1]  # opening it again copies nothing twice


def test_lanes_option_works_on_more_shapes_at_once(tmp_path):
    """--lanes N overrides the seam's two-per-GPU: with a one-lane seam and N=3, three shapes are in flight."""
    shapes = [(64, 64, 64), (128, 128, 128), (192, 192, 192)]
    cfg, summary, _ = campaign(tmp_path, shapes, budget=4, delay=0.05, lanes=1, cfg_lanes=3)
    assert not summary["failures"]
    evals = [r for r in log_records(tmp_path / "calls.jsonl") if r["op"] == "eval" and r["mode"] == "offline"]
    spans = {tuple(s): (min(r["t"] for r in evals if tuple(r["shape"]) == s),
                        max(r["t"] for r in evals if tuple(r["shape"]) == s)) for s in shapes}
    # every shape started before any other finished: they ran side by side, not one after another
    assert max(a for a, _ in spans.values()) < min(b for _, b in spans.values())


def test_rerun_with_other_settings_is_refused(tmp_path):
    from agent.campaign.driver import CampaignError

    campaign(tmp_path, [(64, 64, 64)], budget=2)
    seam = ReplaySeam(tmp_path / "calls.jsonl")
    cfg = CampaignConfig(run="c1", shapes=[(64, 64, 64)], acc="fp16", budget_candidates=2,
                         runs_dir=tmp_path / "runs", global_archive=None)
    with pytest.raises(CampaignError, match="acc was 'fp32', now 'fp16'"):
        run_campaign(cfg, seam=seam, make_proposer=ScriptedProposer, live=False)


def test_a_resumed_run_from_before_the_commit_record_says_its_earlier_starts_went_unrecorded(tmp_path):
    """A run whose campaign.json predates the "commits" record, resumed: the record keeps that its earlier starts
    named no commit, so a table does not pass the whole run off as measured at the resuming commit."""
    from agent.campaign.db import UNRECORDED, recorded_commits
    from agent.resources import code_commit

    cfg, _, _ = campaign(tmp_path, [(64, 64, 64)], budget=2)
    path = cfg.run_dir / "campaign.json"
    old = json.loads(path.read_text())
    del old["commits"]
    path.write_text(json.dumps(old))
    campaign(tmp_path, [(64, 64, 64)], budget=2)
    made = json.loads(path.read_text())
    assert made["commits"] == [UNRECORDED, code_commit()]
    assert recorded_commits(made) == ([code_commit()], True)
    assert recorded_commits({"commits": ["abc1234"]}) == (["abc1234"], False) and recorded_commits({}) == ([], False)


def subprocess_main(argv: list[str]) -> int:
    """Entry point of the killed campaign process: tmp_dir shapes... (delay per evaluation 0.25 s)."""
    from rich.console import Console

    from agent.campaign.cli import finish_campaign
    from agent.campaign.config import ModelConfig

    tmp = Path(argv[0])
    shapes = [tuple(int(x) for x in s.split("x")) for s in argv[1:]]
    seam = ReplaySeam(tmp / "calls.jsonl", delay=0.25)
    cfg = CampaignConfig(run="killme", shapes=shapes, budget_candidates=8, runs_dir=tmp / "runs",
                         global_archive=None, n_per_step=2)
    import agent.proposers as proposers

    proposers.make_proposer = lambda config: ScriptedProposer()  # this process's model is the scripted one
    return finish_campaign(cfg, seam, ModelConfig(), console=Console(file=sys.stdout, width=200), live=False)


def test_resume_after_sigkill_repeats_and_loses_nothing(tmp_path):
    from agent.campaign.archive import Archive

    shapes = ["64x64x64", "128x256x512", "256x128x64"]
    cmd = [sys.executable, "-c", "import sys; sys.path.insert(0, 'tests'); import test_campaign as t; "
                                 "sys.exit(t.subprocess_main(sys.argv[1:]))", str(tmp_path), *shapes]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    log = tmp_path / "calls.jsonl"
    deadline = time.monotonic() + 120
    while len([r for r in log_records(log) if r["op"] == "eval"]) < 7:
        assert proc.poll() is None, proc.stdout.read().decode()[-3000:]
        assert time.monotonic() < deadline, "the campaign made no progress"
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    run_dir = tmp_path / "runs" / "killme"
    archive = Archive(run_dir / "archive.sqlite")
    first = [r for r in log_records(log) if r["op"] == "eval"]
    archived = {(tuple(s), v.source_hash) for _, _, s in archive.shapes() for v in archive.history(GPU, "fp32", s)}
    done_first = {(tuple(r["shape"]), r["hash"]) for r in first if r["mode"] == "offline"}
    assert archived, "nothing was archived before the kill"
    assert len(done_first - archived) <= 2, "more evaluations lost than were in flight (one per lane)"

    proc2 = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc2.returncode == 0, proc2.stdout[-3000:] + proc2.stderr[-3000:]
    second = [r for r in log_records(log) if r["op"] == "eval"][len(first):]
    again = Counter((tuple(r["shape"]), r["hash"]) for r in second if r["mode"] == "offline")
    # A shape whose search ended before the kill but whose winner was not yet re-measured gets that final offline
    # measurement after the resume: one evaluation of its best kernel is the final, not a repeat.
    # The leaders' second measurements (confirm_top) are new measurements too, and each is archived.
    best = {(tuple(s), archive.best(GPU, "fp32", s).source_hash) for _, _, s in archive.shapes()}
    confirms = {(tuple(s), v.source_hash): len(archive.remeasures(v.id))
                for _, _, s in archive.shapes() for v in archive.history(GPU, "fp32", s)}
    repeated = {k: c for k, c in again.items() if k in archived and c > (k in best) + confirms.get(k, 0)}
    assert not repeated, f"finished evaluations repeated after the resume: {repeated}"
    final = {(tuple(s), v.source_hash) for _, _, s in archive.shapes() for v in archive.history(GPU, "fp32", s)}
    assert archived <= final, "evaluations archived before the kill were lost"
    for s in shapes:
        shape = tuple(int(x) for x in s.split("x"))
        assert len(archive.history(GPU, "fp32", shape)) == 8, s
    assert "resume" in (run_dir / "transcript.jsonl").read_text()


def test_cli_bad_shape_file_names_the_line(tmp_path):
    bad = tmp_path / "shapes.txt"
    bad.write_text("64 64 64\n# fine\n128 x 256\n")
    r = subprocess.run([sys.executable, "-m", "agent.cli", "campaign", "--shapes", str(bad), "--budget", "2"],
                       cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert f"{bad}:3:" in r.stderr and "three integers" in r.stderr


def test_cli_refuses_a_run_name_that_leaves_runs_dir(tmp_path):
    (tmp_path / "afile").write_text("mine")
    for flags, msg in ((["--run", "../../etc"], "run name '../../etc'"), (["--run", ".hidden"], "run name"),
                       (["--runs-dir", str(tmp_path / "afile")], "is not a folder"),
                       (["--final-modes", "offline,bogus"], "unknown timing mode(s) ['bogus']")):
        r = subprocess.run([sys.executable, "-m", "agent.cli", "campaign", "--shapes", "examples/shapes_small.txt",
                            "--budget", "2", "--runs-dir", str(tmp_path / "runs"), *flags],
                           cwd=REPO, capture_output=True, text=True, timeout=120)
        assert r.returncode == 2 and msg in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not (tmp_path / "runs").exists() and (tmp_path / "afile").read_text() == "mine"


@pytest.mark.skipif(__import__("evaluator.gpu", fromlist=["has_gpu"]).has_gpu(), reason="this machine has a GPU")
def test_cli_without_gpu_says_so(tmp_path):
    r = subprocess.run([sys.executable, "-m", "agent.cli", "campaign", "--shapes", "examples/shapes_small.txt",
                        "--model", "builtin", "--budget", "2", "--runs-dir", str(tmp_path), "--mode", "graph",
                        "--final-modes", "offline,graph"],  # every timing mode is accepted; the GPU is what lacks
                       cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert "needs a CUDA GPU" in r.stderr
    assert not (tmp_path / "shapes_small").exists()


def test_a_tournament_of_leaders_picks_the_winner_and_is_played_once(tmp_path):
    """A seam that times rivals gets one evaluation of the top three leaders instead of a second measurement of each;
    the archive's ranking, so the finals, follow the tournament, and a resumed run does not play it again."""
    from agent.campaign.archive import Archive
    from agent.campaign.driver import TOURNAMENT_ROUNDS

    shape = (128, 256, 512)
    seam = TournamentSeam(tmp_path / "calls.jsonl")
    cfg, summary, _ = campaign(tmp_path, [shape], budget=6, final_repeats=1, seam=seam)
    assert not summary["failures"], summary["failures"]
    arch = Archive(cfg.run_dir / "archive.sqlite")
    t = arch.tournament(GPU, "fp32", shape)
    ranked = arch.ranked(GPU, "fp32", shape)
    search = sorted(ranked[:3], key=lambda v: (-v.extra["pooled_speedup"], v.id))
    assert [i for i, _ in t["figures"]] == [v.id for v in reversed(search)] == [v.id for v in ranked[:3]]
    assert all(arch.remeasures(v.id) == [] for v in ranked)  # no separate second measurements
    recs = log_records(tmp_path / "calls.jsonl")
    played = [r for r in recs if r["op"] == "tournament" and r["mode"] == "offline"]
    assert len(played) == 1 and played[0]["rounds"] == TOURNAMENT_ROUNDS
    assert played[0]["rivals"] == [str(v.id) for v in search[1:]]
    # the players are sent to the build pool together right before it (a resume on a cold cache builds them at once)
    before = recs[:recs.index(played[0]) - 1]  # up to the tournament's own "eval" record
    last_search = max(i for i, r in enumerate(before) if r["op"] == "eval")
    assert {r["hash"] for r in before[last_search + 1:] if r["op"] == "compile"} == {v.source_hash for v in ranked[:3]}
    offline = [r for r in recs if r["op"] == "eval" and r["mode"] == "offline"]
    assert offline[-1]["hash"] == ranked[0].source_hash  # the offline final measures the search's winner
    nodes = [json.loads(line) for line in (cfg.run_dir / "transcript.jsonl").open()]
    tour = [n for n in nodes if n["node"] == "tournament"]
    assert len(tour) == 1 and tour[0]["output"]["figures"] == {str(i): f for i, f in t["figures"]}
    # server mode plays its own tournament of the same leaders (the seam reverses their order there too, so the
    # leader ranked third wins it) and its finals measure that winner
    served = [r for r in recs if r["op"] == "tournament" and r["mode"] == "server"]
    assert len(served) == 1 and served[0]["rivals"] == [str(v.id) for v in ranked[1:3]]
    assert CampaignDB(cfg.run_dir / "campaign.sqlite").get_mode_winner(GPU, "fp32", shape, "server")[
        "variant_id"] == ranked[2].id
    finals = [r for r in recs[recs.index(served[0]) + 1:] if r["op"] == "eval" and r["mode"] == "server"]
    assert [r["hash"] for r in finals] == [ranked[2].source_hash]
    assert {f["variant_id"] for f in CampaignDB(cfg.run_dir / "campaign.sqlite").finals() if f["mode"] == "server"} \
        == {ranked[2].id}
    mode_tour = [n for n in nodes if n["node"] == "mode_tournament"]
    assert [n["input"]["mode"] for n in mode_tour] == ["server"]
    # the report shows each mode's own winner; the export carries it beside the best, named for its mode
    from agent.campaign.archive_io import export_archive
    from agent.report import collect_rows

    rows = {r.mode: r for r in collect_rows(cfg.run_dir)}
    assert (rows["offline"].variant_id, rows["server"].variant_id) == (ranked[0].id, ranked[2].id)
    assert rows["server"].final and rows["server"].extra["mode_winner"]
    manifest = export_archive(cfg.run_dir / "archive.sqlite", tmp_path / "export", run_dir=cfg.run_dir)
    assert [(e["variant_id"], e["winner_in_modes"]) for e in manifest["kernels"]] == [(ranked[0].id, []),
                                                                                       (ranked[2].id, ["server"])]
    assert manifest["kernels"][1]["file"].endswith("_server.cu") and "server" in manifest["kernels"][1][
        "speedups_by_mode"]
    campaign(tmp_path, [shape], budget=6, final_repeats=1, seam=TournamentSeam(tmp_path / "calls.jsonl"))
    assert [r for r in log_records(tmp_path / "calls.jsonl")[len(recs):] if r["op"] in ("eval", "tournament")] == []
    # a variant archived after the offline finals that outranks the search's winner (runs before 2026-11-28: a
    # server tournament's cold twin) leaves the offline row on the kernel those finals measured
    faster = EvalResult.from_json(ranked[0].result.to_json())
    for t in faster.baselines.values():
        t.speedup_mean, t.speedup_median = 2 * t.speedup_mean, 2 * t.speedup_median
    twin = arch.add("t", GPU, "fp32", shape, ranked[0].read_source() + "// twin\n", "cold_twin", faster)
    assert arch.best(GPU, "fp32", shape).id == twin
    rows = {r.mode: r for r in collect_rows(cfg.run_dir)}
    assert (rows["offline"].variant_id, rows["offline"].final) == (ranked[0].id, True)


def test_a_rival_refused_in_a_tournament_leaves_and_the_next_leader_plays(tmp_path):
    from agent.campaign.archive import Archive

    shape = (128, 256, 512)
    probe = TournamentSeam(tmp_path / "probe.jsonl")
    campaign(tmp_path / "probe", [shape], budget=6, final_repeats=1, confirm_top=0, seam=probe)
    order = [v.id for v in Archive(tmp_path / "probe" / "runs" / "c1" / "archive.sqlite").ranked(GPU, "fp32", shape)]
    assert len(order) >= 4  # a fourth leader to step in
    seam = TournamentSeam(tmp_path / "calls.jsonl", refuse=(str(order[1]),))
    cfg, summary, _ = campaign(tmp_path, [shape], budget=6, final_repeats=1, seam=seam)
    assert not summary["failures"], summary["failures"]
    arch = Archive(cfg.run_dir / "archive.sqlite")
    again = arch.remeasures(order[1])
    assert [r.status for r in again] == ["incorrect"] and "tournament: wrong output" in again[0].reason
    played = [r["rivals"] for r in log_records(tmp_path / "calls.jsonl") if r["op"] == "tournament"
              and r["mode"] == "offline"]
    # the second is led by the first's winner (order[2], given the fastest rounds), with order[0] and order[3]
    assert played == [[str(order[1]), str(order[2])], [str(order[0]), str(order[3])]]
    assert {i for i, _ in arch.tournament(GPU, "fp32", shape)["figures"]} == {order[0], order[2], order[3]}
    assert order[1] not in [v.id for v in arch.ranked(GPU, "fp32", shape)]


class FamilyProposer(ScriptedProposer):
    """ScriptedProposer whose kernels belong to a family by their tag: the two fastest recorded ones to famA, the
    next (0.885 of the fastest) to famB, the rest to famC."""

    def propose(self, context: ProposalContext, n: int) -> list[Proposal]:
        import re

        fams = {"wgmma": "famA", "pipelined": "famA", "tile128x256": "famB"}
        return [Proposal(p.source, model=p.model, name=p.name,
                         family=fams.get(re.search(r"// variant: (\S+)", p.source).group(1), "famC"))
                for p in super().propose(context, n)]


def test_a_mode_tournament_plays_a_close_leader_of_another_family(tmp_path):
    """With the top two leaders of one family, server mode's tournament also plays the other family's best, which is
    within MODE_FAMILY_SLACK of the fastest; the search's own tournament plays the top two alone."""
    from agent.campaign.archive import Archive
    from agent.campaign.driver import mode_players

    shape = (128, 256, 512)
    cfg, summary, _ = campaign(tmp_path, [shape], budget=6, final_repeats=1, confirm_top=2,
                               seam=TournamentSeam(tmp_path / "calls.jsonl"), proposer=FamilyProposer)
    assert not summary["failures"], summary["failures"]
    ranked = Archive(cfg.run_dir / "archive.sqlite").ranked(GPU, "fp32", shape)
    assert [v.family for v in ranked[:3]] == ["famA", "famA", "famB"]
    played = {r["mode"]: r["rivals"] for r in log_records(tmp_path / "calls.jsonl") if r["op"] == "tournament"}
    assert played["offline"] == [str(ranked[0].id)]  # the seam reverses a tournament: the rival won it
    assert [v.id for v in mode_players(ranked, 2)] == [v.id for v in ranked[:3]]
    assert played["server"] == [str(v.id) for v in ranked[1:3]]


def test_mode_players_add_each_missing_familys_best_close_behind():
    """A mode tournament plays the top leaders, then the best of each family they lack if it is within
    MODE_FAMILY_SLACK of the fastest: a cold call costs TMA and cp.async kernels differently."""
    from types import SimpleNamespace

    from agent.campaign.driver import MODE_FAMILY_SLACK, mode_players

    def v(i, fam, sp):
        return SimpleNamespace(id=i, family=fam, extra={"pooled_speedup": sp})

    ranked = [v(1, "hopper_wgmma", 1.30), v(2, "hopper_wgmma", 1.28), v(3, "hopper_raw", 1.27),
              v(4, "hopper_wgmma", 1.25), v(5, "ampere_cute", 1.20), v(6, "ampere_cute", 1.19), v(7, None, 1.15),
              v(8, "small", 1.30 * MODE_FAMILY_SLACK - 0.01)]
    assert [x.id for x in mode_players(ranked, 3)] == [1, 2, 3, 5, 7]  # small is too far behind
    assert [x.id for x in mode_players(ranked, 1)] == [1, 3, 5, 7]
    assert mode_players([], 3) == [] and [x.id for x in mode_players(ranked[:2], 3)] == [1, 2]


class TwinSeam(TournamentSeam):
    """TournamentSeam that also times a kernel rendered from a family (no `// variant:` tag) as the recorded WMMA
    kernel."""

    def evaluate(self, source, shape, **kw):
        import dataclasses

        from agent.campaign.archive import source_hash

        if "// variant:" in source:
            return super().evaluate(source, shape, **kw)
        self._write({"op": "untagged", "hash": source_hash(source), "mode": kw["mode"], "rivals": kw.get("rivals")})
        r = super().evaluate(source + "\n// variant: wgmma\n", shape, **kw)
        return dataclasses.replace(r, source_hash=source_hash(source))


class StreamingProposer(ScriptedProposer):
    """ScriptedProposer whose kernels all claim the hand-written family's streaming config of an M = 64 shape."""

    PARAMS = {"tile_m": 64, "tile_n": 64, "stages": 14, "cluster_k": 2, "group": 1, "acc": "fp32"}

    def propose(self, context: ProposalContext, n: int) -> list[Proposal]:
        return [Proposal(p.source, model=p.model, name=p.name, family="hopper_raw", params=dict(self.PARAMS))
                for p in super().propose(context, n)]


def test_server_mode_plays_the_leaders_cold_twin(tmp_path):
    """Where a leader's family has a cold-call twin (hopper_raw: the L2 hint on the operand read once), server mode's
    tournament evaluates it once in the search's mode, archives it under its leader and plays it beside them; the
    search's own tournament does not."""
    from agent.campaign.archive import Archive, source_hash
    from agent.families import cold_twin, render

    shape = (64, 4096, 8192)
    cfg, summary, _ = campaign(tmp_path, [shape], budget=4, final_repeats=1, confirm_top=2,
                               seam=TwinSeam(tmp_path / "calls.jsonl"), proposer=StreamingProposer)
    assert not summary["failures"], summary["failures"]
    nodes = [json.loads(line) for line in (cfg.run_dir / "transcript.jsonl").open()]
    twin_params = cold_twin("hopper_raw", StreamingProposer.PARAMS, shape)
    assert twin_params["l2_evict_first"] == "b"  # B (64 MiB) passes one 64-row tile-row
    src = render("hopper_raw", twin_params, shape)
    arch = Archive(cfg.run_dir / "archive.sqlite")
    twin = arch.find_by_hash(GPU, "fp32", shape, source_hash(src))
    assert twin is not None and twin.proposer == "cold-twin" and twin.params == twin_params
    made = [n for n in nodes if n["node"] == "cold_twin"]
    assert len(made) == 1 and made[0]["output"]["variant_id"] == twin.id  # both leaders share one twin
    recs = log_records(tmp_path / "calls.jsonl")
    # evaluated once, in the search's mode, before any tournament plays it
    assert [(r["mode"], r["rivals"]) for r in recs if r["op"] == "untagged" and r["hash"] == twin.source_hash][:1] \
        == [("offline", None)]
    played = {r["mode"]: r["rivals"] for r in recs if r["op"] == "tournament"}
    assert str(twin.id) in played["server"]
    # the server tournament's whole evaluation is kept: every player's times round by round, the figures' source
    players, res = CampaignDB(cfg.run_dir / "campaign.sqlite").get_mode_tournament(GPU, "fp32", shape, "server")
    assert twin.id in players and set(played["server"]) == {str(i) for i in players[1:]}
    rounds = res.candidate.detail["timing"]["rounds_us"]
    assert {f"rival:{i}" for i in players[1:]} <= set(rounds) and "candidate" in rounds
    again = {int(n) if n != "candidate" else players[0]: f for n, f in res.head_to_head("best-nvidia").items()}
    assert again == CampaignDB(cfg.run_dir / "campaign.sqlite").get_mode_winner(GPU, "fp32", shape, "server")["figures"]
    parent = arch.get(twin.parent)
    assert parent.id == made[0]["input"]["of"] and parent.proposer != "cold-twin"
    assert cold_twin(parent.family, parent.params, shape) == twin.params
    # the search's tournament did not play the twin; measured once offline it outranks the leaders, so they play
    # again with it before the offline finals, which measure the archive's best
    offline = [n["input"]["variant_ids"] for n in nodes if n["node"] == "tournament"]
    assert len(offline) == 2 and twin.id not in offline[0] and twin.id in offline[1]
    assert {f["source_hash"] for f in CampaignDB(cfg.run_dir / "campaign.sqlite").finals() if f["mode"] == "offline"} \
        == {arch.best(GPU, "fp32", shape).source_hash}


def test_code_commit_outside_a_checkout_comes_from_the_environment(tmp_path):
    """A lent GPU machine gets a copy of the tree without .git: the commit the benchmark outputs and a run's record
    name is then CUDAL2_COMMIT, or nothing (never another checkout's)."""
    import shutil

    pkg = tmp_path / "copy" / "agent"
    pkg.mkdir(parents=True)
    shutil.copy(REPO / "agent" / "resources.py", pkg / "resources.py")
    code = ("import importlib.util as u, sys; s = u.spec_from_file_location('r', sys.argv[1]); "
            "m = u.module_from_spec(s); s.loader.exec_module(m); print(m.code_commit())")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") and k != "CUDAL2_COMMIT"}
    env["GIT_CEILING_DIRECTORIES"] = str(tmp_path)
    for extra, want in (({}, "None"), ({"CUDAL2_COMMIT": "abc1234"}, "abc1234")):
        r = subprocess.run([sys.executable, "-c", code, str(pkg / "resources.py")], cwd=tmp_path, text=True,
                           capture_output=True, env={**env, **extra}, timeout=60)
        assert r.returncode == 0 and r.stdout.strip() == want, r.stderr


def test_code_commit_says_dirty_where_tracked_files_differ_from_head(tmp_path):
    """A checkout whose tracked files differ from HEAD (a GPU machine's copy of the tree with a stale .git, or
    uncommitted work) is named HEAD+dirty, not HEAD; untracked files (run folders) do not count."""
    import shutil

    repo = tmp_path / "repo"
    (repo / "agent").mkdir(parents=True)
    shutil.copy(REPO / "agent" / "resources.py", repo / "agent" / "resources.py")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") and k != "CUDAL2_COMMIT"}
    env.update(GIT_CEILING_DIRECTORIES=str(tmp_path), GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")
    for cmd in (["init", "-q"], ["add", "."], ["commit", "-qm", "x"]):
        subprocess.run(["git", *cmd], cwd=repo, env=env, check=True, capture_output=True, timeout=60)
    code = ("import importlib.util as u, sys; s = u.spec_from_file_location('r', sys.argv[1]); "
            "m = u.module_from_spec(s); s.loader.exec_module(m); print(m.code_commit())")

    def named() -> str:
        return subprocess.run([sys.executable, "-c", code, str(repo / "agent" / "resources.py")], cwd=repo,
                              text=True, capture_output=True, env=env, timeout=60).stdout.strip()

    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=repo, env=env, text=True,
                          capture_output=True, timeout=60).stdout.strip()
    (repo / "run.json").write_text("{}")  # untracked
    assert named() == head
    with (repo / "agent" / "resources.py").open("a") as f:
        f.write("# changed\n")
    assert named() == f"{head}+dirty"


def test_code_commit_names_cudal2_commit_over_the_checkouts_head():
    """The variable says what code runs even inside a checkout whose HEAD is another commit (a GPU machine's copy of
    the tree can carry a stale .git)."""
    code = "from agent.resources import code_commit; print(code_commit())"
    env = {k: v for k, v in os.environ.items() if k != "CUDAL2_COMMIT"}
    head = subprocess.run([sys.executable, "-c", code], cwd=REPO, text=True, capture_output=True, env=env,
                          timeout=60).stdout.strip()
    named = subprocess.run([sys.executable, "-c", code], cwd=REPO, text=True, capture_output=True,
                           env={**env, "CUDAL2_COMMIT": "feed123"}, timeout=60).stdout.strip()
    assert head and head != "feed123" and named == "feed123"
