"""Nsight Compute of every kernel that misses a target of a built-in policy benchmark run (scripts/bench_targets.py),
beside the fastest NVIDIA baseline: what the benchmark doc owes for each miss (its bottleneck against the baseline's).

    python3 scripts/profile_misses.py RUN_DIR --out DIR [--gpus 0,1] [--deadline-s 540] [--skip 64x64x256,...]
    python3 scripts/profile_misses.py --render DIR        # DIR/summary.md from the profiles, no GPU

A miss is a winner's median final against best NVIDIA: server <= 1.00; from 2^36 FLOP < 1.00 back to back, separated
or offline; skinny long-K < 1.05 there. Each (winner, shape) gets one `cudal2 profile` (the candidate evaluated, then
it and its evaluation's fastest baseline each under Nsight Compute), smallest shape first, spread over the GPUs; none
starts within 40 s of the deadline (a profile takes 13-67 s on an H200), so a device call ends with the profiles it
had time for and --skip leaves the done ones to the next. On a lent machine, pack DIR into one tarball: the device
returns a few files only. The summary counts cycles too (duration x the SM clock each kernel ran at): Nsight Compute
leaves clocks alone here, and two kernels of one shape ran up to 5% apart in clock.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]
from bench_targets import missed  # noqa: E402

MISSES = "misses.json"  # {profile stem: {"shape": [m, n, k], "kernel": path, "misses": ["server 0.982", ...]}}
START_MARGIN_S = 40


def stem(shape, kernel: str | Path) -> str:
    return "x".join(map(str, shape)) + "_" + Path(kernel).stem[:8]


def find_misses(run: Path, skip: set[str] = frozenset()) -> dict[str, dict]:
    """Every missing (winner, shape) of the run, smallest shape first."""
    from agent.report import collect_rows
    from evaluator.record import BEST_NVIDIA

    found: dict[str, dict] = {}
    for r in collect_rows(run):
        x = r.speedup(BEST_NVIDIA) if r.final else None
        if x is None or not r.kernel_path or "x".join(map(str, r.shape)) in skip:
            continue
        if missed(tuple(r.shape), r.mode, x):
            e = found.setdefault(stem(r.shape, r.kernel_path), {"shape": list(r.shape), "kernel": str(r.kernel_path),
                                                                "misses": []})
            e["misses"].append(f"{r.mode} {x:.3f}")
    return dict(sorted(found.items(), key=lambda kv: (kv[1]["shape"][0] * kv[1]["shape"][1] * kv[1]["shape"][2],
                                                      kv[0])))


def profile_all(todo: dict[str, dict], out: Path, gpus: list[str], deadline_s: float) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / MISSES).write_text(json.dumps(todo, indent=1) + "\n")
    deadline = time.monotonic() + deadline_s

    def one(i_item):
        i, (name, e) = i_item
        left = deadline - time.monotonic()
        if left < START_MARGIN_S:
            print(name, "not profiled: deadline", flush=True)
            return
        env = dict(os.environ, CUDA_VISIBLE_DEVICES=gpus[i % len(gpus)])
        cmd = [sys.executable, "-m", "agent.cli", "profile", e["kernel"], "--shape", *map(str, e["shape"]),
               "--json", str(out / f"{name}.json")]
        t = time.monotonic()
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=left)
            text, rc = r.stdout + r.stderr[-2000:], r.returncode
        except subprocess.TimeoutExpired:
            text, rc = "timed out at the deadline", "timeout"
        (out / f"{name}.md").write_text(f"misses: {', '.join(e['misses'])}\n\n" + text)
        print(name, "rc", rc, f"{time.monotonic() - t:.0f} s", flush=True)

    with ThreadPoolExecutor(len(gpus)) as ex:
        list(ex.map(one, enumerate(todo.items())))


def _side(r: dict) -> str:
    return (f"{r['duration_us']:.2f} µs, grid {r['grid_size']}×{r['block_size']}, tensor pipe "
            f"{r['tensor_pipe_pct']:.0f}%, DRAM {r['dram_throughput_pct']:.0f}%, L2 {r['l2_throughput_pct']:.0f}%, "
            f"{r['sm_clock_mhz']:.0f} MHz; {(r.get('bottleneck') or {}).get('label', '?')}; stalls {r['top_stalls']}")


def render(out: Path, note: str = "") -> str:
    """summary.md of a profiles folder: each miss, ours and the fastest NVIDIA kernel side by side."""
    todo = json.loads((out / MISSES).read_text())
    records = {n: json.loads(f.read_text()) for n in todo if (f := out / f"{n}.json").is_file()}
    gpus = sorted({r["candidate"].get("gpu", "?") for r in records.values()})
    ncu = sorted({r["candidate"].get("ncu_version", "?") for r in records.values()})
    head = [f"# Nsight Compute of {len(todo)} target misses", "",
            *([note, ""] if note else []),
            f"- {len(records)} of {len(todo)} profiled; GPU {', '.join(gpus) or '?'}; Nsight Compute {', '.join(ncu)}; "
            "made by `scripts/profile_misses.py`",
            "- each miss's kernel beside the fastest baseline of the profile's own evaluation (offline mode, one "
            "evaluation, not a final); Nsight Compute serialises launches and flushes the caches before each pass, so "
            "a duration is one cold launch, with the L2 clean where server mode's prelude leaves it dirty",
            "- cycles: duration times the SM clock each kernel ran at (clocks are left alone, and they differ)",
            "- files: `<shape>_<kernel hash>.md` (side by side, with verdicts) and `.json` (every metric)", ""]
    lines = ["| shape | kernel | misses (median final / best NVIDIA) | ours | fastest NVIDIA | cycles, ours / NVIDIA "
             "| NVIDIA / ours, the profile's offline evaluation |", "|---|---|---|---|---|---|---|"]
    for name, e in todo.items():
        shape, why = "×".join(map(str, e["shape"])), ", ".join(e["misses"])
        d = records.get(name)
        if d is None:
            lines.append(f"| {shape} | `{name}` | {why} | not profiled | | | |")
            continue
        c, b = d["candidate"], d["baseline"]["record"]
        cycles = (c["duration_us"] * c["sm_clock_mhz"]) / (b["duration_us"] * b["sm_clock_mhz"])
        ratio = (d.get("timing") or {}).get("speedup")
        lines.append(f"| {shape} | `{name}` | {why} | {_side(c)} | {d['baseline']['name']}: "
                     f"`{b['main_kernel'][:60]}`, {_side(b)} | {cycles:.3f} | "
                     f"{'' if ratio is None else f'{ratio:.3f}'} |")
    return "\n".join(head + lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", nargs="?", type=Path, help="the benchmark's run folder (runs/<run>)")
    ap.add_argument("--out", type=Path, help="where the profiles go")
    ap.add_argument("--gpus", default="0")
    ap.add_argument("--deadline-s", type=float, default=540.0)
    ap.add_argument("--skip", default="", help="shapes already profiled, MxNxK,...")
    ap.add_argument("--render", type=Path, help="write DIR/summary.md from DIR's profiles and stop")
    ap.add_argument("--note", default="", help="with --render: what was profiled where (run, commit, GPUs)")
    a = ap.parse_args(argv)
    if a.render:
        if not (a.render / MISSES).is_file():
            ap.error(f"{a.render} has no {MISSES}: profile a run into it first")
        (a.render / "summary.md").write_text(render(a.render, a.note))
        print(f"wrote {a.render / 'summary.md'}")
        return 0
    if a.run is None or a.out is None:
        ap.error("give RUN_DIR and --out DIR, or --render DIR")
    if not (a.run / "campaign.sqlite").is_file():
        ap.error(f"{a.run} has no campaign.sqlite: not a campaign's run folder")
    todo = find_misses(a.run, set(filter(None, a.skip.split(","))))
    print(len(todo), "kernels to profile:", flush=True)
    for name, e in todo.items():
        print(" ", name, e["misses"], flush=True)
    profile_all(todo, a.out, a.gpus.split(","), a.deadline_s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
