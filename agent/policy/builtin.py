"""The built-in search policy: prior-seeded, surrogate-ranked local search over the kernel families.

Each call to `propose` (see docs/design/builtin_policy.md):
1. splits the batch between families: size-class priors, then re-weighted by the best speedup each family has
   reached in `history` (failing families shrink);
2. builds a candidate pool per family: the paper's priors for this shape, seeds from neighbouring shapes,
   one- and two-knob mutations of the best measured configs (evolution), and a random sample of the space;
3. ranks the pool with a surrogate: log speedup = -log(analytic time) + a k-nearest-neighbour correction learnt
   from this shape's history (the residual between measured speedup and the model), plus an exploration bonus
   for configs far from anything measured and a penalty near configs that failed;
4. returns the best-ranked unseen configs, a few per tile shape, rendered to contract sources.
It never returns a config that is in `history` or that this object proposed before, and for the same inputs and
seed it returns the same batch.
"""
from __future__ import annotations

import functools
import hashlib
import math
import random
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from agent.families import (COLD_MODE, candidate_name, canonical, full_params, get, names, normal_params, settled,
                            with_launch_knobs)
from agent.families.common import ARCHS, LAUNCH_DOMAIN
from agent.families.pricing import WGMMA_PEAK, follow_read_once, splits_k
from . import costmodel, priors

ACCS = ("fp32", "fp16")
RANDOM_SAMPLE = 160
KNN = 5
# An unsplit listed prior the cost model prices at more than this times the family's fastest candidate gives up its
# reserved slot (docs/design/builtin_policy.md, "Selection"): its price is tile and wave arithmetic, which held; the
# model's prices of split schedules on small outputs missed by more than 2x
PRIOR_GAP = 2.0
# checks that compare the output's error with the same-class baselines': failing one says the numerics are too coarse,
# not that the code is wrong, so at fp16 the same config with fp32 accumulators is still worth a slot
ACCURACY_CHECKS = ("baseline_bounded_deviation", "timed_output_correct")


@dataclass
class Candidate:
    family: str
    params: dict[str, Any]
    name: str
    source: str
    rationale: str
    predicted_speedup: float | None = field(default=None, repr=False)


def _stable_int(*parts: Any) -> int:
    return int(hashlib.sha256(repr(parts).encode()).hexdigest()[:16], 16)


def _knob_distance(dom: dict[str, tuple], a: dict[str, Any], b: dict[str, Any]) -> float:
    d = 0.0
    for k, values in dom.items():
        x, y = a.get(k), b.get(k)
        if x == y:
            continue
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values) and len(values) > 1:
            lo, hi = min(values), max(values)
            if lo > 0:
                span = math.log2(hi / lo) or 1.0
                d += abs(math.log2(max(x, 1e-9) / max(y, 1e-9))) / span if x and y else 1.0
            else:
                d += abs(x - y) / ((hi - lo) or 1)
        else:
            d += 1.0
    return d / max(len(dom), 1)


def _mutations(dom: dict[str, tuple], p: dict[str, Any], rng: random.Random, fixed: Iterable[str] = ("acc", *LAUNCH_DOMAIN)) -> list[dict[str, Any]]:
    """All one-knob moves to an adjacent value (ordered knobs) or another value (categorical), plus a few
    random two-knob moves."""
    out = []
    knobs = [k for k in dom if k not in fixed and len(dom[k]) > 1]
    for k in knobs:
        vals = list(dom[k])
        numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals)
        if numeric:
            # the nearest values on either side, by value: a prior may hold one outside the search's domain
            # (hopper_wgmma's 32-wide tile)
            below, above = [v for v in vals if v < p[k]], [v for v in vals if v > p[k]]
            steps = ([max(below)] if below else []) + ([min(above)] if above else [])
        else:
            steps = [v for v in vals if v != p[k]]
        for v in steps:
            q = dict(p)
            q[k] = v
            out.append(q)
    singles = list(out)
    for _ in range(min(12, len(singles))):
        a, b = rng.sample(singles, 2) if len(singles) >= 2 else (singles[0], singles[0])
        q = dict(a)
        for k in b:
            if b[k] != p[k]:
                q[k] = b[k]
        out.append(q)
    return out


def _label_of(h: dict[str, Any]) -> str | None:
    """The bottleneck label of a history item: `bottleneck` as a string or {"label": ...}, else the ncu record's."""
    b = h.get("bottleneck")
    if b is None and isinstance(h.get("ncu"), dict):
        b = h["ncu"].get("bottleneck")
    if isinstance(b, dict):
        b = b.get("label")
    return b if isinstance(b, str) and b else None


def _accuracy_refused(h: dict[str, Any]) -> bool:
    return h.get("status") == "incorrect" and str(h.get("reason") or "").startswith(ACCURACY_CHECKS)


def _ctas(family: str, p: dict[str, Any], shape) -> int:
    m, n, _ = shape
    if "tile_m" in p:  # the wgmma families
        pm, pn = (n, m) if p.get("swap_ab") else (m, n)
        return -(-pm // p["tile_m"]) * -(-pn // p["tile_n"]) * p.get("splits", 1)
    return -(-m // p["bm"]) * -(-n // p["bn"]) * max(p["split_k"], p.get("cluster_k", 1))


def _tile_area(family: str, p: dict[str, Any]) -> int:
    return p["tile_m"] * p["tile_n"] if "tile_m" in p else p["bm"] * p["bn"]


def _bottleneck_bias(family: str, parent: dict[str, Any], child: dict[str, Any], label: str, shape) -> float:
    """A small bonus (log-speedup units) for moves that address the parent's measured bottleneck."""
    bonus = 0.05
    more_ctas = _ctas(family, child, shape) > _ctas(family, parent, shape)
    bigger_tile = _tile_area(family, child) > _tile_area(family, parent)
    if label in ("occupancy-limited", "latency-bound"):
        stages = child.get("stages", 0) < parent.get("stages", 0) and child.get("stages", 0) != 0
        return bonus if (more_ctas or stages) else 0.0
    if label == "memory-bound":
        swz = child.get("block_swizzle", child.get("swizzle", 1)) > parent.get("block_swizzle", parent.get("swizzle", 1))
        return bonus if (bigger_tile or swz) else 0.0
    if label == "bank-conflicted":
        return bonus if (child.get("sw_b", 0) > parent.get("sw_b", 0) or child.get("epilogue") != parent.get("epilogue")) else 0.0
    if label == "launch-bound":
        fewer = child.get("split_k", child.get("splits", 1)) < parent.get("split_k", parent.get("splits", 1))
        return bonus if fewer else 0.0
    if label == "tensor-pipe-bound":
        return bonus / 2 if bigger_tile else 0.0
    return 0.0


@functools.lru_cache(maxsize=32)
def _feasible_space(fam: str, shape: tuple[int, int, int], acc: str, arch: str) -> tuple[dict[str, Any], ...]:
    """A family's feasible configs for a shape, shared by every policy object: a pure function of its arguments that
    takes hopper_wgmma seconds to enumerate, asked for again by each policy that meets the shape. Bounded, since one
    hopper_wgmma space holds tens of thousands of configs; a tuple, so that no caller can change what others get."""
    return tuple(get(fam).space(shape, acc, arch))


def _search_domain(fam: str, shape: tuple[int, int, int]) -> dict[str, tuple]:
    """The knob values worth a search slot: the family's `search_domain(shape)` where it has one (a regime with knobs
    of its own), else its SEARCH_DOMAIN, else every value of its DOMAIN."""
    mod = get(fam)
    if hasattr(mod, "search_domain"):
        return mod.search_domain(shape)
    return getattr(mod, "SEARCH_DOMAIN", mod.DOMAIN)


class BuiltinPolicy:
    """Deterministic for a given seed; never proposes a config twice (history included)."""

    def __init__(self, seed: int = 0):
        self.seed = int(seed)
        self._proposed: set[tuple[tuple, tuple[str, str]]] = set()  # ((shape, acc, arch), (family, params))
        self._labels: dict[tuple[str, str], str] = {}
        self._parents: dict[tuple[str, str], tuple[dict, str]] = {}
        self._spilled: dict[str, list[dict]] = {}
        # (family, canonical full params) -> params of the configs the history shows refused for accuracy
        self._acc_refused: dict[tuple[str, str], dict[str, Any]] = {}
        self._mode = "offline"

    # -- public -----------------------------------------------------------------------------------------------
    def propose(self, shape: Sequence[int], acc: str = "fp32", arch: str = "sm_90a",
                history: Sequence[dict[str, Any]] = (), n: int = 8,
                seeds: Sequence[dict[str, Any]] = (), mode: str = "offline") -> list[Candidate]:
        from evaluator.contract import MODES, check_shape  # noqa: PLC0415 (evaluator stays importable without agent)

        shape = check_shape(tuple(shape))
        if acc not in ACCS:
            raise ValueError(f"acc must be one of {ACCS}, got {acc!r}")
        if arch not in ARCHS:
            raise ValueError(f"unknown arch {arch!r}; known: {', '.join(ARCHS)}")
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        if n <= 0:
            return []
        self._mode = mode  # the search's timing mode sets the launch knobs (families.common.launch_knobs)
        history = [h for h in history if h.get("family") in names() and isinstance(h.get("params"), dict)]
        rng = random.Random(_stable_int(self.seed, shape, acc, arch, len(history),
                                        sorted(canonical(h["params"]) for h in history)))
        seen = {(h["family"], canonical(h["params"])) for h in history}
        seen |= {fp for (sk, fp) in self._proposed if sk == (shape, acc, arch)}

        obs: dict[str, list[tuple[dict, float]]] = {f: [] for f in names()}
        fails: dict[str, list[dict]] = {f: [] for f in names()}
        self._acc_refused = {}
        for h in history:
            try:  # records from other schema versions still count as seen, but teach nothing
                get(h["family"]).validate(h["params"])
            except ValueError:
                continue
            s = h.get("speedup")
            if h.get("status") == "ok" and s is not None and s > 0:
                obs[h["family"]].append((h["params"], math.log(float(s))))
            elif h.get("status") not in ("ok", None):
                fails[h["family"]].append(h["params"])
                if _accuracy_refused(h):
                    self._acc_refused[(h["family"], canonical(full_params(h["family"], h["params"])))] = h["params"]

        self._labels = {}
        spilled: dict[str, list[dict]] = {f: [] for f in names()}
        for h in history:
            label = _label_of(h)
            if label:
                self._labels[(h["family"], canonical(h["params"]))] = label
            res = h.get("resources") or {}
            if (res.get("spill_stores") or 0) > 0 or (res.get("spill_loads") or 0) > 0:
                spilled[h["family"]].append(h["params"])
        self._spilled = spilled

        shares = priors.family_shares(shape, arch, acc)
        chosen = self._fp32_twins(shape, acc, arch, obs, fails, seen, max(1, n // 3)) if acc == "fp16" else []
        slots = self._allocate(dict(shares), obs, fails, n - len(chosen))
        for fam in names():
            if slots.get(fam, 0) <= 0:
                continue
            pool = self._pool(fam, shape, acc, arch, obs, seeds, rng)
            ranked = self._rank(fam, pool, shape, arch, obs, fails, seen)
            if not obs[fam]:
                # An unmeasured family starts with its priors (up to half its slots) in their listed order: the
                # lists put first what measured best on similar shapes, which the analytic model does not know.
                order = {canonical(normal_params(fam, p)): i
                         for i, p in enumerate(priors.priors(fam, shape, acc, arch, self._mode))}
                # ... but an unsplit one the model prices far behind the family's best: a 128x256 tile over 3
                # tile-rows at K = 13440 leaves 105 SMs idle (0.24 of NVIDIA, where split K read 0.50)
                fastest = min((costmodel.estimate_us(fam, r[2], shape, arch) for r in ranked), default=0.0)
                listed = sorted((r for r in ranked if r[3].startswith("prior") and canonical(r[2]) in order
                                 and (splits_k(r[2])
                                      or costmodel.estimate_us(fam, r[2], shape, arch) <= PRIOR_GAP * fastest)),
                                key=lambda r: order[canonical(r[2])])
                reserved = listed[: max(1, slots[fam] // 2)]
                ranked = reserved + [r for r in ranked if r not in reserved]
            chosen.extend(self._select(fam, ranked, slots[fam], seen, exploit=bool(obs[fam])))
        # a family may have run out of unseen configs: fill from the others, best predicted first; where none with a
        # share has a feasible config (their priors off the shape's rows: 128x2046x12288), from any that has one
        with_share = [f for f in names() if shares.get(f, 0) > 0]
        self._fill(chosen, n, with_share, shape, acc, arch, obs, fails, seeds, seen, rng)
        if not chosen:
            others = [f for f in names() if f not in with_share and get(f).runs_on(arch)]
            self._fill(chosen, n, others, shape, acc, arch, obs, fails, seeds, seen, rng)
        for c in chosen:
            self._proposed.add(((shape, acc, arch), (c.family, canonical(c.params))))
        return chosen[:n]

    @staticmethod
    def unsupported(shape: Sequence[int], acc: str = "fp32", arch: str = "sm_90a") -> str:
        """Why no family can build a kernel for the shape ('' where one can): each family's refusal of its first
        prior, or that it does not run on `arch` or lists none. Every family needs N and K in whole 16-byte rows, so a
        search of N = 1001 would otherwise end with nothing but 'no candidates'."""
        shape = tuple(shape)
        why = []
        for fam in names():
            mod = get(fam)
            if not mod.runs_on(arch):
                why.append(f"{fam}: does not run on {arch}")
                continue
            verdicts = [mod.feasible(normal_params(fam, p), shape, arch) for p in priors.priors(fam, shape, acc, arch)]
            if any(ok for ok, _ in verdicts) or _feasible_space(fam, shape, acc, arch):
                return ""
            why.append(f"{fam}: {verdicts[0][1]}" if verdicts else f"{fam}: no config fits {acc} accumulation here")
        return "; ".join(why)

    # -- steps ------------------------------------------------------------------------------------------------
    def _fill(self, chosen, n, fams, shape, acc, arch, obs, fails, seeds, seen, rng) -> None:
        """Up to n candidates in `chosen`: the best predicted unseen configs of `fams`, from their wide pools."""
        if len(chosen) >= n:
            return
        extra = []
        for fam in fams:
            pool = self._pool(fam, shape, acc, arch, obs, seeds, rng, wide=True)
            extra.extend(self._rank(fam, pool, shape, arch, obs, fails, seen))
        extra.sort(key=lambda t: (-t[0], t[1], canonical(t[2])))
        for score, fam, p, why in extra:
            if len(chosen) >= n:
                break
            key = (fam, canonical(p))
            if key in seen:
                continue
            seen.add(key)
            chosen.append(self._candidate(fam, p, why, score))

    def _fp32_twins(self, shape, acc, arch, obs, fails, seen, k) -> list[Candidate]:
        """In an fp16 campaign (H100), on 64x2048x4096 all three first-step kernels, split-K with fp16 accumulators,
        came out less accurate than all six fp16 cuBLAS kernels and were refused; their families' shares collapsed and
        the search spent the shape on `small` (0.57). The first of them with fp32 accumulators had measured 7.3 us in
        the fp32 campaign before it, against 9.4 us for the fp16 baselines. So each config refused for accuracy at
        fp16 gets its fp32-accumulating twin proposed (up to k per batch, best predicted first); the refusal still
        shrinks the family's share, and a measured twin brings the family back through its own speedup."""
        pool: dict[str, list[tuple[dict, str]]] = {}
        for (fam, _), p in sorted(self._acc_refused.items(), key=lambda kv: kv[0]):
            if p.get("acc") != "fp16" or "fp32" not in get(fam).DOMAIN.get("acc", ()):
                continue
            try:
                q = with_launch_knobs(fam, dict(p, acc="fp32"), arch, self._mode)
                q = normal_params(fam, settled(fam, q, shape))
            except ValueError:
                continue
            if get(fam).feasible(q, shape, arch)[0]:
                pool.setdefault(fam, []).append((q, "fp32-accumulating twin of a config refused for accuracy at fp16"))
        ranked = sorted((r for fam, ps in pool.items() for r in self._rank(fam, ps, shape, arch, obs, fails, seen)),
                        key=lambda r: (-r[0], r[1], canonical(r[2])))
        out = []
        for score, fam, p, why in ranked[:k]:
            seen.add((fam, canonical(p)))
            out.append(self._candidate(fam, p, why, score))
        return out

    def _allocate(self, shares, obs, fails, n) -> dict[str, int]:
        """n slots over the families by their size class's `shares` (scaled here, in place, by what was measured)."""
        best = {f: max((s for _, s in obs[f]), default=None) for f in names()}
        top = max((b for b in best.values() if b is not None), default=None)
        for f in names():
            if shares.get(f, 0) <= 0:
                continue
            if best[f] is not None and top is not None:
                # families within reach of the best keep their share; far-behind ones fade (temperature 0.1)
                shares[f] *= math.exp((best[f] - top) / 0.1) ** 0.5 + 0.15
            if fails[f] and not obs[f]:
                # nothing it tried has passed: each failure cuts its share. Waiting for four (the old rule) let
                # an fp16 campaign re-propose mma.sync kernels at every step of 64x512x2048 and 64x2048x4096, where each
                # failed the accuracy check, a third of those shapes' budget
                shares[f] *= 0.25 ** len(fails[f])
        total = sum(shares.values()) or 1.0
        raw = {f: n * s / total for f, s in shares.items()}
        slots = {f: int(math.floor(v)) for f, v in raw.items()}
        # remainders rounded, so that equal shares tie (4 * 0.3 / 0.8 is not 1.5) and the name decides
        for f in sorted(raw, key=lambda f: (-round(raw[f] - slots[f], 9), f))[: n - sum(slots.values())]:
            slots[f] += 1
        return slots

    def _pool(self, fam, shape, acc, arch, obs, seeds, rng, wide=False) -> list[tuple[dict[str, Any], str]]:
        mod = get(fam)
        search_domain = _search_domain(fam, shape)
        pool: list[tuple[dict[str, Any], str]] = []
        for p in priors.priors(fam, shape, acc, arch, self._mode):
            pool.append((p, "prior (paper §5-6: BM~M, BN~N, stages~K, swizzle stride~size)"))
        cold = self._mode == COLD_MODE  # where a read-once hint pays on any scheduler (pricing.follow_read_once)
        for s in seeds:
            if s.get("family") != fam or not isinstance(s.get("params"), dict):
                continue
            p = dict(s["params"])
            if "acc" in mod.DOMAIN:
                p["acc"] = acc
            src = s.get("shape")
            why = f"seed from neighbouring shape {tuple(src) if src else '?'}"
            if s.get("speedup") is not None:
                why += f" (speedup {float(s['speedup']):.3f})"
            p = follow_read_once(p, shape, cold)  # hinted for the neighbour's operand read once, maybe not this one
            pool.append((p, why))
            for q in _mutations(search_domain, full_params(fam, p), rng)[:8]:
                pool.append((follow_read_once(mod.repair(q), shape, cold), why + ", adapted"))
        best = sorted(obs[fam], key=lambda t: (-t[1], canonical(t[0])))[:4]
        for p, ls in best:
            label = self._labels.get((fam, canonical(p)))
            p = full_params(fam, p)
            for q in _mutations(search_domain, p, rng):
                q = follow_read_once(mod.repair(q), shape, cold)
                changed = ", ".join(f"{k} {p[k]}->{q[k]}" for k in q if q[k] != p.get(k))
                why = f"mutation of measured {math.exp(ls):.3f}x config: {changed}"
                if label:
                    why += f" (parent {label})"
                    self._parents[(fam, canonical(normal_params(fam, q)))] = (p, label)
                pool.append((q, why))
        space = _feasible_space(fam, shape, acc, arch)
        k = min(len(space), RANDOM_SAMPLE * (4 if wide else 1))
        for p in rng.sample(space, k) if k else []:
            pool.append((p, "exploration sample of the feasible space"))
        out, keys = [], set()
        for p, why in pool:
            try:
                # history, seeds and mutations may come from configs measured before a launch knob existed
                p = normal_params(fam, settled(fam, with_launch_knobs(fam, p, arch, self._mode), shape))
            except ValueError:
                continue  # a seed from an older or foreign archive with knobs this family no longer has
            key = canonical(p)
            if key in keys:
                continue
            keys.add(key)
            if mod.feasible(p, shape, arch)[0]:
                out.append((p, why))
        return out

    def _rank(self, fam, pool, shape, arch, obs, fails, seen) -> list[tuple[float, str, dict, str]]:
        # the knobs the search moves: a knob left to sweeps would change every distance's normalisation
        dom = _search_domain(fam, shape)
        measured = obs[fam]
        resid = [(p, ls + math.log(costmodel.estimate_us(fam, p, shape, arch))) for p, ls in measured]
        # knob distances compare every knob, so the neighbours are spelled out once here, not per pool entry
        resid_full = [(full_params(fam, q), r) for q, r in resid]
        fails_full = [full_params(fam, q) for q in fails[fam]]
        spilled_full = [full_params(fam, q) for q in self._spilled.get(fam, ())]
        all_resid = [r for f in names() for r in
                     ((ls + math.log(costmodel.estimate_us(f, p, shape, arch))) for p, ls in obs[f])]
        base = sum(all_resid) / len(all_resid) if all_resid else None
        out = []
        for p, why in pool:
            if (fam, canonical(p)) in seen:
                continue
            t = costmodel.estimate_us(fam, p, shape, arch)
            pf = full_params(fam, p)
            dists = sorted(((_knob_distance(dom, pf, q), r) for q, r in resid_full), key=lambda x: x[0])[:KNN]
            if dists:
                # local correction: neighbours one or two knobs away dominate; far ones fade into the family mean
                fam_mean = sum(r for _, r in resid) / len(resid)
                w = [math.exp(-d / 0.1) for d, _ in dists]
                corr = (sum(wi * r for wi, (_, r) in zip(w, dists)) + 0.05 * fam_mean) / (sum(w) + 0.05)
                explore = 0.08 * min(1.0, dists[0][0] * 4)
            else:
                corr = base if base is not None else math.log(self._baseline_guess_us(shape))
                explore = 0.08
            penalty = 0.0
            for q in fails_full:
                if q.get("acc") != pf.get("acc") and (fam, canonical(q)) in self._acc_refused:
                    continue  # coarse numerics say nothing about the same kernel with other accumulators
                if _knob_distance(dom, pf, q) < 0.12:
                    penalty += 0.4
            for q in spilled_full:
                if _knob_distance(dom, pf, q) < 0.12:
                    penalty += 0.15  # register spills: neighbours with the same tile and warp shape spill too
            parent = self._parents.get((fam, canonical(p)))
            if parent is not None:
                penalty -= _bottleneck_bias(fam, parent[0], p, parent[1], shape)
            # priors and seeds are trusted over the model until the family has measurements of its own
            trust = 0.25 if (not measured and (why.startswith("prior") or why.startswith("seed"))) else 0.0
            score = corr - math.log(t) + explore - penalty + trust
            out.append((score, fam, p, why))
        out.sort(key=lambda x: (-x[0], canonical(x[2])))
        return out

    @staticmethod
    def _baseline_guess_us(shape) -> float:
        """A cuBLASLt-like time guess (launch floor + ~75% of wgmma peak) so that a fresh model's scores read as
        speedups."""
        return 10.0 + 2.0 * shape[0] * shape[1] * shape[2] / (0.75 * WGMMA_PEAK) * 1e6

    def _select(self, fam, ranked, k, seen, exploit: bool = False) -> list[Candidate]:
        out, per_tile = [], {}
        if exploit:
            # elitism: most of a measured family's slots go to mutations of its best configs and to seeds
            local = [r for r in ranked if r[3].startswith(("mutation", "seed"))]
            out = self._select(fam, local, max(1, math.ceil(0.6 * k)), seen)
            per_tile = {}
            for c in out:
                t = tuple(c.params.get(x) for x in ("bm", "bn", "tile_m", "tile_n", "schedule", "swap_ab"))
                per_tile[t] = per_tile.get(t, 0) + 1
        for score, _, p, why in ranked:
            if len(out) >= k:
                break
            key = (fam, canonical(p))
            if key in seen:
                continue
            tile = tuple(p.get(x) for x in ("bm", "bn", "tile_m", "tile_n", "schedule", "swap_ab"))
            if per_tile.get(tile, 0) >= 2:  # diversity: at most two variants of one tile shape per batch
                continue
            per_tile[tile] = per_tile.get(tile, 0) + 1
            seen.add(key)
            out.append(self._candidate(fam, p, why, score))
        return out

    @staticmethod
    def _candidate(fam, p, why, score) -> Candidate:
        pred = math.exp(score)
        return Candidate(family=fam, params=dict(p), name=candidate_name(fam, p), source=get(fam).render(p),
                         rationale=f"{why}; surrogate predicts {pred:.2f}x", predicted_speedup=pred)
