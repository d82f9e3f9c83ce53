"""scripts/prebuild_first_batches.py: a campaign's first builds made on a machine without a GPU, found by the
GPU machine's compile cache (real nvcc builds)."""
from __future__ import annotations

import sys
import tarfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from script_module import load_script  # noqa: E402

from agent.families import render  # noqa: E402
from agent.policy import BuiltinPolicy  # noqa: E402
from evaluator.compile import compile_kernel  # noqa: E402


def test_the_first_batch_built_here_is_a_cache_hit_there(tmp_path):
    shapes = tmp_path / "shapes.txt"
    shapes.write_text("16 16 128\n")
    out = tmp_path / "prebuilt.tgz"
    assert load_script("prebuild_first_batches").main(
        ["--shapes", str(shapes), "--out", str(out), "--per-step", "2", "--jobs", "2"]) == 0
    there = tmp_path / "gpu_machine_cache"
    with tarfile.open(out) as tar:
        names = tar.getnames()
        tar.extractall(there, filter="data")
    assert names and not any("tmp-" in n for n in names)  # published entries only
    batch = BuiltinPolicy(0).propose((16, 16, 128), "fp32", "sm_90a", [], n=2, mode="offline")
    assert len(batch) == 2
    for c in batch:  # what the campaign compiles first: already built
        info = compile_kernel(render(c.family, c.params, (16, 16, 128)), "sm_90a", cache_dir=there)
        assert info.ok and info.cached, info.log


def test_a_runs_tournament_players_and_their_cold_twins_built_here_are_cache_hits_there(tmp_path):
    """--run: a resumed run whose mode tournaments are to be played again on a bare machine finds its players and
    their cold twins built (hopper_raw's streaming config of an M = 64 shape has a twin: the L2 hint on B)."""
    import json

    from agent.campaign.archive import Archive
    from agent.families import cold_twin
    from evaluator.record import EvalResult
    from http_servers import RECORDED_RESULTS

    shape = (64, 4096, 8192)
    recorded = json.loads(RECORDED_RESULTS.read_text())
    run = tmp_path / "runs" / "r"
    archive = Archive(run / "archive.sqlite")
    params = [{"tile_m": 64, "tile_n": 64, "stages": 14, "cluster_k": 2, "group": 1, "acc": "fp32"},
              {"tile_m": 64, "tile_n": 128, "stages": 8, "cluster_k": 2, "group": 1, "acc": "fp32"}]
    for p, tag in zip(params, ("wgmma", "tile128")):
        archive.add("r", "NVIDIA H200", "fp32", shape, render("hopper_raw", p, shape), "builtin",
                    EvalResult.from_dict(recorded[tag]), family="hopper_raw", params=p)
    out = tmp_path / "players.tgz"
    script = load_script("prebuild_first_batches")
    assert script.main(["--run", str(run), "--out", str(out), "--jobs", "2"]) == 0
    there = tmp_path / "gpu_machine_cache"
    with tarfile.open(out) as tar:
        tar.extractall(there, filter="data")
    twins = [cold_twin("hopper_raw", p, shape) for p in params]
    assert all(t and t["l2_evict_first"] == "b" for t in twins)
    sources = [render("hopper_raw", p, shape) for p in params + twins]
    assert len(set(sources)) == 4
    for src in sources:
        info = compile_kernel(src, "sm_90a", cache_dir=there)
        assert info.ok and info.cached, info.log
    assert script.main(["--run", str(tmp_path), "--out", str(out)]) == 2  # not a run folder


def test_a_resumed_slice_gets_its_players_and_the_first_batches_of_the_shapes_it_has_not_started(tmp_path, capsys):
    """--run with --shapes: the shape the run started (its first batch is archived) gets its players only, the shape
    it has not started its first batch."""
    import json

    from agent.campaign.archive import Archive
    from evaluator.record import EvalResult
    from http_servers import RECORDED_RESULTS

    started, fresh = (64, 128, 1024), (16, 16, 128)
    run = tmp_path / "runs" / "r"
    p = {"pdl": True, "bm": 16, "bn": 32, "bk": 64, "wm": 1, "wn": 2, "stages": 2, "split_k": 2}
    Archive(run / "archive.sqlite").add("r", "NVIDIA H200", "fp32", started, render("small", p, started), "builtin",
                                        EvalResult.from_dict(json.loads(RECORDED_RESULTS.read_text())["wgmma"]),
                                        family="small", params=p)
    shapes = tmp_path / "shapes.txt"
    shapes.write_text("64 128 1024\n16 16 128\n")
    out = tmp_path / "resume.tgz"
    assert load_script("prebuild_first_batches").main(
        ["--run", str(run), "--shapes", str(shapes), "--out", str(out), "--per-step", "2", "--jobs", "2"]) == 0
    assert "2 distinct kernels in the first batches of 1 shape of" in capsys.readouterr().out
    there = tmp_path / "gpu_machine_cache"
    with tarfile.open(out) as tar:
        tar.extractall(there, filter="data")
    sources = [render("small", p, started)] + [render(c.family, c.params, fresh) for c in
                                               BuiltinPolicy(0).propose(fresh, "fp32", "sm_90a", [], n=2)]
    for src in sources:
        info = compile_kernel(src, "sm_90a", cache_dir=there)
        assert info.ok and info.cached, info.log


def test_a_slice_stopped_by_its_time_limit_returns_what_the_next_one_builds_first(tmp_path):
    """scripts/device_bench.sh stopped by BENCH_S (here a stand-in benchmark that outlasts it; every other command is
    real): $OUT/resume_cache.txz holds the started shape's player, which the next machine, given it as PREBUILT,
    finds built."""
    import json
    import os
    import subprocess

    from agent.campaign.archive import Archive
    from evaluator.record import EvalResult
    from http_servers import RECORDED_RESULTS

    repo = Path(__file__).resolve().parents[1]
    shape = (64, 128, 1024)
    run = tmp_path / "runs" / "r"
    p = {"pdl": True, "bm": 16, "bn": 32, "bk": 64, "wm": 1, "wn": 2, "stages": 2, "split_k": 2}
    src = render("small", p, shape)
    Archive(run / "archive.sqlite").add("r", "NVIDIA H200", "fp32", shape, src, "builtin",
                                        EvalResult.from_dict(json.loads(RECORDED_RESULTS.read_text())["wgmma"]),
                                        family="small", params=p)
    runs_tgz = tmp_path / "runs.tgz"
    subprocess.run(["tar", "czf", str(runs_tgz), "-C", str(run.parent), "r"], check=True)
    shapes = tmp_path / "shapes.txt"
    shapes.write_text("64 128 1024\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").write_text(f'#!/bin/bash\ncase "$*" in *bench_builtin_policy.py*) exec sleep 60 ;; esac\n'
                                     f'exec {sys.executable} "$@"\n')
    (bin_dir / "python3").chmod(0o755)
    out = tmp_path / "out"
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "RUN": "r", "RUNS_TGZ": str(runs_tgz),
           "RUNS_DIR": str(tmp_path / "bare"), "OUT": str(out), "WHEELS": str(tmp_path / "no-wheels"),
           "CUDAL2_CACHE": str(tmp_path / "gpu_machine_1"), "BENCH_S": "2"}
    cmd = ["bash", "scripts/device_bench.sh", f"--shapes={shapes}", "--acc", "fp32", "--per-step=2"]
    done = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 124, done.stdout + done.stderr
    assert "PREBUILT=<this resume_cache.txz>" in done.stdout, done.stdout
    there = tmp_path / "gpu_machine_2" / "build"
    there.mkdir(parents=True)
    subprocess.run(["tar", "xJf", str(out / "resume_cache.txz"), "-C", str(there)], check=True)
    info = compile_kernel(src, "sm_90a", cache_dir=there)
    assert info.ok and info.cached, info.log
