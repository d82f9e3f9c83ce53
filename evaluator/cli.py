"""`cudal2 eval` and `cudal2 baselines`.

Exit codes: 0 success (status ok, or compiled with --compile-only), 1 the kernel was evaluated and refused or failed,
2 the request itself could not be carried out (bad input, no GPU, missing tool).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from evaluator import contract
from evaluator import record as R
from evaluator.compile import ARCH_HELP

GPU_NEEDED = "a CUDA GPU is needed to run, check and time a kernel, and none is visible on this machine"
NO_GPU_MESSAGE = (f"{GPU_NEEDED}. Without one, screen and compile only: "
                  "cudal2 eval KERNEL.cu --compile-only (builds for sm_90a unless --arch says otherwise)")


class UsageError(Exception):
    """Bad input: reported on stderr with exit status 2."""


def add_subcommands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("eval", help="screen, compile, check and time one candidate kernel",
                       description="Evaluate one candidate .cu against the kernel contract and NVIDIA's baselines.")
    p.add_argument("kernel", type=Path, help="the candidate .cu file")
    _shape_arg(p, required=False)
    _common_args(p)
    p.add_argument("--sanitize", action="store_true", help="also run compute-sanitizer memcheck and racecheck")
    p.add_argument("--ncu", action="store_true", help="also profile the candidate with Nsight Compute")
    p.add_argument("--compile-only", action="store_true",
                   help="screen and compile only (no GPU needed); exit 0 when it compiled")
    p.add_argument("--arch", help=ARCH_HELP)
    p.set_defaults(func=cmd_eval)

    b = sub.add_parser("baselines", help="time NVIDIA's baselines (cuBLAS, cuBLASLt, torch) for one shape",
                       description="Time the NVIDIA baselines for one shape, interleaved, as eval does.")
    _shape_arg(b, required=True)
    _common_args(b)
    b.set_defaults(func=cmd_baselines)


def _shape_arg(p: argparse.ArgumentParser, required: bool) -> None:
    p.add_argument("--shape", nargs=3, metavar=("M", "N", "K"), required=required,
                   help="problem size: C (MxN) = A (MxK) B (KxN)" + ("" if required else
                                                                    "; required unless --compile-only"))


def _common_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--acc", choices=contract.ACCUMULATORS, default="fp32", help="accumulator class (default fp32)")
    p.add_argument("--mode", choices=contract.MODES, default="offline",
                   help="offline: back-to-back calls; server: random gaps between calls; graph: offline batches "
                        "replayed from a CUDA graph (default offline)")
    prof = p.add_mutually_exclusive_group()
    prof.add_argument("--quick", dest="profile", action="store_const", const="quick",
                      help="short warm-up and timing (the search loop's setting; default)")
    prof.add_argument("--paper", dest="profile", action="store_const", const="paper",
                      help="the paper's protocol: 10 s warm-up, 30 s timing")
    p.set_defaults(profile="quick")
    p.add_argument("--json", type=Path, metavar="OUT", help="write the full record as JSON to OUT")


# ---------------------------------------------------------------------------------------------------- helpers


def parse_shape(values: list[str] | None) -> tuple[int, int, int]:
    if values is None:
        raise UsageError("--shape M N K is required")
    try:
        ints = [int(v) for v in values]
    except ValueError:
        raise UsageError(f"--shape takes three integers M N K, got {' '.join(values)}") from None
    try:
        return contract.check_shape(ints)
    except ValueError as e:
        raise UsageError(f"bad --shape: {e}") from None


def _read_kernel(path: Path) -> str:
    if not path.exists():
        raise UsageError(f"kernel file not found: {path}")
    if not path.is_file():
        raise UsageError(f"not a file: {path}")
    try:
        data = path.read_bytes()
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror or e}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{path} is not UTF-8 text; a candidate is a .cu source file") from None


def json_target(path: Path | None) -> None:
    """Refuse an unusable --json path before any work, not after a minute of compiling."""
    if path is None:
        return
    if path.is_dir():
        raise UsageError(f"--json {path} is a folder; name a file")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        bad = next((p for p in path.parents if p.exists() and not p.is_dir()), path.parent)
        raise UsageError(f"--json {path}: cannot create its folder ({bad}: {e.strerror or e})") from None


def _write_json(path: Path | None, obj: object) -> None:
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(obj, indent=2) + "\n")
    except OSError as e:
        raise UsageError(f"cannot write {path}: {e.strerror or e}") from None


def _console():
    from rich.console import Console  # noqa: PLC0415

    return Console(highlight=False, soft_wrap=True)


def _fmt(x: float | None, spec: str = ".3f") -> str:
    return "-" if x is None else format(x, spec)


def print_compile(info: R.CompileInfo, console) -> None:
    from rich.table import Table  # noqa: PLC0415

    how = "cache hit" if info.cached else "built"
    console.print(f"compile: {'ok' if info.ok else 'FAILED'} ({how}, {info.seconds:.2f} s, {info.arch}, "
                  f"nvcc {info.nvcc_version})")
    if info.kernels:
        # ptxas knows only static shared memory: a kernel that sizes its own at launch (CUTLASS's) reads 0 here
        t = Table("kernel", "regs", "static smem B", "spill st B", "spill ld B", "stack B", show_edge=False)
        for k in info.kernels:
            t.add_row(k["name"], str(k["registers"]), str(k["smem_bytes"]), str(k["spill_stores"]),
                      str(k["spill_loads"]), str(k["stack_bytes"]))
        console.print(t)
    if info.ok and info.so_path:
        console.print(f"library: {info.so_path}")


def print_result(res: R.EvalResult, console) -> None:
    from rich.table import Table  # noqa: PLC0415

    style = "green" if res.status in (R.OK, R.COMPILED) else "red"
    shape = "x".join(map(str, res.shape)) if any(res.shape) else "not given"  # --compile-only needs none
    console.print(f"[{style}][bold]{res.status}[/bold][/{style}]  shape {shape}  acc {res.acc}  "
                  f"{res.mode}/{res.profile}")
    if res.reason:
        console.print(f"reason: {res.reason}")
    if res.status == R.SCREEN_REJECTED and res.compile is not None:
        console.print("screening refused the source:")
        for line in res.compile.log.removeprefix("screen:").strip().splitlines():
            if line.startswith("$ "):
                break  # the build log of a symbol-screen refusal follows the reasons
            console.print(f"  - {line}", markup=False)
    elif res.compile is not None:
        print_compile(res.compile, console)
        if not res.compile.ok:
            tail = "\n".join(res.compile.log.strip().splitlines()[-25:])
            console.print(tail, markup=False)
    if res.checks:
        t = Table("check", "result", "detail", show_edge=False)
        for c in res.checks:
            t.add_row(c.name, "[green]pass[/green]" if c.passed else "[red]FAIL[/red]", c.detail[:120])
        console.print(t)
    if res.candidate is not None:
        c = res.candidate
        console.print(f"candidate: median {c.median_us:.2f} µs, mean {c.mean_us:.2f} µs, min {c.min_us:.2f} µs "
                      f"({c.samples} samples)")
    if res.baselines:
        t = Table("baseline", "median µs", "speedup mean", "speedup median", "95% CI", show_edge=False)
        for name, b in sorted(res.baselines.items()):
            ci = "-" if b.speedup_ci95 is None else f"{b.speedup_ci95[0]:.3f}–{b.speedup_ci95[1]:.3f}"
            t.add_row(name, _fmt(b.median_us, ".2f"), _fmt(b.speedup_mean), _fmt(b.speedup_median), ci)
        console.print(t)


# ---------------------------------------------------------------------------------------------------- commands


def cmd_eval(args: argparse.Namespace) -> int:
    try:
        return _eval(args)
    except UsageError as e:
        print(f"cudal2 eval: error: {e}", file=sys.stderr)
        return 2


def _print_build_progress(p) -> None:
    print(f"cudal2 eval: {p.line()}", file=sys.stderr, flush=True)


def _compile_record(source: str, shape: tuple[int, int, int], args: argparse.Namespace) -> R.EvalResult:
    from evaluator.compile import ToolMissingError, compile_kernel, compile_status, source_hash  # noqa: PLC0415

    try:
        info = compile_kernel(source, args.arch, progress=_print_build_progress)
    except (ValueError, ToolMissingError) as e:
        raise UsageError(str(e)) from None
    status, reason = compile_status(info)
    return R.EvalResult(status=status, reason=reason, shape=shape, acc=args.acc, mode=args.mode,
                        profile=args.profile, source_hash=source_hash(source), code_length=len(source),
                        compile=info, wall_seconds=info.seconds)


def _eval(args: argparse.Namespace) -> int:
    source = _read_kernel(args.kernel)
    json_target(args.json)
    console = _console()
    if args.compile_only:
        shape = parse_shape(args.shape) if args.shape is not None else (0, 0, 0)
        res = _compile_record(source, shape, args)
        print_result(res, console)
        _write_json(args.json, res.to_dict())
        return 0 if res.status == R.COMPILED else 1

    shape = parse_shape(args.shape)
    from evaluator.gpu import has_gpu  # noqa: PLC0415

    if not has_gpu():
        print(f"cudal2 eval: {NO_GPU_MESSAGE}", file=sys.stderr)
        from evaluator.compile import source_hash  # noqa: PLC0415

        _write_json(args.json, R.EvalResult(status=R.NO_GPU, reason=NO_GPU_MESSAGE, shape=shape, acc=args.acc,
                                            mode=args.mode, profile=args.profile, source_hash=source_hash(source),
                                            code_length=len(source)).to_dict())
        return 2
    from evaluator.api import evaluate  # noqa: PLC0415 (imports the GPU side only when it is needed)

    try:
        res = evaluate(source, shape, acc=args.acc, mode=args.mode, profile=args.profile, sanitize=args.sanitize,
                       ncu=args.ncu, arch=args.arch, build_progress=_print_build_progress)
    except ValueError as e:
        raise UsageError(str(e)) from None
    print_result(res, console)
    _write_json(args.json, res.to_dict())
    return 0 if res.status == R.OK else 1


def cmd_baselines(args: argparse.Namespace) -> int:
    try:
        shape = parse_shape(args.shape)
        json_target(args.json)
        from evaluator.gpu import has_gpu  # noqa: PLC0415

        if not has_gpu():
            print(f"cudal2 baselines: {GPU_NEEDED}.", file=sys.stderr)
            return 2
        from evaluator.api import time_baselines  # noqa: PLC0415

        try:
            timings = time_baselines(shape, acc=args.acc, mode=args.mode, profile=args.profile)
        except ValueError as e:
            raise UsageError(str(e)) from None
        _print_baselines(shape, args, timings)
        _write_json(args.json, {"shape": list(shape), "acc": args.acc, "mode": args.mode, "profile": args.profile,
                                "baselines": {k: dataclasses.asdict(v) for k, v in timings.items()}})
        return 0
    except UsageError as e:
        print(f"cudal2 baselines: error: {e}", file=sys.stderr)
        return 2


def _baseline_detail(d: dict) -> str:
    from evaluator.timing import held_over_burst

    if "algos_valid" in d:  # an AutoTuning pick: how it was chosen says how much to trust it as the baseline
        how = (f"{d['steady']['finalists']} leaders re-timed power-steady" if "steady" in d else "screening only")
        ratio = held_over_burst(d)
        held = "" if ratio is None else f", held/burst {ratio:.2f}"
        variations = (f" ({d.get('variations_valid', '?')} of {d['algos_variations']} variations)"
                      if d.get("algos_variations") else "")
        picked = f"picked screening #{d.get('screening_rank', 0) + 1}" + (
            " (a variation)" if d.get("chosen_variation") else "")
        return (f"{d['algos_valid']}/{d.get('algos_offered', '?')} algos valid{variations}, {how}, {picked}" + held
                + (", cached" if d.get("cached") else ""))
    return ", ".join(f"{dk}={dv}" for dk, dv in list(d.items())[:3])


def _print_baselines(shape: tuple[int, int, int], args: argparse.Namespace, timings: dict[str, R.Timing]) -> None:
    from rich.table import Table  # noqa: PLC0415

    console = _console()
    m, n, k = shape
    console.print(f"baselines  shape {m}x{n}x{k}  acc {args.acc}  {args.mode}/{args.profile}")
    t = Table("baseline", "median µs", "mean µs", "min µs", "samples", "TFLOP/s (median)", "detail",
              show_edge=False)
    flops = 2.0 * m * n * k
    for name, b in sorted(timings.items(), key=lambda kv: kv[1].median_us):
        tflops = flops / (b.median_us * 1e-6) / 1e12 if b.median_us > 0 else None
        detail = _baseline_detail(b.detail)
        t.add_row(name, _fmt(b.median_us, ".2f"), _fmt(b.mean_us, ".2f"), _fmt(b.min_us, ".2f"), str(b.samples),
                  _fmt(tflops, ".1f"), detail[:110])
    console.print(t)
