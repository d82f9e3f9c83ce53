"""The GPU session (evaluator.session) on a real GPU, as the campaign's seam and as a cluster actor's backend: both
compile, evaluate, profile and read the GPU's facts through it and give the same answer for the same kernel."""
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

KERNEL = (Path(__file__).parent / "kernels" / "reference_wmma.cu").read_text()
SHAPE = (256, 512, 1024)


def test_the_campaign_seam_and_the_cluster_backend_share_one_session():
    from agent.campaign.driver import CampaignError, EvaluatorSeam
    from agent.cluster.backends import EvaluatorGPU
    from evaluator.session import GPUSession, device_count

    with pytest.raises(CampaignError, match="--gpus names GPU"):
        EvaluatorSeam([device_count()])
    seam = EvaluatorSeam([0])
    try:
        assert isinstance(seam, GPUSession) and seam.lanes == 2 and seam.arch.startswith("sm_")
        facts = seam.gpu_facts()
        assert facts["sm_count"] and facts["name"] == seam.gpu_name
        seam.compile(KERNEL)
        res = seam.evaluate(KERNEL, SHAPE, acc="fp32", mode="offline", profile="quick")
        assert res.ok, res.reason
        if seam.profiles:
            assert seam.profile(KERNEL, SHAPE, acc="fp32") is not None
    finally:
        seam.close()
    actor = EvaluatorGPU(0)  # outside Ray, device 0 is the GPU itself
    try:
        d = actor.evaluate(KERNEL, list(SHAPE), acc="fp32", mode="offline", profile="quick")
        assert d["status"] == "ok" and d["gpu"]["gpu_index"] == 0
        assert actor.gpu_facts() == facts and actor.arch == seam.arch
    finally:
        actor.close()
