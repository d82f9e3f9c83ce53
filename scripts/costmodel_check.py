#!/usr/bin/env python3
"""How well the built-in policy's cost model ranks the candidates a run measured (no GPU needed).

    python3 scripts/costmodel_check.py runs/RUN [--arch sm_90a] [--json OUT]
    python3 scripts/costmodel_check.py docs/benchmarks/data/PROBE.json [--mode back-to-back]

Per (GPU, acc, shape): the candidates that passed every check and carry family params, Spearman's rank correlation
between `costmodel.estimate_us` (the current code's) and the measured time (the search's median µs per call), and
how the candidate that the cost model ranks first measured against the fastest one. A correlation near zero on
near-parity candidates means the search, not the model, picked the winner there (docs/design/builtin_policy.md).
A probe file (`scripts/sweep_configs.py --together`'s probe.json) ranks the players of each GPU and shape in one
timing mode, their time taken as 1 / (speedup over best NVIDIA in the same rounds).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def ranks(xs: list[float]) -> list[float]:
    """1-based ranks, ties sharing their mean rank."""
    order = sorted(range(len(xs)), key=xs.__getitem__)
    out = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for t in order[i:j + 1]:
            out[t] = (i + j) / 2 + 1
        i = j + 1
    return out


def spearman(x: list[float], y: list[float]) -> float | None:
    if len(x) < 3:
        return None
    rx, ry = ranks(x), ranks(y)
    mx, my = statistics.fmean(rx), statistics.fmean(ry)
    num = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    den = (sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry)) ** 0.5
    return num / den if den else None


def check(run_dir: Path, arch: str) -> list[dict]:
    from agent.campaign.archive import Archive
    from agent.policy.costmodel import estimate_us

    db = Path(run_dir) / "archive.sqlite"
    if not db.is_file():
        raise SystemExit(f"no archive at {db}")
    archive = Archive(db)
    rows = []
    for key in archive.shapes():
        pairs, skipped = [], 0
        for v in archive.history(key.gpu, key.acc, key.shape):
            t = v.result.candidate
            if v.status != "ok" or not v.family or v.params is None or t is None:
                continue
            try:
                pairs.append((estimate_us(v.family, v.params, tuple(key.shape), arch), t.median_us, v.family))
            except (KeyError, ValueError):  # params of a family or knob the current cost model does not know
                skipped += 1
        if pairs:
            rows.append(_row(key.gpu, key.acc, key.shape, pairs, skipped))
    return rows


def _row(gpu: str, acc: str, shape, pairs: list[tuple[float, float, str]], skipped: int) -> dict:
    """One shape's row from its (model time, measured time, family) triples."""
    fastest = min(p[1] for p in pairs)
    model_first = min(pairs, key=lambda p: p[0])
    return {"gpu": gpu, "acc": acc, "shape": list(shape), "candidates": len(pairs), "skipped": skipped,
            "spearman": spearman([p[0] for p in pairs], [p[1] for p in pairs]),
            "model_first_vs_fastest": model_first[1] / fastest, "model_first_family": model_first[2]}


def probe_rows(path: Path) -> list[dict]:
    """The rows of a probe file, or SystemExit saying why it is none."""
    try:
        results = json.loads(Path(path).read_text())["results"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SystemExit(f"{path} is not a probe file (JSON with a 'results' list): {e}")
    if not isinstance(results, list) or not all(isinstance(r, dict) for r in results):
        # the older summaries keyed by shape and mode hold no configs
        raise SystemExit(f"{path} is not a probe file: its 'results' is not a list of rows (family, params, shape, "
                         "mode, vs_best_nvidia), as scripts/sweep_configs.py --together writes")
    return results


def check_probe(path: Path, arch: str, mode: str) -> list[dict]:
    from agent.policy.costmodel import estimate_us

    results = probe_rows(path)
    groups: dict[tuple, list[tuple[float, float, str]]] = {}
    skipped: dict[tuple, int] = {}
    for r in results:
        if r.get("mode") != mode or r.get("status") != "ok" or not r.get("vs_best_nvidia"):
            continue
        key = (r.get("gpu_uuid", ""), r["params"].get("acc", "fp32"), tuple(r["shape"]))
        try:
            model = estimate_us(r["family"], r["params"], key[2], arch)
        except (KeyError, ValueError):  # a family or knob the current cost model does not know
            skipped[key] = skipped.get(key, 0) + 1
            continue
        groups.setdefault(key, []).append((model, 1.0 / r["vs_best_nvidia"], r["family"]))
    return [_row(gpu, acc, shape, pairs, skipped.get((gpu, acc, shape), 0))
            for (gpu, acc, shape), pairs in groups.items()]


def summary(rows: list[dict]) -> list[str]:
    """Means over the shapes, and over those >= 2^36 FLOP (the power-limited ones, where candidates sit within a few
    percent of one another): the figures a change to the model is judged by."""
    out = []
    for label, keep in (("all shapes", lambda r: True),
                        ("shapes >= 2^36 FLOP", lambda r: 2 * r["shape"][0] * r["shape"][1] * r["shape"][2] >= 2 ** 36)):
        sel = [r for r in rows if keep(r)]
        rhos = [r["spearman"] for r in sel if r["spearman"] is not None]
        if not sel:
            continue
        rho = f"{statistics.fmean(rhos):+.2f}" if rhos else "-"
        first = statistics.fmean(r["model_first_vs_fastest"] for r in sel)
        out.append(f"{label} ({len(sel)}): mean Spearman {rho}, model's first pick on average {first:.3f} of the "
                   "fastest's time")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run_dir", type=Path, help="a run folder, or a probe file (*.json)")
    ap.add_argument("--arch", default="sm_90a", help="the architecture the run's GPU builds for (default sm_90a)")
    ap.add_argument("--mode", default="back-to-back", help="a probe file's timing mode to rank (default back-to-back)")
    ap.add_argument("--json", type=Path, help="also write the rows as JSON here")
    a = ap.parse_args()
    rows = check_probe(a.run_dir, a.arch, a.mode) if a.run_dir.suffix == ".json" else check(a.run_dir, a.arch)
    print("| shape | acc | candidates | Spearman (model, measured) | model's first pick, time / fastest |")
    print("|---|---|---|---|---|")
    for r in rows:
        rho = "-" if r["spearman"] is None else f"{r['spearman']:+.2f}"
        print(f"| {'x'.join(map(str, r['shape']))} | {r['acc']} | {r['candidates']} | {rho} | "
              f"{r['model_first_vs_fastest']:.3f} ({r['model_first_family']}) |")
    print()
    for line in summary(rows):
        print(line)
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
