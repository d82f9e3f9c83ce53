#!/usr/bin/env python3
"""Re-measure a finished campaign's winners on this machine, beside the figures the run reported (GPU machine).

A near-parity big shape moves by 2-5% between evaluations of one kernel (docs/benchmarks/data/sweeps/recheck_*),
and a lent GPU is one draw of several physical ones. This takes the kernels a run's final measurements
timed (campaign.sqlite + kernels/ in the run folder), loads the run's cuBLASLt-AutoTuning picks (autotune_picks/)
into the cache so the baseline algorithms are the run's, and evaluates each winner `--repeats` more times per mode,
the rounds interleaved across shapes, with every check of the evaluator.

    python3 scripts/recheck_finals.py RUN_DIR --out DIR [--repeats 3] [--modes offline] [--baseline NAME]
                                      [--shapes FILE]

--shapes keeps only the run's shapes listed in FILE (a campaign shape list): the near-parity ones, where a draw
decides the win, without spending device time on shapes that win by a wide margin.

DIR/recheck.json keeps every evaluation (ratio, status, the physical GPU); DIR/recheck.md is the table: per shape the
recheck's evaluations and median beside the run's.
"""
from __future__ import annotations

import argparse
import datetime
import json
import shutil
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.report import geomean  # noqa: E402
from agent.shapes import load_shapes  # noqa: E402

BASELINE = "cublaslt-autotune-max"


def load_finals(run_dir: Path, modes: list[str], baseline: str = BASELINE, shapes: list | None = None) -> list[dict]:
    """One entry per (shape, acc, mode): the winner's source and the run's final ratios, in the run's shape order;
    only the shapes in `shapes` where it is given."""
    from agent.campaign.db import CampaignDB

    db_path = run_dir / "campaign.sqlite"
    if not db_path.is_file():
        raise ValueError(f"{run_dir} has no campaign.sqlite: is it a campaign's run folder?")
    groups: dict[tuple, dict] = {}
    for f in CampaignDB(db_path).finals():
        if f["mode"] not in modes or (shapes is not None and tuple(f["shape"]) not in shapes):
            continue
        key = (tuple(f["shape"]), f["acc"], f["mode"])
        g = groups.setdefault(key, {"shape": key[0], "acc": key[1], "mode": key[2], "source_hash": f["source_hash"],
                                    "run": []})
        if f["source_hash"] != g["source_hash"]:
            continue  # a later winner would be a different kernel; the first one's finals are the reported ones
        s = f["result"].speedup(baseline) if f["result"].status == "ok" else None
        g["run"].append(s)
    if not groups:
        raise ValueError(f"{run_dir}: no final measurements in mode(s) {', '.join(modes)}"
                         + (" for the shapes asked for" if shapes is not None else ""))
    for g in groups.values():
        src = run_dir / "kernels" / f"{g['source_hash']}.cu"
        if not src.is_file():
            raise ValueError(f"{src} is missing: the run folder does not hold the kernel its finals timed")
        g["source"] = src.read_text()
    return list(groups.values())


def load_picks(run_dir: Path) -> int:
    """Copy the run's autotuning picks into this machine's cache; how many."""
    from evaluator.baselines import autotune_cache_dir

    picks = sorted((run_dir / "autotune_picks").glob("*.json"))
    for p in picks:
        shutil.copy(p, autotune_cache_dir() / p.name)
    return len(picks)


def _median(xs: list) -> float | None:
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def _geomean(xs: list) -> float | None:
    return geomean(x for x in xs if x is not None and x > 0)


def table(groups: list[dict], meta: dict) -> str:
    lines = [f"# Recheck of `{meta['run']}`'s final kernels", "",
             f"- device: {meta['device']} ({', '.join(meta['gpu_uuids']) or 'no UUID'}); date: {meta['date']}",
             f"- {meta['repeats']} more evaluation(s) per winner and mode, rounds interleaved across shapes, quick "
             f"profile, every check; baseline {meta['baseline']} with the run's autotuning picks "
             f"({meta['picks']} loaded)",
             f"- command: `{meta['command']}`", ""]
    for mode in dict.fromkeys(g["mode"] for g in groups):
        rows = [g for g in groups if g["mode"] == mode]
        lines += [f"## {mode}", "", "| M | N | K | acc | recheck | recheck median | run | run median |",
                  "|---|---|---|---|---|---|---|---|"]
        for g in rows:
            m, n, k = g["shape"]
            lines.append(f"| {m} | {n} | {k} | {g['acc']} | {' / '.join(_fmt(x) for x in g['recheck'])} | "
                         f"{_fmt(_median(g['recheck']))} | {' / '.join(_fmt(x) for x in g['run'])} | "
                         f"{_fmt(_median(g['run']))} |")
        re_med = [_median(g["recheck"]) for g in rows]
        run_med = [_median(g["run"]) for g in rows]
        lines += ["", f"Medians above 1.0: recheck {sum(1 for x in re_med if x and x > 1.0)} of {len(rows)}, run "
                      f"{sum(1 for x in run_med if x and x > 1.0)} of {len(rows)}; geomean of medians: recheck "
                      f"{_fmt(_geomean(re_med))}, run {_fmt(_geomean(run_med))}.", ""]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--modes", default="offline", help="comma-separated: offline, server, graph")
    ap.add_argument("--baseline", default=BASELINE)
    ap.add_argument("--shapes", type=Path, help="a shape list: recheck only the run's shapes it names")
    a = ap.parse_args()
    if a.repeats < 1:
        ap.error("--repeats must be at least 1")
    try:
        shapes = set(load_shapes(a.shapes)) if a.shapes else None
        groups = load_finals(a.run_dir, a.modes.split(","), a.baseline, shapes)
    except ValueError as e:
        print(f"recheck_finals: {e}", file=sys.stderr)
        return 2
    from evaluator.api import evaluate
    from evaluator.compile import compile_many
    from evaluator.gpu import gpu_missing
    from evaluator.pool import WorkerPool

    if gpu_missing("recheck_finals"):
        return 2
    a.out.mkdir(parents=True, exist_ok=True)
    picks = load_picks(a.run_dir)
    compile_many([g["source"] for g in groups])
    records, uuids, device = [], set(), ""
    pool = WorkerPool(gpus=[0])
    try:
        for rep in range(a.repeats):
            for g in groups:
                res = evaluate(g["source"], g["shape"], acc=g["acc"], mode=g["mode"], profile="quick", pool=pool)
                s = res.speedup(a.baseline) if res.status == "ok" else None
                g.setdefault("recheck", []).append(s)
                uuids.add(res.gpu.get("gpu_uuid") or "")
                device = device or res.gpu.get("name", "")
                records.append({"shape": list(g["shape"]), "acc": g["acc"], "mode": g["mode"], "rep": rep,
                                "status": res.status, "reason": res.reason, "speedup": s,
                                "gpu_uuid": res.gpu.get("gpu_uuid")})
                print(f"{'x'.join(map(str, g['shape']))} {g['mode']} rep {rep}: {res.status} {_fmt(s)}", flush=True)
    finally:
        pool.close()
    meta = {"run": a.run_dir.name, "device": device, "gpu_uuids": sorted(u for u in uuids if u),
            "date": datetime.date.today().isoformat(), "repeats": a.repeats, "baseline": a.baseline, "picks": picks,
            "command": "python3 scripts/recheck_finals.py " + " ".join(sys.argv[1:])}
    for g in groups:
        g.pop("source", None)
    (a.out / "recheck.json").write_text(json.dumps({"meta": meta, "records": records, "shapes": groups}, indent=1))
    md = table(groups, meta)
    (a.out / "recheck.md").write_text(md)
    print(md)
    return 0 if all(r["status"] == "ok" for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
