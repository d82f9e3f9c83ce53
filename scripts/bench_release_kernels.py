#!/usr/bin/env python3
"""Time the CUDA-L2 release's kernels in this project's evaluator, the way our own candidates are timed (GPU machine).

    python3 scripts/bench_release_kernels.py --release CUDA_L2_CHECKOUT --shapes docs/benchmarks/dev_sample.txt \
        --out DIR [--set h100_F32F16F16F32] [--modes offline,server] [--repeats 3] [--ours TABLE.md] [--compile-only]
        [--ours-run CAMPAIGN_RUN_DIR [--h2h-repeats N]]

For each shape, `kernels/<set>/<M>_<N>_<K>.cu` of the user's checkout of github.com/deepreinforce-ai/CUDA-L2 is brought
into the kernel contract (scripts/release_adapter.py says what it rewrites), built with the evaluator's flags, and
evaluated in the accumulation class its set's name claims (F32F16F16F32: fp32), quick profile, every check, against
cuBLASLt-AutoTuning measured interleaved in the same worker process. A kernel refused for accuracy in that class
(it accumulates in fp16) is evaluated again in the fp16 class, against fp16-accumulating baselines, so its speed is
on record too, in its own column. A file the adapter or the evaluator's screen refuses is listed with the reason.

DIR/release_<set>.json keeps every evaluation and is read back on a re-run: a shape and mode is evaluated until it
holds --repeats separate evaluations, so a run can be spread over device calls and machines (--budget-s stops
starting evaluations after that many seconds); DIR/release_<set>.md is the table, each cell the median of its
evaluations. --ours adds a column read from one of our benchmark tables (its "speedup vs
AutoTuning-max" column): a different evaluation on possibly another GPU, not a head-to-head in the same rounds.
--ours-run is the head-to-head: a finished campaign's winner for each of its shapes is evaluated with the release's
kernel as its rival, both timed in the same rounds against cuBLASLt-AutoTuning (only where the release's kernel
passed every check in its claimed class).
The release's text is read at run time and never written to DIR.
"""
from __future__ import annotations

import argparse
import csv
import datetime
import json
import re
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

from agent.shapes import load_shapes  # noqa: E402
from recheck_finals import _geomean, load_finals  # noqa: E402
from release_adapter import NotAdaptable, adapt  # noqa: E402

BASELINE = "cublaslt-autotune-max"
ACCURACY_CHECKS = {"baseline_bounded_deviation", "accumulator_honesty"}


def claimed_acc(kernel_set: str) -> str:
    """The release names its sets <gpu>_F32F16F16F32 (half operands, fp32 accumulator: "HGEMM (16 bit) with 32-bit
    accumulator" in its history) and <gpu>_F16F16F16F16 (fp16 accumulator); the first field is the claim."""
    m = re.search(r"_F(16|32)F16F16F(16|32)$", kernel_set)
    if not m:
        raise ValueError(f"cannot tell the accumulator from the set name {kernel_set!r} "
                         "(expected e.g. h100_F32F16F16F32)")
    return "fp32" if m.group(1) == "32" else "fp16"


def prepare(release: Path, kernel_set: str, shapes: list) -> list[dict]:
    """Per shape: the adapted source, or why there is none."""
    from evaluator.screen import screen

    rows = []
    for s in shapes:
        m, n, k = s
        row = {"shape": [m, n, k], "file": f"kernels/{kernel_set}/{m}_{n}_{k}.cu"}
        path = release / row["file"]
        if not path.is_file():
            row["refused"] = "the release has no kernel for this shape"
        else:
            try:
                a = adapt(path.read_text(), (m, n, k))
            except NotAdaptable as e:
                row["refused"] = f"adapter: {e}"
            else:
                reasons = screen(a.source)
                row.update(rewrites=a.rewrites, entry=a.entry)
                if reasons:  # the table shows the first, the JSON keeps them all
                    row["screen_reasons"] = reasons
                    more = f" (+{len(reasons) - 1} more)" if len(reasons) > 1 else ""
                    row["refused"] = f"screen: {reasons[0]}{more}"
                else:
                    row["source"] = a.source
        rows.append(row)
    return rows


def release_claims(release: Path, kernel_set: str, mode: str) -> dict[tuple, float]:
    """The release's own speedups against cuBLASLt-AutoTuning-max in `mode` (its eval_results/), if it ships them."""
    p = release / "eval_results" / f"cuda_l2_{kernel_set}_speedup_{mode}.csv"
    if not p.is_file():
        return {}
    with p.open() as f:
        return {tuple(int(x) for x in r["mnk"].split("_")): float(r["cuBLASLt-auto-tuning-max"])
                for r in csv.DictReader(f) if r.get("cuBLASLt-auto-tuning-max")}


def ours_from_table(path: Path) -> dict[tuple, float]:
    """Our figures from a committed benchmark table: its first per-shape table's speedup column."""
    out: dict[tuple, float] = {}
    for line in path.read_text().splitlines():
        if line.startswith("## ") and out:
            break  # the first section (offline) only
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) > 3 and all(c.isdigit() for c in cells[:3]):
            try:
                out[tuple(int(c) for c in cells[:3])] = float(cells[3])
            except ValueError:
                pass
    return out


def _failed(res) -> list[str]:
    return [c.name for c in res.checks if not c.passed]


def _key(shape, mode: str) -> str:
    return f"{shape[0]}x{shape[1]}x{shape[2]}/{mode}"


def _schedule(rows: list[dict], store: dict, modes: list[str], repeats: int, budget_s: float, wanted):
    """(row, key, mode) for each evaluation still owed: `store[key]` is filled up to `repeats` entries, one set of all
    shapes at a time (so that the sets' readings of one shape are minutes apart, as separate evaluations should be),
    for the rows `wanted(row, key)` accepts, until `budget_s` seconds have passed."""
    started = time.monotonic()
    for rep in range(repeats):
        for mode in modes:
            for row in rows:
                key = _key(row["shape"], mode)
                if len(store.get(key, [])) > rep or not wanted(row, key):
                    continue
                if time.monotonic() - started > budget_s:
                    print(f"budget of {budget_s:g} s spent; re-run to go on", flush=True)
                    return
                yield row, key, mode


def evaluate_rows(rows: list[dict], done: dict, acc: str, modes: list[str], budget_s: float, save,
                  repeats: int = 1) -> None:
    """Appends to done["<M>x<N>x<K>/<mode>"] until each holds `repeats` evaluations."""
    from evaluator import record as R
    from evaluator.api import evaluate

    for row, key, mode in _schedule(rows, done, modes, repeats, budget_s,
                                    lambda row, key: "source" in row and row.get("built")):
        res = evaluate(row["source"], tuple(row["shape"]), acc=acc, mode=mode)
        entry = {"claimed": _summary(res, acc)}
        failed = _failed(res)
        if acc == "fp32" and res.status == R.INCORRECT and failed and set(failed) <= ACCURACY_CHECKS:
            entry["fp16_class"] = _summary(evaluate(row["source"], tuple(row["shape"]), acc="fp16", mode=mode),
                                           "fp16")
        done.setdefault(key, []).append(entry)
        print(key, json.dumps({k: (v["status"], v["speedup"]) for k, v in entry.items()}), flush=True)
        save()


def head_to_head(rows: list[dict], done: dict, h2h: dict, winners: dict, acc: str, modes: list[str],
                 budget_s: float, save, repeats: int = 1) -> None:
    """Our campaign's winner as the candidate and the release's kernel as its rival, timed in the same rounds of one
    evaluation (evaluate(rivals=)): both against cuBLASLt-AutoTuning on one clock. Only a release kernel that passed
    every check in its claimed class is a rival (a rival's timed output is checked again, its other checks not)."""
    from evaluator.api import evaluate

    def wanted(row, key):
        return (tuple(row["shape"]) in winners
                and any(e["claimed"]["status"] == "ok" for e in done.get(key, [])))

    for row, key, mode in _schedule(rows, h2h, modes, repeats, budget_s, wanted):
        sh = tuple(row["shape"])
        res = evaluate(winners[sh], sh, acc=acc, mode=mode, rivals={"release": row["source"]})
        h = res.head_to_head(BASELINE) if res.ok else {}
        h2h.setdefault(key, []).append(
            {"ours": h.get("candidate"), "release": h.get("release"), "status": res.status,
             "reason": res.reason[:300], "release_refused": res.rivals_refused() or None,
             "gpu": {k: res.gpu.get(k) for k in ("name", "gpu_uuid") if k in res.gpu}})
        print(key, "head to head", json.dumps(h2h[key][-1]["ours"]), json.dumps(h2h[key][-1]["release"]),
              flush=True)
        save()


def load_winners(run_dir: Path) -> dict[tuple, str]:
    """Each shape's winner in a finished campaign (the kernel its final measurements timed)."""
    return {tuple(g["shape"]): g["source"] for g in load_finals(run_dir, ["offline", "server", "graph"])}


def _summary(res, acc: str) -> dict:
    return {"acc": acc, "status": res.status, "reason": res.reason[:400], "failed_checks": _failed(res),
            "speedup": res.speedup(BASELINE) if res.ok else None,
            "speedup_median": res.speedup(BASELINE, "median") if res.ok else None,
            "gpu": {k: res.gpu.get(k) for k in ("name", "gpu_uuid", "sm_clock_mhz", "power_w") if k in res.gpu},
            "max_abs_diff": res.max_abs_diff()}


def _readings(entries: list[dict], cls: str) -> tuple[float | None, str]:
    """The median of a class's timed readings and the cell that lists them."""
    return _median_cell([e[cls]["speedup"] for e in entries if e.get(cls) and e[cls]["speedup"] is not None])


def _median_cell(xs: list[float]) -> tuple[float | None, str]:
    """The median of some readings and the cell that lists them."""
    if not xs:
        return None, "–"
    med = statistics.median(xs)
    return med, _fmt(med) + (f" ({' / '.join(_fmt(x) for x in xs)})" if len(xs) > 1 else "")


def _fmt(x) -> str:
    return "–" if x is None else f"{x:.3f}"


def table(rows: list[dict], done: dict, meta: dict, claims: dict[str, dict], ours: dict,
          h2h: dict | None = None) -> str:
    """`claims`: mode -> the release's own figures; `ours`: our figures (offline) from one of our tables; `h2h`:
    head-to-head evaluations against our campaign's winners."""
    lines = [f"# The CUDA-L2 release's `{meta['set']}` kernels in this project's evaluator", "",
             f"- device: {meta['device']}; date: {meta['date']}; shapes: `{meta['shapes']}`; release commit "
             f"`{meta['release_commit']}`",
             f"- each kernel adapted to the contract (scripts/release_adapter.py: torch stand-in, launches on the "
             f"caller's stream, no per-call device synchronise or cudaMalloc/cudaFree), evaluated in the "
             f"{meta['acc']} class with every check, against {BASELINE} interleaved in the same process; a cell is "
             f"the median of the separate evaluations listed beside it",
             *[f"- command: `{c}`" for c in meta.get("commands", [])],
             *([f"- {meta['note']}"] if meta.get("note") else []), ""]
    for mode in meta["modes"]:
        mode_claims = claims.get(mode, {})
        mode_ours = ours if mode == "offline" else {}
        claim_col = " | release's own figure (its harness)" if mode_claims else ""
        ours_col = f" | ours ({meta['ours']})" if mode_ours else ""
        lines += [f"## {mode}", "",
                  f"| M | N | K | {meta['acc']} class | fp16 class | status / reason{claim_col}{ours_col} |",
                  "|---|---|---|---|---|---" + ("|---" if mode_claims else "") + ("|---" if mode_ours else "") + "|"]
        counted = []
        for row in rows:
            sh = tuple(row["shape"])
            entries = done.get(_key(sh, mode))
            if entries:
                med, cell = _readings(entries, "claimed")
                bad = [e["claimed"] for e in entries if e["claimed"]["status"] != "ok"]
                note = "ok" if not bad else (f"{bad[0]['status']} in {len(bad)} of {len(entries)}: "
                                             f"{', '.join(bad[0]['failed_checks']) or bad[0]['reason'][:120]}")
                cells = [cell, _readings(entries, "fp16_class")[1], note]
                counted.append(med if not bad else None)
            else:
                cells = ["–", "–", row.get("refused") or ("build failed: " + row.get("build_log", "")[:120]
                                                         if row.get("built") is False else "not measured")]
                counted.append(None)
            if mode_claims:
                cells.append(_fmt(mode_claims.get(sh)))
            if mode_ours:
                cells.append(_fmt(mode_ours.get(sh)))
            lines.append(f"| {sh[0]} | {sh[1]} | {sh[2]} | " + " | ".join(c.replace("|", "/") for c in cells) + " |")
        timed = [x for x in counted if x is not None]
        lines += ["", f"{meta['acc']} class: {len(timed)} of {len(rows)} shapes timed, {sum(x > 1 for x in timed)} "
                      f"above 1.0, geomean over the timed ones {_fmt(_geomean(timed))}; counting every shape "
                      f"without a timed {meta['acc']} kernel as lost: win rate "
                      f"{sum(x > 1 for x in timed)}/{len(rows)}", ""]
        if mode_ours:
            both = [(x, ours[tuple(r["shape"])]) for x, r in zip(counted, rows) if x and tuple(r["shape"]) in ours]
            if both:
                lines += [f"On the {len(both)} shapes timed here and in ours: release geomean "
                          f"{_fmt(_geomean([a for a, _ in both]))}, ours {_fmt(_geomean([b for _, b in both]))}.", ""]
    if h2h:
        lines += ["## Head to head: our campaign's winner and the release's kernel in the same rounds", "",
                  f"Our winners from `{meta.get('ours_run')}`; each evaluation times both beside {BASELINE} in the "
                  "same rounds (our kernel with every check, the release's with its timed output checked again); "
                  "each cell is the median over the evaluations listed beside it of the per-round ratios.", "",
                  "| M | N | K | mode | ours | release | status |", "|---|---|---|---|---|---|---|"]
        for key, es in h2h.items():
            shape, mode = key.split("/")
            ours_cell = _median_cell([e["ours"] for e in es if e["ours"] is not None])[1]
            rel_cell = _median_cell([e["release"] for e in es if e["release"] is not None])[1]
            bad = [e for e in es if e["status"] != "ok" or e["release_refused"]]
            status = "ok" if not bad else f"{bad[0]['status']}: {bad[0]['reason'] or bad[0]['release_refused']}"[:160]
            lines.append(f"| {' | '.join(shape.split('x'))} | {mode} | {ours_cell} | {rel_cell} | {status} |")
        lines.append("")
    return "\n".join(lines)


def side_figures(meta: dict, release: Path, kernel_set: str) -> tuple[dict, dict]:
    """The table's side columns: the release's own figures per mode, and ours from the table `meta` names."""
    claims = {m: release_claims(release, kernel_set, m) for m in meta["modes"]}
    return claims, (ours_from_table(Path(meta["ours"])) if meta.get("ours") else {})


def write_table(out: Path, kernel_set: str, saved: dict, claims: dict, ours: dict) -> None:
    """DIR/release_<set>.md from what DIR/release_<set>.json holds (or is about to)."""
    (out / f"release_{kernel_set}.md").write_text(
        table(saved["kernels"], saved["evaluations"], saved["meta"], claims, ours, saved.get("head_to_head")))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--release", required=True, type=Path, help="a checkout of deepreinforce-ai/CUDA-L2")
    ap.add_argument("--set", default="h100_F32F16F16F32", help="the folder under kernels/")
    ap.add_argument("--shapes", required=True)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--modes", default="offline,server")
    ap.add_argument("--ours", type=Path, help="one of our benchmark tables, for a side column")
    ap.add_argument("--compile-only", action="store_true", help="adapt and build only (no GPU needed)")
    ap.add_argument("--arch", default=None, help="default: this machine's GPU (sm_90a with --compile-only)")
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--budget-s", type=float, default=float("inf"))
    ap.add_argument("--repeats", type=int, default=1, help="separate evaluations per shape and mode")
    ap.add_argument("--h2h-repeats", type=int, default=1, help="head-to-head evaluations per shape and mode")
    ap.add_argument("--ours-run", type=Path, help="a finished campaign's run folder: its winners are timed against "
                    "the release's kernels in the same rounds (shapes it has finals for)")
    ap.add_argument("--report-only", action="store_true",
                    help="rewrite DIR's table from its JSON with this script's table code (no build, no GPU)")
    ap.add_argument("--release-commit", help="the release's commit, where --release is not a git checkout")
    a = ap.parse_args()
    if not (a.release / "kernels" / a.set).is_dir():
        ap.error(f"{a.release / 'kernels' / a.set} is not a folder: --release must be a CUDA-L2 checkout")
    acc = claimed_acc(a.set)
    modes = [m for m in a.modes.split(",") if m]
    if a.report_only:
        jpath = a.out / f"release_{a.set}.json"
        if not jpath.is_file():
            ap.error(f"{jpath} does not exist: nothing to report")
        saved = json.loads(jpath.read_text())
        write_table(a.out, a.set, saved, *side_figures(saved["meta"], a.release, a.set))
        print(f"wrote {a.out / f'release_{a.set}.md'}")
        return 0
    from evaluator.compile import compile_many
    from evaluator.contract import MODES
    from evaluator.gpu import has_gpu

    if not a.compile_only and not has_gpu():  # else every evaluation would be recorded as a no_gpu "reading"
        ap.error("timing needs a CUDA GPU on this machine; --compile-only adapts and builds without one")

    if bad := [m for m in modes if m not in MODES]:
        ap.error(f"unknown mode(s) {bad}; choose from {MODES}")
    rows = prepare(a.release, a.set, load_shapes(a.shapes))
    todo = [r for r in rows if "source" in r]
    arch = a.arch or ("sm_90a" if a.compile_only else None)
    t0 = time.monotonic()
    for r, info in zip(todo, compile_many([r["source"] for r in todo], arch, jobs=a.jobs)):
        r["built"], r["build_seconds"] = info.ok, round(info.build_seconds, 1)
        if not info.ok:
            r["build_log"] = info.log[-600:]
    print(f"adapted {len(todo)} of {len(rows)}; built {sum(r['built'] for r in todo)} in "
          f"{time.monotonic() - t0:.0f} s", flush=True)
    for r in rows:
        print(" ", r["shape"], "built" if r.get("built") else r.get("refused") or r.get("build_log", "")[-300:])
    if a.compile_only:
        return 0 if all(r.get("built") for r in todo) else 1
    a.out.mkdir(parents=True, exist_ok=True)
    jpath = a.out / f"release_{a.set}.json"
    saved = json.loads(jpath.read_text()) if jpath.is_file() else {}
    done = saved.get("evaluations", {})
    h2h = saved.get("head_to_head", {})
    meta = {**saved.get("meta", {}), "set": a.set, "acc": acc, "shapes": a.shapes,
            "modes": list(dict.fromkeys([*saved.get("meta", {}).get("modes", []), *modes])),
            "date": datetime.date.today().isoformat(), "release_commit": a.release_commit or _git_head(a.release),
            "ours": str(a.ours) if a.ours else None}
    meta["commands"] = [*meta.get("commands", []), "python3 scripts/bench_release_kernels.py " + " ".join(sys.argv[1:])]
    if a.ours_run:
        meta["ours_run"] = str(a.ours_run)

    claims, ours = side_figures(meta, a.release, a.set)  # read once, not at every save

    def save():
        devices = sorted({f"{v['gpu'].get('name')} ({str(v['gpu'].get('gpu_uuid', ''))[:12]})"
                          for es in done.values() for e in es for v in e.values() if v.get("gpu")})
        meta["device"] = ", ".join(devices) or "none"
        doc = {"meta": meta, "evaluations": done, "head_to_head": h2h,
               "kernels": [{k: v for k, v in r.items() if k != "source"} for r in rows]}
        jpath.write_text(json.dumps(doc, indent=1))
        write_table(a.out, a.set, doc, claims, ours)

    started = time.monotonic()
    evaluate_rows(rows, done, acc, modes, a.budget_s, save, a.repeats)
    if a.ours_run:
        head_to_head(rows, done, h2h, load_winners(a.ours_run), acc, modes,
                     a.budget_s - (time.monotonic() - started), save, a.h2h_repeats)
    save()
    print(f"wrote {jpath} and its .md")
    return 0


def _git_head(repo: Path) -> str:
    import subprocess

    r = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return r.stdout.strip() or "unknown (not a git checkout)"


if __name__ == "__main__":
    sys.exit(main())
