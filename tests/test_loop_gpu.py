"""One real loop on the GPU: the per-shape graph with the built-in model and the real evaluator, a few steps."""
import pytest

pytestmark = pytest.mark.gpu


def test_builtin_loop_on_one_shape(tmp_path):
    from agent.campaign.archive import Archive
    from agent.loop.shape_loop import run_shape
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


def test_campaign_picks_its_winner_in_a_tournament_of_leaders(tmp_path):
    """The campaign on the real evaluator: the leaders are timed head to head in one evaluation, and the archive's
    ranking (so the finals, exports and reports) follows that evaluation."""
    import json

    from agent.campaign.archive import Archive
    from agent.campaign.driver import CampaignConfig, EvaluatorSeam, TOURNAMENT_ROUNDS, run_campaign
    from agent.proposers.builtin_backend import BuiltinProposer

    shape = (512, 512, 512)
    seam = EvaluatorSeam([0], ncu=False)
    cfg = CampaignConfig(run="t", shapes=[shape], budget_candidates=6, runs_dir=tmp_path, n_per_step=3,
                         confirm_top=3, final_repeats=1, final_modes=("offline",), retrieve=False)
    try:
        summary = run_campaign(cfg, seam=seam, make_proposer=lambda: BuiltinProposer(seed=0), live=False)
    finally:
        seam.close()
    assert not summary["failures"], summary["failures"]
    archive = Archive(cfg.run_dir / "archive.sqlite")
    t = archive.tournament(seam.gpu_name, "fp32", shape)
    assert t is not None and len(t["figures"]) == 3, t
    res = t["result"]
    assert res.ok and len(res.rivals) == 2 and res.candidate.samples >= TOURNAMENT_ROUNDS
    ranked = archive.ranked(seam.gpu_name, "fp32", shape)
    assert [v.id for v in ranked[:3]] == [i for i, _ in t["figures"]]
    assert ranked[0].extra["tournament"] == max(f for _, f in t["figures"]) > 0
    rows = [json.loads(line) for line in (cfg.run_dir / "transcript.jsonl").open()]
    assert [r["node"] for r in rows].count("tournament") == 1
    final = [r for r in rows if r["node"] == "final"]
    assert final and all(r["input"]["variant_id"] == ranked[0].id for r in final)
