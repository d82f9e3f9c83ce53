#!/usr/bin/env python3
"""Sustained time, SM clock and board power of family configs beside cuBLASLt-AutoTuning (GPU machine).

Big GEMMs run back to back hold a GPU at its power limit, where the SM clock follows the kernel's power: two
kernels that need the same cycles per call can differ in time by their energy per cycle. This separates the two
(docs/design/builtin_policy.md, the power-limit rule).

    python3 scripts/sustained_power.py SPEC.json --out DIR [--lead-s 0.5] [--timed-s 1.5] [--rounds 2] [--separator]

SPEC.json: {"MxNxK": {"target name": {"family": ..., "params": {...}}, ...}, ...}. Every config must first pass
every check of the evaluator (evaluator.api.evaluate, quick profile, in its own worker process); one that does not
is reported and left out. A target may instead be a contract file wrong by design, {"file": "x.cu", "probe": "why"}
(a path relative to the spec's folder): an ablation that leaves out the loads, the MMAs or the stores, to see what
each costs in energy. It is compiled and timed without the checks, and its entry under "checks" says so. Then, in
this process, each target and cuBLASLt-AutoTuning NN and TN (`lt-NN`, `lt-TN`) runs `lead_s` untimed and `timed_s`
timed, one after another, while NVML is read every `sample_ms`; the rounds alternate forward and reverse order.
Per target and round: ms per call (CUDA events over back-to-back batches), the median SM clock and board power and
the peak temperature over the second half of the timed window, and kcycles per call (ms × MHz) and mJ per call
(ms × W). The results go to DIR/sustained.json after each shape.

--separator puts the evaluator's ordinary empty kernel after every call, as its offline timing does, and takes the
separators' own time (a held batch of them, timed after each window) out of the figure. Back to back without it, a
kernel launched with programmatic dependent launch overlaps its prologue with its own previous call, which no
caller's stream offers it; with it, the figure is the one the evaluator's offline mode measures, held longer.
"""
from __future__ import annotations

import argparse
import ctypes
import datetime
import json
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

BASELINE = "cublaslt-autotune-max"
LT = {"lt-NN": "cublaslt-autotune-NN", "lt-TN": "cublaslt-autotune-TN"}
BATCH_MS = 40.0  # one timed batch; the host sync between batches idles the GPU for well under 0.1% of it


def parse_spec(spec: dict, arch: str, folder: Path = Path(".")) -> list[tuple[tuple[int, int, int], dict, dict]]:
    """[(shape, {target: source}, {probe target: why it is unchecked})]; raises ValueError naming the bad entry."""
    from agent.families import render
    from agent.shapes import parse_shape_line

    if not isinstance(spec, dict) or not spec:
        raise ValueError('the spec must be a non-empty object {"MxNxK": {"name": {"family": ..., "params": ...}}}')
    out = []
    for key, targets in spec.items():
        try:
            shape = parse_shape_line(key)
        except ValueError as e:
            raise ValueError(f"{key!r} is not a shape (write it as MxNxK): {e}") from None
        if not isinstance(targets, dict) or not targets:
            raise ValueError(f"{key}: give at least one target")
        srcs, probes = {}, {}
        for name, cfg in targets.items():
            if name in LT:
                raise ValueError(f"{key}: {name!r} is the name of a baseline")
            if isinstance(cfg, dict) and "file" in cfg:
                if not isinstance(cfg.get("probe"), str) or not cfg["probe"].strip():
                    raise ValueError(f"{key}/{name}: a file target needs 'probe', saying why it runs unchecked")
                try:
                    srcs[name] = (folder / cfg["file"]).read_text()
                except (OSError, TypeError) as e:
                    raise ValueError(f"{key}/{name}: cannot read {cfg['file']!r}: {e}") from None
                probes[name] = cfg["probe"].strip()
                continue
            try:
                srcs[name] = render(cfg["family"], cfg["params"], shape, arch)
            except (KeyError, TypeError) as e:
                raise ValueError(f"{key}/{name}: needs 'family' and 'params' ({e})") from e
            except ValueError as e:
                raise ValueError(f"{key}/{name}: refused: {e}") from e
        out.append((shape, srcs, probes))
    return out


class Sampler:
    """SM clock (MHz), board power (W) and temperature (°C) from NVML every `period_s`, on a thread."""

    def __init__(self, period_s: float):
        self.nvml = ctypes.CDLL("libnvidia-ml.so.1")
        self._ok(self.nvml.nvmlInit_v2(), "init")
        self.dev = ctypes.c_void_p()
        self._ok(self.nvml.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(self.dev)), "device handle")
        self.period_s, self.samples, self._stop = period_s, [], threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _ok(self, rc: int, what: str) -> None:
        if rc != 0:
            raise RuntimeError(f"NVML {what} failed (nvmlReturn_t {rc})")

    def read(self) -> tuple[float, float, float]:
        clk, mw, temp = ctypes.c_uint(), ctypes.c_uint(), ctypes.c_uint()
        self._ok(self.nvml.nvmlDeviceGetClockInfo(self.dev, 1, ctypes.byref(clk)), "SM clock")  # NVML_CLOCK_SM
        self._ok(self.nvml.nvmlDeviceGetPowerUsage(self.dev, ctypes.byref(mw)), "power")
        self._ok(self.nvml.nvmlDeviceGetTemperature(self.dev, 0, ctypes.byref(temp)), "temperature")
        return float(clk.value), mw.value / 1000.0, float(temp.value)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.perf_counter(), *self.read()))
            self._stop.wait(self.period_s)

    def start(self) -> Sampler:
        self.read()  # fail here, on the main thread, if NVML cannot answer
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def window(self, t0: float, t1: float) -> dict:
        sel = [s for s in self.samples if t0 <= s[0] <= t1]
        if not sel:
            return {"samples": 0}
        return {"samples": len(sel), "clk_mhz": statistics.median(s[1] for s in sel),
                "power_w": round(statistics.median(s[2] for s in sel), 1), "temp_c": max(s[3] for s in sel)}


def run_for(c, ops, seconds: float, est_ms: float, sep: bool = False) -> tuple[float, int]:
    """Back-to-back unheld batches of `c` for about `seconds`, each call followed by the separator if `sep`: (ms per
    call, separator included, calls)."""
    reps = max(1, min(200, round(BATCH_MS / est_ms)))
    total_ms, calls, end = 0.0, 0, time.perf_counter() + seconds
    while time.perf_counter() < end:
        total_ms += c.time(ops, reps, False, sep) * reps
        calls += reps
    return total_ms / calls, calls


def measure_shape(nat, gpu: str, lt_version: int, shape, callables: dict, acc16: bool, a, sampler: Sampler) -> list:
    from evaluator.baselines import build_baselines
    from evaluator.buffers import OperandSet, Reference
    from evaluator.timing import PROFILES

    ops = OperandSet(nat, *shape, snapshots=False)
    ref = Reference(nat, *shape)
    try:
        ops.fill("normal", 1)
        base = build_baselines(nat, gpu, lt_version, shape, acc16, ops, ref, PROFILES["quick"], lambda msg: None)
        ops.fill("normal", 1)  # autotuning leaves its own draws behind; power depends on the data, so time on these
        targets = {**callables, **{short: base[full] for short, full in LT.items()}}
        est = {n: max(c.time(ops, 3, False, False), 1e-4) for n, c in targets.items()}
        if min(est[n] for n in LT) < 0.05:
            print(f"  note: {'x'.join(map(str, shape))} takes under 0.05 ms a call in cuBLASLt; it may not reach the"
                  " power limit, where this measurement matters", flush=True)
        rows, order = [], list(targets)
        for rnd in range(a.rounds):
            for name in (order if rnd % 2 == 0 else order[::-1]):
                run_for(targets[name], ops, a.lead_s, est[name], a.separator)
                t0 = time.perf_counter()
                ms, calls = run_for(targets[name], ops, a.timed_s, est[name], a.separator)
                t1 = time.perf_counter()
                sep_ms = nat.time_batch(-1, *ops.args, 200, True, True) if a.separator else 0.0
                ms -= sep_ms
                # the driver may average board power over up to ~1 s: read the window's second half, which the
                # lead-in and first half separate from the previous target
                w = sampler.window(t0 + 0.5 * (t1 - t0), t1)
                row = {"target": name, "round": rnd, "ms": round(ms, 5), "calls": calls, **w}
                if a.separator:
                    row["separator_us"] = round(1e3 * sep_ms, 3)
                if "clk_mhz" in w:
                    row["kcycles"] = round(ms * w["clk_mhz"], 1)  # ms × MHz = thousands of cycles
                    row["mj"] = round(ms * w["power_w"], 2)  # ms × W = mJ: what a call costs at the power limit
                rows.append(row)
                print(f"  {name:20s} round {rnd}: {ms:.5f} ms at {w.get('clk_mhz', '?')} MHz, "
                      f"{w.get('power_w', '?')} W", flush=True)
        return rows
    finally:
        ops.free()
        ref.free()


def summary(rows: list[dict]) -> dict:
    """Per target: mean ms over rounds and its speedup against the faster cuBLASLt layout."""
    by: dict[str, list[dict]] = {}
    for r in rows:
        by.setdefault(r["target"], []).append(r)
    ms = {n: statistics.mean(r["ms"] for r in rs) for n, rs in by.items()}
    lt = min(ms[n] for n in LT if n in ms)
    return {n: {"ms": round(v, 5), "vs_lt": round(lt / v, 4),
                "clk_mhz": statistics.median(r.get("clk_mhz", 0) for r in by[n]),
                "kcycles": round(statistics.mean(r.get("kcycles", 0) for r in by[n]), 1),
                "mj": round(statistics.mean(r.get("mj", 0) for r in by[n]), 2)} for n, v in ms.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("spec", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--acc", choices=["fp32", "fp16"], default="fp32")
    ap.add_argument("--arch", default="sm_90a")
    ap.add_argument("--lead-s", type=float, default=0.5, help="untimed run before each timed window")
    ap.add_argument("--timed-s", type=float, default=1.5)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--sample-ms", type=float, default=50.0)
    ap.add_argument("--separator", action="store_true",
                    help="an ordinary empty kernel after every call, its own time taken out (as offline timing)")
    a = ap.parse_args()
    try:
        jobs = parse_spec(json.loads(a.spec.read_text()), a.arch, a.spec.parent)
    except (OSError, ValueError) as e:  # json.JSONDecodeError is a ValueError
        print(f"sustained_power: {a.spec}: {e}", file=sys.stderr)
        return 2
    from evaluator.gpu import gpu_missing

    if gpu_missing("sustained_power"):
        return 2
    from evaluator.api import evaluate
    from evaluator.baselines import NativeCallable
    from evaluator.compile import compile_many
    from evaluator.gpu import device_name
    from evaluator.native import Native, build

    a.out.mkdir(parents=True, exist_ok=True)
    nat = Native(build(a.arch), 0)
    info, gpu = nat.info(), device_name(0)
    result = {"device": gpu, "date": datetime.date.today().isoformat(), "acc": a.acc,
              "method": {"lead_s": a.lead_s, "timed_s": a.timed_s, "rounds": a.rounds, "sample_ms": a.sample_ms,
                         "separator": a.separator},
              "shapes": {}}
    unique = sorted({s for _, srcs, _ in jobs for s in srcs.values()})
    built = dict(zip(unique, compile_many(unique, a.arch)))  # in parallel, into the cache
    sampler = Sampler(a.sample_ms / 1e3).start()
    libs = []  # the candidates' libraries stay loaded while their callables are registered
    try:
        for shape, srcs, probes in jobs:
            key = "x".join(map(str, shape))
            print(key, flush=True)
            checks, callables = {}, {}
            for name, src in srcs.items():
                if name in probes:
                    so, ok = built[src].so_path, built[src].ok
                    checks[name] = {"status": "probe" if ok else "compile_error", "reason": probes[name]}
                    if not ok:
                        print(f"  {name}: does not compile, left out: {built[src].log[-300:]}", flush=True)
                        continue
                else:
                    r = evaluate(src, shape, acc=a.acc, mode="offline", profile="quick", arch=a.arch)
                    checks[name] = {"status": r.status, "speedup_quick": r.speedup(BASELINE), "reason": r.reason[:300]}
                    if r.status != "ok":
                        print(f"  {name}: {r.status}, left out: {r.reason[:200]}", flush=True)
                        continue
                    so = r.compile.so_path
                libs.append(ctypes.CDLL(so))
                fn = ctypes.cast(libs[-1].hgemm, ctypes.c_void_p).value
                callables[name] = NativeCallable(nat, name, nat.register_candidate(fn, *shape))
            rows = measure_shape(nat, gpu, info["cublaslt"], shape, callables, a.acc == "fp16", a, sampler)
            nat.release_callables()
            result["shapes"][key] = {"checks": checks, "rounds": rows, "summary": summary(rows)}
            (a.out / "sustained.json").write_text(json.dumps(result, indent=1))
    finally:
        sampler.stop()
    print(json.dumps({k: v["summary"] for k, v in result["shapes"].items()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
