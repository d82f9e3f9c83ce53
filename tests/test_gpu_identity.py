"""Which GPU a worker uses and names: CUDA counts only the GPUs that CUDA_VISIBLE_DEVICES leaves, nvidia-smi every GPU
of the machine. Under CUDA_VISIBLE_DEVICES=1 the pool's GPU 0 is the machine's GPU 1, and its records must say so."""
import os
import subprocess
import sys

import pytest

from evaluator.gpu import visible_token


def test_a_child_sees_the_gpu_its_parent_counts(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert [visible_token(g) for g in (0, 3)] == ["0", "3"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert visible_token(0) == "1"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2, 5")
    assert [visible_token(0), visible_token(1)] == ["2", "5"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-1234abcd")
    assert visible_token(0) == "GPU-1234abcd"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")  # a Ray actor given GPU 3 passes the id itself
    assert visible_token(3) == "3"


@pytest.mark.gpu
def test_every_worker_names_the_gpu_it_runs_on():
    from evaluator.gpu import device_count, device_uuid
    from evaluator.pool import WorkerPool

    n = device_count()
    uuids = [device_uuid(g) for g in range(n)]
    assert all(u and u.startswith("GPU-") for u in uuids) and len(set(uuids)) == n
    pool = WorkerPool(gpus=list(range(n)))
    try:
        assert [pool.gpu_info(g)["gpu_uuid"] for g in range(n)] == uuids
    finally:
        pool.close()
    # a process under CUDA_VISIBLE_DEVICES=<the last GPU>: its pool's GPU 0 is that GPU, and says so
    probe = ("from evaluator.pool import WorkerPool\n"
             "p = WorkerPool(gpus=[0])\nprint(p.gpu_info(0)['gpu_uuid'])\np.close()")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, CUDA_VISIBLE_DEVICES=str(n - 1))).stdout.split()
    assert out and out[-1] == uuids[-1]
