"""The evaluator's entry points: screen → compile → (GPU worker) check → time → record.

    evaluate(source, (M, N, K), acc="fp32", mode="offline", profile="quick") -> EvalResult
    time_baselines((M, N, K), ...) -> dict[str, Timing]

A candidate that fails any correctness check is never timed. Everything that runs candidate code happens in a
worker process (evaluator.pool), so crashes, sticky CUDA errors and hangs become statuses, not failures here.
"""
from __future__ import annotations

import contextlib
import threading
import time

from evaluator import record as R
from evaluator.compile import ARCH_HELP, DEFAULT_ARCH, default_arch  # noqa: F401 (the CLIs' one --arch default)
from evaluator.contract import ACCUMULATORS, MODES, PROFILES, check_shape
from evaluator.gpu import NoGPUError, has_gpu
from evaluator.pool import WorkerPool

_default_pool: WorkerPool | None = None
_pool_lock = threading.Lock()

# Seconds without any progress message from the worker before it counts as hung. Big shapes with a naive kernel
# take seconds per call; every phase reports progress.
INACTIVITY_TIMEOUT = {"quick": 90.0, "paper": 300.0}


def default_pool() -> WorkerPool:
    global _default_pool
    with _pool_lock:
        if _default_pool is None:
            _default_pool = WorkerPool()
        return _default_pool


def _validate(acc: str, mode: str, profile: str) -> None:
    if acc not in ACCUMULATORS:
        raise ValueError(f"acc must be one of {ACCUMULATORS}, got {acc!r}")
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if profile not in PROFILES:
        raise ValueError(f"profile must be one of {PROFILES}, got {profile!r}")


def compile_only(source: str, shape=(0, 0, 0), *, acc: str = "fp32", arch: str | None = None,
                 screen: bool = True, build_progress=None) -> R.EvalResult:
    """`build_progress`: see compile_kernel's `progress` (a slow build's elapsed and expected time).
    `screen=False` skips the source screen (the red team uses it to show what the run time refuses)."""
    from evaluator.compile import compile_kernel, compile_status, source_hash

    info = compile_kernel(source, arch, screen_source=screen, progress=build_progress)
    status, reason = compile_status(info)
    return R.EvalResult(status=status, reason=reason, shape=tuple(shape), acc=acc, source_hash=source_hash(source),
                        code_length=len(source), compile=info)


def evaluate(source: str, shape, *, acc: str = "fp32", mode: str = "offline", profile: str = "quick",
             sanitize: bool = False, ncu: bool = False, arch: str | None = None, pool: WorkerPool | None = None,
             gpu: int | None = None, seed: int | None = None, on_progress=None,
             inactivity_timeout: float | None = None, rivals: dict[str, str] | None = None,
             rounds: int | None = None, screen: bool = True, build_progress=None) -> R.EvalResult:
    """`rivals` (name -> source): kernels that passed every check before, timed beside this one in the same rounds,
    so that leaders are compared on one clock (their figures: `EvalResult.rivals`, `head_to_head`). `rounds`
    overrides the profile's number of timed rounds (power-steady included). `screen=False` skips the source screen
    (the red team uses it to show that the run-time checks refuse what the screen would have). `build_progress`:
    as compile_only's."""
    started = time.monotonic()
    shape = check_shape(shape)
    _validate(acc, mode, profile)
    res = compile_only(source, shape, acc=acc, arch=arch, screen=screen, build_progress=build_progress)
    res.mode, res.profile = mode, profile
    if res.status != R.COMPILED:
        res.wall_seconds = time.monotonic() - started
        return res
    if not has_gpu():
        res.status, res.reason = R.NO_GPU, str(NoGPUError("running and timing a kernel"))
        return res
    pool = pool or default_pool()
    req = {"op": "evaluate", "so_path": res.compile.so_path, "shape": list(shape), "acc": acc, "mode": mode,
           "profile": profile}
    if seed is not None:
        req["seed"] = seed
    if rounds is not None:
        if not isinstance(rounds, int) or not 1 <= rounds <= 200:
            raise ValueError(f"rounds must be a whole number in 1..200, got {rounds!r}")
        req["rounds"] = rounds
    if rivals:
        req["rivals"] = {}
        for name, src in rivals.items():
            rc = compile_only(src, shape, acc=acc, arch=arch)
            if rc.status != R.COMPILED:
                raise ValueError(f"rival {name!r} does not build: {rc.status}: {rc.reason[:300]}")
            req["rivals"][name] = rc.compile.so_path
    timeout = inactivity_timeout or INACTIVITY_TIMEOUT[profile]
    res.gpu_seconds = 0.0
    if sanitize:
        # The sanitizers are correctness checks too, so they run before any timing: checks, sanitizers, timing.
        out = pool.run({**req, "phases": ["checks"]}, timeout, gpu=gpu, on_progress=on_progress)
        _fill(res, out)
        if res.status in (R.OK, R.INCORRECT, R.ESCAPED_WORK):  # it ran to the end: sanitize it too
            from evaluator.sanitize import run_sanitizers

            with _holding(pool, out.get("gpu_index"), res) as g:
                checks = run_sanitizers(res.compile.so_path, shape, pool.native_so(), gpu=g)
            res.checks.extend(checks)
            failed = [c for c in checks if not c.passed]
            if failed and res.status == R.OK:
                res.status = R.INCORRECT
                res.reason = "; ".join(f"{c.name}: {c.detail}" for c in failed)
        if res.status == R.OK:
            earlier = res.checks
            _fill(res, pool.run({**req, "phases": ["timing"]}, timeout, gpu=gpu, on_progress=on_progress))
            res.checks = earlier + res.checks
    else:
        _fill(res, pool.run(req, timeout, gpu=gpu, on_progress=on_progress))
    if ncu and res.status == R.OK:
        from evaluator.profile import profile_candidate

        with _holding(pool, res.gpu.get("gpu_index"), res) as g:
            res.ncu = profile_candidate(res.compile.so_path, shape, pool.native_so(), acc=acc, gpu=g)
    res.wall_seconds = time.monotonic() - started
    return res


@contextlib.contextmanager
def _holding(pool: WorkerPool, gpu: int | None, res: R.EvalResult):
    """Runs a profiler or sanitizer on the GPU the checks ran on, with the pool's other evaluations kept off it, and
    counts that time as the evaluation's GPU time."""
    with pool.holding(gpu) as g:
        began = time.monotonic()
        try:
            yield g
        finally:
            res.gpu_seconds = (res.gpu_seconds or 0.0) + time.monotonic() - began


def _fill(res: R.EvalResult, out: dict) -> None:
    res.gpu_seconds = (res.gpu_seconds or 0.0) + out.get("held_s", 0.0)
    res.status = out.get("status", R.ERROR)
    res.reason = out.get("reason", "")
    res.checks = [R.CheckOutcome(**c) for c in out.get("checks", [])]
    res.gpu = dict(out.get("gpu", {}), gpu_index=out.get("gpu_index"))
    if out.get("seed") is not None:
        res.gpu["seed"] = out["seed"]
    if out.get("candidate"):
        res.candidate = R.Timing.from_dict(out["candidate"])
        res.candidate.detail["timing"] = out.get("timing_meta", {})
    res.baselines = {k: R.Timing.from_dict(v) for k, v in out.get("baselines", {}).items()}
    res.rivals = {k: R.Timing.from_dict(v) for k, v in out.get("rivals", {}).items()}


def time_baselines(shape, *, acc: str = "fp32", mode: str = "offline", profile: str = "quick",
                   pool: WorkerPool | None = None, gpu: int | None = None) -> dict[str, R.Timing]:
    """Times the NVIDIA baselines alone, interleaved; speedups are relative to cublas-NN."""
    shape = check_shape(shape)
    _validate(acc, mode, profile)
    if not has_gpu():
        raise NoGPUError("timing the baselines")
    pool = pool or default_pool()
    out = pool.run({"op": "baselines", "shape": list(shape), "acc": acc, "mode": mode, "profile": profile},
                   INACTIVITY_TIMEOUT[profile], gpu=gpu)
    if out.get("status") != R.OK:
        raise RuntimeError(f"baseline timing failed: {out.get('status')}: {out.get('reason')}")
    return {k: R.Timing.from_dict(v) for k, v in out["baselines"].items()}
