#!/usr/bin/env python3
"""Replay a finished campaign's tournaments of leaders on the machine at hand (GPU machine).

A campaign chooses each shape's winner by timing its leaders in the same rounds of one evaluation (agent.campaign.driver,
`--confirm-top`): one machine, one draw. Here the top `--top` variants of each shape (the archive's ranking, the
run's own tournament first) are timed again in one evaluation each: one of them is the candidate (every check), the
others are its rivals (timed in the same shuffled rounds, their timed output checked), beside the baselines. Each
repeat makes another leader the candidate. A leader's figure per repeat is the median over rounds of
t_baseline / t_leader, all from the same rounds.

    python3 scripts/tournament.py RUN_DIR --out DIR [--top 4] [--repeats 2] [--rounds 15] [--shapes FILE]
                                  [--mode offline|server|back-to-back|separated|...]

`--mode` times the tournaments in another regime (a campaign plays one per final mode, `docs/campaigns.md`); in a
mode other than the run's search mode the players are the campaign's for that mode: the top `--top` and each other
family's best within 0.85 of the fastest.

DIR/tournament.json keeps every evaluation (per-round times included); DIR/tournament.md is the table: per shape
each leader's run figures (pooled search readings, and the run's tournament figure "T"), its figures here, the
run's pick and this replay's (the highest mean over repeats).
"""
from __future__ import annotations

import argparse
import datetime
import json
import sqlite3
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from agent.shapes import load_shapes  # noqa: E402
from evaluator.contract import MODES  # noqa: E402
from recheck_finals import _fmt, load_picks  # noqa: E402

BASELINE = "cublaslt-autotune-max"


def leaders(run_dir: Path, acc: str, top: int, shapes: list | None, mix_families: bool = False) -> list[dict]:
    """Per shape of the run (or of `shapes`): its `top` ranked variants, the run's pick first; with `mix_families`,
    also each other family's best close behind, as a campaign's tournament in a mode other than its search's
    (agent.campaign.driver.mode_players)."""
    from agent.campaign.archive import Archive
    from agent.campaign.driver import mode_players

    db = run_dir / "archive.sqlite"
    if not db.is_file():
        raise ValueError(f"{run_dir} has no archive.sqlite: is it a campaign's run folder?")
    with sqlite3.connect(db) as c:
        keys = c.execute("SELECT DISTINCT gpu, m, n, k FROM variants WHERE acc=? ORDER BY m*n*k, m, n, k",
                         (acc,)).fetchall()
    archive = Archive(db)
    out = []
    for gpu, m, n, k in keys:
        if shapes is not None and (m, n, k) not in shapes:
            continue
        ranked = archive.ranked(gpu, acc, (m, n, k), BASELINE)
        ranked = mode_players(ranked, top) if mix_families else ranked[:top]
        if len(ranked) < 2:
            continue
        out.append({"shape": (m, n, k), "gpu": gpu, "leaders": [
            {"id": v.id, "family": v.family, "params": v.params, "source": v.read_source(),
             "run": v.extra.get("pooled_speedup") or v.result.speedup(BASELINE),
             "run_tournament": v.extra.get("tournament"),
             "measurements": v.extra.get("measurements", 1)} for v in ranked]})
    if not out:
        raise ValueError(f"{run_dir}: no shape with two or more correct {acc} variants"
                         + (" among the shapes asked for" if shapes is not None else ""))
    return out


def play(group: dict, acc: str, repeats: int, rounds: int, mode: str = "offline") -> None:
    from evaluator.api import evaluate

    lead = group["leaders"]
    group["evals"] = []
    for r in range(repeats):
        cand = lead[r % len(lead)]
        rivals = {str(v["id"]): v["source"] for v in lead if v is not cand}
        res = evaluate(cand["source"], group["shape"], acc=acc, mode=mode, rivals=rivals, rounds=rounds)
        h2h = res.head_to_head(BASELINE) if res.ok else {}
        timing = res.candidate.detail.get("timing", {}) if res.candidate else {}
        figures = {str(cand["id"]): h2h.get("candidate")}
        figures.update({name: h2h.get(name) for name in rivals})
        group["evals"].append({"candidate": cand["id"], "status": res.status, "reason": res.reason[:300],
                               "gpu_uuid": res.gpu.get("gpu_uuid"), "figures": figures,
                               "rounds": timing.get("rounds"), "rounds_us": timing.get("rounds_us"),
                               "steady": timing.get("steady", {}).get("why"), "unheld": timing.get("unheld")})
        shown = ", ".join(f"{k} {_fmt(v)}" for k, v in figures.items())
        print(f"{'x'.join(map(str, group['shape']))} repeat {r}: {res.status} {shown} {res.reason[:120]}",
              flush=True)
    for v in lead:
        got = [e["figures"].get(str(v["id"])) for e in group["evals"]]
        v["tournament"] = [x for x in got if x is not None]
    scored = [v for v in lead if v["tournament"]]
    group["pick"] = max(scored, key=lambda v: statistics.fmean(v["tournament"]))["id"] if scored else None


def table(groups: list[dict], meta: dict) -> str:
    lines = [f"# Tournament of `{meta['run']}`'s leaders", "",
             f"- device: {meta['device']}; date: {meta['date']}",
             f"- top {meta['top']} leaders per shape, {meta['repeats']} evaluation(s) each with another leader as the "
             f"candidate, {meta['rounds']} timed rounds, quick profile; figure: median over rounds of t_baseline / "
             f"t_leader against {BASELINE}, the run's autotuning picks ({meta['picks']} loaded)",
             f"- command: `{meta['command']}`", "",
             "| M | N | K | leader | family | run (pooled) | tournament | run's pick | tournament's pick |",
             "|---|---|---|---|---|---|---|---|---|"]
    changed = 0
    for g in groups:
        m, n, k = g["shape"]
        changed += g["pick"] is not None and g["pick"] != g["leaders"][0]["id"]
        for i, v in enumerate(g["leaders"]):
            played = f" · T {_fmt(v['run_tournament'])}" if v.get("run_tournament") is not None else ""
            lines.append(f"| {m} | {n} | {k} | {v['id']} | {v['family']} | {_fmt(v['run'])} ({v['measurements']}){played} | "
                         f"{' / '.join(_fmt(x) for x in v['tournament']) or '-'} | {'yes' if i == 0 else ''} | "
                         f"{'yes' if v['id'] == g['pick'] else ''} |")
    lines += ["", f"The tournament picked another leader than the run on {changed} of {len(groups)} shapes.", ""]
    return "\n".join(lines)


def search_mode(run_dir: Path) -> str:
    """The timing mode the run searched in (campaign.json; offline where a run folder predates the record or the
    record cannot be read)."""
    from agent.campaign.db import run_record

    try:
        return run_record(run_dir).get("mode", "offline")
    except (OSError, ValueError):
        return "offline"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--acc", choices=["fp32", "fp16"], default="fp32")
    ap.add_argument("--top", type=int, default=4, help="leaders per shape (2 or more)")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=15, help="timed rounds per evaluation")
    ap.add_argument("--shapes", type=Path, help="keep only the run's shapes listed in this shape file")
    ap.add_argument("--mode", choices=MODES, default="offline", help="timing mode of the tournaments")
    a = ap.parse_args()
    if a.top < 2 or a.repeats < 1:
        ap.error("--top needs at least 2 leaders and --repeats at least 1")
    try:
        shapes = {tuple(s) for s in load_shapes(a.shapes)} if a.shapes else None
        groups = leaders(a.run_dir, a.acc, a.top, shapes, mix_families=a.mode != search_mode(a.run_dir))
    except (OSError, ValueError) as e:
        print(f"tournament: {e}", file=sys.stderr)
        return 2
    from evaluator.gpu import device_name, has_gpu

    if not has_gpu():
        print("tournament: no GPU on this machine; run it where the evaluator can time kernels", file=sys.stderr)
        return 2
    a.out.mkdir(parents=True, exist_ok=True)
    meta = {"run": a.run_dir.name, "device": device_name(0), "date": datetime.date.today().isoformat(),
            "top": a.top, "repeats": a.repeats, "rounds": a.rounds, "mode": a.mode, "picks": load_picks(a.run_dir),
            "command": "python3 scripts/tournament.py " + " ".join(sys.argv[1:])}
    for g in groups:
        play(g, a.acc, a.repeats, a.rounds, a.mode)
        kept = [{**g, "leaders": [{k: v for k, v in x.items() if k != "source"} for x in g["leaders"]]}
                for g in groups if "evals" in g]
        (a.out / "tournament.json").write_text(json.dumps({"meta": meta, "shapes": kept}, indent=1))
    (a.out / "tournament.md").write_text(table(groups, meta))
    print(table(groups, meta))
    return 0


if __name__ == "__main__":
    sys.exit(main())
