"""One real loop on the GPU: the per-shape graph with the built-in model and the real evaluator, a few steps."""
import pytest

pytestmark = pytest.mark.gpu


def test_builtin_loop_on_one_shape(tmp_path):
    from agent.archive import Archive
    from agent.graph import run_shape
    from agent.proposers.builtin_backend import BuiltinProposer
    from agent.transcript import Transcript
    from evaluator.api import evaluate
    from evaluator.gpu import device_name, native_arch
    from evaluator.pool import WorkerPool

    shape = (256, 512, 1024)
    pool = WorkerPool(gpus=[0])
    gpu, arch = device_name(0), native_arch(0)
    archive = Archive(tmp_path / "archive.sqlite")
    try:
        out = run_shape(shape, acc="fp32", gpu_name=gpu, arch=arch, run_dir=tmp_path, proposer=BuiltinProposer(seed=0),
                        evaluate_fn=lambda src, shp, **kw: evaluate(src, shp, pool=pool, **kw),
                        archive=archive, transcript=Transcript(tmp_path / "transcript.jsonl", run="gpu"),
                        budget_candidates=4, n_per_step=2, eval_kwargs={"mode": "offline", "profile": "quick"})
    finally:
        pool.close()
    assert out.candidates >= 4 and out.steps >= 2, out
    hist = archive.history(gpu, "fp32", shape)
    assert len(hist) >= 4
    ok = [v for v in hist if v.result.ok]
    assert ok, [(v.result.status, v.result.reason[:200]) for v in hist]
    best = archive.best(gpu, "fp32", shape)
    assert best is not None and best.result.speedup("cublaslt-autotune-max") > 0
    assert all(c.passed for c in best.result.checks)
    nodes = {e["node"] for e in Transcript(tmp_path / "transcript.jsonl", run="gpu").read()}
    assert {"propose", "evaluate", "record", "decide"} <= nodes
