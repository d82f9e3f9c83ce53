"""The GPU worker process: one per GPU, reused while healthy, replaced when a candidate poisons it.

Protocol: JSON lines. Requests arrive on stdin; progress events and the result go out on the process's original
stdout, which is moved away from fd 1 first so that anything a candidate prints lands on stderr instead of in the
protocol. After a CUDA error the worker answers with "poisoned": true and exits: its context is not trusted again.
"""
from __future__ import annotations

import argparse
import ctypes
import dataclasses
import json
import os
import random
import sys
import time
import traceback

from evaluator import record as R
from evaluator.timing import RIVAL


class Worker:
    def __init__(self, native_so: str, out):
        from evaluator.native import Native

        self.out = out
        self.nat = Native(native_so, 0)
        self.info = self.nat.info()
        from evaluator.gpu import device_name, nvidia_smi_query

        self.info["name"] = device_name(0)
        # the UUID names the physical GPU: between two lent H200s one cuBLASLt algorithm measured 2.05 and 2.24 us on
        # the same tiny shape (H200s, 2026-11-24), so a figure is traceable to its machine
        smi = nvidia_smi_query("driver_version,clocks.max.sm,clocks.max.mem,uuid,power.limit")
        if smi:
            self.info.update(driver_version=smi[0], max_sm_clock_mhz=smi[1], max_mem_clock_mhz=smi[2],
                             gpu_uuid=smi[3], power_limit_w=smi[4])

    def send(self, obj: dict) -> None:
        self.out.write(json.dumps(obj) + "\n")
        self.out.flush()

    def progress(self, msg: str) -> None:
        self.send({"event": "progress", "msg": msg})

    def gpu_facts(self) -> dict:
        from evaluator.gpu import nvidia_smi_query

        facts = dict(self.info)
        now = nvidia_smi_query("clocks.sm,clocks.mem,temperature.gpu,power.draw")
        if now:
            facts.update(sm_clock_mhz=now[0], mem_clock_mhz=now[1], temperature_c=now[2], power_w=now[3])
        return facts

    # -- requests -----------------------------------------------------------------------------------------------
    def handle(self, req: dict) -> dict:
        op = req.get("op")
        if op == "ping":
            return {"status": "ok", "gpu": self.info}
        if op == "evaluate":
            return self.evaluate(req)
        if op == "baselines":
            return self.baselines_only(req)
        return {"status": R.ERROR, "reason": f"unknown op {op!r}"}

    def _setup(self, req: dict):
        from evaluator.baselines import build_baselines
        from evaluator.buffers import OperandSet, Reference
        from evaluator.timing import PROFILES

        m, n, k = req["shape"]
        acc16 = req.get("acc", "fp32") == "fp16"
        prof = PROFILES[req.get("profile", "quick")]
        ops = OperandSet(self.nat, m, n, k, snapshots=False)
        ref = Reference(self.nat, m, n, k)
        try:
            base = build_baselines(self.nat, self.info["name"], self.info["cublaslt"], (m, n, k), acc16, ops, ref, prof,
                                   self.progress)
        except Exception:
            ops.free()
            ref.free()
            raise
        return (m, n, k), acc16, prof, ops, ref, base

    def baselines_only(self, req: dict) -> dict:
        from evaluator.timing import measure, summarise

        from evaluator.buffers import OperandPool

        shape, acc16, prof, ops, ref, base = self._setup(req)
        pool = None
        try:
            ops.free()
            pool = OperandPool(self.nat, *shape)
            rng = random.Random(int(req.get("seed", 1)))
            ref_name = "cublas-NN"
            times, meta = measure(self.nat, base, ref_name, pool, req.get("mode", "offline"), prof, rng,
                                  self.progress, int(req.get("seed", 1)))
            details = {n: getattr(c, "detail", {}) for n, c in base.items()}
            cand_t, others = summarise(times, ref_name, details)
            others[ref_name] = cand_t
            return {"status": R.OK, "baselines": {k: _asdict(v) for k, v in others.items()}, "timing_meta": meta,
                    "gpu": self.gpu_facts()}
        finally:
            if pool is not None:
                pool.free()
            ops.free()
            ref.free()
            self.nat.release_callables()

    def evaluate(self, req: dict) -> dict:
        from evaluator import stateful
        from evaluator.buffers import OperandPool
        from evaluator.checks import Checker, CudaFault, Unsupported
        from evaluator.timing import REGIMES, measure, summarise

        t_start = time.perf_counter()
        seed = int(req.get("seed", random.SystemRandom().randrange(1 << 40)))
        shape, acc16, prof, ops, ref, base = self._setup(req)
        libs: list = []  # the loaded libraries stay referenced while their kernels can still be called
        try:
            cand = self._load_callable(req["so_path"], "candidate", shape, libs)
            # Rivals: kernels that passed every check in an earlier evaluation, timed round by round beside this one
            # on the same clock (a tournament of leaders); only their timed output is checked again here.
            rivals = {RIVAL + name: self._load_callable(so, RIVAL + name, shape, libs)
                      for name, so in (req.get("rivals") or {}).items()}
            checker = Checker(self.nat, cand, base, shape, acc16, seed, prof.draws, self.progress)
            result: dict = {"gpu": self.gpu_facts(), "seed": seed}
            ops.free()  # the checks use operand sets at fresh addresses
            phases = req.get("phases", ["checks", "timing"])
            try:
                if "checks" in phases:
                    checker.run(ref)
            except Unsupported as e:
                return {**result, "status": R.UNSUPPORTED_SHAPE, "reason": str(e), "checks": _checks(checker)}
            except CudaFault as e:
                return {**result, "status": R.CRASH, "reason": str(e), "checks": _checks(checker), "poisoned": True}
            failed = [c for c in checker.checks if not c.passed]
            if failed:
                escaped = any(c.name == "work_completes_on_stream" for c in failed)
                status = R.ESCAPED_WORK if escaped else R.INCORRECT
                return {**result, "status": status, "checks": _checks(checker),
                        "reason": "; ".join(f"{c.name}: {c.detail}" for c in failed)}
            if "timing" not in phases:
                return {**result, "status": R.OK, "checks": _checks(checker), "timed": False}
            # Timing on operand sets at new addresses: one per call of a batch, refilled before every batch.
            ops = OperandPool(self.nat, *shape)
            callables = {"candidate": cand, **rivals, **base}
            if req.get("rounds"):  # at least that many: the profile's round budget and cap give way
                n = int(req["rounds"])
                prof = dataclasses.replace(prof, steady_rounds=n, min_rounds=max(prof.min_rounds, n),
                                           max_rounds=max(prof.max_rounds, n))
            try:
                mode = req.get("mode", "offline")
                times, meta = measure(self.nat, callables, "candidate", ops, mode, prof, random.Random(seed),
                                      self.progress, seed)
                outputs = meta["outputs"]
                checker.add("timed_outputs_verified", outputs["candidate"]["passed"], outputs["candidate"]["detail"],
                            **{k: v for k, v in outputs["candidate"].items() if k not in ("passed", "detail")})
                if outputs["candidate"]["passed"]:
                    self.progress("state probe: repeated against fresh inputs")
                    held = {n: n not in meta["unheld"] for n in meta["reps"]}
                    verdict = stateful.probe(callables, "candidate", ops, meta["reps"], held,
                                             REGIMES[mode]["separator"], seed + 909)
                    checker.add("stateless_timing", verdict.pop("passed"), verdict.pop("detail"), **verdict)
                if all(c.passed for c in checker.checks):
                    checker.timed_output(ops.first, ref, meta["reps"]["candidate"])
                refused = {}
                for name, rc in rivals.items():  # a rival's verdict is its own, not one of the candidate's checks
                    if not outputs[name]["passed"]:
                        refused[name] = outputs[name]["detail"]
                        continue
                    verdict = checker.timed_output(ops.first, ref, meta["reps"][name], cand=rc, label=name,
                                                   record=False)
                    if not verdict.passed:
                        refused[name] = verdict.detail
            except Exception as e:  # a fault while timing is still the candidate's fault
                err = self.nat.sync()
                if err:
                    return {**result, "status": R.CRASH, "reason": f"CUDA error {err} while timing: {e}",
                            "checks": _checks(checker), "poisoned": True}
                raise
            failed = [c for c in checker.checks if not c.passed]
            if failed:  # no figure of a refused kernel reaches the record
                return {**result, "status": R.INCORRECT, "checks": _checks(checker),
                        "reason": "; ".join(f"{c.name}: {c.detail}" for c in failed)}
            times = {n: ts for n, ts in times.items() if n not in refused}
            details = {n: getattr(c, "detail", {}) for n, c in callables.items()}
            cand_t, others = summarise(times, "candidate", details, seed)
            if rivals:  # round by round, so that each leader compares with the baselines of its own rounds
                meta["rounds_us"] = {n: [round(t, 4) for t in ts] for n, ts in times.items()}
                meta["rivals_refused"] = {n[len(RIVAL):]: d for n, d in refused.items()}
            result.update(status=R.OK, checks=_checks(checker), candidate=_asdict(cand_t),
                          baselines={k: _asdict(v) for k, v in others.items() if not k.startswith(RIVAL)},
                          rivals={k[len(RIVAL):]: _asdict(v) for k, v in others.items() if k.startswith(RIVAL)},
                          timing_meta=meta)
            result["worker_seconds"] = time.perf_counter() - t_start
            return result
        finally:
            ops.free()
            ref.free()
            self.nat.release_callables()

    def _load_callable(self, so_path: str, name: str, shape: tuple[int, int, int], libs: list):
        """The `hgemm` of a kernel library, registered for `shape`; the library handle is appended to `libs`, which
        the caller keeps until its callables are released."""
        from evaluator.baselines import NativeCallable

        lib = ctypes.CDLL(so_path)
        libs.append(lib)
        fn = ctypes.cast(lib.hgemm, ctypes.c_void_p).value
        return NativeCallable(self.nat, name, self.nat.register_candidate(fn, *shape))


def _asdict(t) -> dict:
    return dataclasses.asdict(t)


def _checks(checker) -> list[dict]:
    return [dataclasses.asdict(c) for c in checker.checks]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="cuda-l2 GPU worker (started by evaluator.pool)")
    ap.add_argument("--native", required=True)
    args = ap.parse_args(argv)
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # candidate printf / std::cout go to stderr, never into the protocol
    sys.stdout = sys.stderr
    try:
        w = Worker(args.native, out)
    except Exception as e:
        out.write(json.dumps({"event": "fatal", "reason": f"worker start failed: {e}"}) + "\n")
        out.flush()
        return 3
    w.send({"event": "ready", "gpu": w.info})
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
        except ValueError:
            w.send({"event": "result", "id": None, "result": {"status": R.ERROR, "reason": "bad request"}})
            continue
        try:
            res = w.handle(req)
        except Exception as e:
            err = w.nat.sync()
            res = {"status": R.CRASH if err else R.ERROR, "reason": f"{type(e).__name__}: {e}",
                   "traceback": traceback.format_exc()[-3000:], "poisoned": bool(err)}
        w.send({"event": "result", "id": req.get("id"), "result": res})
        if res.get("poisoned"):
            return 4
    return 0


if __name__ == "__main__":
    sys.exit(main())
