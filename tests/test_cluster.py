"""The parts of agent.cluster that need no Ray: shape routing, moving builds between nodes' caches, the error
without Ray, and the campaign simulation."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from agent.cluster.routing import NoLiveGPU, ShapeRouter

REPO = Path(__file__).resolve().parents[1]


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_router_spreads_new_shapes_and_keeps_each_on_its_gpu():
    clock = Clock()
    r = ShapeRouter(["a", "b"], idle_s=100, clock=clock)
    homes = {s: r.acquire(s) for s in [(1, 1, 1), (2, 2, 2), (3, 3, 3), (4, 4, 4)]}
    assert sorted(homes.values()) == ["a", "a", "b", "b"]
    for s, k in homes.items():
        r.release(k, s)
        assert r.acquire(s) == k  # sticky
        r.release(k, s)
    # Shapes idle past idle_s no longer count: a fresh shape goes where the active ones are fewer.
    clock.t = 50
    r.release(r.acquire((1, 1, 1)), (1, 1, 1))
    clock.t = 120  # (2,2,2), (3,3,3), (4,4,4) idle for 120 s; (1,1,1) for 70 s
    assert r.load()[homes[(1, 1, 1)]]["active_shapes"] == 1
    assert r.acquire((5, 5, 5)) != homes[(1, 1, 1)]


def test_router_moves_shapes_off_a_lost_gpu_and_gives_up_only_when_all_are_lost():
    r = ShapeRouter(["a", "b", "c"])
    k = r.acquire((8, 8, 8))
    r.release(k, (8, 8, 8))
    r.lost(k, "node died")
    k2 = r.acquire((8, 8, 8))
    assert k2 != k and r.home((8, 8, 8)) == k2
    assert r.moves == [((8, 8, 8), k, k2)]
    # `exclude` (GPUs this evaluation already failed on) is honoured while others live.
    k3 = r.acquire((8, 8, 8), exclude={k2})
    assert k3 not in (k, k2)
    for g in ("a", "b", "c"):
        r.lost(g, f"{g} gone")
    with pytest.raises(NoLiveGPU, match="a gone"):
        r.acquire((9, 9, 9))
    r.revive("b")
    assert r.acquire((9, 9, 9)) == "b"


def test_build_moves_to_another_nodes_cache(tmp_path, monkeypatch):
    """A library built on one node (its own cache) is installed into another node's cache, where the evaluator's
    compile_kernel then finds it instead of building."""
    from agent.cluster.backends import build_artifact
    from evaluator.session import install_artifact
    from evaluator.compile import compile_kernel

    src = (REPO / "tests" / "kernels" / "reference_naive.cu").read_text() + "\n// cluster test\n"
    monkeypatch.setenv("CUDAL2_CACHE", str(tmp_path / "build-node"))
    art = build_artifact(src, "sm_90a")
    assert art["info"]["ok"] and art["so"][:4] == b"\x7fELF"
    assert art["built_on"]["host"]
    monkeypatch.setenv("CUDAL2_CACHE", str(tmp_path / "gpu-node"))
    assert install_artifact(art) is True
    assert install_artifact(art) is False  # already there
    info = compile_kernel(src, "sm_90a")
    assert info.ok and info.cached
    assert Path(info.so_path).read_bytes() == art["so"]
    assert str(tmp_path / "gpu-node") in info.so_path


def test_install_refuses_what_the_evaluator_would_not_cache(tmp_path):
    from evaluator.session import install_artifact

    assert install_artifact(None, tmp_path) is False
    assert install_artifact({"info": {"ok": True, "cache_key": "ab" * 32}, "so": None}, tmp_path) is False
    assert install_artifact({"info": {"ok": False, "cache_key": "../../etc"}, "so": None}, tmp_path) is False
    assert install_artifact({"info": {"ok": False, "cache_key": "cd" * 32, "log": "timeout: nvcc killed"}},
                            tmp_path) is False
    assert not any(tmp_path.iterdir())


def test_cluster_without_ray_is_a_clear_error():
    """With Ray absent, --cluster fails with how to install it; local campaigns never import Ray."""
    code = ("import sys; sys.modules['ray'] = None\n"
            "import agent.campaign.driver, agent.cluster\n"
            "from agent.cluster import ClusterError, make_seam\n"
            "try:\n    make_seam('auto', None)\nexcept ClusterError as e:\n    print('ERR', e)\n"
            "assert 'ray' not in [m for m in sys.modules if sys.modules[m] is not None]\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "ERR --cluster needs Ray, which is not installed here: pip install 'cuda-l2[ray]'" in out.stdout


def test_cluster_address_is_checked_before_connecting():
    pytest.importorskip("ray", reason="ray is not installed (optional extra: pip install 'cuda-l2[ray]')")
    from agent.cluster import ClusterError, make_seam

    with pytest.raises(ClusterError, match="takes ray://HOST:PORT or auto, not 'tcp://x'"):
        make_seam("tcp://x", None)
    with pytest.raises(ClusterError, match="names GPUs of this machine"):
        make_seam("ray://127.0.0.1:1", [2, 3])


def test_simulation_shows_the_bottleneck_moving():
    sys.path.insert(0, str(REPO / "scripts"))
    import simulate_campaign as sim

    # The mechanics, on costs where builds outweigh evaluations (the 2026-11-22 estimates: 0.5-3.1 s evaluations,
    # ~145 CPU s CuTe builds), so that each resource can be made the bottleneck in turn.
    costs = {**sim.DEFAULT_COSTS,
             "eval_s": {"small_shapes": [0.5, 0.7], "large_shapes": [1.5, 3.1], "large_fraction": 0.125},
             "compile_s": {"plain": [3.7, 8.9], "cute": [141.7, 147.8], "cute_fraction": 0.75}}
    today = sim.simulate(sim.Scenario(8, llm="builtin"), costs)  # 2 lanes per GPU, as agent.campaign.driver runs
    wide = sim.simulate(sim.Scenario(8, llm="builtin", lanes_per_gpu=64, compile_slots=8 * 256), costs)
    starved = sim.simulate(sim.Scenario(8, llm="builtin", lanes_per_gpu=8, compile_slots=8 * 2), costs)
    llm = sim.simulate(sim.Scenario(64, llm="hosted", llm_concurrency=8, lanes_per_gpu=8), costs)
    assert today.bottleneck == "lane latency" and max(today.busy.values()) < sim.SATURATED
    assert wide.bottleneck == "gpu" and wide.wall_s < today.wall_s / 3
    # GPU-bound, the end of each shape (second measurements, three finals per mode) is a real share of the time
    lean = sim.simulate(sim.Scenario(8, llm="builtin", lanes_per_gpu=64, compile_slots=8 * 256, end_evals=2), costs)
    assert sim.driver_end_evals() == 9 and lean.wall_s < wide.wall_s * 0.9
    assert starved.bottleneck == "compile" and starved.busy["compile"] > 0.95
    assert llm.bottleneck == "llm" and llm.busy["llm"] > 0.95
    # Four times the GPUs: shorter, but not four times (31 shapes per GPU; each shape is a chain of builds).
    wide32 = sim.simulate(sim.Scenario(32, llm="builtin", lanes_per_gpu=16, compile_slots=32 * 256), costs)
    assert wide.wall_s / 4 < wide32.wall_s < wide.wall_s / 1.4 and wide32.bottleneck != "gpu"
    # With the measured costs (a two-GPU campaign's evaluations, 25-29 CPU s builds) the GPUs are the bottleneck from the start.
    measured = sim.simulate(sim.Scenario(8, llm="builtin"), sim.DEFAULT_COSTS)
    assert measured.bottleneck == "gpu" and measured.busy["compile"] < 0.5
    out = subprocess.run([sys.executable, "scripts/simulate_campaign.py", "simulate", "--gpus", "8", "--shapes", "50",
                          "--markdown"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("| GPUs | scenario |") and out.stdout.count("\n| 8 |") == len(sim.scenarios([8]))
    bad = subprocess.run([sys.executable, "scripts/simulate_campaign.py", "simulate", "--gpus", "x"], cwd=REPO,
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--gpus takes counts like 8,16" in bad.stderr


def test_campaign_cli_cluster_flag_errors(tmp_path):
    """`cudal2 campaign --cluster`: bad addresses and a GPU-less `auto` stop with exit code 2 and say why; without
    Ray installed, the error says how to install it."""
    shapes = tmp_path / "s.txt"
    shapes.write_text("64 64 64\n")
    base = [sys.executable, "-m", "agent.cli", "campaign", "--shapes", str(shapes), "--model", "builtin",
            "--runs-dir", str(tmp_path / "runs")]

    def cli(*extra, pre=""):
        argv = base + list(extra)
        if pre:
            argv = [sys.executable, "-c", pre + "import sys, runpy; sys.argv = ['cudal2'] + sys.argv[1:]; "
                    "runpy.run_module('agent.cli', run_name='__main__')", *argv[3:]]
        return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120)

    out = cli("--cluster", "tcp://x")
    assert out.returncode == 2 and "--cluster takes ray://HOST:PORT or auto, not 'tcp://x'" in out.stderr
    out = cli("--cluster", "auto", pre="import sys; sys.modules['ray'] = None; ")
    assert out.returncode == 2 and "pip install 'cuda-l2[ray]'" in out.stderr
    try:
        import ray  # noqa: F401
    except ImportError:
        return
    from evaluator.gpu import has_gpu

    if not has_gpu():
        out = cli("--cluster", "auto")
        assert out.returncode == 2 and "over this machine's GPUs, and it has none" in out.stderr
    out = cli("--cluster", "ray://127.0.0.1:1", "--gpus", "0,1")
    assert out.returncode == 2 and "names GPUs of this machine" in out.stderr
