"""cuBLASLt configurations beyond its heuristic's list, for AutoTuning where that list is short.

cublasLtMatmulAlgoConfigSetAttribute lets a caller choose an algorithm's split-K factor, reduction scheme, CTA
swizzling, tile and stage count within what cublasLtMatmulAlgoCapGetAttribute says the algorithm supports. `plan`
lists such configurations in the order they are worth timing, `select` keeps those that cublasLtMatmulAlgoCheck
accepted (native side: `Native.lt_algo_try`) up to a bound, and `lt_variations` runs both against the native library.
Planning and selection are pure, so their bounds are tested without a GPU.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Sequence

# The configuration fields in the order the native side reads and writes them (cl2_lt_algo_try).
FIELDS = ("id", "tile", "stages", "splitk", "reduction", "swizzle", "custom", "inner", "cluster")
ID, TILE, STAGES, SPLITK, REDUCTION, SWIZZLE = range(6)
KEEP = -1  # a field left as the starting record (or cublasLtMatmulAlgoInit) has it
RED_NONE, RED_INPLACE, RED_COMPUTE, RED_OUTPUT = 0, 1, 2, 4  # cublasLtReductionScheme_t
UNDEFINED = 0  # CUBLASLT_MATMUL_TILE_UNDEFINED and CUBLASLT_MATMUL_STAGES_UNDEFINED: nothing to choose

# "Few": asked for 1024, the heuristic returned 8 valid algorithms per layout on each of the 14 shapes of
# docs/benchmarks/data/sweeps/autotune_*.json (H200, cuBLASLt 13): a couple of kernels in a few tile and split-K
# choices. A list of 16 or more already spans tiles and split-K factors of its own and is timed as it is.
VARIATION_THRESHOLD = 16
# At most this many variations join a short list. Each costs the AutoTuning an exactness call, an estimate call and
# `autotune_rounds` screening batches, once per GPU, cuBLASLt version, shape, accumulator and layout (the pick is
# cached): on 16384x12288x8192 (~5 ms a call) 128 add an estimated ~3.5 s a layout to the first evaluation with the
# quick profile, ~8 s with the paper one, and 256 would double that for configurations the planning order ranks last
# (tiles ever further in wave count from the heuristic's own).
MAX_VARIATIONS = 128
# The heuristic's own algorithms re-split and re-swizzled take at most this share of the bound, so that tile and
# stage variations are always timed too.
SPLIT_SHARE = 0.5
# Kernels the heuristic did not offer get at most this share of what is left (more when the heuristic's kernels have
# no further tiles): on Hopper its list holds the fast wgmma kernels, but a shape where another kernel wins is still
# found.
OTHER_SHARE = 0.25
SPLIT_K = (2, 4, 8, 16)
# A split keeps at least this much of K (four K tiles of 64): shorter, its prologue and epilogue dominate.
MIN_K_PER_SPLIT = 256
# Configurations handed to cublasLtMatmulAlgoCheck (host work only): the splits in full, tile and stage variations
# round-robin over the algorithms up to this.
MAX_PLANNED = 4096


@dataclass(frozen=True)
class Planned:
    tier: int  # 1: a heuristic algorithm re-split or re-swizzled; 2: its kernel with another tile or stage count;
    # 3: a kernel the heuristic did not offer
    group: int  # the heuristic record varied (tiers 1, 2) or the algorithm id (tier 3)
    base: int  # the heuristic record it starts from, or -1: cublasLtMatmulAlgoInit of fields[ID]
    fields: tuple[int, ...]
    near: int  # the heuristic record whose wave count it is ranked against

    @property
    def row(self) -> tuple[int, ...]:
        return (self.base, *self.fields)


def reduction_schemes(mask: int, acc16: bool) -> list[int]:
    """The split-K reduction schemes used among those in `mask`. With fp32 accumulation into fp16 outputs, INPLACE
    and OUTPUT_TYPE add the partial sums in fp16: the baseline would leave its accumulator class, and the {0,1}
    exactness check cannot tell (its partial sums are small integers, exact in fp16). With fp16 accumulation the
    output type is the compute type, so OUTPUT_TYPE would repeat COMPUTE_TYPE."""
    allowed = (RED_INPLACE, RED_COMPUTE) if acc16 else (RED_COMPUTE,)
    return [r for r in allowed if mask & r]


def split_options(k: int, caps: dict, acc16: bool) -> list[tuple[int, int]]:
    """(split-K factor, reduction scheme) pairs with a split that an algorithm of `caps` allows at depth k."""
    if not caps.get("splitk"):
        return []
    schemes = reduction_schemes(caps.get("reduction_mask", 0), acc16)
    return [(s, r) for s in SPLIT_K if k // s >= MIN_K_PER_SPLIT for r in schemes]


def round_robin(lists: Iterable[Sequence]) -> list:
    """Every list's first item, then every list's second, ..."""
    lists = [list(x) for x in lists]
    return [x[i] for i in range(max(map(len, lists), default=0)) for x in lists if i < len(x)]


def _fields(**set_) -> tuple[int, ...]:
    return tuple(set_.get(f, KEEP) for f in FIELDS)


def _choices(values: Sequence[int]) -> list[int]:
    return [v for v in values if v != UNDEFINED]


def plan(heuristic: Sequence[Sequence[int]], caps: dict[int, dict], other_ids: Sequence[int], k: int, acc16: bool,
         max_planned: int = MAX_PLANNED) -> list[Planned]:
    """Configurations to check, given the heuristic's records (their FIELDS as read back), the capabilities of each
    algorithm id and the ids the heuristic did not offer. Tier 1 in full; tiers 2 and 3 round-robin over their
    groups up to `max_planned` in all, each group stage-major so that every tile is tried with a first stage count
    before any with a second."""
    splits: list[Planned] = []
    groups: list[list[Planned]] = []
    for i, h in enumerate(heuristic):
        c = caps.get(h[ID])
        if c is None:
            continue
        own_split = max(h[SPLITK], 1)
        own = (own_split, h[REDUCTION] if own_split > 1 else RED_NONE, h[SWIZZLE])
        swizzles = [h[SWIZZLE]] + ([1 - h[SWIZZLE]] if c.get("swizzle") and h[SWIZZLE] in (0, 1) else [])
        for s, r in [(1, RED_NONE)] + split_options(k, c, acc16):
            for sw in swizzles:
                if (s, r, sw) != own:
                    splits.append(Planned(1, i, i, _fields(splitk=s, reduction=r, swizzle=sw), i))
        stages = _choices(c.get("stages", ())) or [KEEP]
        groups.append([Planned(2, i, i, _fields(tile=t, stages=st, splitk=1, reduction=RED_NONE), i)
                       for st in stages for t in _choices(c.get("tiles", ())) if (t, st) != (h[TILE], h[STAGES])])
    for algo_id in other_ids:
        c = caps.get(algo_id)
        if c is None:
            continue
        tiles, stages = _choices(c.get("tiles", ())) or [KEEP], _choices(c.get("stages", ())) or [KEEP]
        groups.append([Planned(3, algo_id, -1, _fields(id=algo_id, tile=t, stages=st), 0)
                       for st in stages for t in tiles])
    return splits + round_robin(groups)[:max(0, max_planned - len(splits))]


def _wave_distance(waves: float, ref: float) -> float:
    return abs(math.log(waves / ref)) if waves > 0 and ref > 0 else math.inf


def select(planned: Sequence[Planned], checked: Sequence[dict], heuristic: Sequence[Sequence[int]],
           heuristic_waves: Sequence[float], limit: int = MAX_VARIATIONS) -> list[int]:
    """Indices into `planned` of the configurations to offer, in order: those cuBLASLt accepted (status 0) whose
    configuration as read back is new. Tier 1 first (at most SPLIT_SHARE of `limit`), then tier 2 and tier 3 (at
    most OTHER_SHARE of what is left unless tier 2 runs short). Within tiers 2 and 3, a group's tiles go nearest in
    wave count to the heuristic's own first (the heuristic's choice is a good guess of the right size), each tile's
    stage counts in turn, round-robin over the groups."""
    seen = {tuple(h) for h in heuristic}
    ok = [i for i, r in enumerate(checked) if r["status"] == 0]

    def take(order: Iterable[int], n: int) -> list[int]:
        out = []
        for i in order:
            if len(out) >= n:
                break
            cfg = tuple(checked[i]["config"])
            if cfg not in seen:
                seen.add(cfg)
                out.append(i)
        return out

    first = take(round_robin(_by(ok, planned, 1).values()), int(limit * SPLIT_SHARE))
    queues = {}
    for tier in (2, 3):
        lists = []
        for members in _by(ok, planned, tier).values():
            tiles: dict[int, list[int]] = {}
            for i in members:
                tiles.setdefault(checked[i]["config"][TILE], []).append(i)
            near = sorted(tiles.values(), key=lambda ix: min(_wave_distance(
                checked[i]["waves"], heuristic_waves[planned[i].near]) for i in ix))
            lists.append(round_robin(near))
        queues[tier] = round_robin(lists)
    left = limit - len(first)
    # the queues may hold duplicates, so take from them in turn: tier 3 within its share, tier 2 the rest, then
    # tier 3 again if tier 2 ran short
    other = take(queues[3], int(left * OTHER_SHARE))
    own = take(queues[2], left - len(other))
    other += take(queues[3], left - len(own) - len(other))
    return first + own + other


def _by(indices: Iterable[int], planned: Sequence[Planned], tier: int) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for i in indices:
        if planned[i].tier == tier:
            out.setdefault(planned[i].group, []).append(i)
    return out


def configs(nat, shape: tuple[int, int, int], acc16: bool, tn: bool, algos: Sequence[bytes]) -> list[dict]:
    """Each record's configuration as cuBLASLt reads it back, with its status, workspace and wave count here."""
    m, n, k = shape
    rows = [(i,) + (KEEP,) * len(FIELDS) for i in range(len(algos))]
    return nat.lt_algo_try(int(tn), int(acc16), m, n, k, list(algos), rows)


def lt_variations(nat, shape: tuple[int, int, int], acc16: bool, tn: bool, heuristic: Sequence[bytes],
                  limit: int = MAX_VARIATIONS) -> tuple[list[bytes], dict]:
    """(variation records to time after the heuristic's, how they were found); none where the heuristic offered
    VARIATION_THRESHOLD or more."""
    if len(heuristic) >= VARIATION_THRESHOLD or limit <= 0 or not heuristic:
        return [], {}
    m, n, k = shape
    own = configs(nat, shape, acc16, tn, heuristic)
    own_cfg = [r["config"] for r in own]
    ids = nat.lt_algo_ids(int(acc16))
    caps = {}
    for algo_id in dict.fromkeys([c[ID] for c in own_cfg] + ids):
        if (c := nat.lt_algo_caps(int(acc16), algo_id)) is not None:
            caps[algo_id] = c
    offered = {c[ID] for c in own_cfg}
    planned = plan(own_cfg, caps, [i for i in ids if i not in offered], k, acc16)
    checked = nat.lt_algo_try(int(tn), int(acc16), m, n, k, list(heuristic), [p.row for p in planned])
    chosen = select(planned, checked, own_cfg, [r["waves"] for r in own], limit)
    tiers = [planned[i].tier for i in chosen]
    stats = {"algo_ids": len(ids), "planned": len(planned), "accepted": sum(r["status"] == 0 for r in checked),
             "split_swizzle": tiers.count(1), "tile_stages": tiers.count(2), "other_kernels": tiers.count(3)}
    return [checked[i]["algo"] for i in chosen], stats
