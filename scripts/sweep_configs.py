#!/usr/bin/env python3
"""Time hand-picked family configs (GPU machine): render, compile in parallel, evaluate each with the project's
evaluator (quick profile, every check; offline unless --mode says otherwise) and print its speedup against
cuBLASLt-AutoTuning-max.

    python3 scripts/sweep_configs.py SPEC.json --out DIR [--acc fp32] [--mode graph] [--budget-s 400] [--jobs 16]
    python3 scripts/sweep_configs.py SPEC.json --out DIR --together --modes back-to-back,server [--rounds 12]

SPEC.json is a list of {"family": ..., "params": {...}, "shape": [M, N, K]} (with "source": a .cu file, timed in
place of what the params render today; `_jobs`). Results go to DIR/sweep.json, one record per entry, as soon as each
is measured, so a run cut short keeps what it finished. This is the tool for
kernel-family work; the built-in policy's search goes through `cudal2 campaign`.

--together times a shape's entries in the same rounds, in each of --modes: the first as the candidate (it passes
every check), the others as its rivals, each against best NVIDIA (the fastest baseline of those rounds), so that
configs timed minutes apart on a drifting clock are not compared. A 1-2% difference between two separate
evaluations is within their spread; in the same rounds it is not. An entry's optional "role" (what it stands for:
"the policy's first prior", "probe tile") is kept in its rows. Each row also holds the kernel's and best NVIDIA's
median microseconds in those rounds (comparable across neighbouring shapes, where ratios are not; a shape's lone
entry has no rounds of its own, so its figure is the evaluator's median speedup). DIR/probe.json holds the rows in
the form of docs/benchmarks/data's probe files (what, device, date, commit, results; --what and --commit fill the
first and the last, since the GPU machine's copy of the tree has no git history).
"""
from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from evaluator.contract import MODES  # noqa: E402
from evaluator.record import BEST_NVIDIA  # noqa: E402

BASELINE = "cublaslt-autotune-max"


def main() -> int:
    from evaluator.api import evaluate
    from evaluator.compile import compile_many

    ap = argparse.ArgumentParser()
    ap.add_argument("spec", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--acc", choices=["fp32", "fp16"], default="fp32")
    ap.add_argument("--arch", default="sm_90a")
    ap.add_argument("--mode", choices=MODES, default="offline", help="the evaluator's timing mode")
    ap.add_argument("--budget-s", type=float, default=400.0, help="stop starting evaluations after this long")
    ap.add_argument("--jobs", type=int, default=None, help="parallel nvcc processes (default: CPU count)")
    ap.add_argument("--together", action="store_true", help="a shape's entries in the same rounds (see above)")
    ap.add_argument("--modes", default="back-to-back", help="with --together: comma-separated timing modes")
    ap.add_argument("--rounds", type=int, default=None, help="with --together: timed rounds (default: the profile's)")
    ap.add_argument("--what", default="", help="with --together: what the probe measures, for DIR/probe.json")
    ap.add_argument("--commit", default="", help="with --together: the code's commit, for DIR/probe.json")
    a = ap.parse_args()
    modes = a.modes.split(",")
    if bad := [m for m in modes if m not in MODES]:
        ap.error(f"unknown mode(s) {', '.join(bad)}; known: {', '.join(MODES)}")
    t0 = time.monotonic()
    entries = json.loads(a.spec.read_text())
    a.out.mkdir(parents=True, exist_ok=True)
    try:
        jobs = _jobs(entries, a.arch, a.spec.parent)
    except OSError as err:
        ap.error(f"an entry's source: {err}")
    infos = compile_many(sorted({j[2] for j in jobs}), a.arch, jobs=a.jobs)
    failed = sum(not i.ok for i in infos)
    print(f"{len(jobs)} entries, {len(infos)} distinct sources compiled in {time.monotonic() - t0:.0f} s"
          f" ({failed} failed)", flush=True)
    if a.together:
        return _together(jobs, a, modes, t0)
    rows = []
    for e, shape, src, name in jobs:
        if time.monotonic() - t0 > a.budget_s:
            print("time budget spent; stopping", flush=True)
            break
        r = evaluate(src, shape, acc=a.acc, mode=a.mode, profile="quick", arch=a.arch)
        sp = r.speedup(BASELINE)
        at = [t.median_us for n, t in r.baselines.items() if n.startswith("cublaslt-autotune")]
        row = {"name": name, "family": e["family"], "params": e["params"], "shape": list(shape), "mode": a.mode,
               "status": r.status,
               "reason": r.reason[:300], "speedup": sp, "kernel_us": r.candidate.median_us if r.candidate else None,
               "autotune_us": min(at, default=None), "eval_s": round(r.wall_seconds, 2)}
        rows.append(row)
        (a.out / "sweep.json").write_text(json.dumps(rows, indent=1))
        shown = "-" if sp is None else f"{sp:.3f}"
        print(f"{name:28s} {'x'.join(map(str, shape)):17s} {r.status:10s} {shown:>6s} "
              f"kernel {row['kernel_us']} us, autotune {row['autotune_us']} us {r.reason[:100]}", flush=True)
    print(f"done in {time.monotonic() - t0:.0f} s", flush=True)
    return 0


def _jobs(entries: list[dict], arch: str, spec_dir: Path) -> list[tuple]:
    """(entry, shape, source, name) of each entry that renders. An entry with "source" (a .cu path, relative to the
    spec's folder unless absolute) is timed as that file says, named by its stem: a kernel another commit's template
    rendered, beside today's of the same params."""
    from agent.families import candidate_name, render

    jobs = []
    for e in entries:
        shape = tuple(e["shape"])
        if "source" in e:
            path = spec_dir / e["source"]
            jobs.append((e, shape, path.read_text(), path.stem))
            continue
        try:
            src = render(e["family"], e["params"], shape, arch)
        except ValueError as err:
            print(f"refused {e['family']} {e['params']}: {err}", flush=True)
            continue
        jobs.append((e, shape, src, candidate_name(e["family"], e["params"])))
    return jobs


def _together(jobs, a, modes, t0) -> int:
    from evaluator.api import evaluate

    by_shape: dict[tuple, list] = {}
    for j in jobs:
        by_shape.setdefault(j[1], []).append(j)
    rows = []
    for shape, group in by_shape.items():
        first = {}
        for j in group:
            first.setdefault(j[3], j)
        if len(first) < len(group):
            print(f"{shape}: two entries render the same kernel name; the later ones are left out", flush=True)
        (_, _, src0, name0), rest = group[0], [j for j in first.values() if j is not group[0]]
        for mode in modes:
            if time.monotonic() - t0 > a.budget_s:
                print("time budget spent; stopping", flush=True)
                return 0
            r = evaluate(src0, shape, acc=a.acc, mode=mode, profile="quick", arch=a.arch, rounds=a.rounds,
                         rivals={name: src for _, _, src, name in rest})
            h2h = r.head_to_head(BEST_NVIDIA) if r.ok else {}
            refused = r.rivals_refused() if r.ok else {}
            us, nvidia_us = _medians(r)
            for e, _, _, name in [group[0]] + rest:
                key = "candidate" if name == name0 else name
                fig = h2h.get(key)
                if fig is None and name == name0 and r.ok and not rest:
                    fig = r.speedup(BEST_NVIDIA, stat="median")  # alone: no round-by-round times are kept
                status = "refused" if name != name0 and name in refused else r.status
                rows.append({"name": name, "family": e["family"], "params": e["params"], "shape": list(shape),
                             "role": e.get("role"), "mode": mode, "status": status,
                             "reason": (r.reason if name == name0 else refused.get(name, ""))[:300],
                             "vs_best_nvidia": fig, "median_us": us.get(key),
                             "best_nvidia_us": nvidia_us, "gpu": r.gpu.get("name"),
                             "gpu_uuid": r.gpu.get("gpu_uuid"), "eval_s": round(r.wall_seconds, 2)})
                shown = "-" if fig is None else f"{fig:.3f}"
                print(f"{name:28s} {'x'.join(map(str, shape)):17s} {mode:12s} {shown:>6s}", flush=True)
            (a.out / "sweep.json").write_text(json.dumps(rows, indent=1))
            (a.out / "probe.json").write_text(json.dumps(_probe_record(rows, a), indent=1))
    print(f"done in {time.monotonic() - t0:.0f} s", flush=True)
    return 0


def _medians(r) -> tuple[dict[str, float], float | None]:
    """Each kernel's median microseconds in these rounds (the candidate's as "candidate"; a refused rival has none)
    and best NVIDIA's, so that probes of neighbouring shapes compare times, not only ratios."""
    if not r.ok or r.candidate is None:
        return {}, None
    us = {"candidate": r.candidate.median_us, **{n: t.median_us for n, t in r.rivals.items()}}
    best = r.baseline_timing(BEST_NVIDIA)
    return us, best.median_us if best else None


def _probe_record(rows: list[dict], a) -> dict:
    gpus = sorted({(r["gpu"], r["gpu_uuid"]) for r in rows if r["gpu"]})
    device = "; ".join(f"{name} ({uuid})" for name, uuid in gpus)
    return {"what": a.what, "device": device, "date": datetime.datetime.now(datetime.timezone.utc).date().isoformat(),
            "commit": a.commit, "results": rows}


if __name__ == "__main__":
    sys.exit(main())
