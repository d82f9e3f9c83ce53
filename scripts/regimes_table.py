#!/usr/bin/env python3
"""Each final of a campaign in every timing regime, against the fastest NVIDIA baseline of that regime.

    python3 scripts/regimes_table.py --run RUN_DIR [--run RUN_DIR ...] --data OUT.json --out TABLE.md
                                     [--previous OLD_TABLE.md]
    python3 scripts/regimes_table.py --data OUT.json --out TABLE.md        # regenerate from the kept figures

The figures come from the run's final measurements (campaign.sqlite): per shape and regime, the speedup against
best NVIDIA (`EvalResult.speedup("best-nvidia")`: the baseline with the lowest median in the same rounds, so the
pick is made in the regime it is compared in) and against cuBLASLt-AutoTuning-max, and which baseline was fastest.
`--data` keeps them as JSON, so the table regenerates without the run folder. A target holds only where it holds
in every offline regime (back to back, separated, power-steady); server mode is reported beside them.
"""
from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]
from agent.families.pricing import flop  # noqa: E402
from agent.report import geomean, short_gpu_id  # noqa: E402
from bench_targets import is_big  # noqa: E402

REGIMES = (("back-to-back", "back to back"), ("separated", "separated"), ("steady", "power-steady"),
           ("server", "server"))
OFFLINE = ("back-to-back", "separated", "steady")
TARGETS = {"geomean": 1.15, "win_rate": 0.90, "big_min": 0.97}


def figures(run_dir: Path) -> dict:
    """Per shape (as 'MxNxK') and regime: best, autotune_max, fastest baseline, of the median of the winner's final
    evaluations in that regime (agent.report.collect_rows: the evaluation whose speedup is the median, as every
    table of the project shows). The campaign's "offline" finals are power-steady where the shape is power-limited;
    elsewhere they repeat the separated regime and are left out."""
    from agent.report import collect_rows

    out: dict = {"run": run_dir.name, "shapes": {}}
    for row in collect_rows(run_dir):
        key, mode, r = "x".join(map(str, row.shape)), row.mode, row.result
        failed = row.extra.get("final_failed", [])
        if r is None or not row.final:
            if failed:  # no evaluation of this regime passed its checks: shown, not dropped
                out["shapes"].setdefault(key, {})[mode] = {"status": failed[0]}
            continue
        out.setdefault("gpu", r.gpu.get("name"))
        if r.gpu.get("gpu_uuid") and r.gpu["gpu_uuid"] not in out.setdefault("gpu_uuids", []):
            out["gpu_uuids"].append(r.gpu["gpu_uuid"])
        if mode == "offline":
            if "steady" not in r.candidate.detail.get("timing", {}):
                continue
            mode = "steady"
        fastest = min(r.baselines, key=lambda n: r.baselines[n].median_us)
        out["shapes"].setdefault(key, {})[mode] = {
            "best": round(r.speedup("best-nvidia"), 4), "autotune_max": round(r.speedup("cublaslt-autotune-max"), 4),
            "fastest": fastest, "gpu_s": round(r.gpu_time(), 1),
            "us": [round(r.candidate.median_us, 3), round(r.baselines[fastest].median_us, 3)],
            "evaluations": len(row.extra.get("final_speedups", [])) + len(failed)}
    return out


def merged(parts: list[dict]) -> dict:
    """One table's figures from several runs' (a benchmark run in slices): a shape in several is taken from the run
    named last, as the benchmark table does; runs of different GPU models are not combined."""
    models = {p["gpu"] for p in parts if p.get("gpu")}
    if len(models) > 1:
        raise ValueError(f"the runs were measured on different GPU models ({', '.join(sorted(models))})")
    out: dict = {"run": ", ".join(p["run"] for p in parts), "shapes": {}, "gpu": next(iter(models), None),
                 "gpu_uuids": []}
    for p in parts:
        out["shapes"].update(p["shapes"])
        out["gpu_uuids"] += [u for u in p.get("gpu_uuids", []) if u not in out["gpu_uuids"]]
    return out


def _geomean(xs: list[float]) -> float:
    g = geomean(xs)
    return float("nan") if g is None else g


def _shape(key: str) -> tuple[int, int, int]:
    m, n, k = map(int, key.split("x"))
    return m, n, k


def _flop(key: str) -> float:
    return flop(_shape(key))


def summary(data: dict, regime: str) -> dict:
    vals = {k: e[regime]["best"] for k, e in data["shapes"].items() if "best" in e.get(regime, {})}
    big = [v for k, v in vals.items() if is_big(_shape(k))]
    return {"n": len(vals), "geomean": _geomean(list(vals.values())),
            "win_rate": sum(v > 1 for v in vals.values()) / len(vals) if vals else float("nan"),
            "big_min": min(big) if big else None, "big_geomean": _geomean(big) if big else None,
            "losses": sorted((k for k, v in vals.items() if v <= 1), key=_flop)}


def extra_cold_us(entry: dict) -> float | None:
    """How much more the winner's cold cost (its server time less its separated time, median times of each regime's
    median evaluation) is than best NVIDIA's, in us; None where a regime's times are missing (older data)."""
    s, p = entry.get("server", {}).get("us"), entry.get("separated", {}).get("us")
    return (s[0] - p[0]) - (s[1] - p[1]) if s and p else None


def cold_headroom(data: dict) -> str:
    """A line on what server mode leaves to win: the excess cold cost below 2^36 FLOP, and the server geomean (of
    times) with and without it. Separated mode credits a PDL kernel with its launch overlapped by the kernel before
    it, which a call after an idle gap cannot have (docs/benchmarks/big_shapes_and_server.md)."""
    rows = [(k, x, e["server"]["us"]) for k, e in data["shapes"].items() if (x := extra_cold_us(e)) is not None]
    small = sorted(x for k, x, _ in rows if not is_big(_shape(k)))
    if not rows or not small:
        return ""
    now = _geomean([nv / ours for _, _, (ours, nv) in rows])
    without = _geomean([nv / (ours - x) for _, x, (ours, nv) in rows])
    return (f"Server mode's cold cost (a shape's server time less its separated time): the winner's exceeds best "
            f"NVIDIA's by {statistics.median(small):+.2f} µs (median of {len(small)} shapes below 2^36 FLOP; "
            f"{small[0]:+.2f} to {small[-1]:+.2f}). Without that excess server mode would read {without:.3f} over "
            f"{len(rows)} shapes, against {now:.3f} from the same times. Separated mode credits PDL's launch overlap "
            "(~0.9 µs), which a call after an idle gap cannot have.")


def previous_offline(table: Path) -> dict[str, float]:
    """The offline speedups vs AutoTuning-max of an older benchmark table (its first table's fourth column)."""
    out, seen = {}, set()
    for line in table.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) > 4 and all(c.isdigit() for c in cells[:3]) and (key := "x".join(cells[:3])) not in seen:
            seen.add(key)  # a later table's row is another regime's (a server figure once stood in for a marked one)
            if m := re.match(r"\d+\.\d+", cells[3]):  # a figure marked ‡ (its baselines moved) is still the figure
                out[key] = float(m.group())
    return out


def _evaluations(data: dict) -> str:
    """What one figure is: a single evaluation (older data) or the median of the shape's final evaluations."""
    most = max((e.get("evaluations", 1) for es in data["shapes"].values() for e in es.values()), default=1)
    return ("one evaluation" if most < 2 else
            f"the median of up to {most} evaluations (the one whose speedup against AutoTuning-max is the median)")


def _uuids(data: dict) -> str:
    """The physical GPUs the figures came from (older data files name one)."""
    uuids = sorted(data.get("gpu_uuids") or [data.get("gpu_uuid") or ""])
    return f"GPU{'s' if len(uuids) > 1 else ''} " + ", ".join(map(short_gpu_id, uuids))


def render(data: dict) -> str:
    shapes = sorted(data["shapes"], key=_flop)
    cell = lambda e, r: f"{e[r]['best']:.3f}" if "best" in e.get(r, {}) else (e.get(r, {}).get("status") or "—")
    lines = [f"# Built-in policy finals in every timing regime (fp32 accumulation)", "",
             f"- device: {data.get('gpu')} ({_uuids(data)}); measured "
             f"{data.get('date')} with code at commit {data.get('commit')}; table made by "
             f"`scripts/regimes_table.py` from `{data.get('data_file')}`",
             f"- campaign: {data.get('command')}",
             f"- each figure: {_evaluations(data)} of the shape's winner, speedup = mean over rounds of t_baseline / "
             "t_kernel against **best NVIDIA**: the fastest (lowest median) of torch.matmul, cuBLAS NN/TN, "
             "cuBLASLt heuristic NN/TN and cuBLASLt-AutoTuning NN/TN with its two runners-up, timed in the same "
             "rounds (power-steady timing times cuBLAS and AutoTuning only)",
             "- regimes (docs/evaluator.md, \"Timing regimes\"): back to back (calls queued with nothing between "
             "them), separated (an ordinary kernel after every call, its time removed), power-steady (an untimed "
             "lead-in of the same callable before each timed batch; only shapes whose baselines are power-limited), "
             "server (one call after a random idle gap). Every call sees its own operand set, refilled before "
             "every batch, and its output is spot-checked", ""]
    lines += ["| regime | shapes | geomean | won | min, shapes ≥ 2^36 FLOP | geomean, ≥ 2^36 | losses |",
              "|---|---|---|---|---|---|---|"]
    for r, label in REGIMES:
        s = summary(data, r)
        if not s["n"]:
            continue
        big_min = "—" if s["big_min"] is None else f"{s['big_min']:.3f}"
        big_geo = "—" if s["big_geomean"] is None else f"{s['big_geomean']:.3f}"
        lines.append(f"| {label} | {s['n']} | {s['geomean']:.3f} | {s['win_rate']:.0%} | {big_min} | {big_geo} | "
                     f"{', '.join(s['losses']) or 'none'} |")
    held = []
    for name, bound in TARGETS.items():
        # the power-steady regime covers the power-limited shapes only: it counts for the big-shape minimum
        regimes = OFFLINE if name == "big_min" else [r for r in OFFLINE if r != "steady"]
        vals = [v for r in regimes if summary(data, r)["n"] and (v := summary(data, r)[name]) is not None]
        ok = bool(vals) and min(vals) >= bound
        held.append(f"{name.replace('_', ' ')} ≥ {bound:g}: {'met' if ok else 'missed'} (worst offline regime "
                    f"{min(vals):.3f})" if vals else f"{name}: no figure")
    lines += ["", "Targets, each taken in its worst offline regime: " + "; ".join(held) + ".", ""]
    if headroom := cold_headroom(data):
        lines += [headroom, ""]
    # the excess cold cost's column only where the data has the times (older data files do not)
    cold = any(extra_cold_us(e) is not None for e in data["shapes"].values())
    lines += ["| M×N×K | log2 FLOP | " + " | ".join(label for _, label in REGIMES) + " | fastest NVIDIA baseline "
              "(back to back / separated / steady / server) | vs AutoTuning-max, separated |"
              + (" excess cold cost, µs |" if cold else ""),
              "|---|---|" + "---|" * len(REGIMES) + "---|---|" + ("---|" if cold else "")]
    for k in shapes:
        e = data["shapes"][k]
        fastest = " / ".join(e.get(r, {}).get("fastest", "—") for r, _ in REGIMES)
        at = e.get("separated", {}).get("autotune_max")
        x = extra_cold_us(e)
        lines.append(f"| {k.replace('x', '×')} | {math.log2(_flop(k)):.1f} | "
                     + " | ".join(cell(e, r) for r, _ in REGIMES)
                     + f" | {fastest} | {'—' if at is None else f'{at:.3f}'} |"
                     + ((" — |" if x is None else f" {x:+.2f} |") if cold else ""))
    if data.get("previous"):
        lines += ["", f"## Against the previous evaluator", "",
                  f"{data['previous']['what']}", "",
                  "| M×N×K | before: offline vs AutoTuning-max | now: same regime vs AutoTuning-max | now: vs best "
                  "NVIDIA | change |", "|---|---|---|---|---|"]
        for k in shapes:
            old = data["previous"]["offline"].get(k)
            e = data["shapes"][k]
            now = e.get("steady") or e.get("separated") or {}
            if old is None or "best" not in now:
                continue
            lines.append(f"| {k.replace('x', '×')} | {old:.3f} | {now['autotune_max']:.3f} | {now['best']:.3f} | "
                         f"{now['best'] / old - 1:+.1%} |")
    return "\n".join(lines) + "\n"


def code_commits(record: dict, given: str) -> str:
    """The code commits of a run's figures: those its record names, after `given` (--commit) where the record has
    none or its earlier starts recorded none."""
    from agent.campaign.db import recorded_commits

    known, early = recorded_commits(record)
    return ", ".join(([given] if given and (early or not known) else []) + known) or "(not recorded by the run)"


def record_day(record: dict) -> str:
    """The UTC day of a run record's last update (the finals are a campaign's last step), '' where it has none."""
    when = record.get("updated") or record.get("created")
    return time.strftime("%Y-%m-%d", time.gmtime(when)) if when else ""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", type=Path, action="append", default=[],
                    help="a campaign's run folder (else the figures come from --data); several: one table over their "
                         "shapes, a shape in several taken from the last named")
    ap.add_argument("--data", type=Path, required=True, help="the figures as JSON (written with --run)")
    ap.add_argument("--out", type=Path, required=True, help="the markdown table")
    ap.add_argument("--previous", type=Path, help="an older benchmark table to compare the offline figures with")
    ap.add_argument("--previous-what", default="", help="one line on what the older table measured")
    ap.add_argument("--command", default="", help="the campaign's command line, for the header")
    ap.add_argument("--date", default="", help="when the finals ran (default: the day of the run record's last update)")
    ap.add_argument("--commit", default="", help="the code the run measured with where its campaign.json does not "
                    "record it (runs, or their earlier starts, before 2026-11-28); put before the recorded ones")
    a = ap.parse_args()
    if a.run:
        for d in a.run:
            if not (d / "campaign.sqlite").is_file():
                print(f"regimes_table: {d} has no campaign.sqlite", file=sys.stderr)
                return 2
        from agent.campaign.db import run_record

        try:
            data = merged([figures(d) for d in a.run])
        except ValueError as e:
            print(f"regimes_table: {e}", file=sys.stderr)
            return 2
        records = [run_record(d) for d in a.run]
        data["commit"] = (code_commits(records[0], a.commit) if len(a.run) == 1 else
                          "; ".join(f"{code_commits(r, a.commit)} (run {d.name})" for d, r in zip(a.run, records)))
        data.update(date=a.date or max(map(record_day, records)), command=a.command, data_file=str(a.data))
        if a.previous:
            data["previous"] = {"what": a.previous_what, "offline": previous_offline(a.previous)}
        a.data.parent.mkdir(parents=True, exist_ok=True)
        a.data.write_text(json.dumps(data, indent=1) + "\n")
    elif a.data.is_file():
        data = json.loads(a.data.read_text())
    else:
        print(f"regimes_table: give --run, or --data naming an existing figures file ({a.data} is not one)",
              file=sys.stderr)
        return 2
    a.out.write_text(render(data))
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
