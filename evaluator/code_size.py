"""How many bytes of machine code a candidate's kernels are: a cold call fetches them before its first MMA.

`text_bytes(source, arch)` builds the source to a cubin with the evaluator's flags and reads each kernel's `.text`
section from its ELF section headers (no cuobjdump needed, so it runs where only nvcc is installed). Halving
hopper_raw's SASS by keeping its k-block loops rolled made its kernels 0.5-0.8% faster on average, cold and warm
(docs/benchmarks/big_shapes_and_server.md, "hopper_raw's k-block loops rolled"). `ptx_text(source, arch)` is the
PTX of the same build: which fences and atomics a kernel carries (tests/test_splitk_handoff.py).
"""
from __future__ import annotations

import struct
import subprocess
import tempfile
from pathlib import Path

from evaluator.compile import BASE_FLAGS, gencode_flags, include_flags, nvcc_path, virtual_arch

TEXT = ".text."


def elf_text_sizes(blob: bytes) -> dict[str, int]:
    """{function name: bytes} of the `.text.<name>` sections of a 64-bit little-endian ELF (a cubin)."""
    if blob[:4] != b"\x7fELF" or blob[4] != 2 or blob[5] != 1:
        raise ValueError("not a 64-bit little-endian ELF file")
    shoff, = struct.unpack_from("<Q", blob, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", blob, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", blob, shoff + i * shentsize) for i in range(shnum)]
    names_at = headers[shstrndx][4]  # sh_offset of the section-name table

    names = [blob[names_at + h[0]:blob.index(b"\0", names_at + h[0])].decode() for h in headers]
    return {name[len(TEXT):]: h[5] for name, h in zip(names, headers) if name.startswith(TEXT)}


def _nvcc_output(source: str, arch: str, kind: str, timeout: float) -> bytes:
    """nvcc's `-cubin` or `-ptx` output for `source` with the evaluator's flags (less -lineinfo and -Xptxas=-v)."""
    nvcc = nvcc_path()
    includes = include_flags()
    flags = [f for f in BASE_FLAGS if f not in ("-lineinfo", "-Xptxas=-v")]
    target = gencode_flags(arch) if kind == "cubin" else [f"-arch={virtual_arch(arch)}"]
    with tempfile.TemporaryDirectory(prefix="cudal2-size-") as tmp:
        (Path(tmp) / "kernel.cu").write_text(source)
        cmd = [nvcc, f"-{kind}", *flags, *target, *includes, "kernel.cu", "-o", f"kernel.{kind}"]
        p = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, timeout=timeout, check=False)
        if p.returncode:
            raise RuntimeError(f"nvcc failed building a {kind}:\n{(p.stderr or p.stdout)[-2000:]}")
        return (Path(tmp) / f"kernel.{kind}").read_bytes()


def text_bytes(source: str, arch: str = "sm_90a", timeout: float = 600.0) -> dict[str, int]:
    """Each kernel's machine-code bytes in `source` built for `arch`; RuntimeError with nvcc's words if it fails
    (evaluator.compile.ToolMissingError where there is no nvcc)."""
    return elf_text_sizes(_nvcc_output(source, arch, "cubin", timeout))


def ptx_text(source: str, arch: str = "sm_90a", timeout: float = 600.0) -> str:
    """The PTX nvcc makes of `source` for `arch`: where no cuobjdump is installed, what shows which fences and
    atomics a kernel carries."""
    return _nvcc_output(source, arch, "ptx", timeout).decode()
