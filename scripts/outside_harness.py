"""Time exported kernels the way an outside user would, against NVIDIA baselines of its own, sharing no code with the
evaluator or the agent (it reads only the export's manifest.json, for shapes and the evaluator's figures).

Input: folders written by `cudal2 archive export` (manifest.json + kernels/*.cu). Each kernel is built with the
contract's own command (nvcc -shared -Xcompiler -fPIC, plus -O3 -std=c++17 and the CUTLASS include folders: no
evaluator flags, so a kernel that needs one is not self-contained and fails here), loaded with ctypes, called on
torch tensors and checked against an fp32 reference. The baselines are the harness's own: cublasGemmEx NN and TN and
cuBLASLt autotuned per layout, through scripts/outside_native.cu (its own handles, 32 MiB workspaces and stream;
fp16 in and out, fp32 compute, or fp16 compute where the manifest says fp16 accumulation), and torch.matmul.

Regimes (scripts/outside_regimes.py says how a batch is held, how operand sets rotate and how outputs are checked):
- back-to-back: N calls queued one after another, call i on operand set i;
- separated: an ordinary kernel before each call, its time measured alone and taken out;
- server: one call after an idle gap, the weights (B) written before an L2 scrub and A after it.
Best NVIDIA per shape and regime is the fastest baseline by median; the ratios t(baseline) / t(kernel) are compared
with the evaluator's speedups of the same regime from the manifest (separated falls back to offline where the export
has no separated figures, and the output says so), and the Markdown ends with every shape where the two disagree by
more than --tolerance (3%). `--graphs` adds the CUDA-graph regimes against torch.matmul (scripts/outside_graphs.py).

    python3 scripts/outside_harness.py EXPORT_DIR [EXPORT_DIR ...] --out DIR [--shapes 64x128x128,...]
        [--jobs 16] [--compile-only] [--graphs] [--budget-s 420]
    python3 scripts/outside_harness.py --render DIR/outside_harness.json --out DIR2   # table again, no GPU

On a lent GPU machine: `bash scripts/device_outside.sh` (examples/sample_run) or with export folders as arguments.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import outside_native  # noqa: E402
import outside_report  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
STARTED = time.monotonic()  # --budget-s counts from here, the kernels' builds included


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


def parse_shapes(text: str | None) -> set[tuple[int, int, int]] | None:
    if not text:
        return None
    out = set()
    for part in text.replace(" ", "").split(","):
        dims = part.lower().split("x")
        if len(dims) != 3 or not all(d.isdigit() and int(d) > 0 for d in dims):
            raise argparse.ArgumentTypeError(f"{part!r} is not a shape MxNxK")
        out.add(tuple(map(int, dims)))
    return out


def read_exports(dirs: list[Path], shapes: set | None) -> list[tuple[Path, dict]]:
    entries = []
    for d in dirs:
        mpath = d / "manifest.json"
        if not mpath.is_file():
            raise SystemExit(f"{d}: no manifest.json (not a `cudal2 archive export` folder)")
        try:
            kernels = json.loads(mpath.read_text())["kernels"]
        except (ValueError, KeyError) as e:
            raise SystemExit(f"{mpath}: not an export manifest ({type(e).__name__}: {e})") from None
        entries += [(d / k["file"], k) for k in kernels if shapes is None or tuple(k["shape"]) in shapes]
    if shapes is not None:
        missing = shapes - {tuple(k["shape"]) for _, k in entries}
        if missing:
            raise SystemExit("no exported kernel for " + ", ".join("x".join(map(str, s)) for s in sorted(missing)))
    return entries


def git_commit(given: str | None) -> str:
    if given:
        return given
    r = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return r.stdout.strip() or "unknown (not a git checkout; pass --commit)"


def new_row(cu: Path, k: dict, built: tuple[Path | None, str]) -> dict:
    so, log = built
    return {"shape": k["shape"], "acc": k.get("acc", "fp32"), "gpu": k.get("gpu"), "file": cu.name,
            "family": k.get("family"), "built": so is not None, "build_log": log,
            "evaluator": {key: k.get(key) for key in ("mode", "speedups", "speedups_by_mode")}}


def time_rows(args, rows: list[dict], built: list, native_so: Path, save) -> dict:
    import torch

    from outside_regimes import ShapeTimer

    torch.backends.cuda.matmul.allow_tf32 = False  # the fp32 reference must be a true fp32 product
    native = outside_native.Native(native_so)
    props = torch.cuda.get_device_properties(0)
    meta = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
            "cublaslt_version": native.version, "l2_mib": props.L2_cache_size / 2 ** 20}
    save(meta)
    for row, (so, _) in zip(rows, built):
        if so is None:
            continue
        if args.budget_s and time.monotonic() - STARTED > args.budget_s:
            row["error"] = f"not timed: the time budget (--budget-s {args.budget_s}) ran out"
            continue
        shape = tuple(row["shape"])
        # fp16 accumulation: torch may then reduce in fp16 as the kernel does; otherwise fp32 throughout
        torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = row["acc"] == "fp16"
        t0 = time.monotonic()
        try:
            timer = ShapeTimer(torch, native, so, shape, row["acc"], pool_bytes=int(args.pool_gib * 2 ** 30),
                               max_calls=args.max_calls)
            row["harness"] = timer.run(rounds=args.rounds, screen_rounds=args.screen_rounds,
                                       target_ms=args.target_ms, warm_s=args.warm_s)
            del timer
        except (RuntimeError, outside_native.NativeError) as e:
            row["error"] = f"{type(e).__name__}: {e}"[:500]
        torch.cuda.empty_cache()
        if args.graphs:
            from outside_graphs import time_graphs

            try:
                row["graphs"] = time_graphs(so, shape)
            except RuntimeError as e:
                row["graphs"] = {"graph_error": f"{type(e).__name__}: {e}"[:500]}
        regs = (row.get("harness") or {}).get("regimes") or {}
        row["summary"] = {reg: outside_report.summarize(d) for reg, d in regs.items()}
        best = {reg: (s.get("best-nvidia") or {}).get("ratio") for reg, s in row["summary"].items()}
        print(f"{'x'.join(map(str, shape))}: " + " ".join(f"{reg} {b[1]:.3f}" for reg, b in best.items() if b)
              + (f" {row['error']}" if row.get("error") else "") + f" ({time.monotonic() - t0:.1f} s)", flush=True)
        save(meta)
    return meta


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("exports", nargs="*", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--build-dir", type=Path, default=None, help="where the .so files go (default OUT/build)")
    ap.add_argument("--render", type=Path, default=None, metavar="JSON",
                    help="write the Markdown (and the disagreement list) again from a saved outside_harness.json")
    ap.add_argument("--shapes", type=parse_shapes, default=None, help="only these, e.g. 64x128x128,1024x12288x256")
    ap.add_argument("--arch", default="sm_90a")
    ap.add_argument("--cutlass", default=None, metavar="DIR", help="CUTLASS include folder")
    ap.add_argument("--cublas-include", action="append", default=[], metavar="DIR",
                    help="a folder holding cublasLt.h, searched before the toolkit's")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--compile-only", action="store_true")
    ap.add_argument("--graphs", action="store_true", help="also the CUDA-graph regimes against torch.matmul")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--screen-rounds", type=int, default=3)
    ap.add_argument("--target-ms", type=float, default=1.0, help="GPU time a timed batch aims at")
    ap.add_argument("--max-calls", type=int, default=96, help="calls (and operand sets) a batch holds at most")
    ap.add_argument("--pool-gib", type=float, default=4.0, help="memory the operand sets may take")
    ap.add_argument("--warm-s", type=float, default=0.3)
    ap.add_argument("--tolerance", type=float, default=0.03, help="relative difference named a disagreement")
    ap.add_argument("--budget-s", type=float, default=None,
                    help="time no new shape once this many seconds have passed since the start (builds included)")
    ap.add_argument("--commit", default=None, help="the code's commit, where the checkout has no .git")
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.screen_rounds < 1 or args.max_calls < 1 or args.target_ms <= 0:
        ap.error("--rounds, --screen-rounds and --max-calls must be at least 1, --target-ms above 0")
    if args.render:
        if args.exports:
            ap.error("--render takes no export folders")
        doc = json.loads(args.render.read_text())
        doc["tolerance"] = args.tolerance
        doc["disagreements"] = outside_report.disagreements(doc["rows"], args.tolerance)
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "outside_harness.md").write_text(outside_report.render(doc))
        print(f"{len(doc['disagreements'])} disagreement(s) over {args.tolerance:.0%}; wrote {args.out}")
        return 0
    if not args.exports:
        ap.error("name at least one export folder (or --render JSON)")
    entries = read_exports(args.exports, args.shapes)
    build_dir = args.build_dir or args.out / "build"
    build_dir.mkdir(parents=True, exist_ok=True)
    inc = cutlass_includes(args.cutlass)
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        native_job = pool.submit(outside_native.build, build_dir, args.arch, args.compile_only, args.cublas_include)
        built = list(pool.map(lambda e: build(e[0], build_dir, inc, args.arch), entries))
        native_so, native_log = native_job.result()
    rows = [new_row(cu, k, b) for (cu, k), b in zip(entries, built)]
    for row in rows:
        print(f"{row['file']}: {'built' if row['built'] else 'BUILD FAILED'}", flush=True)
    print(f"outside_native.cu: {'built' if native_so else 'NOT BUILT: ' + native_log}", flush=True)
    doc = {"device": None, "date": datetime.date.today().isoformat(), "commit": git_commit(args.commit),
           "arch": args.arch, "exports": [str(d) for d in args.exports], "tolerance": args.tolerance,
           "settings": {k: getattr(args, k) for k in ("rounds", "screen_rounds", "target_ms", "max_calls",
                                                      "pool_gib", "warm_s", "graphs")},
           "native": {"built": native_so is not None, "log": native_log}, "rows": rows}

    def save(meta: dict | None = None) -> None:  # after every shape, so a run cut short still leaves its rows
        doc.update(meta or {})
        doc["disagreements"] = outside_report.disagreements(rows, args.tolerance)
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "outside_harness.json").write_text(json.dumps(doc, indent=1))
        (args.out / "outside_harness.md").write_text(outside_report.render(doc))

    if not args.compile_only:
        if native_so is None:
            save()
            print("the harness's baselines did not build; nothing timed", file=sys.stderr)
            return 2
        time_rows(args, rows, built, native_so, save)
    save()
    return 0 if all(r["built"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
