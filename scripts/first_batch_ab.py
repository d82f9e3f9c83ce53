#!/usr/bin/env python3
"""Which first batches does a change of the built-in policy move, and a probe that times both? (no GPU needed)

    python3 scripts/first_batch_ab.py REV [--sample 200 | --shapes FILE] [--spec OUT.json --pick 8 [--slim]] [--seed 0]

Proposes each shape's first batch (`BuiltinPolicy(0).propose`, sm_90a, fp32, offline, four candidates) once with the
code of git revision REV and once with this working tree, over --sample grid shapes drawn with --seed (each side one
of 64 ... 16384) or the shapes of --shapes, and prints those whose batch changed. With --spec it writes a
`scripts/sweep_configs.py --together` spec of up to --pick changed shapes (every --pick-th of them, in order; of a grid
draw only those outside both samples, of a --shapes file any, since the file names them): the union of both batches,
each entry's role naming the batch(es) and slot(s) it holds, so one device call times the old and new batch in the
same rounds (with --slim only the moved slots and the first; `scripts/ab_summary.py` reads the probe). A cost-model
change moves first batches too: this is how many, and the probe that says whether the move helps.
"""
from __future__ import annotations

import argparse
import itertools
import json
import random
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from prior_diff import GRID, REPO, json_in_tree, samples, tree_at  # noqa: E402

BATCH = """
import json, sys
from agent.policy import BuiltinPolicy
out = []
for s in json.load(sys.stdin):
    out.append([[c.family, c.params] for c in BuiltinPolicy(0).propose(tuple(s), "fp32", "sm_90a", [], n=4,
                                                                          mode="offline")])
json.dump(out, sys.stdout)
"""


def batches(tree: Path, shapes: list[tuple]) -> list[list]:
    return json_in_tree(tree, BATCH, [], "proposing the first batches", stdin=json.dumps(shapes))


def spec_for(shape: tuple, old: list, new: list) -> list[dict]:
    """Both batches' entries for one shape, each once, its role naming every batch slot it holds."""
    entries: dict[str, dict] = {}
    for arm, batch in (("old", old), ("new", new)):
        for i, (family, params) in enumerate(batch):
            key = json.dumps([family, params], sort_keys=True)
            e = entries.setdefault(key, {"family": family, "params": params, "shape": list(shape), "role": ""})
            e["role"] = f"{e['role']}; {arm} #{i}" if e["role"] else f"{arm} #{i}"
    return list(entries.values())


def listing(changed: list[tuple], show: int) -> list[str]:
    """A line for each of the first `show` changed shapes (the slots whose candidates differ), then how many more."""
    lines = []
    for s, o, n in changed[:show]:
        slots = [i for i in range(max(len(o), len(n))) if o[i:i + 1] != n[i:i + 1]]
        lines.append(f"  {'x'.join(map(str, s))}: slots {slots} differ")
    if len(changed) > show:
        lines.append(f"  ... and {len(changed) - show} more (--show {len(changed)} lists them)")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("rev", help="the git revision to compare this working tree with")
    ap.add_argument("--sample", type=int, default=200, help="grid shapes drawn (ignored with --shapes)")
    ap.add_argument("--shapes", type=Path, help="a shape file (M N K a line) instead of a grid sample")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--spec", type=Path, help="write a sweep_configs.py --together spec of changed shapes here")
    ap.add_argument("--pick", type=int, default=8,
                    help="changed shapes in the spec (of a grid draw: outside both samples)")
    ap.add_argument("--show", type=int, default=20, help="changed shapes printed at most")
    ap.add_argument("--slim", action="store_true",
                    help="in the spec only the slots that differ and each batch's first (a third of the device time)")
    a = ap.parse_args(argv)
    if a.shapes:
        from agent.shapes import load_shapes

        shapes = [tuple(s) for s in load_shapes(a.shapes)]
    else:
        if a.sample < 1:
            raise SystemExit("--sample must be at least 1")
        shapes = sorted(random.Random(a.seed).sample(list(itertools.product(GRID, GRID, GRID)), min(a.sample, 1000)))
    with tempfile.TemporaryDirectory() as tmp:
        old = batches(tree_at(a.rev, Path(tmp)), shapes)
    new = batches(REPO, shapes)
    held = samples()
    changed = [(s, o, n) for s, o, n in zip(shapes, old, new) if o != n]
    print(f"{a.rev} -> working tree: {len(changed)} of {len(shapes)} first batches change "
          f"({len([c for c in changed if c[0] in held])} in a sample)")
    for line in listing(changed, a.show):
        print(line)
    if a.spec:
        outside = changed if a.shapes else [c for c in changed if c[0] not in held]
        step = max(1, len(outside) // max(a.pick, 1))
        spec = [e for s, o, n in outside[::step][: a.pick] for e in spec_for(s, o, n)]
        if a.slim:  # what the batch's best moved from and to needs its first slot beside the moved ones
            spec = [e for e in spec if ";" not in e["role"] or e["role"].startswith("old #0;")]
        a.spec.parent.mkdir(parents=True, exist_ok=True)  # minutes of proposing are not lost to a missing folder
        a.spec.write_text(json.dumps(spec, indent=1))
        print(f"wrote {len(spec)} entries on {len({tuple(e['shape']) for e in spec})} shapes to {a.spec}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
