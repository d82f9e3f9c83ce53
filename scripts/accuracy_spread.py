#!/usr/bin/env python3
"""How a kernel's error compares with the same-class baselines' over many input draws (GPU machine).

    python3 scripts/accuracy_spread.py SPEC.json --out DIR [--acc fp16] [--draws 12]

SPEC.json maps "MxNxK" to a list of {"family": ..., "params": {...}}. Every config is rendered and compiled, then on
each draw of normal inputs (the deviation check's kind) every kernel and every same-class baseline runs on the same
inputs, and the error against the fp32 reference is summarised as max |err|, RMS and mean (a bias shows rounding
toward zero). DIR/accuracy.json holds every draw; the printed table gives, per kernel, the ratio of its max and of its
RMS to the largest baseline's on the same draw (min / median / max over the draws). This is the evidence behind the
deviation check's statistic: a max over millions of elements moves by several percent between draws, the RMS does
not. With --truth it also measures the fp32 reference against an fp64 product, and it prints each kernel's error beyond
its own elements' half ulp, the evidence behind the rounding floor's summation slack.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _half_ulp(torch, x):
    """Half an fp16 ulp at each |x| (normal range): what a correctly rounded output may be off by there."""
    _, e = torch.frexp(x.abs().clamp(min=2.0 ** -14, max=65504.0))
    return torch.ldexp(torch.ones_like(x), (e - 12).to(torch.int32))


def _stats(torch, c16, ref):
    d = c16.float() - ref
    fin = torch.isfinite(d)
    d = torch.where(fin, d, torch.zeros_like(d))
    # "excess": how far the worst element lies beyond half an ulp of its own reference value, i.e. the part of the
    # error that rounding to fp16 does not explain (both sides' fp32 summation error); "max_abs_ref" gives the
    # deviation check's rounding floor (evaluator.buffers.rounding_floor).
    return {"max": d.abs().max().item(), "rms": d.square().mean().sqrt().item(), "mean": d.mean().item(),
            "nonfinite": int((~fin).sum().item()), "max_abs_ref": ref.abs().max().item(),
            "excess": (d.abs() - _half_ulp(torch, ref)).max().item()}


def main() -> int:
    import torch

    from agent.families import candidate_name, render
    from evaluator.baselines import NativeCallable, build_baselines
    from evaluator.buffers import OperandSet, Reference
    from evaluator.compile import compile_many
    from evaluator.gpu import device_name
    from evaluator.native import Native, build
    from evaluator.timing import PROFILES

    ap = argparse.ArgumentParser()
    ap.add_argument("spec", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--acc", choices=["fp32", "fp16"], default="fp16")
    ap.add_argument("--arch", default="sm_90a")
    ap.add_argument("--draws", type=int, default=12)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--truth", action="store_true", help="also measure the fp32 reference against an fp64 product")
    a = ap.parse_args()
    spec = json.loads(a.spec.read_text())
    a.out.mkdir(parents=True, exist_ok=True)
    acc16 = a.acc == "fp16"
    jobs = []
    for key, entries in spec.items():
        shape = tuple(int(x) for x in key.split("x"))
        for e in entries:
            jobs.append((shape, candidate_name(e["family"], e["params"]), e, render(e["family"], e["params"], shape,
                                                                                    a.arch)))
    infos = dict(zip(sorted({j[3] for j in jobs}), compile_many(sorted({j[3] for j in jobs}), a.arch)))
    nat = Native(build(a.arch), 0)
    info = nat.info()
    rows = []
    for shape in sorted({j[0] for j in jobs}):
        m, n, k = shape
        ops, ref = OperandSet(nat, m, n, k, snapshots=False), Reference(nat, m, n, k)
        base = build_baselines(nat, device_name(0), info["cublaslt"], shape, acc16, ops, ref, PROFILES["quick"],
                               lambda msg: None)
        calls = {name: b for name, b in base.items() if not (name == "torch" and acc16)}
        libs = []
        for s, name, e, src in jobs:
            ci = infos[src]
            if s != shape:
                continue
            if not ci.ok:
                print(f"{name}: compile failed", flush=True)
                continue
            lib = ctypes.CDLL(ci.so_path)
            libs.append(lib)
            fn = ctypes.cast(lib.hgemm, ctypes.c_void_p).value
            calls[name] = NativeCallable(nat, name, nat.register_candidate(fn, m, n, k))
        c_out = torch.empty(m * n, dtype=torch.float16, device="cuda")
        r_out = torch.empty(m * n, dtype=torch.float32, device="cuda")
        for d in range(a.draws):
            ops.fill("normal", a.seed + 1000 * d)
            ref.compute(ops)
            nat.ok("copy", r_out.data_ptr(), ref.cref, 4 * m * n)
            nat.sync()
            if a.truth:  # the fp32 reference's own summation error, against an fp64 product of the same inputs
                a16 = torch.empty(m * k, dtype=torch.float16, device="cuda")
                b16 = torch.empty(k * n, dtype=torch.float16, device="cuda")
                nat.ok("copy", a16.data_ptr(), ops.ptr["A"], 2 * m * k)
                nat.ok("copy", b16.data_ptr(), ops.ptr["B"], 2 * k * n)
                nat.sync()
                exact = (a16.view(m, k).double() @ b16.view(k, n).double()).view(-1)
                err = (r_out.double() - exact).abs()
                rows.append({"shape": list(shape), "draw": d, "name": "fp32 reference vs fp64", "reference": True,
                             "max": err.max().item(), "max_abs_ref": exact.abs().max().item()})
                del a16, b16, exact, err
            for name, c in calls.items():
                ops.poison_output()
                if c.call(ops) != 0 or nat.sync() != 0:
                    rows.append({"shape": list(shape), "draw": d, "name": name, "status": "failed"})
                    continue
                nat.ok("copy", c_out.data_ptr(), ops.ptr["C"], 2 * m * n)
                nat.sync()
                torch.cuda.synchronize()
                rows.append({"shape": list(shape), "draw": d, "name": name, "baseline": name in base,
                             **_stats(torch, c_out, r_out)})
        (a.out / "accuracy.json").write_text(json.dumps({"acc": a.acc, "draws": a.draws, "gpu": device_name(0),
                                                         "spec": spec, "rows": rows}, indent=1))
        _report(shape, [r for r in rows if r["shape"] == list(shape) and "rms" in r], list(base))
        _report_floor(shape, [r for r in rows if r["shape"] == list(shape) and "max" in r], list(base))
        nat.release_callables()
        ops.free()
        ref.free()
    return 0


def _report(shape, rows, baselines) -> None:
    draws = sorted({r["draw"] for r in rows})
    worst = {d: {s: max((r[s] for r in rows if r["draw"] == d and r["baseline"]), default=float("nan"))
                 for s in ("max", "rms")} for d in draws}
    print(f"\n{'x'.join(map(str, shape))}: ratio to the largest same-class baseline on the same draw "
          f"(min / median / max over {len(draws)} draws), and the mean error", flush=True)
    for name in sorted({r["name"] for r in rows}, key=lambda x: (x not in baselines, x)):
        mine = [r for r in rows if r["name"] == name]
        out = []
        for s in ("max", "rms"):
            q = sorted(r[s] / worst[r["draw"]][s] for r in mine)
            out.append(f"{s} {q[0]:.3f} / {statistics.median(q):.3f} / {q[-1]:.3f}")
        out.append(f"mean err {statistics.mean(r['mean'] for r in mine):+.2e}, "
                   f"rms {statistics.median(r['rms'] for r in mine):.4g}, max {statistics.median(r['max'] for r in mine):.4g}")
        print(f"  {name:40s} " + " | ".join(out), flush=True)


def _report_floor(shape, rows, baselines) -> None:
    """Against the deviation check's fp32 bound (evaluator.checks.accuracy_verdict): how often each kernel's max lies
    beyond 1.05x the larger of the largest baseline max and the rounding floor, and its error beyond its own
    elements' half ulp, which the floor's summation slack must cover (evaluator.buffers.SUMMATION_SLACK)."""
    from evaluator.buffers import rounding_floor
    from evaluator.checks import DEVIATION_HEADROOM, deviation_bound

    k = shape[2]
    kernels = [r for r in rows if "excess" in r]  # one reference a draw: every kernel row holds its max |ref|
    ref_max = {r["draw"]: r["max_abs_ref"] for r in kernels}
    bound = {d: deviation_bound({q["name"]: q["max"] for q in kernels if q["draw"] == d and q["baseline"]}, ref, k)
             for d, ref in ref_max.items()}
    print(f"{'x'.join(map(str, shape))}: against the bound; beyond 1.05x / draws, ratio max, excess beyond half an ulp")
    for name in sorted({r["name"] for r in rows}, key=lambda x: (x not in baselines, x)):
        mine = [r for r in rows if r["name"] == name]
        if "excess" not in mine[0]:
            print(f"  {name:40s} max |err| {max(r['max'] for r in mine):.4g} at max |C| "
                  f"{max(r['max_abs_ref'] for r in mine):.4g}", flush=True)
            continue
        ratios = [r["max"] / bound[r["draw"]] for r in mine]
        print(f"  {name:40s} {sum(x > DEVIATION_HEADROOM for x in ratios)}/{len(ratios)}, {max(ratios):.3f}, "
              f"excess {max(r['excess'] for r in mine):.4g} (floor {rounding_floor(mine[0]['max_abs_ref'], k):.4g})",
              flush=True)


if __name__ == "__main__":
    sys.exit(main())
