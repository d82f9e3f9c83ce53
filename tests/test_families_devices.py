"""One loaded kernel serving every GPU of the process: what a family sets up once (the shared-memory limit, the SM
count, the clusters that fit) belongs to a device, so a call on a second device must set it up again and a call back
on the first must find its own. Needs two GPUs (the device tool's nvidia-h200-x2); skipped otherwise."""
from __future__ import annotations

import ctypes
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_families import AMPERE_OK, HOPPER_OK, RAW_OK, SMALL_OK  # noqa: E402

from agent import families  # noqa: E402

# each needs more than the default 48 KB of dynamic shared memory, so its launch depends on the per-device attribute
CASES = [
    ("small", dict(SMALL_OK, bm=32, bn=64, wm=2, wn=2), (64, 512, 2048)),
    ("ampere_cute", AMPERE_OK, (1000, 1000, 1024)),
    ("hopper_wgmma", HOPPER_OK, (1024, 1024, 1024)),
    ("hopper_raw", dict(RAW_OK, cluster_m=2, group=2), (1024, 1008, 520)),
]


@pytest.fixture(scope="module")
def two_gpus():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or torch.cuda.device_count() < 2:
        pytest.skip("needs two CUDA GPUs (run on the device's nvidia-h200-x2 with: pytest -m gpu)")
    return torch


@pytest.fixture(scope="module")
def libraries(two_gpus):
    from evaluator.compile import compile_many

    infos = compile_many([families.render(f, p, shape, "sm_90a") for f, p, shape in CASES], "sm_90a", timeout=900)
    for info in infos:
        assert info.ok and info.so_path, info.log[-3000:]
    return {case[0]: info.so_path for case, info in zip(CASES, infos)}


@pytest.mark.gpu
@pytest.mark.parametrize("family,params,shape", CASES, ids=[c[0] for c in CASES])
def test_one_library_computes_on_each_device_in_turn(two_gpus, libraries, family, params, shape):
    torch = two_gpus
    fn = ctypes.CDLL(libraries[family]).hgemm
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int] * 3 + [ctypes.c_void_p]
    m, n, k = shape
    for device in (0, 1, 0):
        with torch.cuda.device(device):
            gen = torch.Generator(device=f"cuda:{device}").manual_seed(device + 1)
            # {0,1} entries: every partial sum is an exact fp32 integer, so any split or order rounds alike
            a = torch.randint(0, 2, (m, k), device=f"cuda:{device}", generator=gen).half()
            b = torch.randint(0, 2, (k, n), device=f"cuda:{device}", generator=gen).half()
            b_col = b.t().contiguous()
            c = torch.full((m, n), float("nan"), device=f"cuda:{device}", dtype=torch.half)
            stream = torch.cuda.current_stream(device)
            rc = fn(a.data_ptr(), b.data_ptr(), b_col.data_ptr(), c.data_ptr(), m, n, k, stream.cuda_stream)
            stream.synchronize()
            assert rc == 0, f"{family} on device {device}: hgemm returned {rc}"
            want = (a.float() @ b.float()).half()
            assert torch.equal(c, want), f"{family} on device {device}: {int((c != want).sum())} wrong outputs"
