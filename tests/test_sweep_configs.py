"""scripts/sweep_configs.py --together: which kernels share an evaluation's rounds, and the figure each row gets (the
timing itself needs a GPU; the probes in docs/benchmarks/data/one_wave_tiles_h200_2026-11-26_8f4336c.json ran it on
H200s). The evaluator is replaced here by one that returns recorded round times, so the grouping is what is tested."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from script_module import REPO, load_script  # noqa: E402

from evaluator import api  # noqa: E402
from evaluator.record import OK, EvalResult, Timing  # noqa: E402

# microseconds per round: torch is the fastest baseline, so best NVIDIA is torch's 11 us
ROUNDS = {"cublas-NN": [12.0, 12.0, 12.0], "torch": [11.0, 11.0, 11.0]}
KERNEL_US = {"a": 10.0, "b": 22.0, "c": 11.0}


def _evaluate(calls):
    def evaluate(source, shape, *, acc, mode, profile, arch, rounds, rivals):
        calls.append({"source": source, "shape": shape, "mode": mode, "rounds": rounds, "rivals": dict(rivals)})
        if not rivals:  # as the evaluator does: no round-by-round times without a tournament, the baselines' figures
            us = KERNEL_US[source]
            base = {n: Timing(n, ts[0], ts[0], ts[0], 3, speedup_mean=ts[0] / us, speedup_median=ts[0] / us)
                    for n, ts in ROUNDS.items()}
            return EvalResult(OK, shape=shape, mode=mode, candidate=Timing("candidate", us, us, us, 3), baselines=base,
                              gpu={"name": "H200", "gpu_uuid": "GPU-x"})
        rounds_us = dict(ROUNDS, candidate=[KERNEL_US[source]] * 3)
        refused = {}
        for name, src in rivals.items():
            if src == "c":  # a rival whose output was wrong after a timed batch: no figure
                refused[name] = "wrong output"
            else:
                rounds_us[f"rival:{name}"] = [KERNEL_US[src]] * 3
        cand = Timing("candidate", KERNEL_US[source], KERNEL_US[source], KERNEL_US[source], 3,
                      detail={"timing": {"rounds_us": rounds_us, "rivals_refused": refused}})
        # as the worker summarises the same rounds: one Timing per baseline and per rival that passed
        timed = {n: Timing(n.removeprefix("rival:"), ts[0], ts[0], ts[0], 3) for n, ts in rounds_us.items()
                 if n != "candidate"}
        return EvalResult(OK, shape=shape, mode=mode, candidate=cand, gpu={"name": "H200", "gpu_uuid": "GPU-x"},
                          baselines={n: t for n, t in timed.items() if not n.startswith("rival:")},
                          rivals={t.name: t for n, t in timed.items() if n.startswith("rival:")})
    return evaluate


def _job(name, shape, src):
    return ({"family": "small", "params": {"tag": name}, "role": f"role of {name}"}, shape, src, name)


def test_a_shapes_entries_share_the_rounds_of_each_mode(tmp_path, monkeypatch):
    mod, calls = load_script("sweep_configs"), []
    monkeypatch.setattr(api, "evaluate", _evaluate(calls))
    s1, s2 = (256, 256, 1024), (512, 512, 1024)
    jobs = [_job("k_a", s1, "a"), _job("k_b", s1, "b"), _job("k_c", s1, "c"), _job("k_b", s1, "a"),
            _job("k_b2", s2, "b"), _job("k_a2", s2, "a")]
    args = SimpleNamespace(out=tmp_path, acc="fp32", arch="sm_90a", rounds=12, budget_s=1e9, what="a probe",
                           commit="abc1234")
    assert mod._together(jobs, args, ["back-to-back", "server"], t0=0.0) == 0
    # one evaluation per shape and mode; the first entry is the candidate, a repeated name is timed once
    assert [(c["shape"], c["mode"], c["source"], sorted(c["rivals"])) for c in calls] == [
        (s1, "back-to-back", "a", ["k_b", "k_c"]), (s1, "server", "a", ["k_b", "k_c"]),
        (s2, "back-to-back", "b", ["k_a2"]), (s2, "server", "b", ["k_a2"])]
    assert {c["rounds"] for c in calls} == {12}
    rows = json.loads((tmp_path / "sweep.json").read_text())
    fig = {(r["name"], r["mode"]): (r["vs_best_nvidia"], r["status"]) for r in rows}
    # each against best NVIDIA (torch, 11 us) in the same rounds
    assert fig[("k_a", "server")] == (1.1, OK)
    assert fig[("k_b", "back-to-back")] == (0.5, OK)
    assert fig[("k_c", "server")] == (None, "refused")
    assert fig[("k_b2", "server")] == (0.5, OK) and fig[("k_a2", "server")] == (1.1, OK)
    assert len(rows) == 10 and {r["gpu_uuid"] for r in rows} == {"GPU-x"}
    # times too, so that probes of neighbouring shapes compare them: the kernel's median and best NVIDIA's (torch)
    us = {(r["name"], r["mode"]): (r["median_us"], r["best_nvidia_us"]) for r in rows}
    assert us[("k_a", "server")] == (10.0, 11.0) and us[("k_b", "back-to-back")] == (22.0, 11.0)
    assert us[("k_c", "server")] == (None, 11.0)
    assert {r["name"]: r["role"] for r in rows}["k_c"] == "role of k_c"
    probe = json.loads((tmp_path / "probe.json").read_text())
    assert (probe["what"], probe["device"], probe["commit"], probe["results"]) == ("a probe", "H200 (GPU-x)", "abc1234",
                                                                                    rows)
    assert len(probe["date"]) == 10


def test_a_shape_with_one_entry_gets_its_figure_from_the_baselines(tmp_path, monkeypatch):
    """Alone on its shape a kernel is no tournament, and the evaluator keeps no round-by-round times: its figure is
    the median speedup over the fastest baseline instead of None."""
    mod, calls = load_script("sweep_configs"), []
    monkeypatch.setattr(api, "evaluate", _evaluate(calls))
    args = SimpleNamespace(out=tmp_path, acc="fp32", arch="sm_90a", rounds=8, budget_s=1e9, what="", commit="")
    assert mod._together([_job("k_a", (256, 256, 1024), "a")], args, ["separated"], t0=0.0) == 0
    (row,) = json.loads((tmp_path / "sweep.json").read_text())
    assert calls[0]["rivals"] == {}
    assert (row["vs_best_nvidia"], row["median_us"], row["best_nvidia_us"]) == (1.1, 10.0, 11.0)


def test_an_unknown_mode_is_refused_before_anything_is_built(tmp_path):
    spec = tmp_path / "spec.json"
    spec.write_text("[]")
    p = subprocess.run([sys.executable, str(REPO / "scripts" / "sweep_configs.py"), str(spec), "--out",
                        str(tmp_path / "o"), "--together", "--modes", "back-to-back,cold"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2
    assert "unknown mode(s) cold" in p.stderr and "server" in p.stderr
    assert not (tmp_path / "o").exists()


def test_an_entry_with_a_source_is_timed_as_that_file_says_beside_todays_render(tmp_path):
    """A template A/B: the old side's kernel, rendered at another commit, keeps its params for the record and is named
    by its file, so it does not collide with today's render of the same params."""
    mod = load_script("sweep_configs")
    params = {"tile_m": 128, "tile_n": 128, "stages": 4, "group": 1, "acc": "fp32"}
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "hr_old_64x64.cu").write_text("// the old template's kernel\n")
    entries = [{"family": "hopper_raw", "params": params, "shape": [256, 256, 1024], "role": "new"},
               {"family": "hopper_raw", "params": params, "shape": [256, 256, 1024], "role": "old",
                "source": "old/hr_old_64x64.cu"}]
    (new, _, new_src, new_name), (old, shape, old_src, old_name) = mod._jobs(entries, "sm_90a", tmp_path)
    assert 'extern "C" int hgemm(' in new_src
    assert old_src == "// the old template's kernel\n" and old_name == "hr_old_64x64" and old_name != new_name
    assert old["params"] == params and shape == (256, 256, 1024)
    entries[1]["source"] = "old/missing.cu"
    with pytest.raises(OSError, match="missing.cu"):
        mod._jobs(entries, "sm_90a", tmp_path)
