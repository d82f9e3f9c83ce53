"""One call of one callable in a fresh process: the program that compute-sanitizer and Nsight Compute wrap.

    python -m evaluator.oneshot NATIVE_SO TARGET M N K [--acc fp32|fp16] [--warmup N] [--profile-range]
                                [--status FILE]

TARGET is a candidate's `.so`, or `baseline:NAME` for one of the NVIDIA baselines (cublas-NN, cublas-TN,
cublaslt-heuristic-NN, cublaslt-heuristic-TN, cublaslt-autotune-NN, cublaslt-autotune-TN; the autotuned choice is
read from the evaluator's autotune cache, so the baselines must have been timed for that shape first).

Allocations are exact-size and unguarded (a sanitizer must see a write past the end as a write into nothing).
The inputs are filled and B transposed before anything else; with --warmup the target is called that many times
first, so lazy module loading and library set-up stay outside; with --profile-range the one measured call is
bracketed by cuProfilerStart/cuProfilerStop, which is what `ncu --profile-from-start off` keys on. Everything
the runner itself launches happens outside that bracket, whatever its kernels are called.

Exit status: 0 the call returned 0 and the stream is clean; 1 the call failed; 2 set-up failed; 3 bad target.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys

BASELINES = ("cublas-NN", "cublas-TN", "cublaslt-heuristic-NN", "cublaslt-heuristic-TN", "cublaslt-autotune-NN",
             "cublaslt-autotune-TN")


class TargetError(RuntimeError):
    pass


def _driver() -> ctypes.CDLL:
    for name in ("libcuda.so.1", "libcuda.so"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    raise TargetError("libcuda is not loadable")


def register_target(nat, target: str, m: int, n: int, k: int, acc16: bool) -> tuple[int, dict]:
    """A callable id in the native library for TARGET, and facts about it (e.g. the cuBLASLt algorithm's source)."""
    if not target.startswith("baseline:"):
        fn = ctypes.cast(ctypes.CDLL(target).hgemm, ctypes.c_void_p).value
        return nat.register_candidate(fn, m, n, k), {"kind": "candidate"}
    name = target[len("baseline:"):]
    if name not in BASELINES:
        raise TargetError(f"unknown baseline {name!r}; one of {', '.join(BASELINES)}")
    lib, _, layout = name.rpartition("-")
    tn = int(layout == "TN")
    if lib == "cublas":
        return nat.register_cublas(tn, int(acc16), m, n, k), {"kind": "cublas", "algo": "CUBLAS_GEMM_DEFAULT_TENSOR_OP"}
    if lib == "cublaslt-heuristic":
        return nat.register_lt(tn, int(acc16), m, n, k, None), {"kind": "cublaslt", "algo": "heuristic top-1"}
    algo = _cached_autotune_algo(nat, m, n, k, acc16, layout)
    return nat.register_lt(tn, int(acc16), m, n, k, algo), {"kind": "cublaslt", "algo": "autotune (cached)",
                                                            "algo_hex": algo.hex()}


def _cached_autotune_algo(nat, m: int, n: int, k: int, acc16: bool, layout: str) -> bytes:
    # Re-tuning here would take seconds of timing inside a profile; an older method's pick is not what is timed now.
    from evaluator.baselines import autotune_cache_entry
    from evaluator.gpu import device_name

    key, path, rec = autotune_cache_entry(device_name(0), nat.info()["cublaslt"], (m, n, k), acc16, layout)
    if rec is None:
        raise TargetError(f"no autotuned cuBLASLt choice cached for {key} ({path}); time the baselines for this "
                          "shape first (cudal2 baselines / evaluate)")
    return bytes.fromhex(rec["algo"])


def run_once(native_so: str, target: str, m: int, n: int, k: int, *, acc16: bool = False, warmup: int = 0,
             profile_range: bool = False, status_path: str | None = None) -> int:
    from evaluator.native import Native

    status: dict = {"pid": os.getpid(), "target": target, "shape": [m, n, k], "acc": "fp16" if acc16 else "fp32"}

    def finish(code: int, **kw) -> int:
        status.update(kw, exit=code)
        if status_path:
            with open(status_path, "w") as f:
                json.dump(status, f)
        if kw.get("error"):
            print(kw["error"], file=sys.stderr)
        return code

    nat = Native(native_so, 0)
    try:
        cid, facts = register_target(nat, target, m, n, k, acc16)
    except (TargetError, OSError, AttributeError) as e:
        return finish(3, error=f"target {target!r}: {e}")
    except Exception as e:  # the native library's own set-up errors (cuBLASLt without an algorithm, ...)
        return finish(2, error=f"setting up {target!r}: {e}")
    status.update(facts)
    ptrs = [nat.plain_alloc(2 * e) for e in (m * k, k * n, k * n, m * n)]
    if not all(ptrs):
        return finish(2, error="allocation failed")
    nat.ok("fill_normal", ptrs[0], m * k, 1, 1.0)
    nat.ok("fill_normal", ptrs[1], k * n, 2, 1.0)
    nat.ok("transpose", ptrs[1], ptrs[2], k, n)
    if nat.sync() != 0:
        return finish(2, error=f"input set-up failed: {nat.last_error().decode(errors='replace')}")
    for i in range(warmup):
        rc = nat.call(cid, *ptrs)
        err = nat.sync()
        if rc != 0 or err != 0:
            return finish(1, rc=rc, stream_error=err, error=f"warm-up call {i + 1} returned {rc}, stream status {err}")
    drv = _driver() if profile_range else None
    if drv is not None and drv.cuProfilerStart() != 0:
        return finish(2, error="cuProfilerStart failed")
    rc = nat.call(cid, *ptrs)
    err = nat.sync()
    if drv is not None:
        drv.cuProfilerStop()
    print(f"hgemm returned {rc}, stream status {err}", file=sys.stderr)
    return finish(0 if rc == 0 and err == 0 else 1, rc=rc, stream_error=err)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m evaluator.oneshot", description=__doc__.split("\n\n")[0])
    ap.add_argument("native_so")
    ap.add_argument("target", help="a candidate .so, or baseline:NAME")
    ap.add_argument("m", type=int)
    ap.add_argument("n", type=int)
    ap.add_argument("k", type=int)
    ap.add_argument("--acc", choices=("fp32", "fp16"), default="fp32")
    ap.add_argument("--warmup", type=int, default=0)
    ap.add_argument("--profile-range", action="store_true")
    ap.add_argument("--status", help="write a JSON status (pid, return code, target facts) here")
    a = ap.parse_args(argv)
    return run_once(a.native_so, a.target, a.m, a.n, a.k, acc16=a.acc == "fp16", warmup=a.warmup,
                    profile_range=a.profile_range, status_path=a.status)


if __name__ == "__main__":
    sys.exit(main())
