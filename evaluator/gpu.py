"""Is there a CUDA GPU here, and which one? Answered through the driver library alone (no torch, no cupy)."""
from __future__ import annotations

import ctypes
import functools
import os
import shutil
import subprocess
import sys


class NoGPUError(RuntimeError):
    """Raised where an operation needs a CUDA GPU and this machine has none."""

    def __init__(self, what: str = "this operation"):
        super().__init__(f"{what} needs a CUDA GPU, and none is visible on this machine (no usable libcuda / "
                         "no device). Compile-only checks work without one: cudal2 eval KERNEL.cu --compile-only")


@functools.lru_cache(maxsize=1)
def _driver() -> ctypes.CDLL | None:
    for name in ("libcuda.so.1", "libcuda.so"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None


@functools.lru_cache(maxsize=1)
def device_count() -> int:
    lib = _driver()
    if lib is None or lib.cuInit(0) != 0:
        return 0
    n = ctypes.c_int(0)
    if lib.cuDeviceGetCount(ctypes.byref(n)) != 0:
        return 0
    return n.value


def has_gpu() -> bool:
    return device_count() > 0


def gpu_missing(tool: str) -> bool:
    """For the device scripts: True (after saying so on stderr) when this machine has no CUDA GPU."""
    if has_gpu():
        return False
    print(f"{tool} needs a CUDA GPU, and this machine has none.", file=sys.stderr)
    return True


def compute_capability(device: int = 0) -> tuple[int, int]:
    lib = _driver()
    if lib is None or device_count() <= device:
        raise NoGPUError("reading the compute capability")
    major, minor = ctypes.c_int(), ctypes.c_int()
    # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75, _MINOR = 76
    lib.cuDeviceGetAttribute(ctypes.byref(major), 75, device)
    lib.cuDeviceGetAttribute(ctypes.byref(minor), 76, device)
    return major.value, minor.value


def native_arch(device: int = 0) -> str:
    """The nvcc architecture for this GPU: the 'a' variant where the chip has arch-specific features (wgmma)."""
    major, minor = compute_capability(device)
    suffix = "a" if (major, minor) in ((9, 0), (10, 0), (10, 3), (12, 0)) else ""
    return f"sm_{major}{minor}{suffix}"


def device_name(device: int = 0) -> str:
    lib = _driver()
    if lib is None or device_count() <= device:
        raise NoGPUError("reading the device name")
    buf = ctypes.create_string_buffer(256)
    lib.cuDeviceGetName(buf, 256, device)
    return buf.value.decode()


def device_uuid(device: int = 0) -> str | None:
    """The UUID (as nvidia-smi spells it) of the GPU this process sees as `device`, read through CUDA, which counts
    only the GPUs CUDA_VISIBLE_DEVICES leaves; None where the driver cannot say."""
    lib = _driver()
    if lib is None or device_count() <= device:
        return None
    fn = getattr(lib, "cuDeviceGetUuid_v2", None) or getattr(lib, "cuDeviceGetUuid", None)
    raw = (ctypes.c_ubyte * 16)()
    if fn is None or fn(raw, device) != 0:
        return None
    h = bytes(raw).hex()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def visible_token(gpu: int) -> str:
    """CUDA_VISIBLE_DEVICES for a child process that is to use this process's GPU `gpu`: that entry of this process's
    own list (under CUDA_VISIBLE_DEVICES=1 GPU 0 here is the machine's GPU 1), or `gpu` itself where the list has no
    such entry (a Ray actor passes the id it was given, beyond its one-entry list)."""
    visible = [t.strip() for t in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if t.strip()]
    return visible[gpu] if 0 <= gpu < len(visible) else str(gpu)


def nvidia_smi_query(fields: str, device: int = 0) -> list[str]:
    """Fields from nvidia-smi (clocks, driver) of the GPU this process sees as `device`; empty where nvidia-smi is
    missing. nvidia-smi numbers every GPU of the machine whatever CUDA_VISIBLE_DEVICES says, so it is asked by UUID:
    by index, a worker on the machine's GPU 1 read GPU 0's UUID, clocks and power."""
    if not shutil.which("nvidia-smi"):
        return []
    try:
        out = subprocess.run(["nvidia-smi", f"--id={device_uuid(device) or device}", f"--query-gpu={fields}",
                              "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [x.strip() for x in out.strip().split(",")] if out.strip() else []
