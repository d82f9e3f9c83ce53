"""The NVIDIA baselines, as timed callables inside the worker: torch.matmul, cuBLAS and cuBLASLt (heuristic top-1
and AutoTuning), NN (B row-major) and TN (B column-major), for fp32 or fp16 accumulation."""
from __future__ import annotations

import json
import os
import random
import statistics
from pathlib import Path
from typing import Callable

from evaluator.buffers import OperandPool, OperandSet, Reference
from evaluator.lt_variations import lt_variations
from evaluator.native import Native, NativeError
from evaluator.timing import Profile, steady_calls

NAMES = ("torch", "cublas-NN", "cublas-TN", "cublaslt-heuristic-NN", "cublaslt-heuristic-TN",
         "cublaslt-autotune-NN", "cublaslt-autotune-TN")
# Ask cuBLASLt's heuristic for every algorithm it has for the problem (it returns fewer where it has fewer).
MAX_LT_ALGOS = 1024
# How a cached pick was made; a pick made another way is tuned again. "steady-3": the screening's leaders re-timed
# power-steady (short bursts after a neighbour's clock state rank big-shape algorithms wrongly, and screening picks
# of mid shapes ran up to 2.7% slower than the best algorithm), with the finalists kept so that the runners-up are
# timed beside the pick in every measurement: the pick is then made again in the measurement's own regime.
# "steady-4": as steady-3, over the heuristic's list and, where that list is short, the split-K, reduction-scheme,
# swizzling, tile and stage variations of evaluator.lt_variations.
AUTOTUNE_METHOD = "steady-4"
# Runners-up of each layout's AutoTuning timed beside its pick (named cublaslt-autotune-NN#2, ...); the
# "-max" figure and best NVIDIA take the fastest of them in the same rounds.
EXTRA_FINALISTS = 2
STEADY_FINALISTS = 4


class NativeCallable:
    def __init__(self, nat: Native, name: str, cid: int, detail: dict | None = None):
        self.nat, self.name, self.cid, self.detail = nat, name, cid, detail or {}

    def call(self, ops: OperandSet) -> int:
        return self.nat.call(self.cid, *ops.args)

    def time(self, ops: OperandSet | OperandPool, reps: int, hold: bool = True, sep: bool = False,
             graph: bool = False) -> float:
        """Milliseconds per call of `reps` calls; on a pool, call r uses set r (a pool never has fewer sets than
        the batches the timing asks of it)."""
        if isinstance(ops, OperandPool):
            return self.nat.time_rot(self.cid, ops.table(reps), reps, hold, sep, graph)
        if graph:
            return self.nat.time_graph(self.cid, *ops.args, reps, sep)
        return self.nat.time_batch(self.cid, *ops.args, reps, hold, sep)


class _CudaArray:
    def __init__(self, ptr: int, shape: tuple[int, int]):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": "<f2", "data": (ptr, False), "version": 3,
                                         "strides": None, "stream": None}


class TorchCallable:
    """torch.matmul(A, B, out=C) on the contract stream, over the same device buffers."""

    name = "torch"

    def __init__(self, nat: Native, m: int, n: int, k: int, acc16: bool):
        import torch

        # fp16 reduced-precision reductions would put torch in the fp16-accumulate class.
        torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = acc16
        self.torch, self.nat, self.m, self.n, self.k = torch, nat, m, n, k
        self.stream = torch.cuda.ExternalStream(nat.stream)
        self.detail = {"torch": torch.__version__, "fp16_reduced_precision_reduction": acc16}
        self._views: dict[tuple, tuple] = {}

    def _tensors(self, ops: OperandSet):
        key = ops.args  # addresses, not id(ops): a freed set's id can come back for a new set
        if key not in self._views:
            t = self.torch
            a = t.as_tensor(_CudaArray(ops.ptr["A"], (self.m, self.k)), device="cuda")
            b = t.as_tensor(_CudaArray(ops.ptr["B"], (self.k, self.n)), device="cuda")
            c = t.as_tensor(_CudaArray(ops.ptr["C"], (self.m, self.n)), device="cuda")
            if len(self._views) >= 256:  # views of freed sets: their addresses may come back for other buffers
                self._views = {}
            self._views[key] = (a, b, c)
        return self._views[key]

    def call(self, ops: OperandSet) -> int:
        a, b, c = self._tensors(ops)
        with self.torch.cuda.stream(self.stream):
            self.torch.matmul(a, b, out=c)
        return 0

    def time(self, ops: OperandSet | OperandPool, reps: int, hold: bool = True, sep: bool = False) -> float:
        sets = ops.sets if isinstance(ops, OperandPool) else [ops]
        views = [self._tensors(s) for s in sets[:reps]]
        nat = self.nat
        if hold:
            nat.ok("hold")
        nat.ok("record", 0)
        with self.torch.cuda.stream(self.stream):
            for r in range(reps):
                a, b, c = views[r % len(views)]
                self.torch.matmul(a, b, out=c)
                if sep:
                    nat.ok("separator")
        nat.ok("record", 1)
        nat.ok("release")
        ms = nat.elapsed_ms()
        if ms < 0:
            from evaluator.native import CallFailed

            raise CallFailed(-1, nat.last_error().decode())
        return ms / reps


def torch_available() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:
        return False


def autotune_cache_dir() -> Path:
    root = Path(os.environ.get("CUDAL2_CACHE", Path.home() / ".cache" / "cuda-l2"))
    d = root / "autotune"
    d.mkdir(parents=True, exist_ok=True)
    return d


def autotune_cache_entry(gpu: str, lt_version: int, shape: tuple[int, int, int], acc16: bool, layout: str,
                         min_rounds: int = 0) -> tuple[str, Path, dict | None]:
    """(key, cache file, the cached record if it is one for this key, made by AUTOTUNE_METHOD with at least
    `min_rounds` rounds; else None: a missing, damaged, older or shorter pick)."""
    m, n, k = shape
    key = f"{gpu}|lt{lt_version}|{m}x{n}x{k}|{'fp16' if acc16 else 'fp32'}|{layout}"
    path = autotune_cache_dir() / (key.replace("|", "_").replace(" ", "-").replace("/", "-") + ".json")
    try:
        rec = json.loads(path.read_text())
        if (rec.get("key") == key and rec.get("rounds", 0) >= min_rounds and rec.get("method") == AUTOTUNE_METHOD
                and isinstance(rec.get("algo"), str)):
            bytes.fromhex(rec["algo"])
            return key, path, rec
    except (OSError, ValueError, AttributeError):
        pass
    return key, path, None


def offered_lt_algos(nat: Native, shape: tuple[int, int, int], acc16: bool, tn: bool) -> tuple[list[bytes], dict]:
    """(cuBLASLt's heuristic's algorithms followed by the variations of evaluator.lt_variations where that list is
    short, where they came from: {"heuristic": count, "variations": count, and how the variations were found})."""
    m, n, k = shape
    algos = nat.lt_heuristics(int(tn), int(acc16), m, n, k, MAX_LT_ALGOS)
    if not algos:
        raise RuntimeError(f"cuBLASLt offered no algorithm for {m}x{n}x{k} {'TN' if tn else 'NN'}")
    try:
        extra, how = lt_variations(nat, shape, acc16, tn, algos)
    except NativeError as e:  # a cuBLASLt without the configuration API still has its heuristic's list
        extra, how = [], {"error": str(e)[:300]}
    return algos + extra, {"heuristic": len(algos), "variations": len(extra), **how}


def valid_lt_algos(nat: Native, shape: tuple[int, int, int], acc16: bool, tn: bool, ops: OperandSet,
                   ref: Reference, algos: list[bytes]) -> list[tuple[int, bytes]]:
    """[(callable id, algo)] of the offered `algos` (offered_lt_algos) that run and are exact on {0,1} inputs."""
    m, n, k = shape
    cands: list[tuple[int, bytes]] = []
    ops.fill("binary", 0xA11CE)
    ref.compute(ops)
    for algo in algos:
        cid = nat.register_lt(int(tn), int(acc16), m, n, k, algo)
        ops.poison_output()
        if nat.call(cid, *ops.args) != 0 or nat.sync() != 0:
            continue
        r = ref.compare(ops.ptr["C"], 2048.0)
        if r["nonfinite"] == 0 and r["exact_mismatches"] == 0:
            cands.append((cid, algo))
    return cands


def autotune_lt(nat: Native, gpu: str, lt_version: int, shape: tuple[int, int, int], acc16: bool, tn: bool,
                ops: OperandSet, ref: Reference, prof: Profile, progress: Callable[[str], None],
                finalists: int = STEADY_FINALISTS) -> tuple[bytes, dict]:
    """cuBLASLt-AutoTuning: time the algorithms the heuristic offers (with their variations where it offers few,
    offered_lt_algos) over shuffled rounds on fresh random inputs (the screening). Algorithms that fail or give
    wrong results on {0,1} inputs are dropped. The screening's `finalists` leaders are timed again power-steady (as
    a big-shape candidate is: each at its own clock) and the best of that is kept; `finalists` below 2 keeps the
    screening's best. The choice is cached per GPU, cuBLASLt version, shape, accumulator and layout, with the
    method that made it; only AUTOTUNE_METHOD's picks are reused."""
    m, n, k = shape
    rounds = prof.autotune_rounds
    layout = "TN" if tn else "NN"
    key, path, rec = autotune_cache_entry(gpu, lt_version, shape, acc16, layout, rounds)
    if rec is not None and isinstance(rec.get("detail"), dict):  # anything else is tuned again
        return bytes.fromhex(rec["algo"]), {**rec["detail"], "cached": True}
    algos, origin = offered_lt_algos(nat, shape, acc16, tn)
    cands = valid_lt_algos(nat, shape, acc16, tn, ops, ref, algos)
    if not cands:
        raise RuntimeError(f"no cuBLASLt algorithm passed the exact check for {key}")
    rng = random.Random(k * 1_000_003 + n * 1009 + m)
    times: dict[int, list[float]] = {cid: [] for cid, _ in cands}
    est = {cid: max(nat.time_batch(cid, *ops.args, 1, True), 1e-4) for cid, _ in cands}
    for r in range(rounds):
        progress(f"autotune {layout} round {r + 1}/{rounds}")
        ops.fill("normal", 0xB0B + r)
        order = list(times)
        rng.shuffle(order)
        for cid in order:
            reps = max(1, min(50, int(0.2 / est[cid])))
            times[cid].append(nat.time_batch(cid, *ops.args, reps, True))
    ranked = sorted(times, key=lambda c: statistics.median(times[c]))
    screened = list(ranked)
    best_cid = ranked[0]
    n_heur = origin["heuristic"]
    detail: dict = {"algos_offered": len(algos), "algos_valid": len(cands), "algos_heuristic": n_heur,
                    "algos_variations": origin["variations"],
                    "variations_valid": sum(algos.index(a) >= n_heur for _, a in cands)}
    how = {name: v for name, v in origin.items() if name not in ("heuristic", "variations")}
    if how:
        detail["variations"] = how
    if finalists > 1 and len(ranked) > 1:
        leaders = ranked[:finalists]
        medians = steady_medians(nat, ops, leaders, est, prof, prof.autotune_rounds, rng,
                                 lambda r: progress(f"autotune {layout} power-steady round {r}"))
        best_cid = min(leaders, key=medians.__getitem__)
        detail["steady"] = {"finalists": len(leaders), "chosen_finalist": leaders.index(best_cid),
                            "finalist_median_ms": [round(medians[c], 5) for c in leaders]}
        ranked = sorted(leaders, key=medians.__getitem__) + ranked[len(leaders):]
    detail["finalist_algos"] = [dict(cands)[c].hex() for c in ranked[:1 + EXTRA_FINALISTS]]
    best_algo = dict(cands)[best_cid]
    offered_rank = algos.index(best_algo)
    detail.update({"chosen_heuristic_rank": offered_rank, "chosen_variation": offered_rank >= n_heur,
                   "valid_rank": [a for _, a in cands].index(best_algo), "screening_rank": screened.index(best_cid),
                   "median_ms": statistics.median(times[best_cid]), "rounds": rounds, "cached": False})
    tmp = path.with_suffix(".tmp")
    method = AUTOTUNE_METHOD if "steady" in detail or len(ranked) == 1 else "screening"
    tmp.write_text(json.dumps({"key": key, "algo": best_algo.hex(), "rounds": rounds, "method": method,
                               "detail": detail}))
    tmp.replace(path)
    return best_algo, detail


def steady_medians(nat: Native, ops: OperandSet, cids: list[int], est: dict[int, float], prof: Profile, rounds: int,
                   rng: random.Random, progress: Callable[[int], None] = lambda r: None) -> dict[int, float]:
    """Median ms per call of each callable timed power-steady, as evaluator.timing times a big-shape candidate: an
    untimed lead-in long enough to reach its own clock at the power limit, then a timed held batch; shuffled rounds."""
    steady: dict[int, list[float]] = {cid: [] for cid in cids}
    for r in range(rounds):
        progress(r + 1)
        order = list(cids)
        rng.shuffle(order)
        for cid in order:
            lead, reps = steady_calls(prof, est[cid])
            nat.time_batch(cid, *ops.args, lead, False)
            steady[cid].append(nat.time_batch(cid, *ops.args, reps))
    return {cid: statistics.median(v) for cid, v in steady.items()}


def build_baselines(nat: Native, gpu: str, lt_version: int, shape: tuple[int, int, int], acc16: bool,
                    ops: OperandSet, ref: Reference, prof: Profile,
                    progress: Callable[[str], None]) -> dict[str, object]:
    m, n, k = shape
    out: dict[str, object] = {}
    if torch_available():
        out["torch"] = TorchCallable(nat, m, n, k, acc16)
    for tn, lay in ((0, "NN"), (1, "TN")):
        cid = nat.register_cublas(tn, int(acc16), m, n, k)
        out[f"cublas-{lay}"] = NativeCallable(nat, f"cublas-{lay}", cid, {"algo": "CUBLAS_GEMM_DEFAULT_TENSOR_OP"})
        cid = nat.register_lt(tn, int(acc16), m, n, k, None)
        out[f"cublaslt-heuristic-{lay}"] = NativeCallable(nat, f"cublaslt-heuristic-{lay}", cid,
                                                          {"algo": "heuristic top-1", "workspace_mib": 64})
    for tn, lay in ((0, "NN"), (1, "TN")):
        algo, detail = autotune_lt(nat, gpu, lt_version, shape, acc16, bool(tn), ops, ref, prof, progress)
        cid = nat.register_lt(tn, int(acc16), m, n, k, algo)
        out[f"cublaslt-autotune-{lay}"] = NativeCallable(nat, f"cublaslt-autotune-{lay}", cid, detail)
        runners_up = [bytes.fromhex(a) for a in detail.get("finalist_algos", []) if a != algo.hex()]
        for i, extra in enumerate(runners_up[:EXTRA_FINALISTS], start=2):
            name = f"cublaslt-autotune-{lay}#{i}"
            out[name] = NativeCallable(nat, name, nat.register_lt(tn, int(acc16), m, n, k, extra),
                                       {"finalist": i, "algo": extra.hex()})
    return out
