#!/usr/bin/env python3
"""Which kernels does a template change alter, and a probe that times them before and after? (no GPU needed)

    python3 scripts/render_ab.py REV --family hopper_raw --shapes FILE --out DIR [--first 1] [--sizes]

Takes each shape's first --first priors of --family as this working tree lists them (feasible, normalised, with the
launch knobs: what the policy's pool keeps), renders each with the code of git revision REV and with this tree, and
where the two sources differ writes both under DIR/src/ and a `scripts/sweep_configs.py --together` spec,
DIR/spec.json, whose entries name those files ("source"), roles "old (REV)" and "new": one device call then times the
old and the new kernel of the same params in the same rounds, and `scripts/ab_summary.py` reads the probe. A policy
change moves which kernels are proposed (`first_batch_ab.py`); a template change moves what the same params build,
which is what this is for. With --sizes each pair is built to a cubin here (nvcc only) and its machine-code bytes
printed: a cold call fetches that code (evaluator/code_size.py).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from prior_diff import REPO, json_in_tree, tree_at  # noqa: E402

RENDER = """
import json, sys
from agent.families import candidate_name, render
out = []
for family, params, s in json.load(sys.stdin):
    try:
        out.append([candidate_name(family, params), render(family, params, tuple(s), "sm_90a")])
    except ValueError as err:
        out.append([None, str(err)])
json.dump(out, sys.stdout)
"""


def kept_priors(family: str, shape: tuple[int, int, int], first: int) -> list[dict]:
    """The family's first `first` priors on `shape` as the policy's pool keeps them: normalised, feasible, each once."""
    from agent.families import canonical, get, normal_params
    from agent.policy import priors

    kept, keys = [], set()
    for p in priors.priors(family, shape, "fp32", "sm_90a"):  # launch knobs included
        q = normal_params(family, p)
        if canonical(q) not in keys and get(family).feasible(q, shape, "sm_90a")[0]:
            keys.add(canonical(q))
            kept.append(q)
    return kept[:first]


def renders(tree: Path, jobs: list[list]) -> list[list]:
    return json_in_tree(tree, RENDER, [], "rendering the kernels", stdin=json.dumps(jobs))


def write_probe(out: Path, rev: str, family: str, jobs: list[list], old: list[list], new: list[list]) -> list[str]:
    """The spec and sources of the jobs whose renders differ; a line for each job that changed or was refused."""
    (out / "src").mkdir(parents=True, exist_ok=True)
    spec, lines = [], []
    for (_, params, shape), (old_name, old_src), (name, new_src) in zip(jobs, old, new):
        tag = "x".join(map(str, shape))
        if name is None or old_name is None:
            lines.append(f"  {tag}: refused ({new_src if name is None else old_src})"[:200])
            continue
        if old_src == new_src:
            continue
        lines.append(f"  {tag}: {name} renders differently")
        for arm, src, role in (("old", old_src, f"old ({rev})"), ("new", new_src, "new")):
            path = out / "src" / f"{name}_{tag}_{arm}.cu"
            path.write_text(src)
            spec.append({"family": family, "params": params, "shape": list(shape), "role": role,
                         "source": str(path.relative_to(out))})
    (out / "spec.json").write_text(json.dumps(spec, indent=1))
    return lines


def sizes(out: Path) -> list[str]:
    """A line per pair of the spec in `out`: each side's machine-code bytes (all its kernels) and new over old."""
    from concurrent.futures import ThreadPoolExecutor

    from evaluator.code_size import text_bytes

    spec = json.loads((out / "spec.json").read_text())
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:  # each build is an nvcc process
        built = list(pool.map(lambda e: sum(text_bytes((out / e["source"]).read_text()).values()), spec))
    lines = []
    for (o, n), (old_bytes, new_bytes) in zip(zip(spec[::2], spec[1::2]), zip(built[::2], built[1::2])):
        lines.append(f"  {'x'.join(map(str, o['shape']))} {Path(o['source']).stem.rsplit('_', 2)[0]}: "
                     f"{old_bytes} -> {new_bytes} bytes of machine code ({new_bytes / old_bytes:.2f}x)")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("rev", help="the git revision whose templates render the old kernels")
    ap.add_argument("--family", required=True)
    ap.add_argument("--shapes", type=Path, required=True, help="a shape file (M N K a line)")
    ap.add_argument("--first", type=int, default=1, help="leading priors of the family a shape")
    ap.add_argument("--out", type=Path, required=True, help="a folder for spec.json and src/")
    ap.add_argument("--sizes", action="store_true",
                    help="build each changed pair to a cubin (nvcc, no GPU) and print its machine-code bytes")
    a = ap.parse_args(argv)
    from agent.families import names
    from agent.shapes import load_shapes

    if a.family not in names():
        raise SystemExit(f"--family {a.family!r}: one of {', '.join(names())}")
    if a.first < 1:
        raise SystemExit("--first must be at least 1")
    jobs = [[a.family, p, list(s)] for s in load_shapes(a.shapes) for p in kept_priors(a.family, tuple(s), a.first)]
    with tempfile.TemporaryDirectory() as tmp:
        old = renders(tree_at(a.rev, Path(tmp)), jobs)
    new = renders(REPO, jobs)
    lines = write_probe(a.out, a.rev, a.family, jobs, old, new)
    changed = sum(line.endswith("renders differently") for line in lines)
    print(f"{a.rev} -> working tree: {changed} of {len(jobs)} {a.family} kernels render differently")
    for line in lines:
        print(line)
    if a.sizes:
        for line in sizes(a.out):
            print(line)
    print(f"wrote {2 * changed} entries to {a.out / 'spec.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
