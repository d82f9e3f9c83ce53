"""The campaign driver on a local Ray cluster with two fake GPUs (Ray resources, no CUDA): GPU actors answer from
results recorded on a GPU (agent.cluster.backends.RecordedSpec); the driver, archive, transcript, routing and
retries are real. One actor is killed with an evaluation in flight."""
from __future__ import annotations

import io
import json
import os
import sys
import threading
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="ray is not installed (optional extra: pip install 'cuda-l2[ray]')")

sys.path.insert(0, str(Path(__file__).parent))
from http_servers import RECORDED_RESULTS, kernel_source  # noqa: E402

from agent.campaign.driver import CampaignConfig, CampaignDB, run_campaign  # noqa: E402
from agent.cluster import RaySeam  # noqa: E402
from agent.cluster.backends import RecordedSpec  # noqa: E402
from agent.proposers.base import Proposal, ProposalContext, Proposer  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
GPU = "NVIDIA H200"
TAGS = ["naive", "tile128", "pipelined", "broken", "tile128x256", "wrong", "wgmma"]


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=4, num_gpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
             runtime_env={"env_vars": {"PYTHONPATH": str(REPO)}})
    yield
    ray.shutdown()


class Scripted(Proposer):
    name = "scripted"

    def propose(self, context: ProposalContext, n: int) -> list[Proposal]:
        m, nn, k = context.shape
        return [Proposal(kernel_source(TAGS[(context.step * n + i + m // 64) % len(TAGS)],
                                       extra=f"// {m}x{nn}x{k} step {context.step} #{i}\n"),
                         model="scripted", name=f"c{context.step}-{i}", family="naive") for i in range(n)]


def events(log: Path) -> list[dict]:
    return [json.loads(x) for x in log.read_text().splitlines() if x.strip()] if log.exists() else []


def run(tmp_path, seam, shapes, budget, run_name="r"):
    from rich.console import Console

    cfg = CampaignConfig(run=run_name, shapes=shapes, budget_candidates=budget, runs_dir=tmp_path / "runs",
                         global_archive=None, n_per_step=2)
    summary = run_campaign(cfg, seam=seam, make_proposer=Scripted, console=Console(file=io.StringIO(), width=200),
                           live=False)
    return cfg, summary


def spec(tmp_path, delay):
    return RecordedSpec(recorded=json.loads(RECORDED_RESULTS.read_text()), log=str(tmp_path / "gpu.jsonl"),
                        delay=delay)


def test_campaign_spreads_shapes_over_gpu_actors(cluster, tmp_path):
    from agent.campaign.archive import Archive

    seam = RaySeam(spec(tmp_path, 0.05))
    try:
        assert seam.gpu_name == GPU and seam.arch == "sm_90a" and seam.lanes == 4
        where = seam.where()
        assert sorted(w["gpu_id"] for w in where.values()) == [0, 1]
        assert all(w["node_id"] and w["gpu_name"] == GPU for w in where.values())
        assert seam.gpu_facts()["name"] == GPU and seam.profiles is False  # the recorded GPUs have no ncu
        shapes = [(64, 64, 64), (128, 128, 128), (192, 64, 64), (256, 128, 64)]
        cfg, summary = run(tmp_path, seam, shapes, budget=4)
    finally:
        seam.close()
    assert not summary["failures"]
    arch = Archive(cfg.run_dir / "archive.sqlite")
    gpus_of = {}
    for s in shapes:
        hist = arch.history(GPU, "fp32", s)
        assert len(hist) == 4
        # every result says where it ran; a shape stays on one GPU
        tags = {(v.result.gpu["node_id"], v.result.gpu["ray_gpu_id"]) for v in hist}
        assert len(tags) == 1, (s, tags)
        assert all(v.result.gpu["cluster"]["attempts"] == 1 for v in hist)
        gpus_of[s] = tags.pop()[1]
    assert sorted(gpus_of.values()) == [0, 0, 1, 1]  # spread: two shapes per GPU
    finals = CampaignDB(cfg.run_dir / "campaign.sqlite").finals()
    assert {(f["shape"], f["mode"]) for f in finals} == {(s, m) for s in shapes for m in ("offline", "server")}
    assert all(f["result"].gpu["ray_gpu_id"] == gpus_of[f["shape"]] for f in finals)
    ev = events(tmp_path / "gpu.jsonl")
    builds = {e["hash"] for e in ev if e["op"] == "build"}
    evaluated = {e["hash"] for e in ev if e["op"] == "finish"}
    assert evaluated <= builds  # every evaluated kernel went through a build task first
    # Build tasks ran in Ray workers, not in the driver process.
    assert os.getpid() not in {e["pid"] for e in ev if e["op"] == "build"}
    # Each shape's tournament reached its GPU's actor with the leaders as rivals (a recorded answer has no rivals'
    # rounds, so the pooled ranking stands there).
    # Server mode, a final mode other than the search's, plays its own tournament of the same leaders.
    for mode in ("offline", "server"):
        asked = [e for e in ev if e["op"] == "start" and e["rivals"] and e["mode"] == mode]
        assert sorted(tuple(e["shape"]) for e in asked) == sorted(shapes), mode
        assert all(1 <= len(e["rivals"]) <= 2 for e in asked)
    assert all(arch.tournament(GPU, "fp32", s) is None for s in shapes)


@pytest.mark.slow
def test_killed_actor_inflight_evaluation_is_retried_and_nothing_finished_is_lost(cluster, tmp_path):
    from agent.campaign.archive import Archive

    log = tmp_path / "gpu.jsonl"
    seam = RaySeam(spec(tmp_path, 0.4), probe_every_s=0.5)
    shapes = [(64, 64, 64), (128, 128, 128)]
    out = {}

    def go():
        out["result"] = run(tmp_path, seam, shapes, budget=6)

    t = threading.Thread(target=go)
    t.start()
    try:
        # Wait until both GPUs have finished something and one has an evaluation in flight, then kill that actor.
        victim, deadline = None, time.monotonic() + 60
        while victim is None and time.monotonic() < deadline:
            ev = [e for e in events(log) if e["op"] in ("start", "finish")]
            done_on = {e["gpu"] for e in ev if e["op"] == "finish"}
            started = {}
            for e in ev:
                key = (e["gpu"], e["hash"], e["mode"])
                if e["op"] == "start":
                    started[key] = e
                elif e["op"] == "finish":
                    started.pop(key, None)
            if done_on == {0, 1} and started:
                victim = next(iter(started.values()))
            else:
                time.sleep(0.05)
        assert victim is not None, "no evaluation in flight to interrupt"
        key = next(k for k, w in seam.where().items() if w["gpu_id"] == victim["gpu"])
        finished_before = [e for e in events(log) if e["op"] == "finish"]
        ray.kill(seam.actors[key].handle)
        t.join(timeout=90)
        assert not t.is_alive(), "the campaign did not finish after losing a GPU"
    finally:
        t.join(timeout=5)
        seam.close()
    cfg, summary = out["result"]
    assert not summary["failures"], summary["failures"]
    arch = Archive(cfg.run_dir / "archive.sqlite")
    hist = {s: arch.history(GPU, "fp32", s) for s in shapes}
    assert all(len(h) == 6 for h in hist.values())  # the full budget, in spite of the loss
    by_hash = {v.source_hash: v for h in hist.values() for v in h}

    # The interrupted evaluation was sent to the surviving GPU and archived once, with the loss on record.
    if victim["mode"] == "offline":
        v = by_hash[victim["hash"]]
        assert v.result.gpu["ray_gpu_id"] != victim["gpu"]
        assert v.result.gpu["cluster"]["attempts"] == 2
        assert v.result.gpu["cluster"]["lost"][0]["gpu"] == key
    assert any(e["event"] == "lost" and e["gpu"] == key for e in seam.events)
    assert any(e["event"] == "retried" and e["shape"] == list(victim["shape"]) for e in seam.events)
    # Nothing that finished before the kill is lost: each finished offline evaluation is in the archive.
    for e in finished_before:
        if e["mode"] == "offline":
            assert e["hash"] in by_hash, e
    # The killed actor never finished its evaluation; another actor did.
    ev = events(log)
    same = [e for e in ev if e["op"] == "finish" and e["hash"] == victim["hash"] and e["mode"] == victim["mode"]]
    assert same and all(e["pid"] != victim["pid"] for e in same)
    # The victim's shapes were moved off the lost GPU.
    moved = [m for m in seam.router.moves if m[1] == key]
    assert moved and all(m[2] != key for m in moved)
