"""Device: Nsight Compute of every target miss of a finished benchmark run, beside the best NVIDIA baseline's
(each miss's bottleneck against the best baseline's). Usage (on the device, after device_env):
    python3 docs/benchmarks/data/sample_misses_ncu_h200_2026-11-28_9cb0450/profile_misses.py RUN_DIR OUT_DIR [GPUS]
The device returns at most 8 files: pack OUT_DIR into one tarball.
Misses (median final vs best NVIDIA): server <= 1.00; >= 2^36 FLOP < 1.00 in back-to-back/separated/offline;
skinny long-K < 1.05 there. One `cudal2 profile` a (winner source, shape), spread over the GPUs, one process each."""
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path[:0] = ['.', 'scripts']
from agent.report import collect_rows
from bench_targets import is_big, skinny_long_k
from evaluator.record import BEST_NVIDIA

run, out = Path(sys.argv[1]), Path(sys.argv[2])
gpus = (sys.argv[3] if len(sys.argv) > 3 else '0').split(',')
out.mkdir(parents=True, exist_ok=True)
todo = {}
for r in collect_rows(run):
    x = r.speedup(BEST_NVIDIA) if r.final else None
    if x is None or not r.kernel_path:
        continue
    miss = (r.mode == "server" and x <= 1.0) or (r.mode in ("back-to-back", "separated", "offline") and (
        (is_big(r.shape) and x < 1.0) or (skinny_long_k(r.shape) and x < 1.05)))
    if miss:
        todo.setdefault((r.shape, str(r.kernel_path)), []).append(f"{r.mode} {x:.3f}")
print(len(todo), "kernels to profile:", flush=True)
for (s, k), why in todo.items():
    print(" ", "x".join(map(str, s)), Path(k).name[:12], why, flush=True)


def one(i_item):
    i, ((shape, kernel), why) = i_item
    name = "x".join(map(str, shape)) + "_" + Path(kernel).stem[:8]
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=gpus[i % len(gpus)])
    cmd = [sys.executable, "-m", "agent.cli", "profile", kernel, "--shape", *map(str, shape),
           "--json", str(out / f"{name}.json")]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=540)
    (out / f"{name}.md").write_text(f"misses: {', '.join(why)}\n\n" + r.stdout + r.stderr[-2000:])
    print(name, "rc", r.returncode, flush=True)


with ThreadPoolExecutor(len(gpus)) as ex:
    list(ex.map(one, enumerate(todo.items())))
json.dump({"x".join(map(str, s)): w for (s, _), w in todo.items()}, open(out / "misses.json", "w"), indent=1)
