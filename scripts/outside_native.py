"""Build and call scripts/outside_native.cu, the outside harness's own cuBLAS / cuBLASLt baselines and stream control.

The library is built with nvcc on the machine that runs it, linked against whichever cuBLAS it finds first: the CUDA
toolkit's ($CUDA_HOME, then nvcc's own folder, then /usr/local/cuda), else the pip wheels' (nvidia/cu13, nvidia/cublas
in site-packages). Nothing here imports the evaluator or the agent.
"""
from __future__ import annotations

import ctypes
import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

SOURCE = Path(__file__).with_name("outside_native.cu")
LAYOUTS = ("NN", "TN")  # 0: B read row-major, 1: B_col_major read transposed


def _roots() -> list[Path]:
    roots = [Path(os.environ[v]) for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    nvcc = shutil.which("nvcc")
    if nvcc:
        roots.append(Path(nvcc).resolve().parents[1])
    roots.append(Path("/usr/local/cuda"))
    return roots


def _site_dirs() -> list[Path]:
    dirs = list(site.getsitepackages()) + [site.getusersitepackages()] + [p for p in sys.path if p]
    return list(dict.fromkeys(Path(d) for d in dirs))


def candidate_dirs(extra_includes: list[str] | None = None) -> tuple[list[Path], list[Path]]:
    """Folders that may hold cublasLt.h and libcublasLt, toolkit first (its headers match its nvcc)."""
    incs = [Path(d) for d in extra_includes or []]
    libs = []
    for r in _roots():
        incs += [r / "include", r / "targets" / "x86_64-linux" / "include"]
        libs += [r / "lib64", r / "targets" / "x86_64-linux" / "lib", r / "lib"]
    for sp in _site_dirs():
        for sub in ("nvidia/cu13", "nvidia/cublas", "nvidia/cu12"):
            incs.append(sp / sub / "include")
            libs.append(sp / sub / "lib")
    return incs, libs


def cublas_include(extra_includes: list[str] | None = None) -> Path | None:
    return next((d for d in candidate_dirs(extra_includes)[0] if (d / "cublasLt.h").is_file()), None)


def cublas_link_args() -> list[str] | None:
    """Linker arguments for cuBLAS and cuBLASLt from one folder, named by path (a wheel ships only the versioned
    names, libcublasLt.so.13, which -l cannot find). The folder goes in the rpath."""
    for d in candidate_dirs()[1]:
        picked = []
        for name in ("libcublasLt.so", "libcublas.so"):
            found = sorted(d.glob(name + "*"), key=lambda p: len(p.name)) if d.is_dir() else []
            if not found:
                break
            picked.append(found[0])
        if len(picked) == 2:  # nvcc takes no .so.13 as an input file: the linker gets them directly
            return [a for p in picked for a in ("-Xlinker", str(p))] + ["-Xlinker", "-rpath", "-Xlinker",
                                                                         str(d.resolve())]
    return None


def build(out_dir: Path, arch: str, compile_only: bool = False,
          extra_includes: list[str] | None = None) -> tuple[Path | None, str]:
    """The shared library (or, compile_only, an object file: no cuBLAS libraries needed) and nvcc's complaint."""
    inc = cublas_include(extra_includes)
    if inc is None:
        return None, "cublasLt.h not found (looked in the CUDA toolkit and nvidia/* wheels in site-packages)"
    out = out_dir / ("outside_native.o" if compile_only else "liboutside_native.so")
    cmd = ["nvcc", "-Xcompiler", "-fPIC", "-O2", "-std=c++17", f"-gencode=arch=compute_{arch[3:]},code={arch}",
           f"-I{inc}", str(SOURCE), "-o", str(out)]
    if compile_only:
        cmd.insert(1, "-c")
    else:
        link = cublas_link_args()
        if link is None:
            return None, "libcublasLt / libcublas not found (looked in the CUDA toolkit and nvidia/* wheels)"
        cmd[1:1] = ["-shared"]
        cmd += link
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        return None, " ".join(cmd) + "\n" + r.stderr[-3000:]
    return out, ""


class NativeError(RuntimeError):
    pass


class Native:
    """ctypes view of the library; one stream, cuBLAS and cuBLASLt handle and workspace for the whole run."""

    def __init__(self, so: Path):
        lib = self.lib = ctypes.CDLL(str(so))
        p, i = ctypes.c_void_p, ctypes.c_int
        for name, args, res in (("oh_error", [], ctypes.c_char_p), ("oh_cublaslt_version", [], ctypes.c_size_t),
                                ("oh_init", [], i), ("oh_stream", [], p), ("oh_shape", [i] * 4, i),
                                ("oh_algo_count", [i], i), ("oh_algo_describe", [i, i, ctypes.c_char_p, i], i),
                                ("oh_cublas", [i, p, p, p], i), ("oh_lt", [i, i, p, p, p], i),
                                ("oh_separator", [], i), ("oh_begin", [i], i), ("oh_end", [], ctypes.c_double),
                                ("oh_expired", [], i)):
            f = getattr(lib, name)
            f.argtypes, f.restype = args, res
        self._check(lib.oh_init())
        self.stream = lib.oh_stream()
        self.version = int(lib.oh_cublaslt_version())

    def _check(self, rc: int) -> None:
        if rc != 0:
            raise NativeError(self.lib.oh_error().decode())

    def shape(self, m: int, n: int, k: int, fp16_acc: bool) -> dict[str, int]:
        """Sets the shape up; how many algorithms cuBLASLt's heuristic offered per layout."""
        self._check(self.lib.oh_shape(m, n, k, int(fp16_acc)))
        return {name: self.lib.oh_algo_count(li) for li, name in enumerate(LAYOUTS)}

    def describe(self, layout: int, index: int) -> str:
        buf = ctypes.create_string_buffer(160)
        self._check(self.lib.oh_algo_describe(layout, index, buf, len(buf)))
        return buf.value.decode()

    def cublas(self, layout: int, a: int, b: int, c: int) -> None:
        self._check(self.lib.oh_cublas(layout, a, b, c))

    def lt(self, layout: int, index: int, a: int, b: int, c: int) -> None:
        self._check(self.lib.oh_lt(layout, index, a, b, c))

    def separator(self) -> None:
        self._check(self.lib.oh_separator())

    def begin(self, held: bool) -> None:
        self._check(self.lib.oh_begin(int(held)))

    def end(self) -> tuple[float, bool]:
        """Milliseconds of the batch and whether its hold ran out first (then host gaps are in it)."""
        ms = self.lib.oh_end()
        if ms < 0:
            raise NativeError(self.lib.oh_error().decode())
        return ms, bool(self.lib.oh_expired())
