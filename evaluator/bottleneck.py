"""What limits a kernel, in one word, from its Nsight Compute record (evaluator.ncu_parse.summarize's output).

    bottleneck(record) -> {"label": ..., "why": "...", "evidence": {...}}

Labels, tried in this order (the first that fits wins, so the most specific and most actionable comes first):

  launch-bound        the GPU time is so short, or so split over several launches, that launch overhead and
                      inter-kernel gaps are a large share of the call
  tensor-pipe-bound   the tensor cores are busy most of the time: the kernel is near its compute roof
  bank-conflicted     a large share of shared-memory wavefronts exist only because of bank conflicts, and shared
                      memory is busy or warps wait on it
  memory-bound        DRAM or the cache hierarchy runs near its peak and ahead of the SMs
  occupancy-limited   too few warps to hide latency: the grid leaves SMs idle, or registers/shared memory cap the
                      warps per SM while warps sit stalled and the tensor pipe is not busy (a warp-specialised
                      kernel with a busy tensor pipe runs few warps on purpose)
  latency-bound       nothing is near its peak; warps are stalled (the top stall reason says on what)
  balanced            compute and memory both moderately used, no single limiter stands out

The thresholds are deliberately round numbers on NVIDIA's own "% of peak" scales; they sort kernels for the
search, they do not claim a precise roofline position.
"""
from __future__ import annotations

from typing import Any

LABELS = ("memory-bound", "latency-bound", "occupancy-limited", "bank-conflicted", "tensor-pipe-bound",
          "launch-bound", "balanced")

LAUNCH_US = 5.0  # whole-call GPU time comparable to a kernel launch (a few µs)
MAIN_KERNEL_SHARE = 0.7  # with several launches, the longest one below this share of the GPU time
TENSOR_PCT = 60.0
BANK_PCT = 25.0  # conflict wavefronts / all shared-memory wavefronts
BANK_BUSY_PCT = 30.0  # L1/shared throughput that makes conflicts matter
MEMORY_PCT = 60.0
UNDERFILL_SMS = 0.75  # a grid with fewer blocks than this share of the SMs leaves the rest idle
LOW_OCCUPANCY_PCT = 25.0
LOW_ISSUE_PCT = 50.0
BUSY_TENSOR_PCT = 30.0  # a kernel whose tensor pipe is this busy runs few warps by design (warp-specialised)
IDLE_TENSOR_PCT = 1.0
LATENCY_PCT = 40.0
SHARED_STALLS = ("mio_throttle", "short_scoreboard")
WAIT_STALLS = ("long_scoreboard", "barrier", "short_scoreboard", "wait", "mio_throttle", "lg_throttle")
NOT_A_STALL = ("selected", "not_selected")


def _stalls(rec: dict[str, Any]) -> dict[str, float]:
    if isinstance(rec.get("stalls"), dict):
        return rec["stalls"]
    kernels = rec.get("kernels") or []
    if kernels:
        main = max(kernels, key=lambda k: k.get("duration_us") or 0.0)
        return main.get("stalls") or {}
    return {}


def _top(stalls: dict[str, float]) -> tuple[str | None, float]:
    real = {k: v for k, v in stalls.items() if k not in NOT_A_STALL and v is not None}
    if not real:
        return None, 0.0
    k = max(real, key=real.get)
    return k, real[k]


def _f(rec: dict[str, Any], key: str) -> float | None:
    v = rec.get(key)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _r(v: float | None) -> float | None:
    return None if v is None else round(v, 2)


def bottleneck(rec: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(rec, dict):
        raise TypeError(f"bottleneck() takes an ncu record (dict), got {type(rec).__name__}")
    if rec.get("available") is False:
        raise ValueError(f"no metrics to judge: the profile is unavailable ({rec.get('reason', 'no reason given')})")
    g = lambda k: _f(rec, k)  # noqa: E731
    dur, main_dur, n_k = g("duration_us"), g("main_kernel_duration_us"), int(g("n_kernels") or 1)
    sm, mem, dram = g("sm_throughput_pct"), g("memory_throughput_pct"), g("dram_throughput_pct")
    l1, tensor, issue = g("l1_throughput_pct"), g("tensor_pipe_pct"), g("issue_active_pct")
    bank, waves, grid, sms = g("bank_conflict_pct"), g("waves_per_sm"), g("grid_size"), g("sm_count")
    occ, theo = g("achieved_occupancy_pct"), g("theoretical_occupancy_pct")
    stalls = _stalls(rec)
    top, top_v = _top(stalls)
    mem_peak = max((v for v in (mem, dram) if v is not None), default=None)

    def out(label: str, why: str, **evidence: Any) -> dict[str, Any]:
        ev = {k: (_r(v) if isinstance(v, float) else v) for k, v in evidence.items()}
        if top is not None:
            ev.setdefault("top_stall", top)
            ev.setdefault("top_stall_cycles_per_issue", _r(top_v))
        return {"label": label, "why": why, "evidence": ev}

    if dur is not None and dur < LAUNCH_US:
        return out("launch-bound", f"the whole call is {dur:.2f} µs of GPU time, about the cost of a kernel "
                   f"launch: fewer launches or a lighter prologue/epilogue gain more than a faster main loop",
                   duration_us=dur, n_kernels=n_k)
    if n_k > 1 and dur and main_dur is not None and main_dur / dur < MAIN_KERNEL_SHARE:
        return out("launch-bound", f"{n_k} kernel launches and the longest is only {100 * main_dur / dur:.0f}% "
                   f"of the GPU time: the helper launches (padding, zero-fill, split-K reduction) cost more than "
                   f"they buy; fuse them into the main kernel", duration_us=dur, n_kernels=n_k,
                   main_kernel_duration_us=main_dur)
    if tensor is not None and tensor >= TENSOR_PCT:
        return out("tensor-pipe-bound", f"the tensor pipe is active {tensor:.0f}% of the time: near the compute "
                   f"roof; only less non-MMA work (epilogue, address math) or a wider MMA (wgmma) helps",
                   tensor_pipe_pct=tensor, sm_throughput_pct=sm)
    shared_waits = top in SHARED_STALLS
    if bank is not None and bank >= BANK_PCT and (l1 is None or l1 >= BANK_BUSY_PCT or shared_waits):
        return out("bank-conflicted", f"{bank:.0f}% of shared-memory wavefronts come from bank conflicts"
                   + (f" with L1/shared at {l1:.0f}% of peak" if l1 is not None else "")
                   + ": swizzle or pad the shared-memory tiles (ldmatrix-friendly layout)",
                   bank_conflict_pct=bank, l1_throughput_pct=l1)
    if mem_peak is not None and mem_peak >= MEMORY_PCT and (sm is None or mem_peak >= sm):
        which = "DRAM" if dram is not None and dram >= MEMORY_PCT else "the memory hierarchy (L1/L2)"
        return out("memory-bound", f"{which} runs at {mem_peak:.0f}% of peak"
                   + (f", ahead of the SMs ({sm:.0f}%)" if sm is not None else "")
                   + ": larger tiles for more reuse, better L2 locality (block swizzle), fewer bytes per FLOP",
                   memory_throughput_pct=mem, dram_throughput_pct=dram, sm_throughput_pct=sm,
                   l2_hit_rate_pct=g("l2_hit_rate_pct"))
    if grid is not None and sms and grid < UNDERFILL_SMS * sms:
        return out("occupancy-limited", f"the grid has {grid:.0f} blocks for {sms:.0f} SMs: "
                   f"{100 * (1 - grid / sms):.0f}% of the SMs get no work; smaller tiles, split-K or stream-K "
                   f"give every SM a share", grid_size=int(grid), sm_count=int(sms), waves_per_sm=waves,
                   achieved_occupancy_pct=occ)
    starved = (issue is not None and issue < LOW_ISSUE_PCT) or top in WAIT_STALLS
    tensor_idle_enough = tensor is None or tensor < BUSY_TENSOR_PCT
    if (occ is not None and occ < LOW_OCCUPANCY_PCT and (theo is None or theo <= LOW_OCCUPANCY_PCT) and starved
            and tensor_idle_enough):
        lim = rec.get("occupancy_limiter")
        return out("occupancy-limited", f"only {occ:.0f}% of warp slots are used"
                   + (f" (theoretical {theo:.0f}%, capped by {lim})" if theo is not None and lim else "")
                   + (f" and warps stall on {top}" if top else "")
                   + ": fewer registers or less shared memory per block, or more independent work per warp "
                     "(deeper pipelining)",
                   achieved_occupancy_pct=occ, theoretical_occupancy_pct=theo, occupancy_limiter=lim,
                   issue_active_pct=issue)
    busiest = max((v for v in (sm, mem_peak) if v is not None), default=None)
    if busiest is not None and busiest < LATENCY_PCT:
        return out("latency-bound", f"neither the SMs ({_pct(sm)}) nor memory ({_pct(mem_peak)}) is near its peak"
                   + (f"; warps mostly wait on {top} ({top_v:.2f} cycles per issue)" if top else "")
                   + ": more in flight (cp.async/TMA multi-stage pipelines, more warps or ILP)",
                   sm_throughput_pct=sm, memory_throughput_pct=mem_peak, issue_active_pct=issue)
    if busiest is None:
        return out("balanced", "too few metrics to single out a limiter", duration_us=dur)
    idle = tensor is not None and tensor < IDLE_TENSOR_PCT
    return out("balanced", f"SMs at {_pct(sm)} and memory at {_pct(mem_peak)} of peak, tensor pipe at "
               f"{_pct(tensor)}: no single limiter"
               + ("; the tensor cores are idle, the math runs on the CUDA cores: use mma/wgmma" if idle else
                  "; gains come from the tile shape and schedule as a whole"),
               sm_throughput_pct=sm, memory_throughput_pct=mem_peak, tensor_pipe_pct=tensor)


def _pct(v: float | None) -> str:
    return "?" if v is None else f"{v:.0f}%"
