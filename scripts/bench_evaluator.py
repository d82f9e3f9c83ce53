"""Evaluator benchmark (run on a GPU machine; writes markdown + JSON).

Part "baselines": for every shape, the NVIDIA baselines timed interleaved in one process (offline and server),
reported as ratios of cuBLASLt-AutoTuning-max against cuBLAS-max, cuBLASLt-heuristic-max and torch.matmul.
Part "eval": the wall time of one quick evaluation after compile (checks included), and the spread of one
candidate's speedup against cuBLASLt-AutoTuning-max over two separate quick evaluations.

    python3 scripts/bench_evaluator.py --part baselines --out DIR [--shapes docs/benchmarks/dev_sample.txt]
    python3 scripts/bench_evaluator.py --part eval --kernel tests/kernels/reference_wmma.cu --out DIR
"""
from __future__ import annotations

import argparse
import datetime
import json
import time
from pathlib import Path

from evaluator.api import evaluate, time_baselines
from evaluator.compile import compile_kernel
from evaluator.gpu import device_name
from evaluator.pool import WorkerPool


def read_shapes(path: str) -> list[tuple[int, int, int]]:
    return [tuple(int(x) for x in ln.split()) for ln in Path(path).read_text().splitlines() if ln.strip()]


def best(times: dict, stem: str) -> float:
    return min(times[f"{stem}-NN"].median_us, times[f"{stem}-TN"].median_us)


def part_baselines(shapes, pool, modes) -> tuple[list[dict], list[str]]:
    rows, md = [], ["| M | N | K | mode | AutoTuning-max µs | vs cuBLAS-max | vs cuBLASLt-heuristic-max | vs torch |",
                    "|---|---|---|---|---|---|---|---|"]
    for shape in shapes:
        for mode in modes:
            t = time_baselines(shape, mode=mode, pool=pool)
            at = best(t, "cublaslt-autotune")
            row = {"shape": shape, "mode": mode, "autotune_max_us": at,
                   "cublas_max_over_autotune": best(t, "cublas") / at,
                   "heuristic_max_over_autotune": best(t, "cublaslt-heuristic") / at,
                   "torch_over_autotune": t["torch"].median_us / at if "torch" in t else None,
                   "medians_us": {k: v.median_us for k, v in t.items()}}
            rows.append(row)
            tr = row["torch_over_autotune"]
            md.append(f"| {shape[0]} | {shape[1]} | {shape[2]} | {mode} | {at:.2f} | "
                      f"{row['cublas_max_over_autotune']:.3f} | {row['heuristic_max_over_autotune']:.3f} | "
                      f"{f'{tr:.3f}' if tr else 'n/a'} |")
            print(md[-1], flush=True)
    return rows, md


def part_eval(shapes, pool, kernel: str) -> tuple[list[dict], list[str]]:
    src = Path(kernel).read_text()
    compile_kernel(src)
    rows, md = [], [("| M | N | K | candidate µs | eval wall s (after compile) | speedup, first evaluation | second evaluation "
                     "| spread |"),
                    "|---|---|---|---|---|---|---|---|"]
    for shape in shapes:
        res = []
        for _ in range(2):
            t0 = time.monotonic()
            r = evaluate(src, shape, pool=pool)
            wall = time.monotonic() - t0 - (r.compile.seconds if r.compile else 0)
            res.append((r, wall))
        if any(r.status != "ok" for r, _ in res):
            md.append(f"| {shape[0]} | {shape[1]} | {shape[2]} | {res[0][0].status}: {res[0][0].reason[:80]} |")
            print(md[-1], flush=True)
            continue
        s = [r.speedup("cublaslt-autotune-max") for r, _ in res]
        spread = abs(s[0] - s[1]) / ((s[0] + s[1]) / 2)
        row = {"shape": shape, "candidate_us": res[0][0].candidate.median_us, "wall_s": [w for _, w in res],
               "speedups": s, "spread": spread}
        rows.append(row)
        md.append(f"| {shape[0]} | {shape[1]} | {shape[2]} | {row['candidate_us']:.2f} | "
                  f"{res[0][1]:.2f} / {res[1][1]:.2f} | {s[0]:.4f} | {s[1]:.4f} | {100 * spread:.2f}% |")
        print(md[-1], flush=True)
    return rows, md


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", choices=["baselines", "eval"], required=True)
    ap.add_argument("--shapes", default="docs/benchmarks/dev_sample.txt")
    ap.add_argument("--modes", default="offline,server")
    ap.add_argument("--kernel", default="tests/kernels/reference_wmma.cu")
    ap.add_argument("--out", default=".")
    a = ap.parse_args()
    shapes = read_shapes(a.shapes)
    pool = WorkerPool(gpus=[0])
    head = [f"device: {device_name(0)}", f"date: {datetime.date.today().isoformat()}", f"shapes: {a.shapes}"]
    if a.part == "baselines":
        rows, md = part_baselines(shapes, pool, a.modes.split(","))
    else:
        rows, md = part_eval(shapes, pool, a.kernel)
        head.append(f"candidate: {a.kernel}")
    pool.close()
    out = Path(a.out)
    (out / f"evaluator_{a.part}.md").write_text("\n".join(head + [""] + md) + "\n")
    (out / f"evaluator_{a.part}.json").write_text(json.dumps({"head": head, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
