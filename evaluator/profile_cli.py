"""`cudal2 profile KERNEL.cu --shape M N K`: the candidate's Nsight Compute record next to the best baseline's.

The candidate is first evaluated as usual (checks and timing; a kernel that fails them is not profiled), the
fastest NVIDIA baseline of that timing is named the best, then both are profiled, each in its own ncu run.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from evaluator.oneshot import BASELINES

# (label, record key, format)
ROWS = (
    ("GPU time, all launches (µs)", "duration_us", "{:.2f}"),
    ("kernel launches", "n_kernels", "{}"),
    ("SM throughput (% peak)", "sm_throughput_pct", "{:.1f}"),
    ("memory throughput (% peak)", "memory_throughput_pct", "{:.1f}"),
    ("DRAM throughput (% peak)", "dram_throughput_pct", "{:.1f}"),
    ("L1/shared throughput (% peak)", "l1_throughput_pct", "{:.1f}"),
    ("L2 throughput (% peak)", "l2_throughput_pct", "{:.1f}"),
    ("L1 hit rate (%)", "l1_hit_rate_pct", "{:.1f}"),
    ("L2 hit rate (%)", "l2_hit_rate_pct", "{:.1f}"),
    ("tensor pipe active (%)", "tensor_pipe_pct", "{:.1f}"),
    ("issue slots busy (%)", "issue_active_pct", "{:.1f}"),
    ("achieved occupancy (%)", "achieved_occupancy_pct", "{:.1f}"),
    ("theoretical occupancy (%)", "theoretical_occupancy_pct", "{:.1f}"),
    ("occupancy limited by", "occupancy_limiter", "{}"),
    ("registers / thread", "registers_per_thread", "{}"),
    ("shared memory / block (B)", "smem_per_block_bytes", "{}"),
    ("spills: local memory traffic (B)", "spill_bytes", "{}"),
    ("bank-conflict wavefronts (%)", "bank_conflict_pct", "{:.1f}"),
    ("grid / block", None, None),
    ("waves per SM", "waves_per_sm", "{:.2f}"),
    ("SM clock (MHz)", "sm_clock_mhz", "{:.0f}"),
    ("top stalls (cycles/issue)", "top_stalls", "{}"),
)


def _cell(rec: dict[str, Any], key: str | None, fmt: str | None) -> str:
    if not rec.get("available"):
        return "-"
    if key is None:
        return f"{rec.get('grid_size', '?')} x {rec.get('block_size', '?')}"
    v = rec.get(key)
    if v is None:
        return "n/a"
    try:
        return fmt.format(v)
    except (ValueError, TypeError):
        return str(v)


def render(cand: dict[str, Any], base: dict[str, Any], base_name: str, timing: dict[str, Any] | None = None) -> str:
    rows = [("", "candidate", base_name)]
    rows += [(label, _cell(cand, k, f), _cell(base, k, f)) for label, k, f in ROWS]
    for name, rec in (("candidate", cand), (base_name, base)):
        if not rec.get("available"):
            rows.append((f"{name}: unavailable", rec.get("reason", ""), ""))
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows[: len(ROWS) + 1])
    lines = [f"{a:<{w0}}  {b:<{w1}}  {c}" for a, b, c in rows]
    lines.append("")
    for name, rec in (("candidate", cand), (base_name, base)):
        b = rec.get("bottleneck")
        if b:
            lines.append(f"{name}: {b['label']} — {b['why']}")
        if rec.get("main_kernel"):
            lines.append(f"  main kernel: {rec['main_kernel']}")
    if timing:
        lines.append("")
        lines.append(f"timing (separate run): candidate {timing['candidate_median_us']:.2f} µs, {base_name} "
                     f"{timing['baseline_median_us']:.2f} µs, speedup {timing['speedup']:.3f}x")
    return "\n".join(lines)


def best_baseline(res) -> str:
    """The fastest profileable NVIDIA baseline of a timed result (torch runs cuBLAS underneath; not profiled)."""
    cands = {n: t for n, t in res.baselines.items() if n in BASELINES}
    if not cands:
        return "cublaslt-heuristic-NN"
    return min(cands, key=lambda n: cands[n].median_us)


def cmd_profile(args) -> int:
    from evaluator.cli import GPU_NEEDED, UsageError, json_target, parse_shape
    from evaluator.gpu import has_gpu

    path = Path(args.kernel)
    if not path.is_file():
        print(f"cudal2 profile: error: no such kernel file: {path}", file=sys.stderr)
        return 2
    try:
        shape = parse_shape(args.shape)
        json_target(Path(args.json) if args.json else None)
    except UsageError as e:
        print(f"cudal2 profile: error: {e}", file=sys.stderr)
        return 2
    if not has_gpu():
        print(f"cudal2 profile: {GPU_NEEDED}: the kernel is run under Nsight Compute.", file=sys.stderr)
        return 2
    from evaluator import record as R
    from evaluator.api import default_pool, evaluate
    from evaluator.profile import profile_baseline, profile_candidate

    res = evaluate(path.read_text(), shape, acc=args.acc)
    if res.status != R.OK:
        print(f"not profiled: the candidate's evaluation ended with {res.status}: {res.reason}", file=sys.stderr)
        return 1
    pool = default_pool()
    native = pool.native_so()
    cand = profile_candidate(res.compile.so_path, shape, native, acc=args.acc, timeout=args.timeout)
    name = args.baseline or best_baseline(res)
    base = profile_baseline(shape, native, acc=args.acc, which=name, timeout=args.timeout)
    t = res.baselines.get(name)
    timing = None
    if t is not None and res.candidate is not None:
        timing = {"candidate_median_us": res.candidate.median_us, "baseline_median_us": t.median_us,
                  "speedup": t.speedup_mean}
    print(f"shape {shape[0]}x{shape[1]}x{shape[2]}, {args.acc} accumulation, {res.gpu.get('name', 'GPU')}")
    print(render(cand, base, name, timing))
    if args.json:
        Path(args.json).write_text(json.dumps({"kernel": str(path), "shape": list(shape), "acc": args.acc,
                                               "candidate": cand, "baseline": {"name": name, "record": base},
                                               "timing": timing}, indent=1))
        print(f"record written to {args.json}")
    return 0 if cand.get("available") else 3


def add_subcommands(sub) -> None:
    p = sub.add_parser("profile", help="Nsight Compute metrics and bottleneck of a kernel next to the best baseline's",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("kernel", metavar="KERNEL.cu")
    p.add_argument("--shape", nargs=3, type=int, required=True, metavar=("M", "N", "K"),
                   help="problem size: A is MxK, B is KxN")
    p.add_argument("--acc", choices=("fp32", "fp16"), default="fp32")
    p.add_argument("--baseline", choices=BASELINES, help="compare with this baseline instead of the fastest one")
    p.add_argument("--timeout", type=float, default=180.0, help="seconds per ncu run (default 180)")
    p.add_argument("--json", metavar="OUT", help="also write both records as JSON")
    p.set_defaults(func=cmd_profile)
