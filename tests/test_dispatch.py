"""The dispatch library: kernel selection from an exported archive (CPU), and on a GPU a two-shape campaign with
the built-in model whose exported kernels multiply torch (and CuPy) tensors, checked against torch.matmul."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_campaign import GPU, campaign  # noqa: E402

from agent.campaign.archive_io import export_archive  # noqa: E402
from evaluator.dispatch import Dispatcher, read_manifest  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dispatch")
    cfg, summary, _ = campaign(tmp, [(64, 64, 64), (128, 256, 512)], budget=4)
    assert not summary["failures"], summary["failures"]  # a shape that failed would leave the export without it
    export_archive(cfg.run_dir / "archive.sqlite", tmp / "export", run_dir=cfg.run_dir)
    return tmp / "export"


def test_selection_is_max_of_kernel_and_baseline(exported):
    # Recorded results: the 128x256x512 winner beats cuBLASLt-AutoTuning (1.036x), the 64x64x64 one does not.
    d = Dispatcher(exported, gpu_name=GPU, baseline="cublaslt-autotune-max")
    assert set(d.table()) == {(128, 256, 512)}
    assert d.kernel_for((64, 64, 64)) is None and d.kernel_for((1, 2, 3)) is None
    # Against plain cuBLAS both win; with min_speedup=0 every archived kernel is used.
    assert set(Dispatcher(exported, gpu_name=GPU, baseline="cublas-max").table()) == {(64, 64, 64),
                                                                                        (128, 256, 512)}
    assert len(Dispatcher(exported, gpu_name=GPU, min_speedup=0.0).table()) == 2
    # Kernels timed on another GPU model or for the other accumulator are not used.
    assert Dispatcher(exported, gpu_name="NVIDIA A100-SXM4-80GB").table() == {}
    assert len(Dispatcher(exported, gpu_name="NVIDIA A100-SXM4-80GB", any_gpu=True, min_speedup=0).table()) == 2
    assert Dispatcher(exported, gpu_name=GPU, acc="fp16", min_speedup=0).table() == {}


def test_bad_inputs(exported, tmp_path):
    import torch

    d = Dispatcher(exported, gpu_name=GPU)
    with pytest.raises(TypeError, match="torch tensor or a CuPy array"):
        d.matmul(np.zeros((2, 2), np.float16), np.zeros((2, 2), np.float16))
    with pytest.raises(TypeError, match="fp16"):
        d.matmul(torch.zeros(2, 2), torch.zeros(2, 2))
    with pytest.raises(ValueError, match="CUDA tensors"):
        d.matmul(torch.zeros(2, 2, dtype=torch.float16), torch.zeros(2, 2, dtype=torch.float16))
    with pytest.raises(FileNotFoundError, match="no manifest"):
        Dispatcher(tmp_path)
    (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        read_manifest(tmp_path)
    (tmp_path / "manifest.json").write_text(json.dumps({"kernels": [{"file": "../x.cu", "shape": [1, 1, 1],
                                                                       "acc": "fp32"}]}))
    with pytest.raises(ValueError, match="outside the archive"):
        read_manifest(tmp_path)
    (tmp_path / "manifest.json").write_text(json.dumps({"kernels": [{"file": "x.cu", "shape": [0, 1, 1],
                                                                       "acc": "fp32"}]}))
    with pytest.raises(ValueError, match=r"kernels\[0\]: M must be positive"):
        read_manifest(tmp_path)


@pytest.mark.gpu
def test_campaign_end_to_end_then_dispatch(tmp_path):
    """Two shapes, built-in model, real evaluator; then the exported kernels run through the dispatch library."""
    import torch

    shapes = tmp_path / "shapes.txt"
    shapes.write_text("256 256 256\n512 256 1024\n")
    env_run = [sys.executable, "-m", "agent.cli"]
    r = subprocess.run([*env_run, "campaign", "--shapes", str(shapes), "--model", "builtin", "--budget", "4",
                        "--run", "gpu-e2e", "--runs-dir", str(tmp_path / "runs"), "--no-global"],
                       cwd=REPO, capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    r = subprocess.run([*env_run, "archive", "export", str(tmp_path / "export"), "--run", "gpu-e2e", "--runs-dir",
                        str(tmp_path / "runs")], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([*env_run, "report", "gpu-e2e", "--runs-dir", str(tmp_path / "runs")], cwd=REPO,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and (tmp_path / "runs" / "gpu-e2e" / "report.html").is_file(), r.stderr

    kernels = read_manifest(tmp_path / "export")
    assert kernels, "the campaign archived no correct kernel"
    d = Dispatcher(tmp_path / "export", min_speedup=0.0)  # use every archived kernel, fast or not
    assert d.warmup() == len(d.table()) > 0
    torch.manual_seed(0)
    side = torch.cuda.Stream()
    for k in kernels:
        m, n, kk = k.shape
        a = (torch.randn(m, kk, device="cuda") * 0.5).half()
        b = (torch.randn(kk, n, device="cuda") * 0.5).half()
        ref = torch.matmul(a.float(), b.float())
        before = d.stats["kernel"]
        with torch.cuda.stream(side):  # the kernel must run on the caller's current stream
            c = d.matmul(a, b)
        side.synchronize()
        assert d.stats["kernel"] == before + 1, "the archived kernel was not used"
        torch.testing.assert_close(c.float(), ref, atol=0.05 * (kk ** 0.5) / 8, rtol=0.02)
        # Caller-provided column-major B (no copy) gives the same answer.
        c2 = d.matmul(a, b, b_col_major=b.t().contiguous())
        torch.testing.assert_close(c2, c, atol=0, rtol=0)
    # A shape the archive lacks falls back to cuBLAS.
    a = torch.randn(33, 65, device="cuda").half()
    b = torch.randn(65, 17, device="cuda").half()
    before = d.stats["fallback"]
    torch.testing.assert_close(d.matmul(a, b), torch.matmul(a, b))
    assert d.stats["fallback"] == before + 1
    # The default dispatcher keeps only kernels that beat torch.matmul when they were measured.
    strict = Dispatcher(tmp_path / "export")
    assert all((k.speedup("torch") or k.speedup("cublas-max")) > 1.0 for k in strict.table().values())

    cupy = pytest.importorskip("cupy")
    for k in kernels:
        m, n, kk = k.shape
        a = (cupy.random.standard_normal((m, kk), dtype=cupy.float32) * 0.5).astype(cupy.float16)
        b = (cupy.random.standard_normal((kk, n), dtype=cupy.float32) * 0.5).astype(cupy.float16)
        c = d.matmul(a, b)
        ref = a.astype(cupy.float32) @ b.astype(cupy.float32)
        assert float(cupy.abs(c.astype(cupy.float32) - ref).max()) < 0.05 * (kk ** 0.5)
