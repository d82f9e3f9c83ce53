"""The graph regimes of the outside harness (`--graphs`): the kernel against torch.matmul only, on one operand set.

- graph, with a predecessor: 20 times (a one-element torch kernel, then the call) captured in a CUDA graph; "its
  time taken out" subtracts a graph of the 20 ordinary kernels alone from both sides;
- graph, back to back: 20 calls in a row, where a PDL kernel may overlap its own previous call;
- graph, one call: a graph of one call replayed after a synchronize, launch latency included (like server mode);
- sustained (shapes of 2^36 FLOP and more): plain launches, each side held for 1 s before 0.5 s are timed, so each
  runs at the clock its own power allows.
Both sides are captured in CUDA graphs, so the host (ctypes against torch's Python dispatch) is out of the
comparison. Ratios are t(torch.matmul) / t(kernel), medians over rounds with the interquartile range.
"""
from __future__ import annotations

import ctypes
import statistics
from pathlib import Path

BIG_FLOP = 2 ** 36


def quartiles(xs: list[float]) -> tuple[float, float, float]:
    q = statistics.quantiles(xs, n=4) if len(xs) > 1 else [xs[0]] * 3
    return q[0], statistics.median(xs), q[2]


class Case:
    def __init__(self, so: Path, shape: tuple[int, int, int]):
        import torch

        self.torch = torch
        m, n, k = self.shape = shape
        self.lib = ctypes.CDLL(str(so))
        self.lib.hgemm.restype = ctypes.c_int
        self.lib.hgemm.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int] * 3 + [ctypes.c_void_p]
        g = torch.Generator(device="cuda").manual_seed(m * 31 + n * 7 + k)
        self.a = torch.randn(m, k, device="cuda", dtype=torch.half, generator=g)
        self.b = torch.randn(k, n, device="cuda", dtype=torch.half, generator=g)
        self.b_cm = self.b.t().contiguous()  # B stored column-major: B^T row-major
        self.c = torch.empty(m, n, device="cuda", dtype=torch.half)
        self.c_torch = torch.empty(m, n, device="cuda", dtype=torch.half)
        self.stream = torch.cuda.Stream()
        self.tick = torch.zeros(1, device="cuda")
        torch.cuda.synchronize()  # the inputs were written on the default stream
        for _ in range(3):  # first calls: module load, cuBLAS handle and workspace
            self.ours()
            self.theirs()
        self.stream.synchronize()

    def ours(self) -> None:
        rc = self.lib.hgemm(self.a.data_ptr(), self.b.data_ptr(), self.b_cm.data_ptr(), self.c.data_ptr(),
                            *self.shape, self.stream.cuda_stream)
        if rc != 0:
            raise RuntimeError(f"hgemm returned {rc}")

    def theirs(self) -> None:
        with self.torch.cuda.stream(self.stream):
            self.torch.matmul(self.a, self.b, out=self.c_torch)

    def errors(self) -> tuple[float, float]:
        torch = self.torch
        with torch.cuda.stream(self.stream):
            self.ref = self.a.float() @ self.b.float()
            self.c.fill_(float("nan"))  # a kernel that leaves some of C unwritten shows as nan, not stale data
        self.ours()
        self.theirs()
        self.stream.synchronize()
        self.torch_err = self.err(self.c_torch)  # what a graph replay's C is held to
        return self.err(self.c), self.torch_err

    def err(self, c) -> float:
        return float((c.float() - self.ref).abs().max())

    def batch_ms(self, fn, calls: int) -> float:
        torch = self.torch
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record(self.stream)
        for _ in range(calls):
            fn()
        e1.record(self.stream)
        e1.synchronize()
        return e0.elapsed_time(e1) / calls

    def tick_only(self) -> None:
        pass

    def graph(self, fn, calls: int, predecessor: bool):
        torch = self.torch
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=self.stream):
            for _ in range(calls):
                if predecessor:
                    self.tick.add_(1)
                fn()
        return g

    def graphs(self, rounds: int = 21, calls: int = 20, predecessor: bool = False, replays: int = 10) -> list[float]:
        """Each replay is timed alone, after the previous one finished."""
        torch = self.torch
        sides = (self.ours, self.theirs, self.tick_only) if predecessor else (self.ours, self.theirs)
        gs = {f: self.graph(f, calls, predecessor) for f in sides}
        with torch.cuda.stream(self.stream):  # replay() launches on the current stream
            for f, c in ((self.ours, self.c), (self.theirs, self.c_torch)):  # the graphs really compute C
                c.fill_(float("nan"))
                gs[f].replay()
                self.stream.synchronize()
                if not self.err(c) <= 2 * self.torch_err + 1e-3:
                    raise RuntimeError(f"a graph replay left C wrong: max abs err {self.err(c)}")
            ratios, per_call, self.net = [], {f: [] for f in sides}, []
            for r in range(rounds):
                t = {}
                for f in sides if r % 2 == 0 else sides[::-1]:
                    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    total = 0.0
                    for _ in range(replays):
                        e0.record(self.stream)
                        gs[f].replay()
                        e1.record(self.stream)
                        e1.synchronize()
                        total += e0.elapsed_time(e1)
                    t[f] = total
                    per_call[f].append(total / (replays * calls))
                ratios.append(t[self.theirs] / t[self.ours])
                if predecessor:  # less the ordinary kernels' own time, as the evaluator's offline mode counts
                    self.net.append((t[self.theirs] - t[self.tick_only]) / (t[self.ours] - t[self.tick_only]))
        self.last_ms = {"kernel": statistics.median(per_call[self.ours]),
                        "torch": statistics.median(per_call[self.theirs])}
        if predecessor:
            self.last_ms["ordinary kernel alone"] = statistics.median(per_call[self.tick_only])
        return ratios

    def sustained(self, rounds: int = 3, hold_s: float = 1.0, time_s: float = 0.5) -> list[float]:
        per = {f: self.batch_ms(f, 5) for f in (self.ours, self.theirs)}
        ratios, per_call = [], {self.ours: [], self.theirs: []}
        for r in range(rounds):
            t = {}
            for f in ((self.ours, self.theirs) if r % 2 == 0 else (self.theirs, self.ours)):
                self.batch_ms(f, max(1, int(hold_s * 1e3 / per[f])))
                t[f] = self.batch_ms(f, max(1, int(time_s * 1e3 / per[f])))
                per_call[f].append(t[f])
            ratios.append(t[self.theirs] / t[self.ours])
        self.last_ms = {"kernel": statistics.median(per_call[self.ours]),
                        "torch": statistics.median(per_call[self.theirs])}
        return ratios


def time_graphs(so: Path, shape: tuple[int, int, int]) -> dict:
    m, n, k = shape
    case = Case(so, shape)
    row = {}
    row["max_abs_err"], row["torch_max_abs_err"] = case.errors()
    row["ms_per_call"] = {}  # for a reader who doubts a ratio; the tables quote ratios only
    big = 2 * m * n * k >= BIG_FLOP
    try:
        # big shapes: fewer and shorter replays (a call takes 0.1-4 ms), the sustained figure follows
        opt = {"rounds": 5, "replays": 4, "calls": 3} if big else {"rounds": 21, "replays": 10, "calls": 20}
        for key, kw in (("graph_pred", {**opt, "predecessor": True}), ("graph_loop", opt),
                        ("graph_one", {**opt, "calls": 1, "replays": 2 * opt["replays"]})):
            row[key] = quartiles(case.graphs(**kw))
            row["ms_per_call"][key] = case.last_ms
            if key == "graph_pred":
                row["graph_pred_net"] = quartiles(case.net)
    except RuntimeError as e:  # a kernel that cannot be captured (a blocking call inside) is a finding
        row["graph_error"] = f"{type(e).__name__}: {e}"[:500]
    if big:
        row["sustained"] = quartiles(case.sustained())
        row["ms_per_call"]["sustained"] = case.last_ms
    del case
    return row
