#!/usr/bin/env python3
"""How good is cuBLASLt-AutoTuning's pick, in each timing regime? (GPU machine)

    python3 scripts/autotune_check.py MxNxK [MxNxK ...] --out DIR [--regimes back-to-back,separated,steady]
        [--layouts NN,TN] [--repeats 1] [--top 8] [--truth-rounds 3] [--acc fp32] [--profile quick]
    python3 scripts/autotune_check.py --sample docs/benchmarks/dev_sample.txt --min-log2-flop 36 --out DIR
    python3 scripts/autotune_check.py --table DIR/autotune_check.json [--md PAGE.md]    # the table again, no GPU

Per shape and layout (NN, TN), the field is every algorithm AutoTuning considers (the heuristic's, with its
variations where it offers few: evaluator.lt_variations) that is exact on {0,1} inputs. The evaluator's autotuning
runs `repeats` times from an empty cache; each gives a pick and two runners-up. Then, per regime (back to back: calls
queued, each on its own operand set; separated: an ordinary kernel after each call, its time removed; power-steady:
each callable after a lead-in at its own clock), every valid algorithm is screened with one batch, and the `top`
fastest of that screen with every tuning's pick and runners-up are timed as the evaluator times the regime
(evaluator.timing.measure): that is the truth. Reported per regime: the pick's truth over the fastest truth
("pick/best") and the best of the pick and its runners-up over it ("best of 3/best": what best NVIDIA uses, since
all three are timed beside the candidate). 1.0 is the fastest valid algorithm; the bar is 1.01 on every shape of at
least 2^36 FLOP in every regime. DIR/autotune_check.json and DIR/autotune_check.md are rewritten after each layout.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

REGIMES = {"back-to-back": "back to back", "separated": "separated", "steady": "power-steady"}
LAYOUTS = ("NN", "TN")
BAR = 1.01
BIG_LOG2_FLOP = 36
# The power-steady screen runs its batches one after another, so the GPU stays at its power limit between them (the
# host's turn aside): a short lead-in then reaches each algorithm's own clock. The first gets the full lead-in.
SCREEN_LEAD_MS = 20.0
SCREEN_BATCH_MS = 10.0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("shapes", nargs="*", help="MxNxK")
    ap.add_argument("--sample", type=Path, help="a shape file (M N K a line): its shapes are checked too")
    ap.add_argument("--min-log2-flop", type=float, default=0.0,
                    help="only the shapes of at least 2^this FLOP (2*M*N*K)")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--regimes", default=",".join(REGIMES))
    ap.add_argument("--layouts", default=",".join(LAYOUTS))
    ap.add_argument("--repeats", type=int, default=1, help="tunings per layout, each from an empty cache")
    ap.add_argument("--top", type=int, default=8, help="algorithms of each regime's screen timed in full rounds")
    ap.add_argument("--truth-rounds", type=int, default=3, help="rounds of the power-steady truth")
    ap.add_argument("--acc", choices=["fp32", "fp16"], default="fp32")
    ap.add_argument("--profile", choices=["quick", "paper"], default="quick")
    ap.add_argument("--table", type=Path, help="make the Markdown table of a saved JSON result (no GPU)")
    ap.add_argument("--md", type=Path, help="with --table: write the table here instead of printing it")
    a = ap.parse_args(argv)
    if a.table is None:
        a.regimes = _choices(a.regimes, REGIMES, "regime", ap)
        a.layouts = _choices(a.layouts, LAYOUTS, "layout", ap)
        if a.out is None:
            ap.error("--out is required (or --table to remake a table)")
        if min(a.repeats, a.top, a.truth_rounds) < 1:
            ap.error("--repeats, --top and --truth-rounds are at least 1")
    return a


def _choices(text: str, known, what: str, ap: argparse.ArgumentParser) -> list[str]:
    picked = [t for t in text.split(",") if t]
    bad = [t for t in picked if t not in known]
    if bad or not picked:
        ap.error(f"unknown {what} {bad[0] if bad else text!r}: choose from {', '.join(known)}")
    return list(dict.fromkeys(picked))


def shapes_of(a: argparse.Namespace) -> list[tuple[int, int, int]]:
    """The shapes named and those of --sample, at least 2^min_log2_flop FLOP; ValueError names a bad one."""
    from agent.shapes import ShapeFileError, load_shapes, parse_shape_line

    shapes = []
    for text in a.shapes:
        try:
            shapes.append(tuple(parse_shape_line(text)))
        except ValueError as e:
            raise ValueError(f"{text!r} is not a shape (write it as MxNxK): {e}") from None
    if a.sample is not None:
        try:
            shapes += [tuple(s) for s in load_shapes(a.sample)]
        except ShapeFileError as e:
            raise ValueError(str(e)) from None
    keep = [s for s in dict.fromkeys(shapes) if 2 * s[0] * s[1] * s[2] >= 2 ** a.min_log2_flop]
    if not keep:
        raise ValueError("no shape to check" + (f" of at least 2^{a.min_log2_flop:g} FLOP" if shapes else ""))
    return keep


# ---- on the GPU ---------------------------------------------------------------------------------------------------
def screen(nat, callables: dict, pool, regime: str, prof, est: dict[str, float], seed: int) -> dict[str, float]:
    """Milliseconds per call of one batch of each callable, as the regime times it (the separator's time removed)."""
    from evaluator.timing import REGIMES as TIMING, held_calls

    sep, steady = TIMING[regime]["separator"], TIMING[regime]["steady"] == "always"
    timed_sets = pool.count - 1 if steady and pool.count > 1 else pool.count
    sep_ms = 0.0
    if sep:
        one = max(nat.time_batch(-1, *pool.args, 1, True, True), 1e-4)
        sep_ms = nat.time_batch(-1, *pool.args, held_calls(prof.batch_target_ms, one), True, True)
    order = list(callables)
    random.Random(seed).shuffle(order)
    out = {}
    for i, name in enumerate(order):
        c = callables[name]
        if steady:
            reps = min(held_calls(SCREEN_BATCH_MS, est[name]), timed_sets)
            pool.refill(reps, seed + i)
            lead_ms = prof.steady_lead_ms if i == 0 else SCREEN_LEAD_MS
            c.time(pool.sets[-1], max(1, round(lead_ms / est[name])), False, sep)
        else:
            reps = min(held_calls(prof.batch_target_ms, est[name]), timed_sets)
            pool.refill(reps, seed + i)
        out[name] = max(c.time(pool, reps, True, sep) - sep_ms, 1e-6)
    return out


def truth(nat, callables: dict, pick: str, pool, regime: str, prof, seed: int) -> dict[str, float]:
    """Median microseconds per call of each callable over the rounds the evaluator times this regime with."""
    from evaluator.timing import measure

    times, _ = measure(nat, callables, pick, pool, regime, prof, random.Random(seed), lambda msg: None, seed)
    return {n: statistics.median(ts) for n, ts in times.items()}


def check_layout(nat, gpu: str, lt_version: int, shape, acc16: bool, tn: bool, pool, a) -> dict:
    from evaluator.baselines import (EXTRA_FINALISTS, NativeCallable, autotune_cache_dir, autotune_lt,
                                     offered_lt_algos, valid_lt_algos)
    from evaluator.buffers import OperandSet, Reference
    from evaluator.lt_variations import configs
    from evaluator.timing import PROFILES

    prof = dataclasses.replace(PROFILES[a.profile], steady_rounds=a.truth_rounds)
    lay = "TN" if tn else "NN"
    ops, ref = OperandSet(nat, *shape, snapshots=False), Reference(nat, *shape)
    t0 = time.perf_counter()
    try:
        algos, origin = offered_lt_algos(nat, shape, acc16, tn)
        cands = valid_lt_algos(nat, shape, acc16, tn, ops, ref, algos)
        n_heur = origin["heuristic"]
        labels: dict[bytes, str] = {}
        for i, algo in enumerate(algos):
            labels.setdefault(algo, f"h{i}" if i < n_heur else f"v{i - n_heur}")
        # named as AutoTuning's callables are, so that the power-steady regime times them all
        callables = {labels[algo]: NativeCallable(nat, f"cublaslt-autotune-{lay}@{labels[algo]}", cid)
                     for cid, algo in cands}
        tunings = []
        for _ in range(a.repeats):
            for f in autotune_cache_dir().glob("*.json"):
                f.unlink()
            algo, detail = autotune_lt(nat, gpu, lt_version, shape, acc16, tn, ops, ref, PROFILES[a.profile],
                                       lambda msg: None)
            finals = [algo] + [bytes.fromhex(h) for h in detail.get("finalist_algos", []) if h != algo.hex()]
            for extra in finals:  # a pick outside this field (the offer changed between calls) is timed too
                if labels.get(extra) not in callables:
                    lab = labels.setdefault(extra, f"x{len(labels)}")
                    callables[lab] = NativeCallable(nat, f"cublaslt-autotune-{lay}@{lab}",
                                                    nat.register_lt(int(tn), int(acc16), *shape, extra))
            tunings.append([labels[x] for x in finals[:1 + EXTRA_FINALISTS]])
        est = {n: max(c.time(pool, 1), 1e-4) for n, c in callables.items()}
        regimes = {}
        for r, regime in enumerate(a.regimes):
            seed = ((shape[0] * 31 + shape[1]) * 31 + shape[2]) % 1_000_003 + 7919 * r + int(tn)
            scr = screen(nat, callables, pool, regime, PROFILES[a.profile], est, seed)
            screen_order = sorted(scr, key=scr.__getitem__)
            field = list(dict.fromkeys(screen_order[:a.top] + [n for t in tunings for n in t]))
            med = truth(nat, {f"cublaslt-autotune-{lay}@{n}": callables[n] for n in field},
                        f"cublaslt-autotune-{lay}@{tunings[0][0]}", pool, regime, prof, seed)
            us = {n.rsplit("@", 1)[1]: v for n, v in med.items()}
            best = min(us, key=us.__getitem__)
            regimes[regime] = {
                "screened": len(scr), "timed": len(field), "fastest": best, "fastest_us": round(us[best], 3),
                "fastest_screen_rank": screen_order.index(best) + 1,
                "pick_over_best": [round(us[t[0]] / us[best], 4) for t in tunings],
                "best_of_3_over_best": [round(min(us[n] for n in t) / us[best], 4) for t in tunings],
                "truth_us": {n: round(v, 3) for n, v in sorted(us.items(), key=lambda kv: kv[1])}}
        shown = {n for reg in regimes.values() for n in reg["truth_us"]}
        by_label = {lab: algo for algo, lab in labels.items() if lab in shown}
        cfg = configs(nat, shape, acc16, tn, list(by_label.values()))
        return {"algos": {"heuristic": n_heur, "variations": origin["variations"], "valid": len(cands),
                          "valid_variations": sum(labels[x].startswith("v") for _, x in cands)},
                "variations": {k: v for k, v in origin.items() if k not in ("heuristic", "variations")},
                "tunings": tunings, "regimes": regimes,
                "configs": {lab: list(r["config"]) for lab, r in zip(by_label, cfg)},
                "seconds": round(time.perf_counter() - t0, 1)}
    finally:
        nat.release_callables()
        ops.free()
        ref.free()


def run(a: argparse.Namespace, shapes) -> int:
    from agent.resources import code_commit
    from evaluator.buffers import OperandPool
    from evaluator.gpu import device_name, native_arch
    from evaluator.native import Native, build

    nat = Native(build(native_arch(0)), 0)
    # the picks made here must not reach (or come from) the evaluator's own cache; the native build above may
    os.environ["CUDAL2_CACHE"] = tempfile.mkdtemp(prefix="autotune_check_")
    gpu, lt_version = device_name(0), nat.info()["cublaslt"]
    a.out.mkdir(parents=True, exist_ok=True)
    result = {"device": gpu, "cublaslt": lt_version, "date": datetime.date.today().isoformat(), "acc": a.acc,
              "profile": a.profile, "repeats": a.repeats, "top": a.top, "truth_rounds": a.truth_rounds,
              "regimes": a.regimes, "planned": [f"{'x'.join(map(str, s))} {lay}" for s in shapes for lay in a.layouts],
              "commit": code_commit(), "shapes": {}}
    for shape in shapes:
        pool = OperandPool(nat, *shape)
        try:
            for lay in a.layouts:
                key = f"{'x'.join(map(str, shape))} {lay}"
                r = check_layout(nat, gpu, lt_version, shape, a.acc == "fp16", lay == "TN", pool, a)
                result["shapes"][key] = r
                print(f"{key}: {r['algos']} " + ", ".join(
                    f"{reg}: pick {max(v['pick_over_best'])}, best of 3 {max(v['best_of_3_over_best'])}"
                    for reg, v in r["regimes"].items()) + f" ({r['seconds']} s)", flush=True)
                (a.out / "autotune_check.json").write_text(json.dumps(result, indent=1))
                (a.out / "autotune_check.md").write_text(table(result))
        finally:
            pool.free()
    return 0


# ---- the table ----------------------------------------------------------------------------------------------------
def _flop(key: str) -> float:
    m, n, k = map(int, key.split()[0].split("x"))
    return 2.0 * m * n * k


def _cfg(cfg: list[int] | None) -> str:
    if not cfg:
        return ""
    from evaluator.lt_variations import FIELDS

    c = dict(zip(FIELDS, cfg))
    split = f", split-K {c['splitk']} (reduction {c['reduction']})" if c["splitk"] > 1 else ""
    return f"id {c['id']}, tile {c['tile']}, stages {c['stages']}{split}, swizzle {c['swizzle']}"


def bar_verdict(result: dict, what: str) -> tuple[bool | None, float | None, str]:
    """(whether every layout of a shape of at least 2^36 FLOP is within BAR in every regime, the worst figure, where
    it is); None when no such shape was checked."""
    worst, where = None, ""
    for key, r in result["shapes"].items():
        if _flop(key) < 2 ** BIG_LOG2_FLOP:
            continue
        for regime, v in r["regimes"].items():
            x = max(v[what])
            if worst is None or x > worst:
                worst, where = x, f"{key}, {REGIMES.get(regime, regime)}"
    return (None if worst is None else worst <= BAR), worst, where


def shape_figures(result: dict) -> dict[str, dict[str, float]]:
    """Per shape with both layouts checked and regime: the faster layout's best of 3 over the fastest algorithm of
    either layout. Best NVIDIA takes the fastest of every baseline, so this is the bar that decides whether a speedup
    against it is measured against the strongest cuBLASLt."""
    by: dict[str, dict[str, dict]] = {}
    for key, r in result["shapes"].items():
        shape, lay = key.split()
        by.setdefault(shape, {})[lay] = r
    out: dict[str, dict[str, float]] = {}
    for shape, lays in by.items():
        if len(lays) < 2:
            continue
        for reg in set.intersection(*(set(r["regimes"]) for r in lays.values())):
            vs = [r["regimes"][reg] for r in lays.values()]
            fastest = min(v["fastest_us"] for v in vs)
            best3 = min(max(v["best_of_3_over_best"]) * v["fastest_us"] for v in vs)
            out.setdefault(shape, {})[reg] = round(best3 / fastest, 4)
    return out


def table(result: dict) -> str:
    regimes = result.get("regimes") or list(REGIMES)
    head = ["shape", "layout", "algos: heuristic + variations (valid)"]
    for reg in regimes:
        head += [f"{REGIMES.get(reg, reg)}: pick", "best of 3", "fastest"]
    lines = ["# cuBLASLt-AutoTuning's pick against the fastest valid algorithm, per timing regime", "",
             f"{result['device']}, cuBLASLt {result.get('cublaslt', '?')}, {result['acc']} accumulation, "
             f"{result['date']}" + (f", code at commit {result['commit']}" if result.get("commit") else "") +
             f", profile {result['profile']}: {result['repeats']} tuning(s) a layout from an empty "
             f"cache; each regime's screen of every valid algorithm, then its {result['top']} fastest and the "
             f"tunings' picks and runners-up timed as the evaluator times the regime ({result['truth_rounds']} "
             "power-steady rounds). Figures are truth over the fastest truth, the worst over the tunings: 'pick' is "
             "AutoTuning's pick, 'best of 3' the best of the pick and its two runners-up (what best NVIDIA uses). "
             "'fastest' names the fastest algorithm (h: the heuristic's, v: a variation; its screen rank).", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    fastest_var = total = 0
    for key, r in result["shapes"].items():
        shape, lay = key.split()
        al = r["algos"]
        row = [shape, lay, f"{al['heuristic']} + {al['variations']} ({al['valid']}, {al['valid_variations']} "
                           "variations)"]
        for reg in regimes:
            v = r["regimes"].get(reg)
            if v is None:
                row += ["–"] * 3
                continue
            total += 1
            fastest_var += v["fastest"].startswith("v")
            row += [f"{max(v['pick_over_best']):.4f}", f"{max(v['best_of_3_over_best']):.4f}",
                    f"{v['fastest']} (#{v['fastest_screen_rank']})"]
        lines.append("| " + " | ".join(row) + " |")
    missing = [k for k in result.get("planned", []) if k not in result["shapes"]]
    notes = ["Made on the GPU machine by `bash scripts/device_autotune_check.sh` (the data: `autotune_check.json`); "
             "`python3 scripts/autotune_check.py --table JSON --md PAGE` writes this page from it.",
             f"The fastest algorithm was a variation in {fastest_var} of {total} layout-regimes."]
    if missing:
        notes.append(f"Not checked (the run ended first): {', '.join(missing)}.")
    for what, label in (("pick_over_best", "AutoTuning's pick"), ("best_of_3_over_best",
                                                                   "the best of the pick and its runners-up")):
        ok, worst, where = bar_verdict(result, what)
        verdict = "no shape of that size checked" if ok is None else (
            f"{'met' if ok else 'not met'} (worst {worst:.4f}: {where})")
        notes.append(f"Bar (every shape of at least 2^{BIG_LOG2_FLOP} FLOP, every regime, within "
                     f"{(BAR - 1) * 100:.0f}% of the fastest valid algorithm), {label}: {verdict}.")
    per_shape = {k: v for k, v in shape_figures(result).items() if _flop(k) >= 2 ** BIG_LOG2_FLOP}
    if per_shape:
        worst = max((x, k, reg) for k, v in per_shape.items() for reg, x in v.items())
        notes.append(f"Bar per shape, both layouts as best NVIDIA takes them (the faster layout's best of 3 over the "
                     f"fastest algorithm of either layout): {'met' if worst[0] <= BAR else 'not met'} (worst "
                     f"{worst[0]:.4f}: {worst[1]}, {REGIMES.get(worst[2], worst[2])}).")
    for note in notes:
        lines += ["", note]
    known = [(key, lab, r["configs"][lab]) for key, r in result["shapes"].items()
             for lab in dict.fromkeys(v["fastest"] for v in r["regimes"].values()) if lab in r.get("configs", {})]
    if known:
        lines += ["", "Configurations of the fastest algorithms (cuBLASLt's ids):", ""]
        lines += [f"- {key} {lab}: {_cfg(cfg)}" for key, lab, cfg in known]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    if a.table is not None:
        try:
            text = table(json.loads(a.table.read_text()))
        except (OSError, ValueError, KeyError) as e:
            print(f"autotune_check: cannot make a table of {a.table}: {e}", file=sys.stderr)
            return 2
        if a.md:
            a.md.write_text(text)
        else:
            print(text, end="")
        return 0
    try:
        shapes = shapes_of(a)
    except ValueError as e:
        print(f"autotune_check: {e}", file=sys.stderr)
        return 2
    from evaluator.gpu import gpu_missing

    if gpu_missing("autotune_check"):
        return 2
    return run(a, shapes)


if __name__ == "__main__":
    sys.exit(main())
