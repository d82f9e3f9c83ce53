"""Device: Nsight Compute of every target miss of a finished benchmark run, beside the best NVIDIA baseline's
(each miss's bottleneck against the best baseline's). Usage (on the device, after device_env):
    [DEADLINE_S=540] [SKIP=64x128x1024,...] python3 \
        docs/benchmarks/data/sample_misses_ncu_h200_2026-11-28_9600019/profile_misses.py RUN_DIR OUT_DIR [GPUS]
The device returns at most 8 files: pack OUT_DIR into one tarball.
Misses (median final vs best NVIDIA): server <= 1.00; >= 2^36 FLOP < 1.00 in back-to-back/separated/offline;
skinny long-K < 1.05 there. One `cudal2 profile` a (winner source, shape), smallest shape first, spread over the
GPUs, one process each; none starts within 40 s of DEADLINE_S (a big shape's profile takes 15-25 s on an H200, a
small one's 13-67 s), so a call ends with the profiles it had time for. SKIP: shapes already profiled."""
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path[:0] = ['.', 'scripts']
from agent.report import collect_rows
from bench_targets import is_big, skinny_long_k
from evaluator.record import BEST_NVIDIA

run, out = Path(sys.argv[1]), Path(sys.argv[2])
gpus = (sys.argv[3] if len(sys.argv) > 3 else '0').split(',')
skip = set(filter(None, os.environ.get('SKIP', '').split(',')))
deadline = time.monotonic() + float(os.environ.get('DEADLINE_S', '540'))
out.mkdir(parents=True, exist_ok=True)
todo = {}
for r in collect_rows(run):
    x = r.speedup(BEST_NVIDIA) if r.final else None
    if x is None or not r.kernel_path or 'x'.join(map(str, r.shape)) in skip:
        continue
    miss = (r.mode == "server" and x <= 1.0) or (r.mode in ("back-to-back", "separated", "offline") and (
        (is_big(r.shape) and x < 1.0) or (skinny_long_k(r.shape) and x < 1.05)))
    if miss:
        todo.setdefault((tuple(r.shape), str(r.kernel_path)), []).append(f"{r.mode} {x:.3f}")
items = sorted(todo.items(), key=lambda kv: kv[0][0][0] * kv[0][0][1] * kv[0][0][2])
print(len(items), "kernels to profile:", flush=True)
for (s, k), why in items:
    print(" ", "x".join(map(str, s)), Path(k).name[:12], why, flush=True)
json.dump({"x".join(map(str, s)) + " " + Path(k).name: w for (s, k), w in items}, open(out / "misses.json", "w"),
          indent=1)


def one(i_item):
    i, ((shape, kernel), why) = i_item
    name = "x".join(map(str, shape)) + "_" + Path(kernel).stem[:8]
    left = deadline - time.monotonic()
    if left < 40:
        print(name, "not profiled: deadline", flush=True)
        return
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=gpus[i % len(gpus)])
    cmd = [sys.executable, "-m", "agent.cli", "profile", kernel, "--shape", *map(str, shape),
           "--json", str(out / f"{name}.json")]
    t = time.monotonic()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=left)
        text, rc = r.stdout + r.stderr[-2000:], r.returncode
    except subprocess.TimeoutExpired:
        text, rc = "timed out at the deadline", "timeout"
    (out / f"{name}.md").write_text(f"misses: {', '.join(why)}\n\n" + text)
    print(name, "rc", rc, f"{time.monotonic() - t:.0f} s", flush=True)


with ThreadPoolExecutor(len(gpus)) as ex:
    list(ex.map(one, enumerate(items)))
