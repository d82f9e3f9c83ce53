"""Build a candidate `.cu` into a shared library with nvcc: content-hash cache, parallel pool, timeout, ptxas report.

The build is two steps, `nvcc -c` to an object and `nvcc -shared` to the `.so`, because the object's undefined
symbols say exactly which outside functions the candidate's code calls (the `.so` hides them: cudart is linked in
statically). The symbol screen on the object catches what text screening cannot see, e.g. a forbidden API whose
name was assembled by the preprocessor.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Sequence

from evaluator import build_progress
from evaluator.proc import run_in_group
from evaluator.record import COMPILE_ERROR, COMPILE_TIMEOUT, COMPILED, SCREEN_REJECTED, CompileInfo

# Bump when the build recipe changes in a way the key would not see (e.g. the symbol screen's rules).
_RECIPE = "5"

# The paper's flags, less --use_fast_math: fast math flushes fp32 denormals and swaps in approximate division,
# sqrt and exp, so a candidate's numbers would differ from the fp32 reference (and from cuBLAS, which is not built
# that way) for reasons unrelated to its GEMM. A candidate that wants an approximate intrinsic can call it by name.
# -DNDEBUG keeps CUTLASS's device asserts out of the timed code; -lineinfo lets Nsight Compute map stalls to source
# without changing the generated code. No -DCUTLASS_ENABLE_GDC_FOR_SM90: a candidate that wants programmatic
# dependent launch enables it in its own source (checked by waits_for_predecessor; offline timing puts an ordinary
# kernel between calls so it is never credited with overlapping its own previous call).
# No -DCUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED: its hundreds of extra wgmma atoms cost ~25 s of nvcc front end in every
# file that includes CuTe, used or not (a 128x256 CUTLASS candidate built alone: 60 s -> 34 s); a kernel whose tile
# needs an extended atom defines it in its own source, so it also builds the same in a harness that is not this one.
BASE_FLAGS: list[str] = [
    "-O3",
    "-std=c++17",
    "--expt-relaxed-constexpr",
    "--expt-extended-lambda",
    "-DNDEBUG",
    "-DCUTLASS_DEBUG_TRACE_LEVEL=0",
    "-lineinfo",
    "-Xptxas=-v",
]

TIMEOUT_PREFIX = "timeout:"
SCREEN_PREFIX = "screen:"


class ToolMissingError(RuntimeError):
    """nvcc or the CUTLASS headers are not installed."""


def _cache_root(cache_dir: Path | None) -> Path:
    if cache_dir is not None:
        return Path(cache_dir)
    # CUDAL2_CACHE is the root of all the evaluator's caches (the autotuning choices live next to the builds).
    return Path(os.environ.get("CUDAL2_CACHE") or Path.home() / ".cache" / "cuda-l2") / "build"


@functools.lru_cache(maxsize=1)
def nvcc_path() -> str:
    found = shutil.which("nvcc")
    if found:
        return found
    for var in ("CUDA_HOME", "CUDA_PATH"):
        home = os.environ.get(var)
        if home and os.access(Path(home) / "bin" / "nvcc", os.X_OK):
            return str(Path(home) / "bin" / "nvcc")
    if os.access("/usr/local/cuda/bin/nvcc", os.X_OK):
        return "/usr/local/cuda/bin/nvcc"
    raise ToolMissingError("nvcc not found: put the CUDA toolkit's bin/ on PATH or set CUDA_HOME "
                           "(the evaluator needs nvcc to build candidates, even for --compile-only)")


@functools.lru_cache(maxsize=1)
def nvcc_version() -> str:
    out = subprocess.run([nvcc_path(), "--version"], capture_output=True, text=True, timeout=60).stdout
    m = re.search(r"\bV(\d+\.\d+\.\d+)", out) or re.search(r"release (\d+\.\d+)", out)
    if not m:
        raise ToolMissingError(f"could not read the nvcc version from: {out.strip()[:200]!r}")
    return m.group(1)


@functools.lru_cache(maxsize=1)
def _nvcc_sm_numbers() -> frozenset[str]:
    try:
        out = subprocess.run([nvcc_path(), "--list-gpu-code"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return frozenset()
    return frozenset(re.findall(r"sm_(\d+)", out))


@functools.lru_cache(maxsize=1)
def _cutlass_root() -> Path | None:
    try:
        import cutlass_library  # noqa: PLC0415 (only the headers are used; the package's Python is not)
    except ImportError:
        return None
    root = Path(cutlass_library.__file__).parent / "source"
    return root if (root / "include" / "cutlass").is_dir() else None


def cutlass_include_dirs() -> list[Path]:
    root = _cutlass_root()
    if root is None:
        raise ToolMissingError("the CUTLASS/CuTe headers are missing: pip install --no-deps nvidia-cutlass "
                               "(its cutlass_library package carries them under source/include)")
    dirs = [root / "include", root / "tools" / "util" / "include"]
    return [d for d in dirs if d.is_dir()]


def include_flags() -> list[str]:
    """-I flags for the CUTLASS/CuTe headers where they are installed, none where not (a kernel that needs them then
    fails to build with nvcc's own message)."""
    return [f"-I{d}" for d in (cutlass_include_dirs() if _cutlass_root() else [])]


@functools.lru_cache(maxsize=1)
def cutlass_version() -> str:
    if _cutlass_root() is None:
        return "none"
    try:
        return importlib.metadata.version("nvidia-cutlass")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


_ARCH_RE = re.compile(r"^(?:sm_|compute_)?(\d{2,3})([af]?)$")

# Without a GPU to ask, builds target the H100/H200 (the architecture the project's results are measured on).
DEFAULT_ARCH = "sm_90a"
ARCH_HELP = (f"GPU architecture to build for (sm_90a, sm_80, ...); default: this machine's GPU, or {DEFAULT_ARCH} "
             "on a machine without one")


def default_arch() -> str:
    """This machine's GPU architecture, or DEFAULT_ARCH on a machine without a CUDA GPU."""
    from evaluator import gpu  # noqa: PLC0415

    return gpu.native_arch() if gpu.has_gpu() else DEFAULT_ARCH


def resolve_arch(arch: str | None) -> str:
    """'sm_90a', '90a', 'sm_80', '80' -> 'sm_90a' / 'sm_80'; None -> default_arch()."""
    if arch is None:
        return default_arch()
    m = _ARCH_RE.match(str(arch).strip().lower())
    if not m:
        raise ValueError(f"not a GPU architecture: {arch!r} (expected e.g. sm_90a, sm_80, 90a or 80)")
    number, suffix = m.groups()
    known = _nvcc_sm_numbers()
    if known and number not in known:
        raise ValueError(f"nvcc {nvcc_version()} cannot build for sm_{number}; it knows sm_"
                         + ", sm_".join(sorted(known, key=int)))
    return f"sm_{number}{suffix}"


def virtual_arch(arch: str) -> str:
    """The PTX target of `arch`: 'sm_90a' -> 'compute_90a'."""
    return resolve_arch(arch).replace("sm_", "compute_")


def gencode_flags(arch: str) -> list[str]:
    return [f"-gencode=arch={virtual_arch(arch)},code={resolve_arch(arch)}"]


def compile_status(info: CompileInfo) -> tuple[str, str]:
    """The record status (and a one-line reason) for a compile outcome."""
    if info.ok:
        return COMPILED, ""
    first = info.log.strip().splitlines()[0] if info.log.strip() else "nvcc failed"
    if info.log.startswith(SCREEN_PREFIX):
        return SCREEN_REJECTED, info.log[len(SCREEN_PREFIX):].strip().splitlines()[0]
    if info.log.startswith(TIMEOUT_PREFIX):
        return COMPILE_TIMEOUT, first[len(TIMEOUT_PREFIX):].strip()
    errors = [ln.strip() for ln in info.log.splitlines() if re.search(r"\berror\b", ln)]
    return COMPILE_ERROR, (errors[0] if errors else first)[:300]


# ---------------------------------------------------------------------------------------------------- ptxas report

_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(\w+)'")
_PROPS = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")
_BARRIERS = re.compile(r"used (\d+) barriers")
_CMEM0 = re.compile(r"(\d+) bytes cmem\[0\]")


def _demangle(names: list[str]) -> dict[str, str]:
    tool = shutil.which("c++filt")
    if not tool or not names:
        return {n: n for n in names}
    try:
        out = subprocess.run([tool], input="\n".join(names), capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {n: n for n in names}
    lines = out.splitlines()
    return dict(zip(names, lines)) if len(lines) == len(names) else {n: n for n in names}


def parse_ptxas(log: str) -> list[dict]:
    """Per-entry-kernel resources from `-Xptxas -v` output (one dict per kernel, in the order ptxas reports)."""
    kernels: dict[str, dict] = {}
    current: str | None = None  # the function the next 'Used N registers' line belongs to
    props_for: str | None = None  # the function the next 'stack frame' line belongs to
    for line in log.splitlines():
        if m := _ENTRY.search(line):
            current = m.group(1)
            kernels.setdefault(current, {"name": current, "arch": m.group(2), "registers": 0, "smem_bytes": 0,
                                         "spill_stores": 0, "spill_loads": 0, "stack_bytes": 0, "barriers": 0,
                                         "cmem0_bytes": 0})
        elif m := _PROPS.search(line):
            props_for = m.group(1)
        elif m := _FRAME.search(line):
            if props_for in kernels:
                k = kernels[props_for]
                k["stack_bytes"], k["spill_stores"], k["spill_loads"] = (int(x) for x in m.groups())
            props_for = None
        elif (m := _USED.search(line)) and current in kernels:
            k = kernels[current]
            k["registers"] = int(m.group(1))
            if s := _SMEM.search(line):
                k["smem_bytes"] = int(s.group(1))
            if b := _BARRIERS.search(line):
                k["barriers"] = int(b.group(1))
            if c := _CMEM0.search(line):
                k["cmem0_bytes"] = int(c.group(1))
            current = None
    names = _demangle(list(kernels))
    out = []
    for mangled, k in kernels.items():
        k["mangled"] = mangled
        k["signature"] = names.get(mangled, mangled)
        k["name"] = _short_name(k["signature"])
        out.append(k)
    return out


def _short_name(signature: str) -> str:
    """'void (anonymous namespace)::wmma_hgemm<true>(__half const*, ...)' -> 'wmma_hgemm<true>'."""
    if signature.startswith("_Z"):
        return _short_mangled(signature)
    s = signature.replace("(anonymous namespace)::", "")
    s = re.sub(r"^(?:void|static|__global__)\s+", "", s)
    depth = 0
    for i, ch in enumerate(s):
        depth += {"<": 1, ">": -1}.get(ch, 0)
        if ch == "(" and depth == 0 and i > 0:
            return s[:i]
    return s


def _short_mangled(name: str) -> str:
    """The leading qualified name of a mangled symbol c++filt could not read (deep CUTLASS templates):
    '_ZN7cutlass6KernelINS_4gemm...' -> 'cutlass::Kernel<...>'."""
    m = re.match(r"_Z(N)?", name)
    i, parts = m.end(), []
    while (d := re.match(r"\d+", name[i:])) is not None:
        n = int(d.group())
        i += d.end()
        parts.append(name[i:i + n])
        i += n
        if m.group(1) is None:
            break
    if not parts:
        return name[:60]
    return "::".join(parts) + ("<...>" if name[i:i + 1] == "I" else "")


def _summarise(info: CompileInfo) -> None:
    """Top-level resource fields: registers and smem of the heaviest kernel; spills and stack the worst of any."""
    if not info.kernels:
        return
    heaviest = max(info.kernels, key=lambda k: (k["registers"], k["smem_bytes"]))
    info.registers = heaviest["registers"]
    info.smem_bytes = heaviest["smem_bytes"]
    info.spill_stores = max(k["spill_stores"] for k in info.kernels)
    info.spill_loads = max(k["spill_loads"] for k in info.kernels)
    info.stack_bytes = max(k["stack_bytes"] for k in info.kernels)


# ---------------------------------------------------------------------------------------------------- building


def _run(cmd: list[str], cwd: Path, deadline: float) -> tuple[int | None, str]:
    """Run a build step in its own process group; on timeout kill the whole group (nvcc forks cicc, ptxas, gcc)."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        return None, ""
    return run_in_group(cmd, remaining, cwd=str(cwd))


MAX_LOG_CHARS = 200_000


def _clip(log: str) -> str:
    """Template errors from CUTLASS can run to megabytes; keep the head (the first error) and the tail (the summary)."""
    if len(log) <= MAX_LOG_CHARS:
        return log
    head, tail = log[: MAX_LOG_CHARS * 3 // 4], log[-MAX_LOG_CHARS // 4:]
    return f"{head}\n[... {len(log) - len(head) - len(tail)} characters of the compile log left out ...]\n{tail}"


def _key(source: str, arch: str, flags: list[str], link_flags: list[str], screen_source: bool) -> str:
    material = json.dumps({"recipe": _RECIPE, "source": source, "arch": arch, "flags": flags, "link": link_flags,
                           "nvcc": nvcc_version(), "cutlass": cutlass_version(), "screen": screen_source},
                          sort_keys=True)
    return hashlib.sha256(material.encode()).hexdigest()


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


def _load_cached(entry: Path, started: float) -> CompileInfo | None:
    meta = entry / "info.json"
    if not meta.is_file():
        return None
    try:
        d = json.loads(meta.read_text())
        info = CompileInfo(**d)
    except (OSError, ValueError, TypeError):
        info = None
    if info is None or (info.ok and not (entry / "kernel.so").is_file()):
        # A damaged entry (someone deleted the library, an older record format): drop it so the rebuild can publish.
        shutil.rmtree(entry, ignore_errors=True)
        return None
    if info.ok:
        info.so_path = str(entry / "kernel.so")
    info.cached = True
    info.seconds = time.monotonic() - started
    return info


def _store(root: Path, entry: Path, build_dir: Path, info: CompileInfo) -> CompileInfo:
    """Publish build_dir as the cache entry with one rename, so readers never see a half-written entry."""
    d = dataclasses.asdict(info)
    d["so_path"] = None
    d["cached"] = False
    (build_dir / "info.json").write_text(json.dumps(d, indent=1))
    (build_dir / "kernel.o").unlink(missing_ok=True)
    if not info.ok:
        (build_dir / "kernel.so").unlink(missing_ok=True)
    entry.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.rename(build_dir, entry)
    except OSError:
        # Another process published the same key first; its result is equivalent. Use it.
        shutil.rmtree(build_dir, ignore_errors=True)
    if info.ok:
        info.so_path = str(entry / "kernel.so")
    return info


def compile_kernel(source: str, arch: str | None = None, *, extra_flags: Sequence[str] = (),
                   link_flags: Sequence[str] = (), timeout: float = 300.0, cache_dir: Path | None = None,
                   screen_source: bool = True,
                   progress: Callable[[build_progress.BuildProgress], None] | None = None) -> CompileInfo:
    """Screen, then build `source` into a shared library (or return the cached build). Never raises for a bad
    kernel: the outcome is in CompileInfo (ok, log); see compile_status() for the record status. `progress` is
    called every few seconds while nvcc runs, with the time elapsed and what earlier builds of its kind took."""
    started = time.monotonic()
    arch = resolve_arch(arch)
    flags = [*BASE_FLAGS, *gencode_flags(arch), *extra_flags]
    link = list(link_flags)
    shash = source_hash(source)
    key = _key(source, arch, flags, link, screen_source)
    info = CompileInfo(ok=False, arch=arch, nvcc_version=nvcc_version(), flags=flags + link, source_hash=shash,
                       cache_key=key)

    if screen_source:
        from evaluator.screen import screen  # noqa: PLC0415

        reasons = screen(source)
        if reasons:
            info.log = SCREEN_PREFIX + " " + "\n".join(reasons)
            info.seconds = time.monotonic() - started
            return info

    root = _cache_root(cache_dir)
    entry = root / key[:2] / key
    if (hit := _load_cached(entry, started)) is not None:
        return hit

    root.mkdir(parents=True, exist_ok=True)
    build_dir = Path(tempfile.mkdtemp(prefix=f"tmp-{key[:12]}-", dir=root))
    try:
        (build_dir / "kernel.cu").write_text(source)
        includes = include_flags()
        deadline = started + timeout
        nvcc = nvcc_path()
        cmd_c = [nvcc, "-c", "-Xcompiler", "-fPIC", *flags, *includes, "kernel.cu", "-o", "kernel.o"]
        kind = build_progress.kind_of(source)
        with build_progress.Ticker(progress, kind, root, started):
            rc, out = _run(cmd_c, build_dir, deadline)
            log = "$ " + " ".join(cmd_c) + "\n" + out
            refusal: list[str] = []
            if rc == 0 and screen_source:
                from evaluator.screen import screen_symbols  # noqa: PLC0415

                refusal = screen_symbols(build_dir / "kernel.o", source)
            if rc == 0 and not refusal:
                cmd_l = [nvcc, "-shared", *gencode_flags(arch), "kernel.o", *link, "-o", "kernel.so"]
                rc, out = _run(cmd_l, build_dir, deadline)
                log += "$ " + " ".join(cmd_l) + "\n" + out
        info.seconds = info.build_seconds = time.monotonic() - started
        if rc is not None:
            build_progress.record(root, kind, info.build_seconds)
        if rc is None:
            info.log = _clip(f"{TIMEOUT_PREFIX} nvcc did not finish within {timeout:g} s and was killed\n" + log)
            shutil.rmtree(build_dir, ignore_errors=True)
            return info  # never cached: a timeout depends on the machine's load, not only on the source
        info.kernels = parse_ptxas(log)
        _summarise(info)
        if refusal:
            # As deterministic as a compile error, and as expensive to find again: cached the same way.
            info.log = _clip(SCREEN_PREFIX + " " + "\n".join(refusal) + "\n" + log)
            return _store(root, entry, build_dir, info)
        info.log = _clip(log)
        if rc != 0:
            if re.search(r"cannot open source file \"(cutlass|cute)/", log) and _cutlass_root() is None:
                info.log += "\nhint: the CUTLASS/CuTe headers are missing: pip install --no-deps nvidia-cutlass\n"
            return _store(root, entry, build_dir, info)  # compile errors are deterministic: cache them too
        info.ok = True
        return _store(root, entry, build_dir, info)
    except BaseException:
        shutil.rmtree(build_dir, ignore_errors=True)
        raise


def compile_many(sources: Sequence[str], arch: str | None = None, *, jobs: int | None = None,
                 **kw) -> list[CompileInfo]:
    """Compile in parallel (a pool the size of the machine); results in the order of `sources`. Identical sources
    are built once."""
    arch = resolve_arch(arch)
    unique = list(dict.fromkeys(sources))
    workers = max(1, min(jobs or os.cpu_count() or 1, len(unique) or 1))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        built = dict(zip(unique, pool.map(lambda s: compile_kernel(s, arch, **kw), unique)))
    return [dataclasses.replace(built[s]) for s in sources]
