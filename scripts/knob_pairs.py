#!/usr/bin/env python3
"""What one knob is worth in a probe (no GPU needed): the rows of probe files that differ only in that knob.

    python3 scripts/knob_pairs.py docs/benchmarks/data/PROBE.json [MORE.json ...] --knob edge [--base pad]

A probe file is what `scripts/sweep_configs.py --together` writes (rows of family, params, shape, mode and the
kernel's figure against best NVIDIA in the same rounds). Rows of one family, shape and timing mode whose params agree
on every knob but `--knob` (a knob left out of the params is at its default, as the family's canonical form omits
it) and were timed on one GPU are a pair; each prints the other value's figure over the base value's (a config
timed twice there: its last row). Per mode the geometric mean of those ratios and how many are below 1: the figures a
sweep knob is judged by before any prior uses it. Only rows that passed the evaluator's checks count.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]
from costmodel_check import probe_rows  # noqa: E402


def load_rows(paths: list[Path]) -> list[dict]:
    return [r for path in paths for r in probe_rows(path)]


def pairs(rows: list[dict], knob: str, base: Any) -> list[dict]:
    """One record per pair: family, shape, mode, the base value and the other, both figures and their ratio."""
    groups: dict[tuple, dict] = defaultdict(dict)
    for r in rows:
        if r.get("status") != "ok" or not r.get("vs_best_nvidia"):
            continue
        full = {**defaults_of(r["family"]), **r["params"]}
        if knob not in full:
            continue
        rest = json.dumps({k: v for k, v in full.items() if k != knob}, sort_keys=True)
        key = (r["family"], tuple(r["shape"]), r["mode"], r.get("gpu_uuid", ""), rest)
        groups[key][json.dumps(full[knob])] = r["vs_best_nvidia"]
    out = []
    for (family, shape, mode, _, _), by_value in groups.items():
        if len(by_value) < 2:
            continue
        ref = json.dumps(base if base is not None else defaults_of(family).get(knob))
        if ref not in by_value:
            continue
        for value, fig in by_value.items():
            if value != ref:
                out.append({"family": family, "shape": list(shape), "mode": mode, "base": json.loads(ref),
                            "value": json.loads(value), "base_figure": by_value[ref], "figure": fig,
                            "ratio": fig / by_value[ref]})
    # one knob's values share a type: numbers sort as numbers
    return sorted(out, key=lambda p: (p["mode"], p["shape"], p["value"] if isinstance(p["value"], (int, float))
                                      else str(p["value"])))


def defaults_of(family: str) -> dict:
    from agent.families import get

    return getattr(get(family), "DEFAULTS", {})


def summary(found: list[dict]) -> list[str]:
    lines = []
    by_mode: dict[str, list[float]] = defaultdict(list)
    for p in found:
        by_mode[p["mode"]].append(p["ratio"])
    for mode, ratios in sorted(by_mode.items()):
        geo = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
        lines.append(f"{mode}: {len(ratios)} pairs, geomean {geo:.3f}, below 1 on {sum(x < 1 for x in ratios)}, "
                     f"range {min(ratios):.3f}-{max(ratios):.3f}")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("probes", type=Path, nargs="+")
    ap.add_argument("--knob", required=True, help="the knob whose values the pairs differ in")
    ap.add_argument("--base", default=None,
                    help="the value the others are divided by (default: the family's default for the knob); "
                         "JSON for non-strings (true, 2)")
    a = ap.parse_args()
    base = a.base
    if base is not None:
        try:
            base = json.loads(base)
        except ValueError:
            pass  # a bare string such as pad
    found = pairs(load_rows(a.probes), a.knob, base)
    if not found:
        print(f"no pairs of rows that differ only in {a.knob}" + (f" with {a.knob}={base} among them" if base else ""))
        return 1
    for p in found:
        print(f"{p['mode']:12s} {'x'.join(map(str, p['shape'])):18s} {p['family']:13s} {a.knob}={p['value']} "
              f"{p['figure']:.3f} against {p['base']} {p['base_figure']:.3f}: x{p['ratio']:.3f}")
    print("\n".join(summary(found)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
