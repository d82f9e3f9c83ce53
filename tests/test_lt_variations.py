"""evaluator.lt_variations: which cuBLASLt configurations AutoTuning adds where the heuristic offers few, and how many.
The planning and its bounds run on the CPU against a stand-in for the native configuration API; the last test runs
the real one on a GPU."""
from __future__ import annotations

import struct

import pytest

from evaluator import lt_variations as V

SMS = 132
# stand-in tile ids and their sizes (cuBLASLt's own ids are an enum; only the wave counts matter here)
TILE_AREA = {1: 8 * 8, 2: 64 * 64, 3: 128 * 128, 4: 128 * 256, 5: 256 * 128}


def _caps(tiles=(1, 2, 3, 4, 5), stages=(11, 12), splitk=True, reduction=V.RED_INPLACE | V.RED_COMPUTE |
          V.RED_OUTPUT, swizzle=True) -> dict:
    return {"splitk": splitk, "reduction_mask": reduction, "swizzle": swizzle, "tiles": tuple(tiles),
            "stages": tuple(stages)}


class FakeLt:
    """cuBLASLt's configuration API as Native exposes it: algorithm ids with capabilities, records that carry their
    fields, and a check that refuses what the capabilities do not allow and what needs more than the 64 MiB of
    workspace the baselines get."""

    def __init__(self, caps: dict[int, dict]):
        self.caps = caps
        self.tried = 0

    @staticmethod
    def record(fields) -> bytes:
        return struct.pack("9i", *fields).ljust(64, b"\0")

    def lt_algo_ids(self, acc16: int) -> list[int]:
        return list(self.caps)

    def lt_algo_caps(self, acc16: int, algo_id: int) -> dict | None:
        return self.caps.get(algo_id)

    def lt_algo_try(self, tn, acc16, m, n, k, bases, rows) -> list[dict]:
        out = []
        for row in rows:
            self.tried += 1
            if row[0] >= 0:
                f = list(struct.unpack("9i", bases[row[0]][:36]))
            else:
                f = [row[1], 0, 0, 1, 0, 0, 0, 0, 0]
            f[1:] = [v if v >= 0 else f[1 + i] for i, v in enumerate(row[2:])]
            c = self.caps.get(f[0])
            ok = c is not None and f[1] in c["tiles"] and (f[2] in c["stages"] or f[2] == 0) and (
                f[3] == 1 or (c["splitk"] and f[4] & c["reduction_mask"])) and (f[5] == 0 or c["swizzle"])
            ws = 4 * m * n * f[3] if f[3] > 1 else 0
            waves = m * n * f[3] / TILE_AREA.get(f[1], 1) / SMS
            out.append({"status": (0 if ws <= 64 << 20 else -2) if ok else 1015, "algo": self.record(f),
                        "config": tuple(f), "workspace": ws, "waves": waves})
        return out


def _heuristic(*fields) -> list[bytes]:
    return [FakeLt.record(f) for f in fields]


def test_split_k_keeps_the_accumulator_class_and_enough_k_per_split():
    everything = V.RED_INPLACE | V.RED_COMPUTE | V.RED_OUTPUT
    assert V.reduction_schemes(everything, acc16=False) == [V.RED_COMPUTE]  # fp16 partial sums leave fp32 behind
    assert V.reduction_schemes(everything, acc16=True) == [V.RED_INPLACE, V.RED_COMPUTE]
    assert V.reduction_schemes(V.RED_OUTPUT, acc16=False) == []
    assert V.split_options(1024, _caps(), acc16=False) == [(2, V.RED_COMPUTE), (4, V.RED_COMPUTE)]
    assert V.split_options(8192, _caps(), acc16=False) == [(s, V.RED_COMPUTE) for s in V.SPLIT_K]
    assert V.split_options(8192, _caps(splitk=False), acc16=False) == []
    assert V.split_options(256, _caps(), acc16=True) == []


def test_the_plan_varies_each_heuristic_record_and_skips_its_own_configuration():
    own = (7, 3, 11, 1, 0, 0, 0, 0, 0)
    planned = V.plan([own], {7: _caps(), 9: _caps(tiles=(2,), stages=())}, [9], 1024, acc16=False)
    splits = [p for p in planned if p.tier == 1]
    # (no split, split 2, split 4) x (swizzle 0, 1), less the record's own (no split, swizzle 0)
    assert len(splits) == 5 and all(p.base == 0 for p in splits)
    assert {(p.fields[V.SPLITK], p.fields[V.REDUCTION], p.fields[V.SWIZZLE]) for p in splits} == {
        (1, 0, 1), (2, V.RED_COMPUTE, 0), (2, V.RED_COMPUTE, 1), (4, V.RED_COMPUTE, 0), (4, V.RED_COMPUTE, 1)}
    tiles = [p for p in planned if p.tier == 2]
    assert len(tiles) == 5 * 2 - 1 and all(p.fields[V.SPLITK] == 1 for p in tiles)
    assert (3, 11) not in {(p.fields[V.TILE], p.fields[V.STAGES]) for p in tiles}
    others = [p for p in planned if p.tier == 3]
    assert [(p.base, p.fields[V.ID], p.fields[V.TILE], p.fields[V.STAGES]) for p in others] == [(-1, 9, 2, V.KEEP)]
    # stage-major: every tile with the first stage count before any with the second
    assert [p.fields[V.STAGES] for p in tiles] == [11] * 4 + [12] * 5


def test_the_plan_is_bounded_and_keeps_every_split():
    caps = {i: _caps(tiles=range(1, 41), stages=range(1, 11)) for i in range(20)}
    heuristic = [(i % 2, 3, 1, 1, 0, 0, 0, 0, 0) for i in range(8)]
    planned = V.plan(heuristic, caps, list(range(2, 20)), 8192, acc16=True, max_planned=1000)
    assert len(planned) == 1000
    n_split = sum(p.tier == 1 for p in planned)
    assert n_split == 8 * ((1 + 4 * 2) * 2 - 1)
    # round-robin: each of the 8 + 18 groups gets its share of the rest
    groups = {}
    for p in planned[n_split:]:
        groups[(p.tier, p.group)] = groups.get((p.tier, p.group), 0) + 1
    assert len(groups) == 26 and max(groups.values()) - min(groups.values()) <= 1


def test_where_the_heuristic_offers_few_the_variations_are_bounded_new_and_accepted():
    caps = {i: _caps(tiles=range(1, 6), stages=range(1, 11)) for i in range(20)}
    nat = FakeLt(caps)
    heuristic = _heuristic(*[(i % 2, 3 + i % 3, 1, 1, 0, 0, 0, 0, 0) for i in range(8)])
    shape = (1024, 1024, 8192)
    algos, how = V.lt_variations(nat, shape, False, True, heuristic)
    assert 0 < len(algos) <= V.MAX_VARIATIONS and len(set(algos)) == len(algos)
    checked = nat.lt_algo_try(1, 0, *shape, algos, [(i,) + (V.KEEP,) * 9 for i in range(len(algos))])
    cfgs = [r["config"] for r in checked]
    assert all(r["status"] == 0 for r in checked)
    assert len(set(cfgs)) == len(cfgs) and not set(cfgs) & {tuple(struct.unpack("9i", h[:36])) for h in heuristic}
    assert {c[V.REDUCTION] for c in cfgs if c[V.SPLITK] > 1} == {V.RED_COMPUTE}
    assert how["split_swizzle"] <= V.MAX_VARIATIONS * V.SPLIT_SHARE
    assert how["other_kernels"] <= (V.MAX_VARIATIONS - how["split_swizzle"]) * V.OTHER_SHARE
    assert how["split_swizzle"] + how["tile_stages"] + how["other_kernels"] == len(algos) == V.MAX_VARIATIONS
    assert how["planned"] == nat.tried - 8 - len(algos) and how["algo_ids"] == 20


def test_a_heuristic_list_of_sixteen_or_more_is_timed_as_it_is():
    nat = FakeLt({0: _caps()})
    heuristic = _heuristic(*[(0, 3, 11, 1, 0, 0, 0, 0, s) for s in range(V.VARIATION_THRESHOLD)])
    assert V.lt_variations(nat, (512, 512, 512), False, False, heuristic) == ([], {})
    assert nat.tried == 0


def test_tiles_nearest_in_wave_count_to_the_heuristics_come_first():
    nat = FakeLt({0: _caps(stages=(11,), splitk=False, swizzle=False)})
    heuristic = _heuristic((0, 3, 11, 1, 0, 0, 0, 0, 0))  # 128x128
    algos, _ = V.lt_variations(nat, (4096, 4096, 4096), False, False, heuristic)
    tiles = [struct.unpack("9i", a[:36])[V.TILE] for a in algos]
    assert sorted(tiles[:2]) == [4, 5] and tiles[2:] == [2, 1]  # twice the area, then a quarter, then 1/256


def test_splits_that_need_more_workspace_than_the_baselines_get_are_left_out():
    nat = FakeLt({0: _caps(tiles=(3,), stages=(11,), swizzle=False)})
    heuristic = _heuristic((0, 3, 11, 1, 0, 0, 0, 0, 0))
    algos, how = V.lt_variations(nat, (16384, 12288, 8192), False, False, heuristic)
    assert algos == [] and how["planned"] == 4 and how["accepted"] == 0  # 2-16 splits of 16384x12288 in fp32
    algos, _ = V.lt_variations(nat, (1024, 1024, 8192), False, False, heuristic)
    assert [struct.unpack("9i", a[:36])[V.SPLITK] for a in algos] == [2, 4, 8, 16]


@pytest.mark.gpu
def test_variations_are_made_checked_and_exact_on_a_gpu(tmp_path, monkeypatch):
    from evaluator.baselines import AUTOTUNE_METHOD, autotune_cache_entry, autotune_lt, valid_lt_algos
    from evaluator.buffers import OperandSet, Reference
    from evaluator.gpu import device_name, native_arch
    from evaluator.native import Native, build
    from evaluator.timing import PROFILES

    nat = Native(build(native_arch(0)), 0)
    monkeypatch.setenv("CUDAL2_CACHE", str(tmp_path))
    shape = (512, 384, 2048)
    ops, ref = OperandSet(nat, *shape, snapshots=False), Reference(nat, *shape)
    try:
        for tn in (False, True):
            heuristic = nat.lt_heuristics(int(tn), 0, *shape, 1024)[:4]  # short, whatever this GPU's heuristic says
            algos, how = V.lt_variations(nat, shape, False, tn, heuristic)
            assert 0 < len(algos) <= V.MAX_VARIATIONS, how
            checked = V.configs(nat, shape, False, tn, heuristic + algos)
            assert all(r["status"] == 0 and r["workspace"] <= 64 << 20 for r in checked), checked
            own, cfgs = {r["config"] for r in checked[:len(heuristic)]}, [r["config"] for r in checked[len(heuristic):]]
            assert len(set(cfgs)) == len(cfgs) and not own & set(cfgs), "a variation repeats a configuration"
            assert all(c[V.SPLITK] <= 1 or c[V.REDUCTION] == V.RED_COMPUTE for c in cfgs)
            cands = valid_lt_algos(nat, shape, False, tn, ops, ref, heuristic + algos)
            assert sum(a in algos for _, a in cands) > 0, how  # variations run and are exact on {0,1} inputs
            nat.release_callables()
        _, detail = autotune_lt(nat, device_name(0), nat.info()["cublaslt"], shape, False, True, ops, ref,
                                PROFILES["quick"], lambda msg: None)
        if detail["algos_heuristic"] < V.VARIATION_THRESHOLD:
            assert detail["algos_variations"] > 0 and detail["variations"]["planned"] > 0, detail
        assert detail["algos_offered"] == detail["algos_heuristic"] + detail["algos_variations"]
        rec = autotune_cache_entry(device_name(0), nat.info()["cublaslt"], shape, False, "TN")[2]
        assert rec is not None and rec["method"] == AUTOTUNE_METHOD and rec["detail"]["algos_variations"] == \
            detail["algos_variations"]
    finally:
        nat.release_callables()
        ops.free()
        ref.free()


def test_a_cublaslt_without_the_configuration_api_keeps_the_heuristics_list():
    from evaluator.baselines import offered_lt_algos
    from evaluator.native import NativeError

    class Old(FakeLt):
        def lt_heuristics(self, tn, acc16, m, n, k, max_algos):
            return _heuristic((0, 3, 11, 1, 0, 0, 0, 0, 0))

        def lt_algo_ids(self, acc16):
            raise NativeError("cuBLASLt algorithm ids: not supported")

    algos, origin = offered_lt_algos(Old({0: _caps()}), (512, 512, 512), False, False)
    assert algos == _heuristic((0, 3, 11, 1, 0, 0, 0, 0, 0))
    assert origin["heuristic"] == 1 and origin["variations"] == 0 and "not supported" in origin["error"]
