#!/usr/bin/env python3
"""What would the current built-in policy propose at a step of a finished campaign, given what that campaign had
measured by then? (no GPU needed)

    python3 scripts/replay_search.py runs/RUN [--step 1] [--seed 0] [--json OUT]

Per shape of the run (its archive.sqlite): the history the policy saw before step S (the shape's variants of earlier
steps, with their measured speedups) and the neighbours it was seeded with (each other shape's best variant measured
before step S began), then the proposals of `BuiltinPolicy(seed)` at the run's per-step width. Each proposal is
marked with what the run measured for the same family and params, if it did, at any step. A change to the policy
or its cost model can so be read against real measured histories before a GPU runs it: how many of a step's slots
move, and to configs the run had found slower or faster. A proposal the run never measured stays unknown.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _key(family: str | None, params: dict | None) -> str:
    from agent.families import canonical

    return f"{family}:{canonical(params) if family and params else None}"


def _describe(family: str, params: dict) -> str:
    p = params or {}
    keys = ("tile_m", "tile_n", "tile_k", "schedule", "scheduler", "splits", "cluster_m", "cluster_n", "swap_ab",
            "b_operand", "raster", "swizzle", "stages", "cluster_k", "grid", "group", "epi")
    return family + " " + " ".join(f"{k}={p[k]}" for k in keys if k in p)


def replay(run_dir: Path, step: int, seed: int = 0) -> list[dict]:
    from agent.campaign.archive import Archive
    from agent.policy import BuiltinPolicy

    db = Path(run_dir) / "archive.sqlite"
    if not db.is_file():
        raise SystemExit(f"no archive at {db}")
    cfg_path = Path(run_dir) / "campaign.json"
    cfg = json.loads(cfg_path.read_text()) if cfg_path.is_file() else {}
    width = int(cfg.get("n_per_step") or 4)
    archive = Archive(db)
    keys = archive.shapes()
    variants = {k: archive.history(k.gpu, k.acc, k.shape) for k in keys}
    out = []
    for key in keys:
        mine = variants[key]
        at_step = [v for v in mine if v.step == step]
        if not at_step:
            continue
        t0 = min(v.created_at for v in at_step)
        history = [v.as_history() for v in mine if v.step is not None and v.step < step]
        seeds = []
        for other, vs in variants.items():
            if other == key or other.gpu != key.gpu or other.acc != key.acc:
                continue
            done = [v for v in vs if v.status == "ok" and v.speedup and v.created_at < t0 and v.family and v.params]
            if done:
                b = max(done, key=lambda v: v.speedup)
                seeds.append({"family": b.family, "params": b.params, "shape": list(other.shape), "speedup": b.speedup})
        measured = {_key(v.family, v.params): v.speedup if v.status == "ok" else v.status for v in mine}
        cands = BuiltinPolicy(seed).propose(tuple(key.shape), key.acc, cfg.get("arch") or "sm_90a", history,
                                            n=width, seeds=seeds, mode=cfg.get("mode") or "offline")
        out.append({"shape": list(key.shape), "gpu": key.gpu, "acc": key.acc, "step": step,
                    "run": [{"config": _describe(v.family, v.params), "key": _key(v.family, v.params),
                             "measured": v.speedup if v.status == "ok" else v.status} for v in at_step if v.family],
                    "now": [{"config": _describe(c.family, c.params), "key": _key(c.family, c.params),
                             "measured": measured.get(_key(c.family, c.params))} for c in cands]})
    return out


def _fmt(x) -> str:
    return f"{x:.3f}" if isinstance(x, float) else ("not measured" if x is None else str(x))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run_dir", type=Path, help="a finished (or stopped) campaign's run folder")
    ap.add_argument("--step", type=int, default=1, help="the step to replay (default 1, the first after the priors)")
    ap.add_argument("--seed", type=int, default=0, help="the policy's seed (default 0, the campaigns')")
    ap.add_argument("--json", type=Path, help="also write the rows as JSON here")
    a = ap.parse_args()
    if a.step < 0:
        ap.error("--step must be 0 or more")
    rows = replay(a.run_dir, a.step, a.seed)
    if not rows:
        print(f"no shape of {a.run_dir} has variants at step {a.step}", file=sys.stderr)
        return 1
    moved = 0
    for r in rows:
        print(f"## {'x'.join(map(str, r['shape']))} ({r['acc']}), step {r['step']}")
        print("the run proposed:")
        for c in r["run"]:
            print(f"  {_fmt(c['measured']):>12}  {c['config']}")
        print("the current policy proposes:")
        run_configs = {c["key"] for c in r["run"]}
        for c in r["now"]:
            moved += c["key"] not in run_configs
            print(f"  {_fmt(c['measured']):>12}  {c['config']}")
    print(f"\n{moved} of {sum(len(r['now']) for r in rows)} proposals differ from the run's at step {a.step}")
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
