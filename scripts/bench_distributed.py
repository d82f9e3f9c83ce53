#!/usr/bin/env python3
"""Two shapes, two GPUs: a campaign with each shape's evaluations pinned to its own GPU, against the same campaign
on one GPU. Writes docs/benchmarks/distributed.md (and distributed.json beside it).

    python3 scripts/bench_distributed.py                       # both runs, then the report
    python3 scripts/bench_distributed.py --part two            # only the two-GPU run (JSON under --work)
    python3 scripts/bench_distributed.py --part one            # only the one-GPU run
    python3 scripts/bench_distributed.py --part report         # the report from the runs' JSON

--backend local (default) runs on this machine's GPUs without Ray (agent.cluster.local.PinnedLocalSeam);
--backend ray starts a local Ray cluster over the GPUs (agent.cluster.make_seam("auto", ...)), one actor per GPU.
Each run starts from an empty build cache of its own (CUDAL2_CACHE), so both pay the same compiles and baseline
autotuning; the built-in policy proposes (no LLM), so the two runs search the same way.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

DEFAULT_SHAPES = "2048,2048,2048;4096,1024,4096"


def parse_shapes(text: str) -> list[tuple[int, int, int]]:
    out = []
    for part in text.split(";"):
        nums = [int(x) for x in part.replace("x", ",").split(",") if x.strip()]
        if len(nums) != 3 or min(nums) < 1:
            raise SystemExit(f"--shapes: expected M,N,K;M,N,K (got {part!r})")
        out.append(tuple(nums))
    return out


def run_one(part: str, gpus: list[int], shapes, budget: int, per_step: int, backend: str, work: Path) -> dict:
    from rich.console import Console

    from agent.campaign.archive import Archive
    from agent.campaign.driver import CampaignConfig, run_campaign
    from agent.campaign.config import ModelConfig
    from agent.proposers import make_proposer

    cache = work / f"cache-{part}"
    os.environ["CUDAL2_CACHE"] = str(cache)  # empty: every run builds and autotunes from scratch
    model = ModelConfig(backend="builtin")
    t0 = time.monotonic()
    if backend == "ray":
        from agent.cluster import make_seam

        seam = make_seam("auto", gpus)
    elif backend == "recorded":
        # A dry run of the plumbing on a machine without GPUs: Ray with fake GPUs, answers recorded on a GPU.
        import ray

        from agent.cluster import RaySeam
        from agent.cluster.backends import RecordedSpec

        if not ray.is_initialized():
            ray.init(num_gpus=len(gpus), num_cpus=len(gpus) + 2, include_dashboard=False, log_to_driver=False,
                     configure_logging=False, runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join(
                         p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)}})
        rec = json.loads((REPO / "tests" / "golden" / "recorded_results.json").read_text())
        seam = RaySeam(RecordedSpec(recorded=rec, default_tag="tile128", delay=0.2))
        seam.shutdown_ray = True
    else:
        from agent.cluster.local import PinnedLocalSeam

        seam = PinnedLocalSeam(gpus)
    t_seam = time.monotonic() - t0
    cfg = CampaignConfig(run=f"bench-{part}", shapes=list(shapes), budget_candidates=budget,
                         runs_dir=work / f"runs-{part}", global_archive=None, n_per_step=per_step, retrieve=False)
    log = io.StringIO()
    t1 = time.monotonic()
    try:
        summary = run_campaign(cfg, seam=seam, make_proposer=lambda: make_proposer(model),
                               model_public=model.public_dict(), console=Console(file=log, width=160), live=False)
    finally:
        seam.close()
    wall = time.monotonic() - t1
    arch = Archive(cfg.run_dir / "archive.sqlite")
    per_shape = {}
    for s in shapes:
        hist = arch.history(seam.gpu_name, "fp32", s)
        best = arch.best(seam.gpu_name, "fp32", s)
        per_shape["x".join(map(str, s))] = {
            "evaluations": len(hist),
            "ok": sum(1 for v in hist if v.result.ok),
            "gpus": sorted({v.result.gpu.get("ray_gpu_id", v.result.gpu.get("gpu_index")) for v in hist},
                           key=str),
            "nodes": sorted({str(v.result.gpu.get("node_id") or v.result.gpu.get("host")) for v in hist}),
            # compile_s: the evaluator's own compile step (a cache look-up once compile-ahead or a Ray build task
            # has built the kernel); build_s: the nvcc builds that made the libraries (kept on cache hits).
            "compile_s": round(sum((v.result.compile.seconds if v.result.compile else 0.0) for v in hist), 1),
            "build_s": round(sum((v.result.compile.build_seconds if v.result.compile else 0.0) for v in hist), 1),
            "eval_wall_s": round(sum(v.result.wall_seconds for v in hist), 1),
            # the time the evaluations held a GPU: their wall time also counts waits for a GPU another lane held
            "eval_gpu_s": round(sum(v.result.gpu_time() for v in hist), 1),
            "best_vs_autotune": best.speedup if best else None,
        }
    return {"part": part, "gpus": gpus, "backend": backend, "gpu_name": seam.gpu_name, "shapes": [list(s) for s in shapes],
            "budget": budget, "per_step": per_step, "seam_start_s": round(t_seam, 1), "wall_s": round(wall, 1),
            "failures": summary["failures"], "per_shape": per_shape, "log_tail": log.getvalue()[-3000:]}


def device_line() -> str:
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=index,name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.strip().replace("\n", "; ")
    except (OSError, subprocess.TimeoutExpired):
        smi = "nvidia-smi unavailable"
    from evaluator.compile import nvcc_version

    return f"{smi}; nvcc {nvcc_version()}; {os.cpu_count()} CPU cores; {platform.node()}"


def report(work: Path, out_dir: Path) -> Path:
    runs = {p: json.loads((work / f"{p}.json").read_text()) for p in ("two", "one") if (work / f"{p}.json").is_file()}
    if not runs:
        raise SystemExit(f"no run results under {work}; run --part two and --part one first")
    first = runs[next(iter(runs))]
    backends = sorted({r["backend"] for r in runs.values()})
    lines = ["# Distributed campaign benchmark: two shapes on two GPUs", "",
             f"Produced by `scripts/bench_distributed.py` (backend {', '.join(backends)}) on "
             f"{first.get('device', '?')}, {first.get('date') or time.strftime('%Y-%m-%d')}. Raw numbers: "
             "`distributed.json` beside this file.", "",
             "Each run is the same campaign (built-in policy, no LLM, budget "
             f"{first['budget']} candidates per shape, {first['per_step']} per step, final re-measurement in offline "
             "and server mode) from an empty build cache; the two-GPU run keeps each shape's evaluations on one GPU.",
             ""]
    if "ray" in backends:
        lines += ["Backend `ray`: each run starts a local Ray cluster over its GPUs (`agent.cluster.make_seam(\"auto\")`"
                  ": one `GpuActor` per GPU, builds as Ray tasks of one CPU, dashboard off). The device cannot install "
                  "packages and carries at most 64 MiB, so Ray came as the trimmed bundle of "
                  "`scripts/fetch_ray_bundle.sh` (ray 2.60.0 cp312 without its Java jars, RLlib, Data, Serve, Tune, "
                  "Train and dashboard web client) unpacked into `/tmp/site`.", ""]
    if "recorded" in backends:
        lines += ["**DRY RUN: no GPU was used.** The answers are results recorded on a GPU "
                  "(tests/golden/recorded_results.json), served by Ray actors on fake GPUs; only the routing and "
                  "the wall time of the plumbing are real.", ""]
    lines += ["| run | backend | GPUs | cluster start s | campaign wall s | shape | evaluations (ok) | GPU(s) the shape "
              "ran on | sum of nvcc build s | sum of evaluation s | best vs cuBLASLt-AutoTuning-max |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    no_build = False
    for name, r in runs.items():
        for s, d in r["per_shape"].items():
            best = f"{d['best_vs_autotune']:.3f}" if d["best_vs_autotune"] is not None else "–"
            build = d.get("build_s")
            no_build |= build is None
            lines.append(f"| {name} | {r['backend']} | {','.join(map(str, r['gpus']))} | {r.get('seam_start_s', '–')} "
                         f"| {r['wall_s']} | {s} | {d['evaluations']} ({d['ok']}) | {','.join(map(str, d['gpus']))} | "
                         f"{'not recorded' if build is None else build} | {d['eval_wall_s']} | {best} |")
    lines += ["", "Columns: *cluster start* is starting Ray and its GPU actors (or the local pool), outside the "
              "campaign's wall time; *evaluation s* sums the evaluator's wall time of the search's evaluations (every "
              "check and the quick timing), not the final re-measurements; *best vs cuBLASLt-AutoTuning-max* is "
              "the best candidate's speedup in the search's quick-profile evaluation (below 1: slower than "
              "cuBLASLt-AutoTuning)."]
    if no_build:
        lines += ["", "*nvcc build s* is not recorded for these runs: the script then summed only the evaluator's "
                  "compile step, which is a cache look-up once the Ray build task (or compile-ahead) has built the "
                  "kernel (0.0–0.2 s per shape); it now also records the builds' own seconds (`build_s`)."]
    if "two" in runs and "one" in runs:
        two, one = runs["two"], runs["one"]
        pinned = all(len(d["gpus"]) == 1 for d in two["per_shape"].values())
        distinct = len({d["gpus"][0] for d in two["per_shape"].values() if d["gpus"]}) == len(two["per_shape"])
        # runs recorded before the held time was kept have only the evaluations' wall time
        gpu_s = {n: sum(d.get("eval_gpu_s", d["eval_wall_s"]) for d in r["per_shape"].values())
                 for n, r in runs.items()}
        lines += ["", "## Results", "",
                  f"- Wall time, two GPUs against one: {two['wall_s']} s against {one['wall_s']} s "
                  f"(one-GPU time / two-GPU time = {one['wall_s'] / two['wall_s']:.2f}).",
                  f"- Each shape's evaluations on one GPU: {'yes' if pinned else 'NO'}; the shapes on different "
                  f"GPUs: {'yes' if distinct else 'NO'}.",
                  f"- Where the time goes: the search's evaluations took {gpu_s['two']:.1f} s (two GPUs) and "
                  f"{gpu_s['one']:.1f} s (one GPU) of GPU time in all, against campaign wall times of {two['wall_s']} "
                  f"and {one['wall_s']} s: the GPUs were busy a small fraction of each run. The rest is the candidates' "
                  "builds (on the CPU cores, in parallel, overlapping evaluations), the proposals and the winners' "
                  "final re-measurements; how it splits is not broken down here. A second GPU can only shorten "
                  "the GPU part, so at this budget it barely changes the wall time; the simulation in "
                  "`docs/distributed.md` says when GPUs become the bottleneck.",
                  "- One run of each; no repeats, so no spread is given for the wall times."]
    lines += ["", "Not measured here: more than one node (the cluster is one machine's two GPUs), losing a GPU or a "
              "node on real GPUs (the CPU tests kill an actor on fake GPUs), an LLM proposer, larger budgets."]
    for name, r in runs.items():
        if r["failures"]:
            lines.append(f"- {name}: failures {r['failures']}")
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "distributed.json").write_text(json.dumps(runs, indent=1))
    md = out_dir / "distributed.md"
    md.write_text("\n".join(lines) + "\n")
    return md


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--part", choices=["all", "two", "one", "report"], default="all")
    ap.add_argument("--shapes", default=DEFAULT_SHAPES, help="M,N,K;M,N,K (default %(default)s)")
    ap.add_argument("--budget", type=int, default=4, help="candidates per shape (default 4)")
    ap.add_argument("--per-step", type=int, default=4)
    ap.add_argument("--backend", choices=["local", "ray", "recorded"], default="local",
                    help="recorded: a dry run without GPUs (Ray with fake GPUs answering recorded results)")
    ap.add_argument("--work", default="runs/bench_distributed", help="run folders, caches and per-run JSON")
    ap.add_argument("--out", default="docs/benchmarks", help="where distributed.md/json go")
    a = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    work = Path(a.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    shapes = parse_shapes(a.shapes)
    if a.part != "report":
        from evaluator.gpu import device_count

        n = device_count() if a.backend != "recorded" else 2
        need = 2 if a.part in ("all", "two") else 1
        if n < need:
            print(f"this benchmark needs {need} CUDA GPUs; this machine has {n}", file=sys.stderr)
            return 2
        dev = device_line()
        for part, gpus in (("two", [0, 1]), ("one", [0])):
            if a.part not in ("all", part):
                continue
            r = run_one(part, gpus, shapes, a.budget, a.per_step, a.backend, work)
            r["device"], r["date"] = dev, time.strftime("%Y-%m-%d")
            (work / f"{part}.json").write_text(json.dumps(r, indent=1))
            print(f"{part}: {len(gpus)} GPU(s), wall {r['wall_s']} s, per shape "
                  f"{ {s: (d['evaluations'], d['gpus']) for s, d in r['per_shape'].items()} }", flush=True)
    if a.part in ("all", "report"):
        print(f"wrote {report(work, Path(a.out))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
