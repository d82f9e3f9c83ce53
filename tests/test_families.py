"""Kernel families: validated spaces, feasibility refused before nvcc, and real nvcc builds of a sample."""
from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor

import pytest

from agent import families
from agent.families import ampere_cute, candidate_name, canonical, hopper_raw, hopper_wgmma, small

SHAPES = [(64, 64, 256), (64, 8192, 4096), (1024, 12288, 256), (8192, 4096, 16384)]

SMALL_OK = {"bm": 16, "bn": 32, "bk": 64, "wm": 1, "wn": 2, "stages": 4, "split_k": 4}
AMPERE_OK = {"bm": 160, "bn": 128, "bk": 64, "wm": 2, "wn": 4, "stages": 4, "prefetch": 3, "sw_b": 3, "sw_m": 3,
             "sw_s": 3, "block_swizzle": 8, "reg_pipeline": True, "epilogue": "smem", "split_k": 2, "acc": "fp32"}
SMALL_CLUSTER = {"bm": 64, "bn": 64, "bk": 64, "wm": 2, "wn": 2, "stages": 3, "split_k": 1, "cluster_k": 8,
                 "epi": "smem"}
HOPPER_OK = {"tile_m": 128, "tile_n": 256, "tile_k": 64, "cluster_m": 2, "cluster_n": 1, "schedule": "cooperative",
             "scheduler": "persistent", "splits": 1, "raster": "along_n", "swizzle": 4, "stages": 0,
             "b_operand": "col", "swap_ab": False, "acc": "fp32"}
# split-K as a batch of K slices into fp32 partials, summed by a second kernel (skinny M, long K)
RAW_OK = {"tile_m": 128, "tile_n": 256, "stages": 4, "group": 1, "acc": "fp32", "epi": "tma"}
# tile_n=176 needs one of CuTe's extended wgmma atoms (n176), which the template enables for itself
HOPPER_EXTENDED = dict(HOPPER_OK, tile_m=256, tile_n=176, cluster_m=1, swizzle=1)
HOPPER_SLICED = dict(HOPPER_OK, tile_n=64, cluster_m=1, scheduler="batched", splits=4, raster="heuristic", swizzle=1,
                     swap_ab=True)


def test_spaces_are_feasible_and_render():
    rng = random.Random(0)
    for shape in SHAPES:
        for name, mod in families.families().items():
            space = mod.space(shape, "fp32", "sm_90a")
            if name == "small" and shape[0] * shape[1] * shape[2] > 2 ** 34:
                assert all(mod.feasible(p, shape, "sm_90a")[0] for p in space[:50])
            assert space, f"{name} has no config for {shape}"
            keys = {canonical(p) for p in space}
            assert len(keys) == len(space), f"{name} space has duplicates"
            for p in rng.sample(space, min(3, len(space))):
                ok, why = mod.feasible(p, shape, "sm_90a")
                assert ok, why
                src = mod.render(p)
                assert 'extern "C" int hgemm(const half* A, const half* B, const half* B_col_major, half* C' in src
                assert canonical(p) in src  # the params travel with the source
                assert candidate_name(name, p) == candidate_name(name, dict(reversed(list(p.items()))))


def test_hopper_family_is_sm90a_only_and_others_run_on_sm80():
    assert hopper_wgmma.space((4096, 4096, 4096), "fp32", "sm_80") == []
    ok, why = hopper_wgmma.feasible(HOPPER_OK, (4096, 4096, 4096), "sm_80")
    assert not ok and "sm_90a" in why
    assert small.space((64, 64, 256), "fp32", "sm_80")
    assert ampere_cute.space((4096, 4096, 4096), "fp32", "sm_80")


@pytest.mark.parametrize("family,base,change,reason", [
    ("small", SMALL_OK, {"bm": 128, "bn": 256, "bk": 128, "stages": 6, "wm": 2, "wn": 4}, "shared memory"),
    ("small", SMALL_OK, {"bm": 16, "wm": 2}, "multiple of 16"),
    ("small", SMALL_OK, {"split_k": 16}, "split_k"),
    ("ampere_cute", AMPERE_OK, {"stages": 8, "bm": 256, "bn": 128, "wm": 2, "wn": 4, "prefetch": 7}, "shared memory"),
    ("ampere_cute", AMPERE_OK, {"prefetch": 4}, "prefetch distance"),
    ("ampere_cute", AMPERE_OK, {"bk": 32, "sw_b": 3, "bm": 128}, "swizzle"),
    ("ampere_cute", AMPERE_OK, {"bm": 256, "bn": 256, "wm": 2, "wn": 2}, "accumulator registers"),
    ("hopper_wgmma", HOPPER_OK, {"schedule": "pingpong", "tile_m": 256, "tile_n": 128}, "ping-pong"),
    ("hopper_wgmma", HOPPER_OK, {"scheduler": "streamk", "schedule": "pingpong", "tile_m": 64}, "stream-K"),
    ("hopper_wgmma", HOPPER_OK, {"tile_m": 256, "tile_n": 256}, "accumulator registers"),
    ("hopper_wgmma", HOPPER_OK, {"tile_k": 128, "stages": 5}, "shared memory"),
    ("hopper_wgmma", HOPPER_OK, {"splits": 4}, "stream-K"),
    ("hopper_raw", RAW_OK, {"tile_m": 256, "tile_n": 256}, "accumulators"),
    ("hopper_raw", RAW_OK, {"stages": 5}, "shared memory"),
    ("hopper_raw", RAW_OK, {"tile_n": 144, "grid": "streamk"}, "16, 32 or 48 columns"),
    ("hopper_raw", RAW_OK, {"epi": "direct", "l2_evict_first": "bc"}, "TMA epilogue"),
    ("hopper_raw", RAW_OK, {"cluster_k": 2}, "epi=tma"),  # the K-split stores from its reduction
    ("hopper_raw", RAW_OK, {"cluster_k": 2, "epi": "direct", "cluster_m": 2}, "cluster_m=2"),
    ("hopper_raw", RAW_OK, {"tile_m": 64, "tile_n": 192}, "tile_n 64, 128 or 256"),
    ("hopper_raw", RAW_OK, {"tile_m": 64, "tile_n": 128, "stages": 16, "epi": "direct"}, "shared memory"),
    ("hopper_raw", RAW_OK, {"tile_n": 32, "epi": "direct"}, "64-row tiles"),
    ("hopper_raw", RAW_OK, {"swap_ab": True}, "stores C^T from registers"),
    ("hopper_wgmma", HOPPER_OK, {"scheduler": "batched"}, "splits >= 2"),
])
def test_infeasible_configs_are_refused_before_any_compile(family, base, change, reason):
    p = dict(base)
    p.update(change)
    mod = families.get(family)
    ok, why = mod.feasible(p, (8192, 4096, 64 if "split_k" in change else 16384), "sm_90a")
    assert not ok and reason in why, why
    # refused at render time: there is no source to hand to nvcc
    with pytest.raises(ValueError, match="refused"):
        families.render(family, p, (8192, 4096, 64 if "split_k" in change else 16384), "sm_90a")


def test_cluster_split_and_smem_epilogue_rules():
    assert small.feasible(SMALL_CLUSTER, (64, 2048, 4096), "sm_90a") == (True, "")
    ok, why = small.feasible(SMALL_CLUSTER, (64, 2048, 4096), "sm_80")
    assert not ok and "sm_90" in why
    for change, reason in (({"split_k": 2}, "use one"), ({"epi": "direct"}, "epi=smem")):
        ok, why = small.feasible(dict(SMALL_CLUSTER, **change), (64, 2048, 4096), "sm_90a")
        assert not ok and reason in why, why
    ok, why = small.feasible(SMALL_CLUSTER, (64, 2048, 256), "sm_90a")  # 4 k-tiles for 8 CTAs
    assert not ok and "empty splits" in why
    # the smem epilogue alone runs everywhere; its fp32 tile counts against shared memory
    assert small.feasible(dict(SMALL_CLUSTER, cluster_k=1), (1024, 2048, 64), "sm_80")[0]
    assert small.smem_bytes(dict(SMALL_OK, bm=128, bn=256, stages=2, epi="smem")) == 128 * 264 * 4


def test_knobs_at_their_default_keep_the_earlier_identity():
    """cluster_k/epi came after the first archives: spelled out at their defaults they name the same candidate."""
    spelled = dict(SMALL_OK, cluster_k=1, epi="direct")
    assert small.validate(spelled) == SMALL_OK
    assert small.render(spelled) == small.render(SMALL_OK)
    assert families.full_params("small", SMALL_OK)["cluster_k"] == 1
    assert families.normal_params("small", dict(SMALL_CLUSTER)) == SMALL_CLUSTER
    src = small.render(SMALL_CLUSTER)
    assert "__cluster_dims__(1, 1, CLUSTER_K)" in src and "st.async.shared::cluster" in src
    assert "cluster" not in small.render(SMALL_OK).split("// params")[1].split("namespace")[0]


def test_hopper_raw_k_order_keeps_earlier_identities_and_reverses_only_the_producer():
    """k_order came after runs 13-17: "forward" names and renders the same candidate as before; "alternate" sets
    the one constant the producer's k loop reads."""
    assert hopper_raw.validate(dict(RAW_OK, k_order="forward")) == RAW_OK
    assert hopper_raw.render(dict(RAW_OK, k_order="forward")) == hopper_raw.render(RAW_OK)
    assert "K_ALTERNATE = false" in hopper_raw.render(RAW_OK)
    alt = hopper_raw.render(dict(RAW_OK, k_order="alternate"))
    assert "K_ALTERNATE = true" in alt and '"k_order":"alternate"' in alt.splitlines()[0]
    with pytest.raises(ValueError):
        hopper_raw.validate(dict(RAW_OK, k_order="backward"))


def test_even_grid_keeps_earlier_identities_and_changes_only_the_launch():
    """grid came after the family's first campaigns: "full" names and renders the same candidate as before; "even" changes the host's grid
    size and nothing the GPU runs per tile, is refused where it would launch the same CTAs (one wave, whole waves),
    and belongs to the persistent scheduler only (stream-K sizes its own grid: one kernel, one identity)."""
    for fam, base in ((hopper_raw, RAW_OK), (hopper_wgmma, HOPPER_OK)):
        assert fam.validate(dict(base, grid="full")) == base
        assert fam.render(dict(base, grid="full")) == fam.render(base)
        even, full = fam.render(dict(base, grid="even")), fam.render(base)
        assert '"grid":"even"' in even and '"grid"' not in full

        def device_code(src: str) -> list[str]:
            return [line for line in src.split('extern "C" int hgemm')[0].splitlines() if not line.startswith("//")]
        assert device_code(even) == device_code(full) and even != full
    assert hopper_raw.feasible(dict(RAW_OK, group=16, grid="even"), (8192, 2048, 8192), "sm_90a") == (True, "")
    one_wave = hopper_raw.feasible(dict(RAW_OK, grid="even"), (4096, 1024, 12288), "sm_90a")
    assert not one_wave[0] and "same 128 CTAs" in one_wave[1]
    # 8 x 33 tiles of 128x256 fill 2 whole waves of 132
    assert not hopper_raw.feasible(dict(RAW_OK, group=2, grid="even"), (1024, 8448, 1024), "sm_90a")[0]
    # a pair: 256 units of two CTAs on 66 slots take 4 waves of 64 pairs
    assert hopper_raw.feasible(dict(RAW_OK, cluster_m=2, group=8, grid="even"), (8192, 2048, 8192), "sm_90a")[0]
    streamk = dict(HOPPER_OK, scheduler="streamk", grid="even")
    assert hopper_wgmma.validate(streamk) == dict(HOPPER_OK, scheduler="streamk")
    assert hopper_wgmma.render(streamk) == hopper_wgmma.render(dict(HOPPER_OK, scheduler="streamk"))
    assert hopper_wgmma.feasible(dict(HOPPER_OK, grid="even"), (8192, 2048, 8192), "sm_90a") == (True, "")
    assert not hopper_wgmma.feasible(dict(HOPPER_OK, cluster_n=2, swizzle=2, grid="even"), (8192, 2048, 8192),
                                     "sm_90a")[0]  # 4-CTA clusters: CUTLASS fits fewer than sm_count CTAs
    # 3072 pairs take 47 waves on 66 slots and 66 pairs on 47: nothing to even out
    assert not hopper_wgmma.feasible(dict(HOPPER_OK, grid="even"), (16384, 12288, 8192), "sm_90a")[0]


def test_hopper_raw_swap_ab_keeps_earlier_identities_and_swaps_only_when_asked():
    stream = dict(RAW_OK, tile_m=64, tile_n=128, stages=9, epi="direct")
    assert hopper_raw.validate(dict(stream, swap_ab=False)) == hopper_raw.validate(stream)
    assert hopper_raw.render(dict(stream, swap_ab=False)) == hopper_raw.render(stream)
    assert "A = B_col_major" not in hopper_raw.render(stream)
    swapped = hopper_raw.render(dict(stream, swap_ab=True))
    assert "A = B_col_major" in swapped and "static_cast<size_t>(col) * M + row" in swapped
    # the kernel walks N x M x K: its tiles are those of the transposed shape (8 of 64x128 here, 16 unswapped, more
    # than the 15 clusters of 8 that run at once)
    split = dict(stream, cluster_k=8)
    assert hopper_raw.feasible(dict(split, swap_ab=True), (1024, 64, 8192), "sm_90a") == (True, "")
    assert "second wave" in hopper_raw.feasible(split, (1024, 64, 8192), "sm_90a")[1]


def test_hopper_raw_cluster_k_keeps_earlier_identities_and_is_left_to_sweeps():
    """cluster_k came after the family's campaigns: 1 names and renders the same candidate as before. A split takes one
    work unit per cluster, needs two k-blocks per CTA and all its clusters running at once, counts its fp32 partial
    tile in the shared memory (reusing the ring), and is not a search knob (it measured below the wgmma family's
    split-K where that fills the SMs; the priors list it only where no tile does, hopper_raw._cluster_split_prior)."""
    direct = dict(RAW_OK, epi="direct", tile_n=128)
    assert hopper_raw.validate(dict(direct, cluster_k=1)) == hopper_raw.validate(direct)
    assert hopper_raw.render(dict(direct, cluster_k=1)) == hopper_raw.render(direct)
    split = dict(direct, cluster_k=4)
    src = hopper_raw.render(split)
    assert "CK = 4" in src and "mapa.u64" in src and "cfg.gridDim = dim3(CK * units)" in src
    assert hopper_raw.feasible(split, (256, 1920, 512), "sm_90a") == (True, "")
    assert "two k-blocks" in hopper_raw.feasible(split, (256, 1920, 448), "sm_90a")[1]
    # 30 clusters of 4 run at once on 132 SMs: 32 tiles would take a second wave; 39 of 3 take them in one
    assert "second wave" in hopper_raw.feasible(split, (256, 2048, 512), "sm_90a")[1]
    assert hopper_raw.feasible(dict(split, cluster_k=3), (256, 2048, 512), "sm_90a") == (True, "")
    assert "second wave" in hopper_raw.feasible(dict(split, cluster_k=7), (256, 2048, 1024), "sm_90a")[1]
    assert hopper_raw.smem_bytes(hopper_raw.validate(dict(split, stages=2))) > 2 * 256 * 128 + 1024  # 128x136 fp32
    assert hopper_raw.smem_bytes(hopper_raw.validate(split)) == hopper_raw.smem_bytes(hopper_raw.validate(direct))
    assert "cluster_k" not in hopper_raw.SEARCH_DOMAIN


def _function(src: str, name: str) -> str:
    """The definition of the device function `name` in a rendered source, up to its closing brace."""
    start = src.index(f" {name}(")
    return src[start:src.index("\n}\n", start)]


def test_kernels_end_without_waiting_for_their_stores_of_c():
    """A CTA that sums K-slices over its cluster with a large tile publishes its partial tile with a release barrier,
    but leaves on a relaxed one: a release arrive there compiled to MEMBAR.ALL.GPU, which waited for its stores of C
    to land and cost 0.16-0.51 us a call (docs/benchmarks/data/kernel_ends_cluster_h200_2026-11-29_24f0618.json).
    The TMA epilogue likewise waits only until its stores have read shared memory."""
    raw = hopper_raw.render(dict(RAW_OK, tile_n=128, stages=6, epi="direct", cluster_k=4))
    publish, leave = raw.index("cluster_sync();  // every partial tile"), raw.index("cluster_hold();  // no CTA")
    assert publish < leave and raw.count("cluster_hold();") == 1 and "st.async" not in raw
    assert "arrive.release.aligned" in _function(raw, "cluster_sync")
    assert "arrive.relaxed.aligned" in _function(raw, "cluster_hold")
    sm = small.render(dict(SMALL_CLUSTER, bn=128))
    publish = sm.index("cluster.sync();  // all partial tiles")
    assert "cluster_hold();  // no CTA" in sm[publish:] and sm.count("cluster.sync()") == 1
    assert "arrive.relaxed.aligned" in _function(sm, "cluster_hold")
    tma = hopper_raw.render(dict(RAW_OK, tile_n=64, stages=2, epi="tma"))
    assert "cp.async.bulk.wait_group.read 0;" in tma and "cp.async.bulk.wait_group 0;" not in tma


def test_small_tiles_push_their_partial_rows_without_a_release():
    """Where a split's tile is small, each CTA pushes the rows another CTA sums into that CTA's shared memory
    (st.async, counted on its barrier) once a relaxed barrier says every CTA's buffers are free, and waits for its
    own share with acquire: no release/acquire cluster barrier (a MEMBAR.ALL.GPU) and no barrier at the end. On
    larger tiles the 8-byte pushes cost more than the membar, so those keep publishing
    (docs/benchmarks/data/publish_push_h200_2026-11-29_1985b9c.json)."""
    split = dict(RAW_OK, tile_m=64, tile_n=32, stages=4, epi="direct", cluster_k=4)
    assert hopper_raw.pushes(hopper_raw.validate(split))
    assert not hopper_raw.pushes(hopper_raw.validate(dict(split, tile_n=64)))
    assert not hopper_raw.pushes(hopper_raw.validate(dict(split, cluster_k=1)))
    raw = hopper_raw.render(split)
    kernel = raw[raw.index("__global__"):raw.index("bool make_map(")]
    free, push, wait = kernel.index("cluster_hold();"), kernel.index("push2("), kernel.index("bar_wait_cluster(recv, 0)")
    assert kernel.index("bar_expect_tx(recv") < free < push < wait
    assert "cluster_sync();  // every partial tile" not in kernel and kernel.count("cluster_hold();") == 1
    assert "mbarrier.try_wait.parity.acquire.cluster" in raw and "barrier.cluster.arrive.relaxed" in raw
    assert small.pushes(SMALL_CLUSTER) and not small.pushes(dict(SMALL_CLUSTER, bn=128))
    assert small.smem_bytes(SMALL_CLUSTER) == small.smem_bytes(dict(SMALL_CLUSTER, cluster_k=1)) + 8
    sm = small.render(SMALL_CLUSTER)
    assert "st.async.shared::cluster" in sm and "mbarrier.try_wait.parity.acquire.cluster" in sm
    body = sm[sm.index("__global__"):]
    free, push = body.index("cluster_hold();"), body.index("push2(")
    assert free < push < body.index("bar_wait_cluster(recv, 0)") and body.count("cluster_hold();") == 1
    assert "barrier.cluster.arrive" not in body and "cluster.sync()" not in sm and "cooperative_groups" not in sm


def test_hopper_raw_pingpong_keeps_earlier_identities_and_gives_each_warpgroup_whole_tiles():
    """schedule came after the family's campaigns: "cooperative" names and renders the same candidate as before.
    "pingpong" gives each consumer warpgroup every other tile whole (all of a 64-row tile's columns, all of a
    128-row tile's rows), an empty barrier that one warpgroup's four warps release, and turns at the tensor cores
    through named barriers 5 and 6; it keeps one CTA per cluster and whole tiles, and counts a warpgroup's
    accumulators over the whole tile."""
    assert hopper_raw.validate(dict(RAW_OK, schedule="cooperative")) == RAW_OK
    assert hopper_raw.render(dict(RAW_OK, schedule="cooperative")) == hopper_raw.render(RAW_OK)
    pp = dict(RAW_OK, tile_n=128, stages=6, schedule="pingpong")
    src = hopper_raw.render(pp)
    assert "bar.sync %0, 256;\" ::\"r\"(5 + (i & 1))" in src and "CONSUMER_WARPS / 2" in src
    assert "m64n128k16" in src and "cw * (BM / 2)" not in src.split("__global__")[1]
    # a 64-row tile: one m64 atom as wide as the tile per warpgroup, where cooperative halves the columns
    assert "m64n256k16" in hopper_raw.render(dict(pp, tile_m=64, tile_n=256, stages=4))
    assert "m64n128k16" in hopper_raw.render(dict(pp, tile_m=64, tile_n=256, stages=4, schedule="cooperative"))
    assert hopper_raw.accumulators(hopper_raw.validate(dict(pp, tile_n=192))) == 192
    assert "accumulators" in hopper_raw.feasible(dict(pp, tile_n=256, stages=4), None, "sm_90a")[1]
    for change, why in ((dict(cluster_m=2), "cluster_m=2"), (dict(cluster_k=2, epi="direct"), "cluster_k=2"),
                        (dict(grid="streamk"), "streamk"), (dict(tile_m=256, tile_n=64), "untried")):
        ok, reason = hopper_raw.feasible(dict(pp, **change), (4096, 4096, 1024), "sm_90a")
        assert not ok and why in reason, (change, reason)
    assert hopper_raw.feasible(dict(pp, group=4, grid="even", k_order="alternate"), (4096, 4096, 1000), "sm_90a")[0]


def test_hopper_raw_streamk_keeps_earlier_identities_and_is_left_to_sweeps():
    """grid=streamk came after the family's campaigns: the other grids render as before. It shares the last waves'
    tiles out by k-blocks through a workspace allocated and freed in the call, needs one CTA per tile along M and K
    and a forward K walk, and is not a search knob until timed."""
    sk = dict(RAW_OK, grid="streamk")
    src = hopper_raw.render(sk)
    assert "struct Walk" in src and "cudaMallocAsync" in src and "cudaFreeAsync(ws, stream)" in src
    assert "struct Walk" not in hopper_raw.render(RAW_OK) and "cudaMallocAsync" not in hopper_raw.render(RAW_OK)
    assert hopper_raw.feasible(sk, (4096, 16384, 12288), "sm_90a") == (True, "")
    for clash in ({"cluster_m": 2}, {"k_order": "alternate"}, {"cluster_k": 2, "epi": "direct"}):
        ok, why = hopper_raw.feasible(dict(sk, **clash), (4096, 4096, 1024), "sm_90a")
        assert not ok and ("streamk" in why or "grid=full" in why), why
    assert hopper_raw.SEARCH_DOMAIN["grid"] == ("full", "even")


def test_hopper_raw_l2_hint_keeps_earlier_identities_and_marks_only_the_named_copies():
    """l2_evict_first came after the family's first campaigns: "none" names and renders the same candidate as before; a letter puts the
    cache-hint form on that operand's TMA copies (C: the epilogue's TMA stores) and on no other."""
    assert hopper_raw.validate(dict(RAW_OK, l2_evict_first="none")) == RAW_OK
    assert hopper_raw.render(dict(RAW_OK, l2_evict_first="none")) == hopper_raw.render(RAW_OK)
    plain = hopper_raw.render(RAW_OK)
    assert "EVICT_A = false" in plain and "EVICT_B = false" in plain and "EVICT_C = false" in plain
    bc = hopper_raw.render(dict(RAW_OK, l2_evict_first="bc"))
    assert "EVICT_A = false" in bc and "EVICT_B = true" in bc and "EVICT_C = true" in bc
    assert "tma_load<EVICT_A>" in bc and "tma_load<EVICT_B>" in bc and "createpolicy.fractional.L2::evict_first" in bc
    assert '"l2_evict_first":"bc"' in bc.splitlines()[0]
    assert "EVICT_A = true" in hopper_raw.render(dict(RAW_OK, l2_evict_first="a"))
    with pytest.raises(ValueError):
        hopper_raw.validate(dict(RAW_OK, l2_evict_first="last"))


def test_the_mma_sync_cold_twins_put_every_k_tile_in_flight():
    """ampere_cute's and small's cold-call twins deepen the ring until all of a CTA's k-tiles load at once (a cold
    call reads B from DRAM: one round trip, not one per group), within an A100's shared memory and the domain's
    deepest ring; none where every tile is in flight already. A server-mode search starts from them."""
    from agent.families import cold_twin
    from agent.policy.priors import priors

    ac = {"bm": 32, "bn": 32, "bk": 64, "wm": 2, "wn": 2, "stages": 4, "prefetch": 3, "sw_b": 2, "sw_m": 3,
          "sw_s": 3, "block_swizzle": 1, "reg_pipeline": True, "epilogue": "smem", "split_k": 1, "acc": "fp32"}
    twin = cold_twin("ampere_cute", ac, (64, 64, 256))  # four k-tiles: three were in flight
    assert (twin["prefetch"], twin["stages"]) == (4, 5) and {**twin, "prefetch": 3, "stages": 4} == ac
    assert cold_twin("ampere_cute", ac, (64, 64, 192)) is None  # three k-tiles, three in flight
    deep = cold_twin("ampere_cute", ac, (64, 64, 4096))  # 64 k-tiles: the deepest the domain has
    assert (deep["prefetch"], deep["stages"]) == (7, 8)
    split = cold_twin("ampere_cute", dict(ac, split_k=4, stages=3, prefetch=2), (64, 64, 1024))  # 4 tiles a slice
    assert (split["prefetch"], split["stages"]) == (4, 5)
    big = dict(ac, bm=128, bn=128, wm=2, wn=4, stages=3, prefetch=2)  # 32 KB a stage: an A100 holds five
    bigger = cold_twin("ampere_cute", big, (1024, 1024, 4096))
    assert (bigger["prefetch"], bigger["stages"]) == (4, 5)
    for t in (twin, deep, split):
        assert ampere_cute.feasible(t, None, "sm_80")[0] and ampere_cute.feasible(t, None, "sm_90a")[0]
    sm = {"bm": 16, "bn": 32, "bk": 64, "wm": 1, "wn": 2, "stages": 3, "split_k": 1}
    assert cold_twin("small", sm, (64, 64, 512))["stages"] == 6  # eight k-tiles: the deepest ring, five ahead
    assert cold_twin("small", sm, (64, 64, 256))["stages"] == 5  # four k-tiles, all four ahead
    assert cold_twin("small", sm, (64, 64, 128)) is None  # two k-tiles, both ahead already
    clustered = {"bm": 16, "bn": 32, "bk": 128, "wm": 1, "wn": 1, "stages": 3, "split_k": 1, "cluster_k": 8,
                 "epi": "smem"}
    assert cold_twin("small", clustered, (64, 128, 1024)) is None  # one k-tile a CTA of the cluster
    assert cold_twin("small", clustered, (64, 128, 4096))["stages"] == 5  # four
    # a model's own kernel (no family, no params) or a family's variant without params has no twin
    assert cold_twin(None, None, (64, 64, 256)) is None and cold_twin("ampere_cute", None, (64, 64, 256)) is None
    for fam, shape in (("ampere_cute", (64, 64, 1024)), ("small", (64, 64, 1024))):
        offline, server = (priors(fam, shape, "fp32", "sm_90a", mode) for mode in ("offline", "server"))
        drop_pdl = lambda ps: [{k: v for k, v in p.items() if k != "pdl"} for p in ps]  # noqa: E731
        assert drop_pdl(server) == drop_pdl([cold_twin(fam, p, shape) or p for p in offline]) != drop_pdl(offline)


def test_the_cold_twin_hints_the_operand_its_grid_reads_once():
    """hopper_raw's cold-call twin puts evict_first on the operand of 32 MiB or more that one or two tiles across
    read (A per tile column, B per tile row; in the kernel's own terms where it swaps them); a search timed in server
    mode starts from twins, an offline one does not."""
    from agent.families import cold_twin, pricing

    assert pricing.read_once_operand(4096, 128, 12288, 64, 128) == "a"  # 96 MiB of A, one tile column
    assert pricing.read_once_operand(2048, 256, 12288, 128, 128) == "a"  # two columns
    assert pricing.read_once_operand(2048, 512, 12288, 128, 128) == ""  # four
    assert pricing.read_once_operand(1024, 128, 12288, 64, 128) == ""  # 24 MiB: it stays in the L2
    assert pricing.read_once_operand(64, 4096, 8192, 64, 64) == "b"
    assert pricing.read_once_operand(256, 128, 262144, 128, 128) == "a"  # both qualify: the larger
    split = {"tile_m": 64, "tile_n": 128, "stages": 9, "cluster_k": 2, "group": 1, "acc": "fp32"}
    assert cold_twin("hopper_raw", split, (4096, 128, 12288))["l2_evict_first"] == "a"
    assert cold_twin("hopper_raw", split, (1024, 128, 12288)) is None
    assert cold_twin("hopper_raw", dict(split, l2_evict_first="b"), (4096, 128, 12288)) is None  # hinted already
    swapped = {"tile_m": 64, "tile_n": 64, "stages": 14, "group": 1, "acc": "fp32", "swap_ab": True}
    assert cold_twin("hopper_raw", swapped, (8192, 64, 8192))["l2_evict_first"] == "b"  # A, the kernel's B
    # the wgmma family's: its twin derives a producer whose TMA copies carry the hint, named apart, and only the
    # hinted kernel's source changes
    sliced = dict(HOPPER_SLICED, swap_ab=False, tile_n=128)
    twin = cold_twin("hopper_wgmma", sliced, (256, 2048, 16384))
    assert twin["l2_evict_first"] == "b" and hopper_wgmma.feasible(twin, (256, 2048, 16384), "sm_90a")[0]
    assert cold_twin("hopper_wgmma", HOPPER_SLICED, (4096, 128, 12288))["l2_evict_first"] == "b"  # A, the kernel's B
    # a batched split hints from 8 MiB (its slices stay in the L2 either way); an unsplit grid from 32 MiB
    assert pricing.read_once_operand(64, 1024, 4096, 64, 64, pricing.BATCHED_READ_ONCE_MIN_BYTES) == "b"  # 8 MiB
    assert pricing.read_once_hint(dict(sliced, swap_ab=False), (256, 1024, 8192)) == "b"  # 16 MiB of B, two rows
    assert pricing.read_once_hint(dict(sliced, swap_ab=False, scheduler="persistent", splits=1),
                                  (256, 1024, 8192)) == ""
    assert cold_twin("hopper_wgmma", HOPPER_OK, (4096, 4096, 4096)) is None  # every operand read many times
    assert cold_twin("hopper_wgmma", twin, (256, 2048, 16384)) is None
    assert hopper_wgmma.render(dict(HOPPER_OK, l2_evict_first="none")) == hopper_wgmma.render(HOPPER_OK)
    hinted = hopper_wgmma.render(twin)
    assert "EVICT_FIRST" in hinted and "struct Mainloop : CollectiveMainloop" in hinted
    assert "EVICT_FIRST" not in hopper_wgmma.render(sliced)
    assert families.candidate_name("hopper_wgmma", twin) != families.candidate_name("hopper_wgmma", sliced)
    assert "l2_evict_first" not in hopper_wgmma.SEARCH_DOMAIN
    assert cold_twin("a model's own", {}, (4096, 128, 12288)) is None
    assert cold_twin("hopper_raw", dict(split, knob_of_old=1), (4096, 128, 12288)) is None
    from agent.policy.priors import priors

    # a batched split carries the hint in every mode: its slices stay in the L2 for the summing kernel
    wg = priors("hopper_wgmma", (256, 2048, 16384), "fp32", "sm_90a", "offline")
    assert [p["l2_evict_first"] for p in wg if p["scheduler"] == "batched"] == ["a"] * sum(
        p["scheduler"] == "batched" for p in wg) != []
    for fam, shape in (("hopper_raw", (4096, 128, 12288)), ("hopper_raw", (64, 4096, 8192)),
                       ("hopper_raw", (8192, 64, 8192)), ("hopper_wgmma", (256, 4096, 8192))):
        offline, server = (priors(fam, shape, "fp32", "sm_90a", mode) for mode in ("offline", "server"))
        assert [p.get("l2_evict_first", "none") for p in offline] == ["none"] * len(offline)
        drop_pdl = lambda ps: [{k: v for k, v in p.items() if k != "pdl"} for p in ps]  # a launch knob by mode
        assert drop_pdl(server) == drop_pdl([cold_twin(fam, p, shape) or p for p in offline]) != drop_pdl(offline)
        assert all(families.get(fam).feasible(p, shape, "sm_90a")[0] for p in server)


def test_a_mutated_childs_read_once_hint_follows_the_operand():
    """The search mutates a hinted parent's other knobs: the hint moves with swap_ab to the same physical operand,
    and goes where the child reads no operand once (more tile columns, a smaller operand); C's hints stay."""
    from agent.families import pricing

    shape = (256, 2048, 16384)  # B (64 MiB) is read once by one or two tile-rows of M
    parent = dict(HOPPER_SLICED, swap_ab=False, tile_n=128, l2_evict_first="b")
    for cold in (False, True):
        assert pricing.follow_read_once(parent, shape, cold) == parent
        flipped = pricing.follow_read_once(dict(parent, swap_ab=True), shape, cold)
        assert flipped["l2_evict_first"] == "a"  # B is the kernel's A
        # a 64-row tile reads B four times over M = 256
        assert pricing.follow_read_once(dict(parent, tile_m=64), shape, cold)["l2_evict_first"] == "none"
        # 4 MiB of B, under even a batched split's floor
        assert pricing.follow_read_once(dict(parent, swap_ab=True), (256, 2048, 1024), cold)["l2_evict_first"] == "none"
        raw = {"tile_m": 128, "tile_n": 128, "stages": 4, "acc": "fp32", "l2_evict_first": "bc"}
        assert pricing.follow_read_once(raw, (4096, 4096, 4096), cold) == raw
    # off the batched split the hint pays only cold, as the priors have it
    persistent = dict(parent, scheduler="persistent", splits=1)
    assert pricing.follow_read_once(persistent, shape, True)["l2_evict_first"] == "b"
    assert pricing.follow_read_once(persistent, shape, False)["l2_evict_first"] == "none"


def test_pdl_is_an_sm90_launch_knob_that_keeps_earlier_identities():
    """pdl=False (the default) is left out of the canonical params: earlier candidates render the same source."""
    for mod, base in ((small, SMALL_OK), (ampere_cute, AMPERE_OK), (hopper_wgmma, HOPPER_OK)):
        assert mod.validate(dict(base, pdl=False)) == base
        assert mod.render(dict(base, pdl=False)) == mod.render(base)
        assert "pdl" in mod.validate(dict(base, pdl=True))
    for mod, base in ((small, SMALL_OK), (ampere_cute, AMPERE_OK)):
        src = mod.render(dict(base, pdl=True))
        assert "griddepcontrol.wait" in src and "cudaLaunchAttributeProgrammaticStreamSerialization" in src
        assert "griddepcontrol" not in mod.render(base)
        ok, why = mod.feasible(dict(base, pdl=True), None, "sm_80")
        assert not ok and "sm_90" in why
        assert all(not p.get("pdl") for p in mod.space((512, 512, 1024), "fp32", "sm_80")[:50])
        assert all(p.get("pdl") for p in mod.space((512, 512, 1024), "fp32", "sm_90a")[:50])
    src = hopper_wgmma.render(dict(HOPPER_OK, pdl=True))
    assert "#define CUTLASS_ENABLE_GDC_FOR_SM90" in src and "launch_with_pdl=*/true" in src
    assert "CUTLASS_ENABLE_GDC_FOR_SM90" not in hopper_wgmma.render(HOPPER_OK)
    streamk = dict(HOPPER_OK, scheduler="streamk", pdl=True)
    assert "stream-K" in hopper_wgmma.feasible(streamk, None, "sm_90a")[1]  # CUTLASS's GDC path does not build
    assert families.with_launch_knobs("hopper_wgmma", streamk, "sm_90a")["pdl"] is False
    assert families.with_launch_knobs("hopper_wgmma", HOPPER_OK, "sm_90a")["pdl"] is True


def test_shape_constraints():
    assert not small.feasible(SMALL_OK, (64, 63, 256), "sm_90a")[0]  # N not a multiple of 8
    assert not ampere_cute.feasible(AMPERE_OK, (4096, 4096, 4104), "sm_90a")[0]  # K % bk
    assert not ampere_cute.feasible(AMPERE_OK, (100, 4096, 4096), "sm_90a")[0]  # M < BM: no shifted tile
    assert ampere_cute.feasible(dict(AMPERE_OK, split_k=1), (8192, 4096, 4096), "sm_90a")[0]  # 160 ∤ 8192: fine
    assert "workspace" in ampere_cute.feasible(AMPERE_OK, (8192, 4096, 4096), "sm_90a")[1]
    assert not ampere_cute.feasible(dict(AMPERE_OK, bm=128, bn=128, wm=2, wn=2, stages=6, prefetch=5),
                                    (4096, 4096, 4096), "sm_86")[0]  # 99 KB of shared memory there
    assert "multiple of 8" in hopper_raw.feasible(RAW_OK, (1000, 1002, 1024), "sm_90a")[1]  # TMA rows of C
    assert hopper_raw.feasible(dict(RAW_OK, epi="direct"), (1000, 1002, 1024), "sm_90a")[0]  # paired stores
    # bands up to the first covering all tile-rows (8 of them here): 16 walks them as 8 does
    assert hopper_raw.feasible(dict(RAW_OK, group=8), (1024, 4096, 8192), "sm_90a") == (True, "")
    assert "tile-rows" in hopper_raw.feasible(dict(RAW_OK, group=16), (1024, 4096, 8192), "sm_90a")[1]
    assert "sm_90a" in hopper_raw.feasible(RAW_OK, (4096, 4096, 4096), "sm_80")[1]
    assert hopper_raw.space((4096, 4096, 4096), "fp32", "sm_80") == []
    # 128x64 (one 64x64 TMA sub-tile per consumer warpgroup) is a config, not part of the searched space
    narrow = dict(RAW_OK, tile_n=64, epi="tma")
    assert hopper_raw.feasible(narrow, (128, 16384, 64), "sm_90a") == (True, "")
    assert {p["tile_n"] for p in hopper_raw.space((128, 16384, 64), "fp32", "sm_90a")} and \
        min(p["tile_n"] for p in hopper_raw.space((128, 16384, 64), "fp32", "sm_90a")) == 128
    # a 2-CTA cluster takes two tile-rows at a time, and bands count those pairs
    assert "do not divide" in hopper_raw.feasible(dict(RAW_OK, cluster_m=2), (1100, 4096, 8192), "sm_90a")[1]
    assert "work units" in hopper_raw.feasible(dict(RAW_OK, cluster_m=2, group=8), (1024, 4096, 8192), "sm_90a")[1]
    assert hopper_raw.feasible(dict(RAW_OK, cluster_m=2, group=4), (1024, 4096, 8192), "sm_90a") == (True, "")


def test_swizzles_that_cutlass_caps_or_pads_are_refused():
    """The sm90 tile schedulers round each side of the CTA grid up to swizzle x cluster and compute the padding; a
    swizzle wider than the grid's short side allows is capped, which makes it the same kernel as the narrower one."""
    shape = (1024, 12288, 8192)  # 128x256: 8 x 48 CTAs
    assert hopper_wgmma.cta_grid(HOPPER_OK, shape) == (8, 48, 4)
    ok, why = hopper_wgmma.feasible(dict(HOPPER_OK, swizzle=8), shape, "sm_90a")
    assert not ok and "8x48 to 16x48" in why
    wide = dict(HOPPER_OK, tile_m=256, tile_n=192)  # 4 x 64 CTAs: swizzle 4 would need 8 rows of a 2x1 cluster
    assert not hopper_wgmma.feasible(wide, shape, "sm_90a")[0]
    assert hopper_wgmma.fit_swizzle(wide, shape)["swizzle"] == 2
    capped = dict(HOPPER_OK, cluster_m=1, swizzle=8)  # 512 rows: 4 CTAs on the short side, swizzle 8 acts as 4
    ok, why = hopper_wgmma.feasible(capped, (512, 12288, 8192), "sm_90a")
    assert not ok and "same kernel as swizzle 4" in why
    assert hopper_wgmma.feasible(dict(capped, swizzle=4), (512, 12288, 8192), "sm_90a")[0]
    # a side that does not fill the cluster is padded by the cluster itself, whatever the swizzle
    assert hopper_wgmma.cta_grid(dict(HOPPER_OK, swizzle=1), (1408, 12288, 8192)) == (12, 48, 1)


def test_wave_fitting_tiles_and_the_epilogue_sub_tile():
    """tile_n between the powers of two is a multiple of 16 (168 builds from 8-wide wgmma atoms and fails in
    CuTe's shared-memory layout); an N-major B needs a multiple of 64 for the 128-byte swizzle; epi_n divides tile_n
    and its shared memory counts against the stages."""
    shape = (8192, 2048, 8192)
    assert hopper_wgmma.feasible(dict(HOPPER_OK, tile_m=256, tile_n=176, swizzle=1), shape, "sm_90a") == (True, "")
    with pytest.raises(ValueError, match="outside"):
        hopper_wgmma.validate(dict(HOPPER_OK, tile_n=168))
    ok, why = hopper_wgmma.feasible(dict(HOPPER_OK, tile_m=256, tile_n=176, swizzle=1, b_operand="row"), shape,
                                    "sm_90a")
    assert not ok and "multiple of 64" in why
    # swapped, the 176 side is A's rows (K-major) and B's N-major side is tile_m
    assert hopper_wgmma.feasible(dict(HOPPER_OK, tile_m=256, tile_n=176, swizzle=1, b_operand="row", swap_ab=True),
                                 shape, "sm_90a")[0]
    ok, why = hopper_wgmma.feasible(dict(HOPPER_OK, tile_m=256, tile_n=192, swizzle=1, epi_n=128), shape, "sm_90a")
    assert not ok and "does not divide" in why
    big_epi = dict(HOPPER_OK, epi_n=128, stages=4)  # 4 x 48 KiB + 2 x 128 x 128 x 2 B > 227 KiB
    ok, why = hopper_wgmma.feasible(big_epi, shape, "sm_90a")
    assert not ok and "shared memory" in why
    assert hopper_wgmma.feasible(dict(big_epi, stages=3), shape, "sm_90a")[0]
    src = hopper_wgmma.render(dict(HOPPER_OK, epi_n=64))
    assert "Shape<_128, _64>, ElementAcc" in src and "EpilogueTileAuto" not in src
    assert "EpilogueTileAuto" in hopper_wgmma.render(HOPPER_OK)
    # the default stays out of the canonical params, so names of configs measured before the knob do not change
    assert "epi_n" not in families.normal_params("hopper_wgmma", dict(HOPPER_OK, epi_n=0))


def test_batched_split_k_rules_and_render():
    ok = hopper_wgmma.feasible(HOPPER_SLICED, (64, 2048, 4096), "sm_90a")
    assert ok == (True, "")
    assert "16-byte" in hopper_wgmma.feasible(HOPPER_SLICED, (64, 2048, 4104), "sm_90a")[1]  # 4104/4 % 8 != 0
    assert "shorter than tile_k" in hopper_wgmma.feasible(HOPPER_SLICED, (64, 2048, 224),
                                                          "sm_90a")[1]
    assert "workspace" in hopper_wgmma.feasible(HOPPER_SLICED, (4096, 4096, 4096), "sm_90a")[1]
    src = hopper_wgmma.render(HOPPER_SLICED)
    assert "griddepcontrol.wait" in src and "cudaLaunchAttributeProgrammaticStreamSerialization" in src
    assert "{PM, PN, KS, L}" in src and "constexpr int kSplits = 4;" in src
    plain = hopper_wgmma.render(HOPPER_OK)
    assert "sum_slices" not in plain and "CUTLASS_ENABLE_GDC_FOR_SM90" not in plain


def test_hopper_wgmma_enables_extended_wgmma_shapes_only_where_its_tile_needs_them():
    """The harness no longer passes CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED (~25 s of front end per CuTe file): a
    tile_n whose widest standard atom is narrower than the tile defines it in the source, and no other does, so
    the standard tiles keep their earlier source and so their archive identity."""
    from agent.families.hopper_wgmma import needs_extended_wgmma

    assert [n for n in hopper_wgmma.DOMAIN["tile_n"] if needs_extended_wgmma(n)] == [80, 112, 144, 160, 176]
    macro = "#define CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED"
    for n in hopper_wgmma.DOMAIN["tile_n"]:
        src = hopper_wgmma.render(dict(HOPPER_OK, tile_n=n, cluster_m=1, swizzle=1))
        assert (macro in src) == (n in (80, 112, 144, 160, 176)), n
        if macro in src:  # before any include, or CuTe's selector has already been parsed without the shapes
            assert src.index(macro) < src.index("#include")
    from evaluator.compile import BASE_FLAGS

    assert not any("EXTENDED_MMA" in f for f in BASE_FLAGS)


def test_an_archived_family_kernel_is_rebuilt_from_todays_template():
    """Sources archived before the template defined the extended shapes come back with the definition (seeding
    from a global archive evaluates them again); standard tiles come back unchanged, and kernels of no family,
    or with params the family refuses, keep their stored source."""
    from agent.families import current_source

    new = hopper_wgmma.render(HOPPER_EXTENDED)
    old = "\n".join(ln for ln in new.splitlines() if "EXTENDED_MMA" not in ln and "extended wgmma" not in ln)
    assert old != new and current_source("hopper_wgmma", HOPPER_EXTENDED, old) == new
    std = hopper_wgmma.render(HOPPER_OK)
    assert current_source("hopper_wgmma", HOPPER_OK, std) == std
    assert current_source(None, None, "// a model's kernel") == "// a model's kernel"
    assert current_source("hopper_wgmma", dict(HOPPER_OK, tile_n=168), old) == old


def test_bad_params_are_rejected_with_a_reason():
    with pytest.raises(ValueError, match="unknown parameter"):
        small.render(dict(SMALL_OK, colour="red"))
    with pytest.raises(ValueError, match="missing parameter"):
        hopper_wgmma.render({k: v for k, v in HOPPER_OK.items() if k != "raster"})
    with pytest.raises(ValueError, match="outside"):
        ampere_cute.render(dict(AMPERE_OK, stages=11))
    with pytest.raises(ValueError, match="unknown kernel family"):
        families.get("volta_wmma")


def test_raw_edge_shift_is_only_where_a_tile_hangs_over_the_edge():
    """edge=shift starts the last tiles inside the output: not searched, only where some tile would hang over, and only
    where the rows two tiles share come out the same from both (K walked forward and whole)."""
    assert "edge" not in hopper_raw.SEARCH_DOMAIN and "edge" not in hopper_raw.validate(RAW_OK)
    shifted = dict(RAW_OK, edge="shift")
    assert hopper_raw.feasible(shifted, (1000, 1000, 520), "sm_90a")[0]
    ok, why = hopper_raw.feasible(shifted, (1024, 1024, 520), "sm_90a")
    assert not ok and "hangs over" in why
    for clash in ({"k_order": "alternate"}, {"grid": "streamk"}):
        ok, why = hopper_raw.feasible(dict(shifted, **clash), (1000, 1000, 520), "sm_90a")
        assert not ok and "forward and whole" in why
    assert "row0(tm, M)" in hopper_raw.render(shifted) and "col0(tn, N)" in hopper_raw.render(shifted)
    assert "row0(" not in hopper_raw.render(RAW_OK)  # the default renders what it did before the knob


def test_raw_cooperative_n_splits_columns_for_tiles_of_128_to_256_rows():
    """The consumers of a 192-row tile cannot split its rows (96 is no m64 atom): they split its columns, each running
    tile_m/64 atoms over half of them, stored from registers. Sweeps only: the search keeps its two schedules."""
    p = dict(RAW_OK, tile_m=192, tile_n=144, stages=5, epi="direct", schedule="cooperative_n")
    assert hopper_raw.feasible(p, (1296, 2680, 3392), "sm_90a")[0] and hopper_raw.accumulators(p) == 3 * 36
    src = hopper_raw.render(p)
    assert "wgmma.mma_async.sync.aligned.m64n72k16" in src and "constexpr int ATOMS = BM / 64;" in src
    assert "cw * (BM / 2)" not in src  # no warpgroup owns a band of rows
    for bad, why in ((dict(p, schedule="cooperative"), "96 rows"), (dict(p, epi="tma"), "epi=tma"),
                     (dict(p, cluster_m=2, group=2), "cluster_m=2"), (dict(p, tile_m=64), "128-256 rows"),
                     (dict(p, schedule="pingpong", tile_n=64), "taller tile")):
        ok, reason = hopper_raw.feasible(bad, (1296, 2680, 3392), "sm_90a")
        assert not ok and why in reason, reason
    assert hopper_raw.feasible(dict(p, swap_ab=True), (2680, 1296, 3392), "sm_90a")[0]
    assert hopper_raw.SEARCH_DOMAIN["schedule"] == ("cooperative", "pingpong")
    assert 192 not in hopper_raw.SEARCH_DOMAIN["tile_m"]


def test_raw_cooperative3_shares_a_192_row_tile_by_rows_between_three_consumers():
    """Three consumer warpgroups, 64 rows each, where cooperative_n gives each of two all 192 rows. ptxas holds them to
    128 registers: tiles up to 192 wide. Not a search knob: sweeps and the fitting tile (`_fit_split`)."""
    p = dict(RAW_OK, tile_m=192, tile_n=112, stages=5, epi="direct", schedule="cooperative3", swap_ab=True)
    assert hopper_raw.feasible(p, (408, 6024, 8192), "sm_90a")[0] and hopper_raw.accumulators(p) == 56
    src = hopper_raw.render(p)
    assert "constexpr int THREADS = 512;" in src and "wgmma.mma_async.sync.aligned.m64n112k16" in src
    assert "cw * 64 * 128" in src and "cw * 64 + " in src and "setmaxnreg.inc" not in src
    wide = dict(p, tile_n=208, swap_ab=False)
    for bad, why in ((wide, "above 96"), (dict(p, epi="tma"), "epi=tma"), (dict(p, tile_m=128), "tile_m=128"),
                     (dict(p, swap_ab=False, cluster_m=2), "cluster_m=2"),
                     (dict(p, swap_ab=False, grid="streamk"), "whole tiles")):
        ok, reason = hopper_raw.feasible(bad, (1000, 6024, 8192), "sm_90a")
        assert not ok and why in reason, reason
    assert "cooperative3" not in hopper_raw.SEARCH_DOMAIN["schedule"]
    two = hopper_raw.render(dict(p, schedule="cooperative_n"))
    assert "constexpr int THREADS = 384;" in two and "setmaxnreg.inc.sync.aligned.u32 232;" in two


@pytest.mark.parametrize("tile, shape, shifted", [
    ((64, 112), (1368, 488, 3008), True),  # 62% of a tile-row and 64% of a tile-column over: 1.20-1.28x shifted
    ((128, 64), (1000, 3000, 2048), False),  # 19% over: under a fifth
    ((128, 80), (848, 1280, 1472), True),  # 38% over a row, N whole
    ((128, 128), (1488, 2424, 4160), False),  # 128x128 stays padded: 0.990-0.993 shifted 38% over,
    ((128, 128), (2024, 1976, 1728), False),  # 0.971-0.986 as the first batch's best 56% over
    ((128, 176), (2600, 1000, 4096), False),  # wider than 128x128 (0.984-0.986 shifted)
    ((128, 256), (700, 9000, 3072), False),
    ((64, 112), (1024, 1008, 3072), False),  # nothing over: 1008 is nine tiles of 112
    ((64, 192), (2240, 152, 6272), False),  # a tile wider than N cannot start inside it, and M is whole
])
def test_raw_settle_shifts_narrow_tiles_that_hang_far_over(tile, shape, shifted):
    p = dict(RAW_OK, tile_m=tile[0], tile_n=tile[1], stages=4, epi="direct")
    q = hopper_raw.settle(dict(p, edge="shift"), shape)  # settled both ways, whatever it came with
    assert q == (dict(p, edge="shift") if shifted else p) == hopper_raw.settle(p, shape)
    if shifted:
        assert hopper_raw.feasible(q, shape, "sm_90a")[0]


def test_raw_settle_leaves_the_knobs_shift_does_not_serve_padded():
    """K not walked forward and whole (refused by feasible), and the streaming tiles of M or N <= 64 (unmeasured)."""
    shape = (1368, 488, 3008)
    base = dict(RAW_OK, tile_m=64, tile_n=112, stages=6, epi="direct")
    assert hopper_raw.settle(base, shape)["edge"] == "shift"
    for knobs in ({"k_order": "alternate"}, {"grid": "streamk"}, {"cluster_k": 2}, {"swap_ab": True},
                  {"tile_n": 32}):
        assert "edge" not in hopper_raw.settle(dict(base, **knobs), shape)
    assert hopper_raw.settle({"tile_m": 64}, shape) == {"tile_m": 64}  # too partial to say


def test_every_settled_prior_is_feasible_where_its_padded_twin_is():
    """The policy settles each prior, pool entry and twin (families.settled): a shifted one must build where the
    padded one did, or the pool would lose it without a word."""
    rng = random.Random(7)
    moved = 0
    for _ in range(300):
        shape = (rng.randrange(128, 8192, 8), rng.randrange(128, 8192, 8), rng.randrange(512, 8192, 64))
        for p in hopper_raw.priors(shape, "fp32"):
            q = families.settled("hopper_raw", p, shape)
            moved += q.get("edge") == "shift"
            assert hopper_raw.feasible(q, shape, "sm_90a")[0] == hopper_raw.feasible(p, shape, "sm_90a")[0], (shape, q)
    assert moved > 20
    assert families.settled("ampere_cute", AMPERE_OK, (1000, 1000, 1024)) == AMPERE_OK  # no settle: as given


def _build_all(jobs):
    """Real nvcc builds through the evaluator's compile cache, two at a time; each must build without spills."""
    compile_mod = pytest.importorskip("evaluator.compile")
    with ThreadPoolExecutor(max_workers=2) as pool:
        infos = list(pool.map(lambda j: compile_mod.compile_kernel(j[0], j[1], timeout=900), jobs))
    for (src, arch), info in zip(jobs, infos):
        assert info.ok, f"{arch}: {info.log[-3000:]}"
        assert info.so_path
        assert info.spill_stores == 0, f"{arch}: spills in {src[:200]}"
    return infos


def test_one_kernel_of_each_family_and_arch_compiles_with_nvcc():
    """The CI sample: one build per family and architecture it targets (CUTLASS/CuTe builds take 30-50 s of one core
    each; the variants below are the slow stage). Each goes through the evaluator's whole compile: text screen, nvcc,
    and the object screen, which must let the families' allowed state through (the cache table every family keeps,
    the sliced split-K's static workspace)."""
    jobs = [
        ("hopper_wgmma", dict(HOPPER_SLICED, pdl=True), "sm_90a"),
        ("hopper_raw", dict(RAW_OK, pdl=True), "sm_90a"),
        ("ampere_cute", dict(AMPERE_OK, pdl=True), "sm_90a"),
        ("ampere_cute", dict(AMPERE_OK, bm=64, bn=64, bk=32, sw_b=2, wm=2, wn=2, split_k=1, acc="fp16",
                             epilogue="direct", reg_pipeline=False, block_swizzle=1), "sm_80"),
        ("small", SMALL_OK, "sm_90a"),
        ("small", dict(SMALL_OK, split_k=1, bm=32, wm=2, epi="smem"), "sm_80"),
    ]
    assert {family for family, _, _ in jobs} == set(families.families())
    _build_all([(families.get(family).render(params), arch) for family, params, arch in jobs])


@pytest.mark.slow
def test_variants_of_each_family_compile_with_nvcc():
    """The knobs that change the generated code most: clusters, extended wgmma atoms, TMA epilogues, L2 hints, even
    grids and cluster split-K (the CI sample above builds K slices)."""
    jobs = [
        (hopper_wgmma.render(HOPPER_OK), "sm_90a"),
        (hopper_wgmma.render(HOPPER_EXTENDED), "sm_90a"),
        # the cold twin's own producer: a hint on B, multicast over a 2x1 cluster
        (hopper_wgmma.render(dict(HOPPER_OK, l2_evict_first="b")), "sm_90a"),
        (hopper_raw.render(dict(RAW_OK, tile_m=256, tile_n=176, stages=3, group=8, epi="direct")), "sm_90a"),
        (hopper_raw.render(dict(RAW_OK, cluster_m=2, group=8, pdl=True, k_order="alternate",
                                l2_evict_first="bc")), "sm_90a"),
        (hopper_raw.render(dict(RAW_OK, l2_evict_first="ac")), "sm_90a"),
        (hopper_raw.render(dict(RAW_OK, group=16, grid="even", pdl=True)), "sm_90a"),
        (hopper_raw.render(dict(RAW_OK, tile_n=64, stages=2, epi="tma")), "sm_90a"),
        (hopper_raw.render(dict(RAW_OK, tile_n=128, stages=6, epi="direct", cluster_k=4, pdl=True)), "sm_90a"),
        # 64-row tiles: the consumers split the columns; 64x64 shares one TMA sub-tile between them
        (hopper_raw.render(dict(RAW_OK, tile_m=64, tile_n=64, stages=7, cluster_m=2, group=2, pdl=True)), "sm_90a"),
        (hopper_raw.render(dict(RAW_OK, tile_m=64, tile_n=160, stages=7, epi="direct")), "sm_90a"),
        (hopper_raw.render(dict(RAW_OK, tile_m=64, tile_n=32, stages=7, epi="direct", pdl=True)), "sm_90a"),
        # a 64-row tile's K split over a cluster with a 14-stage ring (the M <= 64 priors; A's box sized at run time)
        (hopper_raw.render(dict(RAW_OK, tile_m=64, tile_n=64, stages=14, epi="direct", cluster_k=3, pdl=True)),
         "sm_90a"),
        # ping-pong: each consumer warpgroup on whole tiles of its own, stored with TMA and from registers
        (hopper_raw.render(dict(RAW_OK, tile_n=192, stages=4, group=8, schedule="pingpong", pdl=True)), "sm_90a"),
        (hopper_raw.render(dict(RAW_OK, tile_m=64, tile_n=256, stages=4, epi="direct", schedule="pingpong")),
         "sm_90a"),
        # the TMA epilogue's narrow last sub-tile: 48 columns (ping-pong 176), 32 (cooperative 256x160)
        (hopper_raw.render(dict(RAW_OK, tile_n=176, stages=5, group=16, schedule="pingpong", pdl=True)), "sm_90a"),
        (hopper_raw.render(dict(RAW_OK, tile_m=256, tile_n=160, stages=3, group=2, l2_evict_first="c")), "sm_90a"),
        # the last tiles shifted inside the output: TMA stores (ping-pong), stores from registers (64 rows)
        (hopper_raw.render(dict(RAW_OK, tile_n=176, stages=5, group=16, schedule="pingpong", edge="shift")), "sm_90a"),
        (hopper_raw.render(dict(RAW_OK, tile_m=64, tile_n=112, stages=7, epi="direct", edge="shift")), "sm_90a"),
        # columns split between the consumers of a 192-row tile, swapped operands stored transposed
        (hopper_raw.render(dict(RAW_OK, tile_m=192, tile_n=144, stages=5, epi="direct", schedule="cooperative_n",
                                swap_ab=True)), "sm_90a"),
        # three consumer warpgroups of 64 rows, the widest tile they hold without spilling
        (hopper_raw.render(dict(RAW_OK, tile_m=192, tile_n=192, stages=4, epi="direct", schedule="cooperative3")),
         "sm_90a"),
        (small.render(dict(SMALL_CLUSTER, pdl=True)), "sm_90a"),
    ]
    infos = _build_all(jobs)
    # one wgmma atom as wide as the tile, from the standard shapes and from the extended ones the template enables
    # (the harness does not pass them: without the macro tile_n=176 would be built from n16 atoms)
    for info, atom in zip(infos[:2], ("MMA_64x256x16_F32F16F16_SS", "MMA_64x176x16_F32F16F16_SS")):
        assert any(atom in k.get("mangled", "") for k in info.kernels), [k.get("mangled", "")[:300] for k in info.kernels]


GPU_SAMPLES = [
    ("small", SMALL_OK, (64, 512, 2048)),
    ("small", dict(SMALL_OK, split_k=1), (512, 64, 64)),
    ("small", SMALL_CLUSTER, (64, 2048, 4096)),  # cluster split-K, reduced through distributed shared memory
    ("small", dict(SMALL_CLUSTER, cluster_k=1, bm=128, bn=128, wm=2, wn=4, stages=2), (1000, 2048, 64)),
    ("ampere_cute", AMPERE_OK, (1000, 1000, 1024)),  # shifted edge tiles and split-K
    ("ampere_cute", dict(AMPERE_OK, bm=64, bn=64, wm=2, wn=2, split_k=1, epilogue="direct"), (512, 512, 64)),
    ("hopper_wgmma", HOPPER_OK, (4096, 1024, 12288)),
    ("hopper_wgmma", dict(HOPPER_OK, scheduler="streamk", splits=4, tile_n=128, cluster_m=1, raster="heuristic",
                          swizzle=1, swap_ab=True, b_operand="row"), (64, 2048, 4096)),
    ("hopper_wgmma", HOPPER_SLICED, (64, 2048, 4096)),  # K slices summed by a second, PDL-launched kernel
    # a cold twin's producer (evict_first on the kernel's B) over K slices and over a multicast cluster
    ("hopper_wgmma", dict(HOPPER_SLICED, l2_evict_first="b"), (64, 2048, 4096)),
    ("hopper_wgmma", dict(HOPPER_OK, l2_evict_first="a"), (4096, 1024, 12288)),
    ("hopper_wgmma", dict(HOPPER_SLICED, swap_ab=False, b_operand="row", tile_n=128, schedule="pingpong",
                          splits=2), (256, 1000, 4096)),  # N not a multiple of the tile
    # programmatic dependent launch: waits_for_predecessor runs each behind a kernel that writes the inputs late
    ("small", dict(SMALL_OK, pdl=True), (64, 512, 2048)),
    ("small", dict(SMALL_CLUSTER, pdl=True), (64, 2048, 4096)),
    # cluster splits that push their partial rows (small tiles), on ragged M and N
    ("small", dict(SMALL_CLUSTER, bm=64, bn=16, wm=4, wn=1), (40, 120, 1024)),
    ("small", dict(SMALL_CLUSTER, bm=16, bn=32, wm=1, wn=2, stages=4), (48, 2000, 4096)),
    ("ampere_cute", dict(AMPERE_OK, pdl=True), (1000, 1000, 1024)),
    ("hopper_wgmma", dict(HOPPER_OK, pdl=True), (4096, 1024, 12288)),
    ("hopper_wgmma", dict(HOPPER_SLICED, pdl=True), (64, 2048, 4096)),
    # 192 accumulators per consumer thread, swapped so that 192 covers M; M and N not multiples of the tile
    ("hopper_wgmma", dict(HOPPER_OK, tile_m=256, tile_n=192, swap_ab=True, cluster_m=1, swizzle=1, pdl=True),
     (1000, 520, 1024)),
    # a tile_n between the powers of two (an extended n176 wgmma atom), ragged on both sides
    ("hopper_wgmma", HOPPER_EXTENDED, (1000, 1000, 1024)),
    # the smallest wave-filling tile: ping-pong 64x32, swapped so the long side is on wgmma's M, both edges ragged
    ("hopper_wgmma", dict(HOPPER_OK, tile_m=64, tile_n=32, schedule="pingpong", cluster_m=2, swap_ab=True,
                          raster="heuristic", swizzle=1), (200, 1000, 1024)),
    # an explicit 128x128 epilogue sub-tile with an N-major B, one CTA per cluster
    ("hopper_wgmma", dict(HOPPER_OK, cluster_m=1, swizzle=1, b_operand="row", epi_n=128, pdl=True), (1000, 520, 1024)),
    # the hand-written kernel: TMA stores clipped at ragged M and N, K not a multiple of 64, several tiles per CTA
    ("hopper_raw", dict(RAW_OK, pdl=True), (1000, 1008, 520)),
    ("hopper_raw", dict(RAW_OK, tile_m=256, tile_n=128, group=4), (4096, 4096, 1000)),
    # 64-row tiles, each consumer warpgroup on half the columns: one 64x64 TMA sub-tile shared by both (ragged M and
    # N, several tiles per CTA, pairs sharing B), 64-column sub-tiles of their own, and stores from registers
    ("hopper_raw", dict(RAW_OK, tile_m=64, tile_n=64, stages=7), (1000, 1000, 520)),
    ("hopper_raw", dict(RAW_OK, tile_m=64, tile_n=64, stages=7, cluster_m=2, l2_evict_first="c", pdl=True),
     (1000, 1000, 1024)),
    ("hopper_raw", dict(RAW_OK, tile_m=64, tile_n=128, stages=7, group=2), (520, 1000, 1000)),
    ("hopper_raw", dict(RAW_OK, tile_m=64, tile_n=160, stages=7, epi="direct"), (200, 998, 1024)),
    # two m64 atoms of 88 columns per consumer warpgroup, stored straight from registers, N only even
    ("hopper_raw", dict(RAW_OK, tile_m=256, tile_n=176, stages=3, group=2, epi="direct"), (1030, 998, 1024)),
    # pairs of CTAs sharing B through TMA multicast: B's second half partly past N, several units per cluster
    ("hopper_raw", dict(RAW_OK, cluster_m=2, group=2, pdl=True), (1024, 1008, 520)),
    ("hopper_raw", dict(RAW_OK, tile_m=256, tile_n=176, stages=3, cluster_m=2, epi="direct"), (2000, 998, 1024)),
    # K walked backward on every other work unit (4 units per CTA or pair), K not a multiple of 64
    ("hopper_raw", dict(RAW_OK, tile_m=256, tile_n=128, group=4, k_order="alternate"), (4096, 4096, 1000)),
    ("hopper_raw", dict(RAW_OK, cluster_m=2, group=2, k_order="alternate"), (4096, 4096, 1000)),
    # L2 hints on the multicast B copies and the clipped TMA stores of C, and on A's plain copies
    ("hopper_raw", dict(RAW_OK, cluster_m=2, group=2, l2_evict_first="bc", pdl=True), (1024, 1008, 520)),
    ("hopper_raw", dict(RAW_OK, tile_m=256, tile_n=128, group=4, l2_evict_first="ac"), (4096, 4096, 1000)),
    # the fewest CTAs that take the same waves: 512 tiles on 128 CTAs, pairs 256 units on 64, CUTLASS 128 of 132
    ("hopper_raw", dict(RAW_OK, group=4, grid="even"), (4096, 4096, 1000)),
    # the last tile-row and tile-column shifted inside the output: rows and columns stored twice, from registers, from
    # TMA stores, over a 2-CTA cluster and a K split
    ("hopper_raw", dict(RAW_OK, tile_m=64, tile_n=112, stages=7, epi="direct", edge="shift"), (1000, 408, 1536)),
    ("hopper_raw", dict(RAW_OK, tile_n=176, stages=5, schedule="pingpong", edge="shift"), (1000, 1000, 520)),
    ("hopper_raw", dict(RAW_OK, cluster_m=2, group=2, edge="shift"), (1000, 1000, 520)),
    ("hopper_raw", dict(RAW_OK, tile_m=64, tile_n=64, stages=14, epi="direct", cluster_k=3, edge="shift"),
     (100, 200, 4096)),
    ("hopper_raw", dict(RAW_OK, cluster_m=2, group=2, grid="even", k_order="alternate"), (4096, 4096, 1000)),
    ("hopper_wgmma", dict(HOPPER_OK, grid="even", pdl=True), (4096, 4096, 1000)),
    # 128x64: one 64x64 TMA sub-tile per consumer warpgroup, several tiles per CTA, stores clipped at both edges
    # (a sweep passed every check with it on three output-bound shapes)
    ("hopper_raw", dict(RAW_OK, tile_n=64, stages=2), (1000, 1000, 520)),
    # K split over a cluster, the partial tiles summed through distributed shared memory: slices of unequal length
    # (K/64 = 9 blocks over 4 CTAs, the last block partial), M and N ragged, 8 CTAs on a 256-row tile
    ("hopper_raw", dict(RAW_OK, tile_n=128, stages=6, epi="direct", cluster_k=4, pdl=True), (200, 1000, 520)),
    ("hopper_raw", dict(RAW_OK, tile_m=256, tile_n=128, stages=4, epi="direct", cluster_k=8), (300, 698, 4096)),
    # cluster sizes that divide neither the 128 rows of the sum nor the k-blocks: shares of 42-43 and 18-19 rows
    ("hopper_raw", dict(RAW_OK, tile_n=64, stages=7, epi="direct", cluster_k=3), (256, 1000, 1000)),
    ("hopper_raw", dict(RAW_OK, tile_n=128, stages=7, epi="direct", cluster_k=7, pdl=True), (130, 500, 2048)),
    # stream-K: whole tiles for the first waves, then runs of k-blocks, a tile split between two CTAs summed through
    # the call's workspace: 512 tiles (3 waves' worth and 116 more: one whole wave, then 248 tiles shared out), K
    # not a multiple of 64; ragged M and N with no whole wave (256 tiles, runs of 17-18 of 9-block tiles); 64-row
    # tiles; a 256-row tile with stores from registers
    ("hopper_raw", dict(RAW_OK, group=4, grid="streamk", pdl=True), (4096, 4096, 1000)),
    ("hopper_raw", dict(RAW_OK, tile_n=128, stages=6, grid="streamk"), (2000, 2000, 520)),
    ("hopper_raw", dict(RAW_OK, tile_m=64, tile_n=64, stages=7, grid="streamk"), (1000, 1000, 1024)),
    ("hopper_raw", dict(RAW_OK, tile_m=256, tile_n=128, group=4, epi="direct", grid="streamk"), (4096, 2048, 1000)),
    # 64x32 tiles for M <= 64 (each consumer an m64n16 atom): the whole of M in one tile-row, N ragged, K not a
    # multiple of 64; pairs sharing B over two tile-rows, the second of 36 rows, N and K ragged
    ("hopper_raw", dict(RAW_OK, tile_m=64, tile_n=32, stages=7, epi="direct", pdl=True), (64, 1000, 1000)),
    ("hopper_raw", dict(RAW_OK, tile_m=64, tile_n=32, stages=7, epi="direct", cluster_m=2), (100, 1000, 2000)),
    # a 64-row tile's K split over a cluster (its consumers' columns summed side by side), rings deeper than the
    # search's: 16 k-blocks over 3 CTAs, N ragged; M short of the tile, 32 k-blocks over 2, K ragged
    ("hopper_raw", dict(RAW_OK, tile_m=64, tile_n=64, stages=14, epi="direct", cluster_k=3, pdl=True),
     (64, 1000, 1000)),
    ("hopper_raw", dict(RAW_OK, tile_m=64, tile_n=32, stages=16, epi="direct", cluster_k=2), (40, 1000, 2000)),
    # the launch tile split over a cluster of 6 (`_launch_split`): 16 tiles on four ragged tile-rows and columns, 33
    # k-blocks (the last partial) over 6 CTAs
    ("hopper_raw", dict(RAW_OK, tile_m=64, tile_n=64, stages=6, epi="direct", cluster_k=6, pdl=True), (200, 248, 2056)),
    # a one-wave tile (`_one_wave_tiles`): 64 rows by 112 columns, each consumer an m64n56 atom over half of them;
    # ragged rows, the last tile-column 8 wide, K not a multiple of 64
    ("hopper_raw", dict(RAW_OK, tile_m=64, tile_n=112, stages=10, epi="direct", pdl=True), (1000, 344, 1480)),
    # its 128-row twin with a 16-column TMA tail (80 = 64 + 16) on N off the tile
    ("hopper_raw", dict(RAW_OK, tile_m=128, tile_n=80, stages=7, pdl=True), (360, 1208, 1472)),
    # M below the tile and not a multiple of 8: A's box takes 16 rows, the rest of the 64 stale; TMA stores
    ("hopper_raw", dict(RAW_OK, tile_m=64, tile_n=64, stages=12, pdl=True), (12, 1000, 1000)),
    # operands swapped for N <= 64 (C^T = B^T A^T, stored transposed): N short of the tile and not a multiple of 8, M
    # ragged; and the same with K split over a cluster of 3 (16 k-blocks, K ragged)
    ("hopper_raw", dict(RAW_OK, tile_m=64, tile_n=128, stages=9, epi="direct", swap_ab=True, pdl=True),
     (1000, 42, 2056)),
    ("hopper_raw", dict(RAW_OK, tile_m=64, tile_n=64, stages=14, epi="direct", cluster_k=3, swap_ab=True),
     (1000, 60, 1000)),
    # ping-pong: each consumer warpgroup on every other whole tile of its CTA's, their mainloops taking turns; 384
    # tiles on 132 CTAs (two or three each, so one warpgroup has the last alone), M and N ragged, K not a multiple of
    # 64; a 64-row tile's whole width per warpgroup; stores from registers with N only even; the even grid with a
    # band order and K walked backward on every other unit; a single k-block (the ring's fills and turns at once)
    ("hopper_raw", dict(RAW_OK, tile_n=128, stages=6, schedule="pingpong"), (3000, 2008, 1000)),
    ("hopper_raw", dict(RAW_OK, tile_m=64, tile_n=256, stages=4, schedule="pingpong", pdl=True), (1000, 3000, 520)),
    ("hopper_raw", dict(RAW_OK, tile_n=192, stages=5, epi="direct", schedule="pingpong"), (4000, 998, 296)),
    ("hopper_raw", dict(RAW_OK, tile_n=128, stages=6, group=4, grid="even", k_order="alternate",
                        schedule="pingpong"), (4096, 4096, 1000)),
    ("hopper_raw", dict(RAW_OK, tile_m=64, tile_n=64, stages=2, schedule="pingpong", pdl=True), (2000, 1000, 64)),
    # the TMA epilogue's narrow last sub-tile (tile_n not a multiple of 64): ragged N and K, ping-pong and cooperative
    ("hopper_raw", dict(RAW_OK, tile_n=176, stages=5, schedule="pingpong", pdl=True), (2000, 3000, 1000)),
    ("hopper_raw", dict(RAW_OK, tile_m=256, tile_n=160, stages=3, group=2, l2_evict_first="c"), (1000, 2056, 1032)),
    # a small output (pricing.streams_ab): two tile-rows, the second ragged, N short of its last tile, K split over
    # clusters of 7 with a partial last k-block
    ("hopper_raw", dict(RAW_OK, tile_m=64, tile_n=32, stages=10, epi="direct", cluster_k=7, pdl=True), (100, 90, 4104)),
    # columns split between the consumers of 128-256-row tiles (cooperative_n): ragged M and N, swapped, shifted
    ("hopper_raw", dict(RAW_OK, tile_m=192, tile_n=144, stages=5, epi="direct", schedule="cooperative_n"),
     (1000, 1000, 1032)),
    ("hopper_raw", dict(RAW_OK, tile_m=192, tile_n=112, stages=5, epi="direct", schedule="cooperative_n",
                        swap_ab=True, pdl=True), (430, 2000, 1000)),
    # swapped and paired: lanes trade a value to store half2 pairs down C's rows; 1000 rows of C^T leave a partial
    # last tile of 232, and M = 302 a partial column tile
    ("hopper_raw", dict(RAW_OK, tile_m=256, tile_n=176, stages=4, epi="direct", schedule="cooperative_n",
                        swap_ab=True), (302, 1000, 1000)),
    ("hopper_raw", dict(RAW_OK, tile_m=256, tile_n=144, stages=4, epi="direct", schedule="cooperative_n",
                        edge="shift", group=4), (1000, 1000, 520)),
    # three consumers of 64 rows (cooperative3): swapped with partial tiles both ways; unswapped, several tiles a CTA
    ("hopper_raw", dict(RAW_OK, tile_m=192, tile_n=112, stages=5, epi="direct", schedule="cooperative3",
                        swap_ab=True, pdl=True), (430, 2000, 1000)),
    ("hopper_raw", dict(RAW_OK, tile_m=192, tile_n=192, stages=4, epi="direct", schedule="cooperative3", group=2,
                        k_order="alternate"), (3000, 2000, 1032)),
    # the rows split between two consumers, swapped: 302 columns of C^T leave a partial tile of 46
    ("hopper_raw", dict(RAW_OK, tile_m=128, tile_n=128, stages=5, epi="direct", swap_ab=True), (302, 2000, 1000)),
]


def test_every_gpu_sample_is_a_config_its_family_takes_for_its_shape():
    """The GPU samples build together before the first runs, so one refused config would fail them all."""
    for family, params, shape in GPU_SAMPLES:
        ok, why = families.get(family).feasible(params, shape, "sm_90a")
        assert ok, f"{family} {params} {shape}: {why}"


def _sample_id(sample) -> str:
    """family-MxNxK-knob=value-...: `pytest -m gpu -k pingpong` (or any knob) selects the samples that carry it."""
    family, params, shape = sample
    return "-".join([family, "x".join(map(str, shape)), *(f"{k}={v}" for k, v in sorted(params.items()))])


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("family,params,shape", GPU_SAMPLES, ids=[_sample_id(s) for s in GPU_SAMPLES])
def test_sample_passes_the_evaluators_checks_on_gpu(gpu_samples, family, params, shape):
    """Every correctness check of the evaluator (exact {0,1} draws, deviation bound, accumulator honesty, guard
    bands, determinism, ...) at fp32 accumulation."""
    from evaluator.api import evaluate

    src = families.render(family, params, shape, "sm_90a")
    res = evaluate(src, shape, acc="fp32", mode="offline", profile="quick", pool=gpu_samples)
    assert res.status == "ok", f"{res.status}: {res.reason}"


@pytest.fixture(scope="module")
def gpu_samples(request):
    """Builds the selected GPU samples on every core at once before the first is evaluated (each evaluation would
    otherwise build its own, one core at a time: the whole GPU suite took ~22 min on an H200 that way) and
    lends the tests one worker pool."""
    from evaluator.compile import compile_many
    from evaluator.pool import WorkerPool

    selected = [item.callspec.params for item in request.session.items
                if getattr(item, "originalname", "") == "test_sample_passes_the_evaluators_checks_on_gpu"]
    compile_many([families.render(p["family"], p["params"], p["shape"], "sm_90a") for p in selected])
    pool = WorkerPool(gpus=[0])
    yield pool
    pool.close()


def test_hopper_raw_64_row_tiles_keep_earlier_identities_and_come_from_priors_only():
    """64-row tiles came after the family's campaigns: every other tile renders as before (the template's new
    branches are guarded); the two consumer warpgroups each run m64 atoms over half the columns, and the tile comes
    from priors only (mid shapes from M = 512, M <= 64), never from the search's own moves."""
    src = hopper_raw.render(dict(RAW_OK, tile_m=64, tile_n=128, stages=7))
    assert "m64n64k16" in src and "CN = BN / 2" in src and "cw * CN * 128" in src
    shared = hopper_raw.render(dict(RAW_OK, tile_m=64, tile_n=64, stages=7))
    assert "m64n32k16" in shared and "bar.sync 3, 256" in shared
    wide = hopper_raw.render(RAW_OK)
    assert "m64n256k16" in wide and "CN" not in wide and "cw * (BM / 2) * 128" in wide
    assert hopper_raw.SEARCH_DOMAIN["tile_m"] == (128, 256)
    assert all(p["tile_m"] != 64 for p in hopper_raw.space((512, 1024, 4096)))
