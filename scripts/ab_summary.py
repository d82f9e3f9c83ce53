#!/usr/bin/env python3
"""Read an A/B probe: what the new arm's kernels gained over the old arm's, shape by shape and mode by mode.

    python3 scripts/ab_summary.py PROBE.json [--old old] [--new new] [--drop 312x6656x10496 ...]

PROBE.json is what `scripts/sweep_configs.py --together` writes ($OUT/probe.json) for a spec from
`scripts/first_batch_ab.py --spec` (roles "old #3", "new #3", "old #0; new #0") or `scripts/render_ab.py` (roles
"old ..." and "new ..."). An entry whose role starts with --old belongs to the old arm, --new to the new one, and one
whose role names both (a slot both batches share) to either. Each row gives best NVIDIA's multiple for the shared
entries' best, the old arm's best and the new arm's best; the summary, per mode, the geomean of new over old (the
arms alone, the slot that changed) and of the batch's best with the new arm over with the old (what the change does
to the batch). Every figure comes from one set of rounds: the ratios of a shape are comparable, those of two shapes
less so.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from agent.report import geomean  # noqa: E402

MODES = ("back-to-back", "separated", "server")  # listed first, in this order; any other mode a probe holds follows


def arms(results: list[dict], old: str, new: str) -> dict[tuple, dict[str, dict[str, float]]]:
    """{(shape, mode): {"old": best, "new": best, "both": best}} of the measured rows; a row that failed a check
    counts in no arm (it is listed by `failures`)."""
    best: dict[tuple, dict[str, float]] = defaultdict(dict)
    for r in results:
        if r.get("status") != "ok":
            continue
        role = r.get("role", "")
        parts = [p.strip() for p in role.split(";")]
        is_old, is_new = any(p.startswith(old) for p in parts), any(p.startswith(new) for p in parts)
        arm = "both" if is_old and is_new else "old" if is_old else "new" if is_new else None
        if arm is None:
            continue
        slot = best[(tuple(r["shape"]), r["mode"])]
        slot[arm] = max(slot.get(arm, 0.0), r["vs_best_nvidia"])
    return best


def failures(results: list[dict]) -> list[str]:
    return [f"{'x'.join(map(str, r['shape']))} {r['mode']} {r.get('role', '')}: {r.get('reason', '')[:100]}"
            for r in results if r.get("status") != "ok"]


def summary(best: dict[tuple, dict[str, float]], drop: set[tuple] = frozenset()) -> tuple[list[str], dict[str, dict]]:
    """The rows (one a shape) and, per mode, the geomeans of the arms' ratio and of the batch's best."""
    held = {mode for _, mode in best}
    modes = [m for m in MODES if m in held] + sorted(held - set(MODES))
    lines, per_mode = [], {m: {"slot": [], "batch": []} for m in modes}
    for shape in sorted({s for s, _ in best}, key=lambda s: (s[0] * s[1] * s[2], s)):
        if shape in drop:
            continue
        line = "x".join(map(str, shape))
        for mode in modes:
            b = best.get((shape, mode), {})
            if "old" not in b or "new" not in b:
                continue
            both = b.get("both", 0.0)
            per_mode[mode]["slot"].append(b["new"] / b["old"])
            per_mode[mode]["batch"].append(max(b["new"], both) / max(b["old"], both))
            shared = f"both {both:.3f} " if both else ""
            line += f"  {mode}: {shared}old {b['old']:.3f} new {b['new']:.3f}"
        lines.append(line)
    totals = {}
    for mode, r in per_mode.items():
        if r["slot"]:
            totals[mode] = {"shapes": len(r["slot"]), "slot": geomean(r["slot"]), "batch": geomean(r["batch"]),
                            "faster": sum(x > 1 for x in r["slot"]), "min": min(r["slot"]), "max": max(r["slot"])}
    return lines, totals


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("probe", type=Path)
    ap.add_argument("--old", default="old", help="the role prefix of the old arm's entries")
    ap.add_argument("--new", default="new", help="the role prefix of the new arm's entries")
    ap.add_argument("--drop", nargs="*", default=[], help="shapes (MxNxK) left out of the rows and the summary")
    a = ap.parse_args(argv)
    try:
        results = json.loads(a.probe.read_text())["results"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise SystemExit(f"{a.probe}: not a probe file with results ({err})")
    drop = set()
    for d in a.drop:
        try:
            drop.add(tuple(int(x) for x in d.split("x")))
        except ValueError:
            raise SystemExit(f"--drop {d!r}: a shape is MxNxK")
    lines, totals = summary(arms(results, a.old, a.new), drop)
    if not totals:
        raise SystemExit(f"{a.probe}: no shape has both a {a.old!r} and a {a.new!r} entry measured")
    print("\n".join(lines))
    for line in failures(results):
        print("failed:", line)
    for mode, t in totals.items():
        print(f"{mode}: new/old {t['slot']:.3f} (min {t['min']:.3f}, max {t['max']:.3f}, faster on {t['faster']} of "
              f"{t['shapes']}), batch best x{t['batch']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
