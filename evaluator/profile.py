"""Nsight Compute profiles of a candidate and of the baselines, in a process of their own, never during timing.

    profile_candidate(so_path, shape, native_so, acc="fp32", timeout=180) -> dict
    profile_baseline(shape, native_so, acc="fp32", which="cublaslt-heuristic-NN") -> dict   (cached on disk)

Each profile is one `ncu` run over the one-shot runner (evaluator.oneshot), which fills the inputs, warms the
target up once, and makes the one profiled call between cuProfilerStart and cuProfilerStop; ncu runs with
`--profile-from-start off`, so exactly the launches inside that bracket are profiled — every kernel the target
launches, under any name, and none of the runner's fill/transpose kernels or cuBLAS set-up. (A kernel-name regex
could not name an unknown candidate's kernels; a --launch-skip count would silently shift whenever the runner's
own launches change.) `--clock-control none` leaves the GPU's clocks as the timing sees them.

The result is a compact record (see docs/profiling.md): {"available": True, "n_kernels", "duration_us" (summed),
the longest kernel's metrics at the top level, "kernels": [...], "bottleneck": {...}, ...}, or
{"available": False, "reason": ...} when ncu is missing, the counters are not accessible, the run fails or
times out. Profiling never raises for those: the search goes on without metrics.
"""
from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from evaluator.gpu import visible_token
from evaluator.proc import run_in_group
from evaluator import ncu_parse as P
from evaluator.bottleneck import bottleneck
from evaluator.contract import ACCUMULATORS, check_shape
from evaluator.oneshot import BASELINES

DEFAULT_TIMEOUT = 180.0
MAX_LAUNCHES = 32  # a candidate launching more kernels than this per call is profiled on its first 32
RECORD_VERSION = 1  # bump when the record's fields or the metric set change: invalidates cached baselines


def ncu_path() -> str | None:
    """$CUDAL2_NCU (an explicit path; empty means "no ncu"), else ncu on PATH, under $CUDA_HOME, /usr/local/cuda."""
    env = os.environ.get("CUDAL2_NCU")
    if env is not None:
        return env if env and os.access(env, os.X_OK) else None
    found = shutil.which("ncu")
    if found:
        return found
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home and os.access(Path(home) / "bin" / "ncu", os.X_OK):
            return str(Path(home) / "bin" / "ncu")
    return None


@functools.lru_cache(maxsize=4)
def _version(exe: str) -> str | None:
    try:
        p = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return P.ncu_version(p.stdout + p.stderr)


def unavailable(reason: str, **extra) -> dict:
    return {"available": False, "reason": reason, **extra}


def _cache_root() -> Path:
    root = Path(os.environ.get("CUDAL2_CACHE", Path.home() / ".cache" / "cuda-l2"))
    d = root / "ncu"
    d.mkdir(parents=True, exist_ok=True)
    return d


class _GpuLock:
    """One ncu at a time per GPU across processes: two profilers on one GPU compete for its counters."""

    def __init__(self, gpu: int, timeout: float):
        # named by the machine's GPU, not this process's index of it: two processes under different
        # CUDA_VISIBLE_DEVICES share a lock only where they share the GPU
        self.path, self.timeout, self.f = _cache_root() / f"gpu{visible_token(gpu)}.lock", timeout, None

    def __enter__(self) -> bool:
        self.f = open(self.path, "w")
        end = time.monotonic() + self.timeout
        while True:
            try:
                fcntl.flock(self.f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                if time.monotonic() > end:
                    return False
                time.sleep(0.2)

    def __exit__(self, *exc) -> None:
        self.f.close()  # releases the lock


def _command(exe: str, metrics: list[str], native_so: str, target: str, shape, acc: str, status: str) -> list[str]:
    return [exe, "--csv", "--page", "raw", "--print-units", "base", "--metrics", ",".join(metrics),
            "--clock-control", "none", "--target-processes", "all", "--profile-from-start", "off",
            "--launch-count", str(MAX_LAUNCHES),
            sys.executable, "-m", "evaluator.oneshot", native_so, target, *map(str, shape), "--acc", acc,
            "--warmup", "1", "--profile-range", "--status", status]


def _run(cmd: list[str], timeout: float, env: dict) -> tuple[int | None, str]:
    """(return code or None on timeout, stdout+stderr). The whole process group dies on timeout."""
    return run_in_group(cmd, timeout, cwd=str(Path(__file__).resolve().parent.parent), env=env)


def profile_target(target: str, shape, native_so: str, acc: str = "fp32", timeout: float = DEFAULT_TIMEOUT,
                   gpu: int | None = None, raw_out: str | os.PathLike | None = None) -> dict:
    """Profile TARGET (a candidate .so or baseline:NAME) once. raw_out: also keep ncu's raw output there."""
    shape = check_shape(shape)
    if acc not in ACCUMULATORS:
        raise ValueError(f"acc must be one of {ACCUMULATORS}, got {acc!r}")
    exe = ncu_path()
    if exe is None:
        where = os.environ.get("CUDAL2_NCU")
        return unavailable(f"Nsight Compute (ncu) not found{f' at {where!r} ($CUDAL2_NCU)' if where else ''}: "
                           "install it with the CUDA toolkit or set CUDAL2_NCU; the search goes on without metrics")
    from evaluator.gpu import device_name, has_gpu

    if not has_gpu():
        return unavailable("no CUDA GPU visible: nothing to profile")
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = visible_token(gpu)
    metrics = P.metric_names()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="cudal2-ncu-") as tmp, _GpuLock(gpu or 0, timeout) as locked:
        if not locked:
            return unavailable(f"another profile held GPU {gpu or 0} for more than {timeout:g} s")
        status_path = os.path.join(tmp, "status.json")
        left = timeout - (time.monotonic() - started)
        if left < 5:
            return unavailable(f"waiting for GPU {gpu or 0} left no time of the {timeout:g} s limit")
        rc, text = _run(_command(exe, metrics, native_so, target, shape, acc, status_path), left, env)
        if raw_out:
            Path(raw_out).write_text(text)
        if rc is None:
            return unavailable(f"ncu did not finish within {timeout:g} s (killed)")
        status = _read_json(status_path)
    seconds = round(time.monotonic() - started, 2)
    reason = P.failure_reason(text)
    if status.get("exit") not in (0, None):
        return unavailable(f"the profiled run failed (exit {status['exit']}): {status.get('error') or 'call failed'}",
                           seconds=seconds)
    try:
        header, units, rows = P.parse_raw_csv(text)
    except P.NcuParseError as e:
        why = reason or P.error_lines(text) or str(e)
        return unavailable(f"ncu gave no metrics (exit {rc}): {why}", seconds=seconds,
                           output_tail=text[-1500:])
    if not rows:
        return unavailable(reason or f"ncu profiled no kernel (exit {rc})", seconds=seconds)
    kernels = [P.kernel_record(r, units) for r in rows]
    rec = {"available": True, "target": target if target.startswith("baseline:") else "candidate",
           "shape": list(shape), "acc": acc, "gpu": device_name(gpu or 0), "ncu_version": _version(exe),
           "clock_control": "none", "pid": status.get("pid"), "seconds": seconds,
           "record_version": RECORD_VERSION, **P.summarize(kernels)}
    if status.get("algo"):
        rec["algo"] = status["algo"]
    if len(rows) >= MAX_LAUNCHES:
        rec["truncated"] = f"only the first {MAX_LAUNCHES} launches of the call were profiled"
    missing = P.missing_metrics(header, metrics)
    if missing:
        rec["missing_metrics"] = missing
    rec["bottleneck"] = bottleneck(rec)
    return rec


def _read_json(path: str) -> dict:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}


def profile_candidate(so_path: str, shape, native_so: str, acc: str = "fp32", timeout: float = DEFAULT_TIMEOUT,
                      gpu: int | None = None) -> dict:
    if not so_path or not Path(so_path).exists():
        raise ValueError(f"no compiled candidate at {so_path!r}")
    return profile_target(str(so_path), shape, native_so, acc, timeout, gpu)


def _baseline_key(shape, native_so: str, acc: str, which: str, gpu: int | None) -> str:
    from evaluator.gpu import device_name

    m, n, k = shape
    parts = {"gpu": device_name(gpu or 0), "driver": _driver_version(), "native": Path(native_so).name,
             "ncu": _version(ncu_path() or ""), "shape": [m, n, k], "acc": acc, "which": which,
             "record": RECORD_VERSION, "metrics": P.metric_names()}
    if "autotune" in which:  # the autotuned algorithm can be re-chosen: key on the cached choice itself
        from evaluator.baselines import autotune_cache_dir

        suffix = f"_{m}x{n}x{k}_{acc}_{which.rsplit('-', 1)[1]}.json"
        parts["autotune"] = sorted(hashlib.sha1(p.read_bytes()).hexdigest()
                                   for p in autotune_cache_dir().glob("*" + suffix))
    return hashlib.sha1(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:20]


def _driver_version() -> int:
    from evaluator.gpu import _driver

    lib, v = _driver(), None
    if lib is not None:
        import ctypes

        c = ctypes.c_int(0)
        if lib.cuDriverGetVersion(ctypes.byref(c)) == 0:
            v = c.value
    return v or 0


def profile_baseline(shape, native_so: str, acc: str = "fp32", which: str = "cublaslt-heuristic-NN",
                     timeout: float = DEFAULT_TIMEOUT, gpu: int | None = None, use_cache: bool = True) -> dict:
    """The baseline's kernels under the same metric set; once per GPU/driver/shape/acc/baseline, then from disk."""
    if which not in BASELINES:
        raise ValueError(f"which must be one of {', '.join(BASELINES)}, got {which!r}")
    shape = check_shape(shape)
    if ncu_path() is None:
        return profile_target(f"baseline:{which}", shape, native_so, acc, timeout, gpu)
    from evaluator.gpu import has_gpu

    if not has_gpu():
        return unavailable("no CUDA GPU visible: nothing to profile")
    safe = re.sub(r"[^A-Za-z0-9]+", "-", which)
    path = _cache_root() / f"baseline-{shape[0]}x{shape[1]}x{shape[2]}-{acc}-{safe}-" \
                           f"{_baseline_key(shape, native_so, acc, which, gpu)}.json"
    if use_cache and path.exists():
        rec = _read_json(str(path))
        if rec.get("available"):
            return {**rec, "cached": True}
    rec = profile_target(f"baseline:{which}", shape, native_so, acc, timeout, gpu)
    if rec.get("available"):  # failures are not cached: they may be transient (a busy GPU, a timeout)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(rec))
        tmp.replace(path)
    return {**rec, "cached": False}
