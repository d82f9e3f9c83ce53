"""The bottleneck summary on hand-made metric sets: every label is reachable, for the reason it names."""
import pytest

from evaluator.bottleneck import LABELS, bottleneck

# A mid-sized GEMM kernel doing nothing remarkable; each case below changes what makes it one label.
BASE = {"available": True, "n_kernels": 1, "duration_us": 200.0, "main_kernel_duration_us": 200.0,
        "sm_throughput_pct": 50.0, "memory_throughput_pct": 45.0, "dram_throughput_pct": 30.0,
        "l1_throughput_pct": 45.0, "tensor_pipe_pct": 35.0, "issue_active_pct": 55.0, "bank_conflict_pct": 2.0,
        "waves_per_sm": 2.0, "sm_count": 132, "achieved_occupancy_pct": 40.0, "theoretical_occupancy_pct": 50.0,
        "occupancy_limiter": "registers", "grid_size": 512,
        "stalls": {"long_scoreboard": 1.5, "barrier": 0.8, "selected": 1.0, "not_selected": 3.0}}


def case(**kw):
    d = dict(BASE)
    d.update(kw)
    return d


CASES = {
    "balanced": case(),
    "launch-bound": case(duration_us=3.1, main_kernel_duration_us=3.1),
    "tensor-pipe-bound": case(tensor_pipe_pct=78.0, sm_throughput_pct=80.0),
    "bank-conflicted": case(bank_conflict_pct=48.0, l1_throughput_pct=70.0,
                            stalls={"mio_throttle": 4.0, "short_scoreboard": 2.0}),
    "memory-bound": case(dram_throughput_pct=88.0, memory_throughput_pct=90.0, sm_throughput_pct=35.0),
    "occupancy-limited": case(achieved_occupancy_pct=12.0, theoretical_occupancy_pct=12.5, issue_active_pct=30.0,
                              tensor_pipe_pct=10.0,
                              sm_throughput_pct=45.0, stalls={"long_scoreboard": 6.0, "barrier": 1.0}),
    "latency-bound": case(sm_throughput_pct=22.0, memory_throughput_pct=25.0, dram_throughput_pct=10.0,
                          stalls={"barrier": 5.0, "long_scoreboard": 2.0}),
}


@pytest.mark.parametrize("label", sorted(CASES))
def test_each_label_is_reachable(label):
    b = bottleneck(CASES[label])
    assert b["label"] == label, b
    assert b["why"] and isinstance(b["evidence"], dict) and b["evidence"]


def test_every_label_has_a_case():
    assert set(CASES) == set(LABELS)


def test_several_launches_with_a_small_main_kernel_are_launch_bound():
    b = bottleneck(case(n_kernels=3, duration_us=40.0, main_kernel_duration_us=20.0))
    assert b["label"] == "launch-bound"
    assert "3 kernel launches" in b["why"] and b["evidence"]["n_kernels"] == 3


def test_underfilled_grid_is_occupancy_limited():
    b = bottleneck(case(waves_per_sm=0.12, grid_size=33))
    assert b["label"] == "occupancy-limited" and "33 blocks for 132 SMs" in b["why"] and "75%" in b["why"]


def test_partial_wave_on_every_sm_is_not_underfilled():
    # 256 blocks where 7 fit per SM: a wave of 28%, yet every SM has work.
    assert bottleneck(case(waves_per_sm=0.28, grid_size=256))["label"] == "balanced"


def test_few_warps_with_a_busy_tensor_pipe_are_not_occupancy_limited():
    # A warp-specialised Hopper kernel: 3 warpgroups per SM on purpose.
    b = bottleneck(case(achieved_occupancy_pct=14.0, theoretical_occupancy_pct=18.75, issue_active_pct=18.0,
                        tensor_pipe_pct=45.0, sm_throughput_pct=31.0, memory_throughput_pct=33.0))
    assert b["label"] == "latency-bound"


def test_idle_tensor_cores_are_named():
    b = bottleneck(case(tensor_pipe_pct=0.03))
    assert b["label"] == "balanced" and "tensor cores are idle" in b["why"]


def test_conflicts_on_idle_shared_memory_do_not_count():
    # Many conflicts in relative terms, but shared memory is barely used and nobody waits on it.
    b = bottleneck(case(bank_conflict_pct=60.0, l1_throughput_pct=5.0))
    assert b["label"] != "bank-conflicted"


def test_memory_behind_the_sms_is_not_memory_bound():
    b = bottleneck(case(memory_throughput_pct=65.0, sm_throughput_pct=85.0))
    assert b["label"] != "memory-bound"


def test_evidence_names_the_top_real_stall():
    b = bottleneck(CASES["latency-bound"])
    assert b["evidence"]["top_stall"] == "barrier"  # not "not_selected", which is larger but no stall
    assert "barrier" in b["why"]


def test_stalls_are_read_from_the_longest_kernel_when_not_at_top_level():
    rec = case(sm_throughput_pct=22.0, memory_throughput_pct=25.0, dram_throughput_pct=10.0)
    del rec["stalls"]
    rec["kernels"] = [{"duration_us": 5.0, "stalls": {"wait": 9.0}},
                      {"duration_us": 195.0, "stalls": {"long_scoreboard": 4.0}}]
    assert bottleneck(rec)["evidence"]["top_stall"] == "long_scoreboard"


def test_missing_metrics_give_balanced_with_a_reason():
    b = bottleneck({"available": True, "duration_us": 100.0})
    assert b["label"] == "balanced" and "too few metrics" in b["why"]


def test_unavailable_record_is_refused_clearly():
    with pytest.raises(ValueError, match="unavailable.*counters"):
        bottleneck({"available": False, "reason": "counters not accessible"})
    with pytest.raises(TypeError):
        bottleneck(["not", "a", "record"])
