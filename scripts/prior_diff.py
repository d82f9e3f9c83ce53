#!/usr/bin/env python3
"""Which shapes does a change of the built-in policy's priors touch? (no GPU needed)

    python3 scripts/prior_diff.py REV [--families hopper_wgmma,hopper_raw] [--random 3000] [--first 2] [--feasible]

Lists every family's priors (agent.policy.priors, sm_90a, fp32, offline) over the CUDA-L2 grid (each side one of
64 ... 16384) and over --random shapes drawn off the grid (a fixed seed), once with the code of git revision REV
and once with this working tree, and prints the shapes whose first --first priors differ, with both lists. The
counts a design note quotes ("22 of the 1,000 grid shapes change") come from here; a rule meant to touch shapes
outside both samples should show none of docs/benchmarks/dev_sample.txt or heldout_sample.txt (marked "sample").
With --feasible the lists are those the policy's pool keeps: a listed prior that its family finds infeasible is
dropped there without a word, so the family starts from the next one.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
GRID = (64, 128, 256, 512, 1024, 2048, 4096, 8192, 12288, 16384)

DUMP = """
import json, random, sys
from agent.policy import priors
from agent.families import canonical, get, normal_params, with_launch_knobs
fams, n_random, seed, kept = sys.argv[1].split(","), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
grid = [(m, n, k) for m in {grid} for n in {grid} for k in {grid}]
rng = random.Random(seed)
side = lambda: rng.choice([8 * rng.randint(1, 40), 64 * rng.randint(1, 64), 128 * rng.randint(1, 128)])
off = sorted({{(side(), side(), 64 * rng.randint(1, 256)) for _ in range(n_random)}} - set(grid))
def listed(f, s):
    ps = priors.priors(f, s, "fp32", "sm_90a")
    if not kept:
        return ps
    out, keys = [], set()
    for p in ps:  # as the policy's pool keeps them: normalised, feasible, each once
        q = normal_params(f, with_launch_knobs(f, p, "sm_90a"))
        if canonical(q) not in keys and get(f).feasible(q, s, "sm_90a")[0]:
            keys.add(canonical(q))
            out.append(q)
    return out
out = [[list(s), {{f: listed(f, s) for f in fams}}] for s in grid + off]
json.dump(out, sys.stdout)
"""


def tree_at(rev: str, into: Path) -> Path:
    """The repository's files at git revision `rev`, unpacked into `into`."""
    archive = subprocess.run(["git", "archive", rev], cwd=REPO, capture_output=True, check=False)
    if archive.returncode:
        raise SystemExit(f"git archive {rev} failed: {archive.stderr.decode()[-500:]}")
    subprocess.run(["tar", "x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def json_in_tree(tree: Path, code: str, args: list[str], what: str, stdin: str = "") -> Any:
    """What `code`, run by this Python with `tree` first on its path, prints as JSON; `what` names the work when it
    fails."""
    env = dict(os.environ, PYTHONPATH=str(tree), HF_HUB_OFFLINE="1")
    p = subprocess.run([sys.executable, "-c", code, *args], cwd=tree, env=env, input=stdin, capture_output=True,
                       text=True, check=False)
    if p.returncode:
        raise SystemExit(f"{what} at {tree} failed:\n{p.stderr[-2000:]}")
    return json.loads(p.stdout)


def dump(tree: Path, families: list[str], n_random: int, seed: int, kept: bool = False) -> dict[tuple, dict]:
    listed = json_in_tree(tree, DUMP.format(grid=list(GRID)),
                          [",".join(families), str(n_random), str(seed), str(int(kept))], "listing the priors")
    return {tuple(s): d for s, d in listed}


def short(p: dict) -> str:
    """A prior in a few characters: its tile, the operands swapped (s), schedule and split where it has them."""
    tile = f"{p.get('tile_m', p.get('bm'))}x{p.get('tile_n', p.get('bn'))}"
    bits = [tile + ("s" if p.get("swap_ab") else "")]
    for key in ("schedule", "scheduler", "epi"):
        if p.get(key):
            bits.append(str(p[key])[:4])
    splits = p.get("splits", p.get("split_k", p.get("cluster_k", 1)))
    return "/".join(bits) + (f"/k{splits}" if splits and splits > 1 else "")


def samples() -> set[tuple]:
    from agent.shapes import load_shapes

    return {s for name in ("dev_sample.txt", "heldout_sample.txt")
            for s in load_shapes(REPO / "docs" / "benchmarks" / name)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("rev", help="the git revision to compare this working tree with")
    ap.add_argument("--families", default="hopper_wgmma,hopper_raw,ampere_cute,small")
    ap.add_argument("--random", type=int, default=3000, help="off-grid shapes drawn (before removing duplicates)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--first", type=int, default=2, help="how many leading priors of each family to compare")
    ap.add_argument("--show", type=int, default=40, help="changed shapes printed at most")
    ap.add_argument("--feasible", action="store_true",
                    help="compare the priors the policy's pool keeps (normalised, feasible, each once), not as listed")
    a = ap.parse_args(argv)
    families = a.families.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        old = dump(tree_at(a.rev, Path(tmp)), families, a.random, a.seed, a.feasible)
    new = dump(REPO, families, a.random, a.seed, a.feasible)
    grid = {s for s in new if all(x in GRID for x in s)}
    held = samples()
    changed = [s for s in new if any(old.get(s, {}).get(f, [])[: a.first] != new[s].get(f, [])[: a.first]
                                     for f in families)]
    on_grid = [s for s in changed if s in grid]
    kind = "feasible priors" if a.feasible else "priors"
    print(f"{a.rev} -> working tree, first {a.first} {kind} of {', '.join(families)}: {len(on_grid)} of "
          f"{len(grid)} grid shapes and {len(changed) - len(on_grid)} of {len(new) - len(grid)} off-grid shapes "
          f"change; {len([s for s in changed if s in held])} of them in a sample")
    for s in sorted(changed, key=lambda s: (s not in grid, s))[: a.show]:
        for f in families:
            was, now = old.get(s, {}).get(f, [])[: a.first], new[s].get(f, [])[: a.first]
            if was != now:
                tag = " sample" if s in held else "" if s in grid else " off-grid"
                print(f"  {'x'.join(map(str, s))}{tag} {f}: {[short(p) for p in was]} -> {[short(p) for p in now]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
