"""Time exported kernels the way an outside user would, sharing no code with the evaluator.

Input: folders written by `cudal2 archive export` (manifest.json + kernels/*.cu). Each kernel is built with the
contract's own command (nvcc -shared -Xcompiler -fPIC, plus -O3 -std=c++17 and the CUTLASS include folders: no
evaluator flags, so a kernel that needs one is not self-contained and fails here), loaded with ctypes, called on
torch tensors and checked against an fp32 reference, then timed with CUDA events against torch.matmul on the same
stream, alternating the two. Both sides are captured in CUDA graphs, so the host (ctypes against torch's Python
dispatch, which alone makes a tiny GEMM look 2-4x faster through ctypes) is out of the comparison:
- graph, with a predecessor: 20 times (a one-element torch kernel, then the call), what the evaluator's offline mode
  does (a PDL kernel cannot overlap its own previous call); the ordinary kernel's time is in both sides, so the
  ratio leans towards 1; "its time taken out" subtracts a graph of the 20 ordinary kernels alone from both sides,
  as the evaluator's offline mode subtracts its separator;
- graph, back to back: 20 calls in a row, where a PDL kernel may overlap its own previous call;
- graph, one call: a graph of one call replayed after a synchronize, launch latency included (like server mode);
- sustained (shapes of 2^36 FLOP and more): plain launches, each side held for 1 s before 0.5 s are timed, so each
  runs at the clock its own power allows (the evaluator's power-steady timing, done independently).
Ratios are t(torch.matmul) / t(kernel), medians over rounds with the interquartile range.

    python3 scripts/outside_harness.py EXPORT_DIR [EXPORT_DIR ...] --out DIR [--jobs 16] [--compile-only]
"""
from __future__ import annotations

import argparse
import ctypes
import datetime
import json
import os
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

BIG_FLOP = 2 ** 36


def cutlass_includes(given: str | None) -> list[str]:
    if given:
        return [given]
    try:
        import cutlass_library
    except ImportError:
        sys.exit("the CUTLASS headers are needed: pip install --no-deps nvidia-cutlass, or pass --cutlass DIR")
    root = Path(cutlass_library.__file__).parent / "source"
    return [str(root / "include"), str(root / "tools" / "util" / "include")]


def build(cu: Path, out_dir: Path, includes: list[str], arch: str) -> tuple[Path | None, str]:
    so = out_dir / (cu.stem + ".so")
    cmd = ["nvcc", "-shared", "-Xcompiler", "-fPIC", "-O3", "-std=c++17", "--expt-relaxed-constexpr",
           f"-gencode=arch=compute_{arch[3:]},code={arch}", *(f"-I{d}" for d in includes), str(cu), "-o", str(so)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    return (so if r.returncode == 0 else None), (r.stderr[-3000:] if r.returncode else "")


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


def _f(x, spec=".3f") -> str:
    return "–" if x is None else format(x, spec)


def _q(q) -> str:
    return "–" if not q else f"{q[1]:.3f} ({q[0]:.3f}–{q[2]:.3f})"


def _geo(xs: list[float]) -> str:
    return f"{statistics.geometric_mean(xs):.3f} over {len(xs)}, {sum(x > 1 for x in xs)} above 1" if xs else "–"


def render(doc: dict) -> str:
    rows = doc["rows"]
    cols = (("graph_pred", "graph, with a predecessor"),
            ("graph_pred_net", "graph, with a predecessor, its time taken out"), ("graph_loop", "graph, back to back"),
            ("graph_one", "graph, one call"), ("sustained", "sustained (≥ 2^36 FLOP)"))
    lines = [
        "# Exported kernels timed by an outside harness", "",
        f"- device: {doc['device']}; date: {doc['date']}; torch {doc.get('torch')}; built for {doc['arch']} with "
        "the contract's command only (`nvcc -shared -Xcompiler -fPIC -O3 -std=c++17 --expt-relaxed-constexpr`, "
        "CUTLASS includes)",
        f"- kernels: {', '.join(f'`{e}`' for e in doc['exports'])} (`cudal2 archive export`); built "
        f"{sum(r['built'] for r in rows)} of {len(rows)}",
        "- command: `python3 scripts/outside_harness.py EXPORT_DIR ... --out DIR` (its docstring says how each "
        "column is timed); ratios are t(torch.matmul) / t(kernel), medians with the interquartile range",
        "- evaluator columns: the figures the export carries (its final measurements, medians of three)", "",
        "geomean vs torch.matmul: " + "; ".join(f"{label} {_geo([r[key][1] for r in rows if r.get(key)])}"
                                                 for key, label in cols), "",
        "| M | N | K | family | evaluator offline vs AutoTuning-max | evaluator offline vs cuBLAS-max "
        "| evaluator server vs torch | " + " | ".join(f"{label}, vs torch" for _, label in cols)
        + " | max abs err, kernel / torch |",
        "|" + "---|" * (8 + len(cols)),
    ]
    for r in rows:
        e = r["evaluator"]
        err = (f"{r['max_abs_err']:.3g} / {r['torch_max_abs_err']:.3g}" if "max_abs_err" in r else
               ("not built" if not r["built"] else "–"))
        lines.append(f"| {' | '.join(map(str, r['shape']))} | {r['family']} | {_f(e['offline_vs_autotune_max'])} "
                     f"| {_f(e['offline_vs_cublas_max'])} | {_f(e['server_vs_torch'])} | "
                     + " | ".join(_q(r.get(key)) for key, _ in cols) + f" | {err} |")
    lines += [f"- {'x'.join(map(str, r['shape']))}: not captured in a graph: {r['graph_error']}"
              for r in rows if r.get("graph_error")]
    lines += [f"- {r['file']}: the contract's build failed:\n\n```\n{r['build_log']}\n```" for r in rows
              if not r["built"]]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("exports", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--arch", default="sm_90a")
    ap.add_argument("--cutlass", default=None, metavar="DIR", help="CUTLASS include folder")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--compile-only", action="store_true")
    args = ap.parse_args()
    entries = []
    for d in args.exports:
        man = json.loads((d / "manifest.json").read_text())
        entries += [(d / k["file"], k) for k in man["kernels"]]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "build").mkdir(exist_ok=True)
    inc = cutlass_includes(args.cutlass)
    with ThreadPoolExecutor(args.jobs) as pool:
        built = list(pool.map(lambda e: build(e[0], args.out / "build", inc, args.arch), entries))
    rows = []
    for (cu, k), (so, log) in zip(entries, built):
        row = {"shape": k["shape"], "file": cu.name, "family": k.get("family"), "built": so is not None,
               "build_log": log, "evaluator": {"offline_vs_autotune_max": k["speedups"].get("cublaslt-autotune-max"),
                                               "offline_vs_cublas_max": k["speedups"].get("cublas-max"),
                                               "server_vs_torch": (k.get("speedups_by_mode") or {})
                                               .get("server", {}).get("torch")}}
        rows.append(row)
        print(f"{cu.name}: {'built' if so else 'BUILD FAILED'}", flush=True)
    if not args.compile_only:
        import torch

        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False  # fp32 accumulation, as ours
        for row, (so, _) in zip(rows, built):
            if so is None:
                continue
            m, n, k = shape = tuple(row["shape"])
            case = Case(so, shape)
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
            print(f"{m}x{n}x{k}: " + " ".join(f"{key} {row[key][1]:.3f}" for key in
                                             ("graph_pred", "graph_loop", "graph_one", "sustained") if key in row)
                  + f" err {row['max_abs_err']:.3g} (torch {row['torch_max_abs_err']:.3g})", flush=True)
            del case
        row_meta = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}
    else:
        row_meta = {"device": None}
    doc = {**row_meta, "date": datetime.date.today().isoformat(), "arch": args.arch,
           "exports": [str(d) for d in args.exports], "rows": rows}
    (args.out / "outside_harness.json").write_text(json.dumps(doc, indent=1))
    (args.out / "outside_harness.md").write_text(render(doc))
    return 0 if all(r["built"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
