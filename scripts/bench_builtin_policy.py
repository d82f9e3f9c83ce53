"""Built-in policy benchmark (GPU machine): a campaign with the built-in model under a fixed budget, then per shape
the best kernel's speedup against cuBLASLt-AutoTuning-max, re-measured offline and server by the evaluator
(interleaved with the baselines in one process), with the cost of the search: GPU seconds and compile CPU seconds.

    python3 scripts/bench_builtin_policy.py --shapes docs/benchmarks/dev_sample.txt --budget 8 --acc fp32 \
        --runs-dir /tmp/runs --out docs/benchmarks/data/tables

It writes builtin_policy_<acc>[_<mode>].md into --out, which opens with the big-shape and server-mode targets judged
on the finals (scripts/bench_targets.py; power-steady is the offline mode's final, so list offline in --final-modes).
A table kept in the repository is renamed there to <acc>[_<device>]_<date>_<commit>.md (docs/benchmarks/data/README.md)
and its figures quoted on the benchmark page.
Re-running the same command resumes the campaign (nothing finished is measured twice). With --report-only, each
--with-run adds another run of --runs-dir to one table (a benchmark spread over runs of its shape subsets); a
shape measured in several is taken from the last run named.
"""
from __future__ import annotations

import argparse
import datetime
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "scripts")]
from bench_targets import is_big, judge  # noqa: E402
from evaluator.contract import MODES  # noqa: E402  (offline, server, graph: the table's section order)
from evaluator.record import BEST_NVIDIA  # noqa: E402

BASELINE = "cublaslt-autotune-max"


def campaign_cmd(a: argparse.Namespace, run: str) -> list[str]:
    """The campaign this benchmark runs (`agent.cli campaign` with the built-in model)."""
    cmd = [sys.executable, "-m", "agent.cli", "campaign", "--shapes", a.shapes, "--model", "builtin",
           "--budget", str(a.budget), "--acc", a.acc, "--run", run, "--runs-dir", a.runs_dir, "--no-global",
           "--mode", a.mode, "--final-modes", a.final_modes or _final_modes(a.mode),
           "--final-repeats", str(a.final_repeats), "--per-step", str(a.per_step), "--ncu", a.ncu or "auto"]
    if a.lanes:
        cmd += ["--lanes", str(a.lanes)]
    if a.gpus:  # a machine of several GPUs: one campaign over all of them (the table names each shape's GPU)
        cmd += ["--gpus", a.gpus]
    return cmd


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="docs/benchmarks/dev_sample.txt")
    # None: with --report-only, what the run was made with (its campaign.json); otherwise the defaults below
    ap.add_argument("--budget", type=int, default=None, help="candidates per shape (default 8)")
    ap.add_argument("--acc", choices=["fp32", "fp16"], default=None, help="accumulator (default fp32)")
    ap.add_argument("--run", default=None)
    ap.add_argument("--runs-dir", default="runs")
    ap.add_argument("--out", default="docs/benchmarks/data/tables")
    ap.add_argument("--per-step", type=int, default=None, help="proposals per search step (default 4)")
    ap.add_argument("--lanes", type=int, default=None, help="shapes in flight (compile parallelism)")
    ap.add_argument("--gpus", default=None, metavar="0,1,...", help="GPU indices the campaign evaluates on (default 0)")
    ap.add_argument("--ncu", choices=["auto", "on", "off"], default=None, help="Nsight Compute per step (default auto)")
    ap.add_argument("--mode", choices=MODES, default=None,
                    help="timing mode of the search (default offline; graph: replayed from a CUDA graph, where the "
                         "launch overlap that offline timing credits mostly goes)")
    ap.add_argument("--final-modes", default=None, metavar="MODES",
                    help="modes the winner is re-measured in (default offline,server; the search mode's first)")
    ap.add_argument("--final-repeats", type=int, default=None,
                    help="separate evaluations of each final measurement (default: the campaign's, 3)")
    ap.add_argument("--report-only", action="store_true", help="summarise an existing run")
    ap.add_argument("--with-run", action="append", default=[], metavar="RUN",
                    help="with --report-only: also summarise this run (a shape in several: the last one named)")
    a = ap.parse_args()
    if a.with_run and not a.report_only:
        ap.error("--with-run only combines finished runs: add --report-only")
    chosen = {k: getattr(a, k, None) or v for k, v in _defaults().items()}
    run = a.run or f"builtin-{chosen['acc']}-b{chosen['budget']}" + ("" if chosen["mode"] == "offline"
                                                                       else f"-{chosen['mode']}")
    if not a.report_only:
        vars(a).update(chosen)
        rc = subprocess.run(campaign_cmd(a, run), cwd=REPO).returncode
        if rc == 2:
            return 2
    runs = [Path(a.runs_dir) / r for r in (run, *a.with_run)]
    for d in runs:
        if not (d / "archive.sqlite").is_file():
            print(f"bench_builtin_policy: no run at {d} (no archive.sqlite)", file=sys.stderr)
            return 2
    try:
        a = recorded_settings(runs, a)
        md = summarise_run(runs, a)
    except ValueError as e:
        print(f"bench_builtin_policy: {e}", file=sys.stderr)
        return 2
    out = Path(a.out) / f"builtin_policy_{a.acc}{'' if a.mode == 'offline' else '_' + a.mode}.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(md)
    print(md)
    return 0


def _final_modes(search_mode: str) -> str:
    """The search's own mode first, then offline and server: a graph-mode winner is also shown where the issue's
    targets are judged."""
    return ",".join(dict.fromkeys([search_mode, "offline", "server"]))


def _defaults() -> dict:
    """What the campaign this script starts uses unless told (profile and confirm-top are not flags here)."""
    from agent.campaign.driver import CampaignConfig

    return {"acc": "fp32", "budget": 8, "per_step": 4, "mode": "offline", "final_repeats": CampaignConfig.final_repeats,
            "profile": CampaignConfig.profile, "confirm_top": CampaignConfig.confirm_top, "ncu": "auto", "lanes": None}


# campaign.json's key for each setting the table's header names
RECORDED = (("acc", "acc"), ("budget_candidates", "budget"), ("n_per_step", "per_step"), ("mode", "mode"),
            ("final_repeats", "final_repeats"), ("profile", "profile"), ("confirm_top", "confirm_top"))
# settings that change no figure: runs that differ in them are combined, and the header's command leaves them out
HOW_RUN = (("ncu", "ncu"), ("lanes", "lanes"))


def recorded_settings(run_dirs: list[Path], a) -> argparse.Namespace:
    """The flags the header shows, taken from what the runs recorded (campaign.json) over the command line's: a fp16
    run summarised without --acc was once titled fp32, and budget 12 printed as the default 8. A flag given that
    contradicts the run, runs that differ, or a --shapes file that is not the runs' shape list is an error."""
    from agent.campaign.db import run_record
    from agent.shapes import load_shapes

    recs = {d.name: run_record(d) for d in run_dirs}
    out, defaults = argparse.Namespace(**vars(a)), _defaults()
    for key, flag in RECORDED + HOW_RUN:
        seen = {name: r[key] for name, r in recs.items() if r.get(key) is not None}
        given = getattr(a, flag, None)
        opt = "--" + flag.replace("_", "-")
        if len(set(seen.values())) > 1 and (key, flag) in HOW_RUN:
            setattr(out, flag, None)
            continue
        if len(set(seen.values())) > 1:
            raise ValueError(f"the runs were made with different {opt} ("
                             + ", ".join(f"{n}: {v}" for n, v in seen.items()) + "): one table would mix them")
        if not seen:
            setattr(out, flag, defaults[flag] if given is None else given)
            continue
        name, made_with = next(iter(seen.items()))
        if given is not None and given != made_with:
            raise ValueError(f"{opt} {given}, but run {name} was made with {made_with}")
        setattr(out, flag, made_with)
    made = {tuple(s) for r in recs.values() for s in r.get("shapes", [])}
    if made and Path(a.shapes).is_file() and set(load_shapes(a.shapes)) != made:
        raise ValueError(f"--shapes {a.shapes} is not the runs' shape list ({len(made)} shapes); name the file "
                         "they were made with")
    return out


def physical_gpus(rows_and_archives) -> list[str]:
    """The UUIDs of the physical GPUs behind a table's figures, its search measurements included. A run spread over
    lent machines is measured on several, and a tiny shape's baseline moved by up to 9% between two of them
    (H200s, 2026-11-24). Older records name none."""
    seen = set()
    for row, archive in rows_and_archives:
        results = [row.result] + [v.result for v in archive.history(row.gpu, row.acc, row.shape)]
        seen.update(r.gpu.get("gpu_uuid") for r in results if r is not None)
    return sorted(u for u in seen if u)


def _without(sel: list, moved: list) -> str:
    """The mode's summary against best NVIDIA over the shapes whose baselines held between the finals."""
    from agent.report import summarise

    kept = [r for r in sel if r not in moved]
    if not kept:
        return "no shape left"
    rest = summarise(kept, BEST_NVIDIA)
    return f"geomean {_f(rest['geomean'])}, win rate {_pct(rest['win_rate'])} over {rest['n_all']} shapes"


def _commits_line(run_dirs: list[Path]) -> str:
    """The code commits the runs searched and measured with (campaign.json keeps one per start that changed it)."""
    from agent.campaign.db import recorded_commits, run_record

    named = [recorded_commits(run_record(d)) for d in run_dirs]
    commits = list(dict.fromkeys(c for cs, _ in named for c in cs))
    if not commits:
        return "- code: the run records no commit (it predates that record); see the page that cites it"
    which = ("the starts that recorded one; earlier starts predate that record, see the page that cites the run"
             if any(early for _, early in named) else "each start of the campaign")
    return f"- code: commit{'s' if len(commits) > 1 else ''} {', '.join(commits)} ({which})"


def _physical_note(uuids: list[str]) -> str:
    from agent.report import short_gpu_id

    if not uuids:
        return ""
    ids = ", ".join(map(short_gpu_id, uuids))
    return f" ({len(uuids)} physical GPU{'s' if len(uuids) > 1 else ''}: {ids})"


def figures_by_gpu(rows) -> str:
    """Which physical GPU measured each shape's figures (its median final, or the search's own where none yet), as
    a line of the table's notes when there are several: one lent machine reads a big shape's figure up to 3% away
    from another's, so a reader comparing two runs shape by shape needs to know which machine each came from. Where
    a resumed run measured one shape's modes on different machines, it says which modes of which shapes."""
    from agent.report import short_gpu_id

    cells = []
    for r in rows:
        uuid = r.result.gpu.get("gpu_uuid") if r.result is not None else None
        if uuid:
            cells.append((short_gpu_id(uuid), r.mode, r.shape))
    if len({u for u, _, _ in cells}) < 2:
        return ""
    name = lambda ss: ", ".join("×".join(map(str, s)) for s in sorted(ss))  # noqa: E731
    shapes: dict[str, set] = {}
    for u, _, s in cells:
        shapes.setdefault(u, set()).add(s)
    every = {s for _, _, s in cells}
    if sum(len(ss) for ss in shapes.values()) > len(every):  # a shape measured on two machines
        per_mode: dict[str, dict[str, set]] = {}
        for u, m, s in cells:
            per_mode.setdefault(u, {}).setdefault(m, set()).add(s)
        modes = lambda ms: " and ".join(  # noqa: E731
            f"{m} ({'every shape' if ss == every else name(ss)})" for m, ss in sorted(ms.items()))
        return "- figures measured on " + "; ".join(f"{u}: {modes(ms)}" for u, ms in sorted(per_mode.items()))
    ordered = sorted(shapes.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    most = len(ordered[0][1])
    named = [f"{u}: {name(ss)}" for u, ss in (ordered[1:] if most > 1 else ordered)]
    rest = [f"{ordered[0][0]}: the other {most} shapes"] if most > 1 else []
    return "- figures measured on " + "; ".join(named + rest)


def summarise_run(run_dirs: Path | list[Path], a) -> str:
    from agent.campaign.archive import Archive
    from agent.campaign.driver import TOURNAMENT_ROUNDS
    from agent.report import baselines_moved, collect_rows, summarise, untimed

    run_dirs = [run_dirs] if isinstance(run_dirs, Path) else list(run_dirs)
    # (gpu, acc, shape, mode) -> (row, its run's archive); a later run replaces an earlier one's shape in every mode
    picked: dict[tuple, tuple] = {}
    for d in run_dirs:
        archive = Archive(d / "archive.sqlite")
        found = collect_rows(d)
        replaced = {(r.gpu, r.acc, r.shape) for r in found}
        picked = {k: v for k, v in picked.items() if k[:3] not in replaced}
        picked.update({(r.gpu, r.acc, r.shape, r.mode): (r, archive) for r in found})
    rows = [r for r, _ in picked.values()]
    if len({r.gpu for r in rows}) > 1:
        raise ValueError("the runs were measured on different GPUs (" + ", ".join(sorted({r.gpu for r in rows}))
                         + "): one table over them would mix devices")
    gpu = rows[0].gpu if rows else "?"
    uuids = physical_gpus(picked.values())
    if {r.acc for r in rows} - {a.acc}:
        raise ValueError(f"the runs accumulate in {', '.join(sorted({r.acc for r in rows}))}, not {a.acc}")
    defaults = _defaults()
    reps = getattr(a, "final_repeats", None)  # absent from callers that only summarise
    top = getattr(a, "confirm_top", defaults["confirm_top"])
    played = any(archive.tournament(r.gpu, r.acc, r.shape) for r, archive in picked.values())
    chose = ("the search's fastest\n  measurement chose the winner (`--confirm-top 0`)" if not top else
             f"the {top} leaders\n  timed head to head in the same rounds of one evaluation (a tournament, "
             f"{TOURNAMENT_ROUNDS} rounds) and the\n  fastest there chosen (`--confirm-top`; its figure is the "
             "table's \"T\")" if played else
             f"the {top} leaders\n  measured a second time and the winner chosen on both measurements (`--confirm-top`)")
    # what the run asked for is not stored with it: the most evaluations any shape of the run has in a mode
    want = max((_final_count(r) for r in rows), default=0)
    spent = {key: _gpu_results(archive, r) for key, (r, archive) in picked.items()}  # read once: notes and rows
    legacy = any(res.gpu_seconds is None for results in spent.values() for res in results)
    search_mode = getattr(a, "mode", defaults["mode"])
    modes = [m for m in MODES if any(r.mode == m for r in rows)]
    lines = [f"# Built-in policy benchmark ({a.acc} accumulation"
             + ("" if search_mode == "offline" else f", searched in {search_mode} mode") + ")", "",
             f"- device: {gpu}{_physical_note(uuids)}; date: {datetime.date.today().isoformat()}; shapes: `{a.shapes}`",
             _commits_line(run_dirs),
             f"- budget: {a.budget} candidates per shape, {getattr(a, 'profile', defaults['profile'])} timing "
             f"profile during the search ({search_mode} timing); {chose}; the winner",
             f"  re-measured in {', '.join(modes) or 'no mode yet'} against every baseline, interleaved in one "
             "worker process, in",
             "  separate evaluations (\"final measurements\"; the speedup and its 95% CI are the median one's);",
             "  GPU s is the time the shape's evaluations held a GPU, the second ones included; \"search",
             "  measurements\" are the winner's own measurements during the search, which chose it as the fastest",
             "  and so read high",
             *(["- this run's records predate the GPU time record (2026-11-25): their GPU s is wall time less the "
                "compile,",
                "  which also counts waits for a GPU that another shape's evaluation held, so it overstates GPU time",
                "  where lanes outnumber GPUs"] if legacy else []),
             f"- command: `python3 scripts/bench_builtin_policy.py --shapes {a.shapes} --budget {a.budget} "
             f"--per-step {a.per_step} --acc {a.acc}" + (f" --ncu {a.ncu}" if a.ncu else "")
             + (f" --lanes {a.lanes}" if a.lanes else "")
             + (f" --gpus {a.gpus}" if getattr(a, "gpus", None) else "")
             + ("" if search_mode == "offline" else f" --mode {search_mode}")
             + ("" if not modes or set(modes) == set(_final_modes(search_mode).split(","))
                else f" --final-modes {','.join(m for m in dict.fromkeys([search_mode, *modes]) if m in modes)}")
             + (f" --final-repeats {reps}" if reps not in (None, defaults["final_repeats"]) else "") + "`",
             *([where] if (where := figures_by_gpu(rows)) else []),
             *([f"- runs combined: {', '.join(f'`{d.name}`' for d in run_dirs)} (a shape in several is taken from "
                "the last), each run with the command above over its own shape list; this table: "
                f"`python3 scripts/bench_builtin_policy.py --report-only --run {run_dirs[0].name} "
                + " ".join(f"--with-run {d.name}" for d in run_dirs[1:]) + "`"] if len(run_dirs) > 1 else []),
             ""]
    if a.acc == "fp32":
        lines += _targets_section(rows, run_dirs, spent)
    for mode in modes:
        sel = [r for r in rows if r.mode == mode]
        s = summarise(sel, BASELINE)
        # an unfinished run: its figures without a final measurement are the search's, which chose them, so read high
        pending = [r for r in sel if r.result is not None and _awaiting_final(r)]
        # a run stopped part-way through its finals: shapes with no row in this mode, or fewer evaluations than asked
        absent = sorted({r.shape for r in rows} - {r.shape for r in sel})
        short = [r for r in sel if not _awaiting_final(r) and _final_count(r) < want]
        moved = [r for r in sel if baselines_moved(r)]
        big = _big(sel, BASELINE)
        best, best_big = summarise(sel, BEST_NVIDIA), _big(sel, BEST_NVIDIA)
        # the evaluator always times cuBLASLt-AutoTuning: a correct kernel without that figure is a fault to show,
        # since the summary above leaves such a shape out of its counts
        unbased = [r.shape for r in untimed(sel, BASELINE)]
        lines += [f"## {mode}", "",
                  f"geomean {_f(s['geomean'])}, win rate {_pct(s['win_rate'])} over {s['n_all']} shapes, "
                  f"{_big_figures(big)}; max(kernel, baseline) mean {_f(s['dispatch_mean'])}", "",
                  # the targets are set against every baseline, AutoTuning's pick being the fastest mostly
                  f"Against best NVIDIA (the fastest of every baseline timed in the same rounds): geomean "
                  f"{_f(best['geomean'])}, win rate {_pct(best['win_rate'])}, {_big_figures(best_big)}.", "",
                  *([f"**Unfinished run: {len(pending)} of {len(sel)} shapes have no final measurement yet; their "
                     "figure (marked *) is the search's own, which chose the kernel and so reads high, and every "
                     "figure above depends on them.**", ""] if pending else []),
                  *([f"**{len(absent)} of the run's shapes have no {mode} final yet and are not in this section: "
                     + ", ".join("×".join(map(str, sh)) for sh in absent) + ".**", ""] if absent else []),
                  *([f"**{len(short)} shapes (marked †) have fewer than {want} final evaluations so far.**", ""]
                    if short else []),
                  *([f"**{len(moved)} shapes (marked ‡): the fastest NVIDIA baseline's time moved by 5% or more "
                     "between the final evaluations, three times as far as the kernel's or more, so the figure "
                     "depends on which evaluation is the median (docs/evaluator.md, server mode). Without "
                     f"them, against best NVIDIA: {_without(sel, moved)}.**", ""]
                    if moved else []),
                  *([f"**{len(unbased)} shapes have a correct kernel but no {BASELINE} figure and are left out "
                     "of the figures above: " + ", ".join("×".join(map(str, sh)) for sh in unbased) + ".**", ""]
                    if unbased else []),
                  *([("Provisional (see above). " if pending or absent or short or unbased else "")
                     + targets(s, big), ""]
                    if mode == "offline" and a.acc == "fp32" else []),
                  "| M | N | K | speedup vs AutoTuning-max | 95% CI | final measurements | search measurements "
                  "| family | tried | correct | GPU s | nvcc s (one core each) |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in sorted(sel, key=lambda r: r.log2_mnk):
            archive = picked[(r.gpu, r.acc, r.shape, r.mode)][1]
            hist = archive.history(r.gpu, r.acc, r.shape)
            tour = archive.tournament(r.gpu, r.acc, r.shape)
            gpu_s = sum(res.gpu_time() for res in spent[(r.gpu, r.acc, r.shape, r.mode)])
            cpu_s = sum(v.result.compile.build_seconds for v in hist if v.result.compile)
            win = next((v for v in hist if v.id == r.variant_id), None)
            fam = (win.family if win else "") or ""
            # what the winner measured while it was chosen, beside the final figure taken after the choice:
            # the gap between them is the selection bias of keeping the fastest of many noisy measurements
            search = " / ".join(_f(res.speedup(BASELINE)) for res in [win.result, *archive.remeasures(win.id)]
                                if res.ok) if win else "-"
            figure = dict(tour["figures"]).get(r.variant_id) if tour else None
            if figure is not None:  # the winner's figure in the tournament that chose it
                search += f" · T {_f(figure)}"
            mark = (" *" if _awaiting_final(r) else (" †" if r in short else "")) + (" ‡" if r in moved else "")
            finals = " / ".join([*(_f(s) for s in r.extra.get("final_speedups", [])),
                                 *(f"**{s}**" for s in r.extra.get("final_failed", []))]) or "-"
            lines.append(f"| {r.shape[0]} | {r.shape[1]} | {r.shape[2]} | {_f(r.speedup(BASELINE))}{mark} | {_ci(r)} | "
                         f"{finals} | {search or '-'} | {fam} | {r.tried} | {r.correct} | {gpu_s:.1f} | {cpu_s:.0f} |")
        lines.append("")
    return "\n".join(lines) + "\n"


def _targets_section(rows, run_dirs: list[Path], spent: dict) -> list[str]:
    """The big-shape and server-mode targets (bench_targets.judge) over the runs' shape lists, on final figures."""
    from agent.campaign.db import run_record
    from agent.report import baselines_moved

    shapes = list(dict.fromkeys([tuple(s) for d in run_dirs for s in run_record(d).get("shapes", [])]
                                + [r.shape for r in rows]))
    finals: dict[str, dict] = {}
    for r in rows:
        if not _awaiting_final(r) and (x := r.speedup(BEST_NVIDIA)) is not None:
            finals.setdefault(r.mode, {})[r.shape] = x
    gpu_s = {key[2]: sum(res.gpu_time() for res in results) for key, results in spent.items()}
    moved: dict[str, list[str]] = {}
    for r in rows:
        if r.shape in finals.get(r.mode, {}) and baselines_moved(r):
            moved.setdefault(r.mode, []).append("×".join(map(str, r.shape)))
    doubt = ["- figures these judgements use whose baselines moved between the finals while the kernel held (‡ "
             "below; the median may read high): "
             + "; ".join(f"{m}: {', '.join(ss)}" for m, ss in sorted(moved.items()))] if moved else []
    return ["## Targets: big shapes and server mode", "",
            "Judged on final measurements only, each figure the median final against best NVIDIA "
            "(scripts/bench_targets.py says what each target is).",
            "", *judge(finals, shapes, gpu_s), *doubt, ""]


def _gpu_results(archive, r) -> list:
    """Every evaluation a shape's row spent GPU time on: each candidate's, its second measurements, the final ones
    (kept as second measurements) and the tournament that chose the winner."""
    tour = archive.tournament(r.gpu, r.acc, r.shape)
    return [res for v in archive.history(r.gpu, r.acc, r.shape) for res in [v.result, *archive.remeasures(v.id), *(
        [tour["result"]] if tour and v.id == tour["figures"][0][0] else [])]]


def _final_count(r) -> int:
    return len(r.extra.get("final_speedups", [])) + len(r.extra.get("final_failed", []))


def _awaiting_final(r) -> bool:
    """No final measurement yet (a failed one counts as taken: it is shown)."""
    return not r.final and not r.extra.get("final_failed")


# The targets for fp32 accumulation, offline: (name, bar, the bar as written, how a figure is written).
TARGETS = (("geomean", 1.15, "1.15", "{:.4f}"), ("win rate", 0.90, "90%", "{:.0%}"),
           ("min over shapes ≥ 2^36 FLOP", 0.97, "0.97", "{:.4f}"))


def _big(rows, baseline: str) -> list[float]:
    """The speedups of the shapes from the issue's threshold, 2^36 FLOP (bench_targets.is_big)."""
    return [x for r in rows if is_big(r.shape) and (x := r.speedup(baseline)) is not None]


def _big_figures(big: list[float]) -> str:
    from agent.report import geomean
    return f"shapes ≥ 2^36 FLOP: min {_f(min(big) if big else None)}, geomean {_f(geomean(big))}"


def targets(s: dict, big: list[float]) -> str:
    """Each target met or not, judged on unrounded figures: a 0.9699 prints as 0.970 above, but misses 0.97."""
    got = (s["geomean"], s["win_rate"], min(big) if big else None)
    parts = []
    for (name, bar, shown, fmt), x in zip(TARGETS, got):
        verdict = "no data" if x is None else ("met" if x >= bar else "not met") + f" ({fmt.format(x)})"
        parts.append(f"{name} ≥ {shown}: {verdict}")
    return "Targets (fp32, offline, over this run's shapes): " + "; ".join(parts) + "."


def _ci(r) -> str:
    if r.result is None:
        return "-"
    ts = [t for n, t in r.result.baselines.items() if n.startswith("cublaslt-autotune-")]
    if not ts:
        return "-"
    best = min(ts, key=lambda t: t.median_us)
    return f"{best.speedup_ci95[0]:.3f}–{best.speedup_ci95[1]:.3f}" if best.speedup_ci95 else "-"


def _f(x) -> str:
    return "-" if x is None else f"{x:.3f}"


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


if __name__ == "__main__":
    sys.exit(main())
