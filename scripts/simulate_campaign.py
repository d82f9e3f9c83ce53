#!/usr/bin/env python3
"""How long does a 1,000-shape campaign take on 8-64 GPUs, and what limits it?

Two parts:

    python3 scripts/simulate_campaign.py measure [--out costs.json]
        Compiles the test kernels (tests/kernels/*.cu) and one kernel of each family (agent/families) with
        evaluator.compile.compile_kernel into an empty build cache, one at a time and then as many at once as the
        machine has cores, and writes the seconds per compile (and per compile-slot when the cores are shared).

    python3 scripts/simulate_campaign.py simulate [--costs costs.json] [--gpus 8,16,32,64] [--markdown]
        A discrete-event simulation of the campaign driver (agent.campaign.driver + agent.cluster): shapes in lanes
        (2 per GPU), each lane proposes (one LLM call per step of n_per_step candidates), compiles the batch on a
        shared pool of compile slots, then evaluates its candidates one after another on its GPU. It reports the
        wall time and the utilisation of each resource (LLM concurrency, compile slots, GPUs), so the bottleneck
        can be read off as the cluster grows.

The model is deliberately the driver's own: compile-ahead (a batch starts compiling the moment it is proposed,
candidate i is evaluated as soon as its own build is done), one evaluation at a time per GPU, an LLM endpoint with a
concurrency limit. Costs are drawn from the measured distributions (seeded), not fixed numbers.
"""
from __future__ import annotations

import argparse
import heapq
import json
import os
import random
import resource
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

# Inputs when no --costs file is given. Where each came from:
#  - eval_s: run 37 of the built-in policy (docs/benchmarks/builtin_policy_fp32.md, H200s, 2026-11-25): a shape's
#    GPU seconds over its 21 evaluations (12 candidates, 3 second measurements, 6 finals), every check, baseline
#    and baseline autotuning included: 1.9-10.2 s for the 16 shapes under 2^36 FLOP, 6.9-27.5 s for the 8 above,
#    so a third of the shapes draw from the second range (the dev sample's share). The 2026-11-22 figures
#    (0.5-3.1 s, docs/benchmarks/evaluator.md section 2) timed one evaluation without its baselines' autotuning.
#  - compile_s: `simulate_campaign.py measure --serial-only` on the development machine (2 cores, nvcc 13.0.88,
#    otherwise idle), 2026-11-25, in CPU seconds of nvcc: the plain CUDA kernels (tests/kernels/*.cu, the `small`
#    and `hopper_raw` families) 1.3-2.9 s; one CuTe kernel (ampere_cute) 25.1 s and one CUTLASS 3.x kernel
#    (hopper_wgmma, 128x128) 28.8 s. hopper_wgmma's tiles 144/160/176 need CuTe's extended wgmma shapes and take
#    ~55 s; the range leaves them out. The 2026-11-22 figures (141.7 and 147.8 s) were taken on a loaded machine
#    with those shapes in every build. The share of CuTe/CUTLASS candidates (cute_fraction) is an assumption: the
#    built-in policy uses the `small` family only for tiny and skinny shapes.
#  - llm_s: an assumption, not a measurement: one call to a hosted model that writes 4 kernels of ~300 lines
#    (~12k output tokens) at ~100 tokens/s is ~2 minutes; a local fine-tuned model behind vLLM is ~30 s.
DEFAULT_COSTS = {
    "eval_s": {"small_shapes": [1.9, 10.2], "large_shapes": [6.9, 27.5], "large_fraction": 0.33},
    "compile_s": {"plain": [1.3, 2.9], "cute": [25.1, 28.8], "cute_fraction": 0.75},
    "llm_s": {"builtin": [0.05, 0.2], "local_vllm": [20.0, 40.0], "hosted": [90.0, 150.0]},
    "source": "defaults in scripts/simulate_campaign.py (see docs/distributed.md)",
}


# ---------------------------------------------------------------- measure

def _family_sources() -> dict[str, str]:
    from agent.families import families

    out = {}
    shape = (4096, 4096, 4096)
    for name, mod in families().items():
        space = mod.space(shape, "fp32", "sm_90a")
        if space:
            out[f"family:{name}"] = mod.render(space[len(space) // 2])
    return out


def measure(out: Path, jobs: int | None, only: str | None = None, timeout: float = 1800.0,
            parallel: bool = True) -> dict:
    from evaluator.compile import compile_kernel, nvcc_version

    sources = {f"tests/kernels/{p.name}": p.read_text() for p in sorted((REPO / "tests" / "kernels").glob("*.cu"))}
    sources.update(_family_sources())
    if only:
        sources = {k: v for k, v in sources.items() if only in k}
    jobs = jobs or os.cpu_count() or 1
    result = {"machine": {"cores": os.cpu_count(), "nvcc": nvcc_version()}, "arch": "sm_90a", "serial": {},
              "parallel": {}, "jobs": jobs}
    with tempfile.TemporaryDirectory(prefix="cudal2-measure-") as d:
        for name, src in sources.items():
            t0 = time.monotonic()
            load0 = os.getloadavg()[0]
            cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            info = compile_kernel(src, "sm_90a", cache_dir=Path(d) / "serial", timeout=timeout)
            cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            # CPU seconds of nvcc and its children: the build's cost on a core of its own, whatever the load here.
            cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
            result["serial"][name] = {"seconds": round(time.monotonic() - t0, 2), "cpu_seconds": round(cpu, 2),
                                      "ok": info.ok,
                                      "lines": src.count("\n"), "load_before": round(load0, 2),
                                      "load_after": round(os.getloadavg()[0], 2),
                                      "log_tail": "" if info.ok else info.log[-400:]}
            print(f"serial   {name:40s} {result['serial'][name]['seconds']:7.2f} s wall "
                  f"{cpu:7.2f} s cpu  load {load0:.1f} ok={info.ok}", flush=True)
        if not parallel:
            out.write_text(json.dumps(result, indent=1))
            return result
        # The same builds, `jobs` at a time (each twice so the pool stays full): the per-build time when cores
        # are shared, which is what a node's compile slots see in a campaign.
        work = [(f"{n}#{i}", s + f"\n// copy {i}\n") for n, s in sources.items() for i in range(2)]
        t_all = time.monotonic()

        def one(item):
            n, s = item
            t0 = time.monotonic()
            compile_kernel(s, "sm_90a", cache_dir=Path(d) / "parallel", timeout=timeout)
            return n, time.monotonic() - t0

        with ThreadPoolExecutor(jobs) as pool:
            for n, dt in pool.map(one, work):
                result["parallel"][n] = round(dt, 2)
                print(f"parallel {n:40s} {dt:7.2f} s", flush=True)
        result["parallel_wall_s"] = round(time.monotonic() - t_all, 2)
        result["parallel_serial_sum_s"] = round(2 * sum(v["seconds"] for v in result["serial"].values()), 2)
    out.write_text(json.dumps(result, indent=1))
    print(f"wrote {out}")
    return result


def costs_from_measurement(m: dict) -> dict:
    """Turn a `measure` file into the simulation's compile ranges (min..max per class, serial builds)."""
    def cost(v):  # a build slot is a core of its own: CPU seconds where measured
        return v.get("cpu_seconds") or v["seconds"]

    heavy = ("family:ampere", "family:hopper")
    plain = [cost(v) for k, v in m["serial"].items() if v["ok"] and not k.startswith(heavy)]
    cute = [cost(v) for k, v in m["serial"].items() if v["ok"] and k.startswith(heavy)]
    c = json.loads(json.dumps(DEFAULT_COSTS))
    if plain:
        c["compile_s"]["plain"] = [min(plain), max(plain)]
    if cute:
        c["compile_s"]["cute"] = [min(cute), max(cute)]
    c["source"] = "measured compile times from a `measure` file; evaluation and LLM costs as documented"
    return c


# ---------------------------------------------------------------- simulate

SATURATED = 0.85


@dataclass
class Scenario:
    gpus: int
    llm: str = "hosted"  # key into costs["llm_s"]
    llm_concurrency: int = 64  # parallel requests the endpoint serves before queueing
    compile_slots: int | None = None  # CPU cores building kernels across the cluster; None: 8 per GPU
    lanes_per_gpu: int = 2  # shapes worked on at once per GPU (agent.campaign.driver uses 2)
    shapes: int = 1000
    budget: int = 16  # candidates per shape
    n_per_step: int = 4
    cute_fraction: float | None = None  # share of candidates that are CuTe/CUTLASS builds
    end_evals: int | None = None  # evaluations after the search (second measurements, finals); None: the driver's
    seed: int = 0
    name: str = ""


def driver_end_evals() -> int:
    """What agent.campaign.driver evaluates once a shape's search ends, by default: its leaders once more (a tournament of
    confirm_top kernels in one evaluation, counted as confirm_top evaluations), then the winner in each final mode,
    final_repeats times."""
    from agent.campaign.driver import FINAL_MODES, CampaignConfig

    return CampaignConfig.confirm_top + len(FINAL_MODES) * CampaignConfig.final_repeats


@dataclass
class Outcome:
    scenario: Scenario
    wall_s: float
    busy: dict = field(default_factory=dict)  # resource -> busy fraction over the wall time
    bottleneck: str = ""


class _Pool:
    """k identical servers, FIFO: returns when a job submitted at t with duration d finishes."""

    def __init__(self, k: int):
        self.free = [0.0] * max(1, k)
        heapq.heapify(self.free)
        self.k = max(1, k)
        self.busy = 0.0

    def run(self, t: float, d: float) -> float:
        start = max(t, heapq.heappop(self.free))
        end = start + d
        heapq.heappush(self.free, end)
        self.busy += d
        return end


def _draw(rng: random.Random, lohi) -> float:
    return rng.uniform(lohi[0], lohi[1])


def simulate(sc: Scenario, costs: dict) -> Outcome:
    """Event-ordered simulation: lanes advance in the order of their clocks (a heap), so shared pools (LLM,
    compile slots) are granted in time order."""
    rng = random.Random(sc.seed)
    lanes = sc.lanes_per_gpu * sc.gpus
    slots = sc.compile_slots if sc.compile_slots is not None else 8 * sc.gpus
    cute_frac = costs["compile_s"]["cute_fraction"] if sc.cute_fraction is None else sc.cute_fraction
    ev = costs["eval_s"]
    llm_pool, cc_pool = _Pool(sc.llm_concurrency), _Pool(slots)
    gpu_free = [0.0] * sc.gpus
    gpu_busy = 0.0
    queue = list(range(sc.shapes))
    # Each lane: (time, lane id, shape, step); lanes share GPUs round-robin (the driver's routing spreads shapes).
    heap = []
    for lane in range(min(lanes, sc.shapes)):
        heapq.heappush(heap, (0.0, lane, queue.pop(0), 0))
    end = 0.0
    while heap:
        t, lane, shape, done = heapq.heappop(heap)
        n = min(sc.n_per_step, sc.budget - done)
        t_prop = llm_pool.run(t, _draw(rng, costs["llm_s"][sc.llm]))
        builds = [cc_pool.run(t_prop, _draw(rng, costs["compile_s"]["cute" if rng.random() < cute_frac
                                                                         else "plain"])) for _ in range(n)]
        g = lane % sc.gpus
        tc = t_prop
        large = rng.random() < ev["large_fraction"]
        for b in builds:  # candidate i waits for its own build, then for the GPU
            d = _draw(rng, ev["large_shapes"] if large else ev["small_shapes"])
            start = max(tc, b, gpu_free[g])
            gpu_free[g] = tc = start + d
            gpu_busy += d
        done += n
        if done < sc.budget:
            heapq.heappush(heap, (tc, lane, shape, done))
        else:
            # the leaders' second measurements and the winner's finals, on the same GPU
            for _ in range(driver_end_evals() if sc.end_evals is None else sc.end_evals):
                d = _draw(rng, ev["large_shapes"] if large else ev["small_shapes"])
                start = max(tc, gpu_free[g])
                gpu_free[g] = tc = start + d
                gpu_busy += d
            end = max(end, tc)
            if queue:
                heapq.heappush(heap, (tc, lane, queue.pop(0), 0))
    busy = {"gpu": gpu_busy / (sc.gpus * end), "compile": cc_pool.busy / (cc_pool.k * end),
            "llm": llm_pool.busy / (llm_pool.k * end)}
    top = max(busy, key=busy.get)
    # No resource near saturation: each lane waits on its own chain (LLM call, then its slowest build, then its
    # evaluations) and more lanes would help.
    if busy[top] >= SATURATED:
        label = top
    elif lanes >= sc.shapes:
        label = "shape chain"  # every shape has its own lane: the slowest shape's steps set the wall time
    else:
        label = "lane latency"
    return Outcome(sc, end, busy, label)


def scenarios(gpus: list[int]) -> list[Scenario]:
    out = []
    for g in gpus:
        out.append(Scenario(g, llm="builtin", name="built-in policy; 2 lanes/GPU, 8 build cores/GPU"))
        out.append(Scenario(g, llm="builtin", lanes_per_gpu=8, name="built-in policy; 8 lanes/GPU, 8 cores/GPU"))
        out.append(Scenario(g, llm="builtin", lanes_per_gpu=8, compile_slots=32 * g,
                            name="built-in policy; 8 lanes/GPU, 32 cores/GPU"))
        out.append(Scenario(g, llm="builtin", lanes_per_gpu=24, compile_slots=128 * g,
                            name="built-in policy; 24 lanes/GPU, 128 cores/GPU"))
        out.append(Scenario(g, llm="builtin", lanes_per_gpu=64, compile_slots=256 * g,
                            name="built-in policy; 64 lanes/GPU, 256 cores/GPU"))
        out.append(Scenario(g, llm="local_vllm", llm_concurrency=32, lanes_per_gpu=8, compile_slots=32 * g,
                            name="local vLLM, 32 concurrent; 8 lanes/GPU, 32 cores/GPU"))
        out.append(Scenario(g, llm="hosted", llm_concurrency=64, lanes_per_gpu=8, compile_slots=32 * g,
                            name="hosted LLM, 64 concurrent; 8 lanes/GPU, 32 cores/GPU"))
    return out


def fmt_h(s: float) -> str:
    return f"{s / 3600:.1f} h" if s >= 3600 else f"{s / 60:.0f} min"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("measure", help="time real nvcc builds of the test and family kernels here")
    m.add_argument("--out", default="compile_costs.json")
    m.add_argument("--jobs", type=int, default=None)
    m.add_argument("--only", default=None, help="only the kernels whose name contains this")
    m.add_argument("--timeout", type=float, default=1800.0, help="per build (the evaluator's default is 300 s)")
    m.add_argument("--serial-only", action="store_true")
    s = sub.add_parser("simulate", help="simulate a campaign on 8-64 GPUs")
    s.add_argument("--costs", default=None, help="a file written by `measure` (default: the documented defaults)")
    s.add_argument("--gpus", default="8,16,32,64")
    s.add_argument("--shapes", type=int, default=1000)
    s.add_argument("--budget", type=int, default=16)
    s.add_argument("--markdown", action="store_true")
    a = ap.parse_args(argv)
    if a.cmd == "measure":
        measure(Path(a.out), a.jobs, a.only, a.timeout, not a.serial_only)
        return 0
    try:
        gpus = [int(x) for x in a.gpus.split(",") if x.strip()]
    except ValueError:
        ap.error(f"--gpus takes counts like 8,16 (got {a.gpus!r})")
    if not gpus or min(gpus) < 1:
        ap.error("--gpus takes positive counts")
    costs = costs_from_measurement(json.loads(Path(a.costs).read_text())) if a.costs else DEFAULT_COSTS
    rows = []
    for sc in scenarios(gpus):
        sc.shapes, sc.budget = a.shapes, a.budget
        rows.append(simulate(sc, costs))
    if a.markdown:
        print("| GPUs | scenario | wall time | GPU busy | compile busy | LLM busy | bottleneck |")
        print("|---|---|---|---|---|---|---|")
    for o in rows:
        b = o.busy
        if a.markdown:
            print(f"| {o.scenario.gpus} | {o.scenario.name} | {fmt_h(o.wall_s)} | {b['gpu']:.0%} | {b['compile']:.0%} "
                  f"| {b['llm']:.0%} | {o.bottleneck} |")
        else:
            print(f"{o.scenario.gpus:3d} GPUs  {o.scenario.name:45s} {fmt_h(o.wall_s):>9s}  gpu {b['gpu']:4.0%}  "
                  f"compile {b['compile']:4.0%}  llm {b['llm']:4.0%}  -> {o.bottleneck}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
