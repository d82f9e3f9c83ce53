"""`cudal2 archive export DIR` / `cudal2 archive import DIR`: contract kernels in and out of the archive.

An export is a folder of plain contract `.cu` files and a `manifest.json` describing each: shape, accumulator, GPU
model, architecture, the speedups it was measured at (per baseline, per mode), its correctness checks and where it
came from. Any harness can time the files; `evaluator.dispatch.Dispatcher` uses the folder directly.

An import never trusts what comes with the kernels: every file is evaluated again here, on this GPU, and archived
with the result measured here. The manifest only says which shape and accumulator a file is for (a `--shape`
flag does that for bare `.cu` files); its numbers are shown next to the measured ones and otherwise ignored.
"""
from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.shapes import shape_dir
from evaluator.contract import ACCUMULATORS, MAX_SOURCE_BYTES, SIGNATURE, check_shape
from evaluator.record import BEST_NVIDIA, NOT_ABOUT_THE_KERNEL

FORMAT = "cuda-l2-archive"
VERSION = 1
MANIFEST = "manifest.json"
BASELINE_NAMES = ["torch", "cublas-NN", "cublas-TN", "cublas-max", "cublaslt-heuristic-NN",
                  "cublaslt-heuristic-TN", "cublaslt-heuristic-max", "cublaslt-autotune-NN", "cublaslt-autotune-TN",
                  "cublaslt-autotune-max", BEST_NVIDIA]


class ArchiveIOError(ValueError):
    pass


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower() or "gpu"


def _speedups(res) -> dict[str, float]:
    out = {}
    for name in BASELINE_NAMES:
        v = res.speedup(name)
        if v is not None:
            out[name] = round(float(v), 6)
    return out


def _entry(v, res_by_mode: dict[str, Any], file: str) -> dict[str, Any]:
    r = v.result
    modes = {m: _speedups(x) for m, x in res_by_mode.items() if x is not None and x.ok}
    # `speedups` is what dispatch decides on: offline numbers where measured, else the search's own.
    main = modes.get("offline") or modes.get(r.mode) or _speedups(r)
    return {
        "file": file, "shape": list(v.shape), "acc": v.acc, "gpu": v.gpu,
        "arch": r.compile.arch if r.compile else None,
        "nvcc": r.compile.nvcc_version if r.compile else None,
        "source_hash": v.source_hash, "code_length": v.code_length,
        "status": v.status, "mode": r.mode, "profile": r.profile,
        "speedups": main, "speedups_by_mode": modes,
        "timings_us": {"candidate": r.candidate.median_us if r.candidate else None,
                       **{n: t.median_us for n, t in r.baselines.items()}},
        "checks": [{"name": c.name, "passed": c.passed, "detail": c.detail} for c in r.checks],
        "max_abs_diff": r.max_abs_diff(),
        "proposer": v.proposer, "family": v.family, "params": v.params, "run": v.run, "variant_id": v.id,
        "measured_at": r.created_at,
    }


def export_archive(db: Path, out_dir: Path, *, best_only: bool = True, run_dir: Path | None = None,
                   baseline: str = "cublaslt-autotune-max") -> dict[str, Any]:
    """Write the best correct kernel per (gpu, acc, shape) (or every correct one) and manifest.json."""
    from agent.campaign.archive import Archive
    from agent.secrets import scrub

    if not Path(db).is_file():
        raise ArchiveIOError(f"no archive at {db}")
    archive = Archive(db)
    finals: dict[tuple, dict[str, Any]] = {}
    winners: dict[tuple, dict[str, int]] = {}
    if run_dir is not None and (run_dir / "campaign.sqlite").is_file():
        from agent.campaign.db import CampaignDB
        from agent.report import median_measurement

        repeats: dict[tuple, list] = {}
        cdb = CampaignDB(run_dir / "campaign.sqlite")
        winners = cdb.mode_winners()
        for f in cdb.finals():
            repeats.setdefault((f["gpu"], f["acc"], tuple(f["shape"]), f["source_hash"], f["mode"]), []).append(
                f["result"])
        for (*key, mode), results in repeats.items():
            # a failed repeat is exported as it is (it must not hide behind passing ones); else the median one
            failed = [r for r in results if not r.ok]
            finals.setdefault(tuple(key), {})[mode] = failed[0] if failed else median_measurement(results)[0]
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise ArchiveIOError(f"{out_dir} exists and is not a folder")
    if out_dir.exists() and any(out_dir.iterdir()) and not (out_dir / MANIFEST).is_file():
        raise ArchiveIOError(f"{out_dir} exists and is not an earlier export (no {MANIFEST}); choose an empty folder")
    try:
        (out_dir / "kernels").mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ArchiveIOError(f"cannot create {out_dir / 'kernels'}: {e.strerror or e}") from None
    entries = []
    for key in archive.shapes():
        ranked = archive.ranked(key.gpu, key.acc, key.shape, baseline)
        won = winners.get((key.gpu, key.acc, tuple(key.shape)), {})
        chosen = ranked if not best_only else ranked[:1] + [
            v for i in dict.fromkeys(won.values()) if ranked and i != ranked[0].id and (v := archive.get(i))]
        for v in chosen:
            # a final mode's own winner (another leader) is exported beside the best, named for its modes
            modes = sorted(m for m, i in won.items() if i == v.id)
            tag = f"_{v.id}" if not best_only else "" if v is chosen[0] else "_" + "-".join(modes)
            name = f"{shape_dir(v.shape)}_{v.acc}_{_slug(v.gpu)}{tag}.cu"
            rel = f"kernels/{name}"
            (out_dir / rel).write_text(v.read_source())
            by_mode = dict(finals.get((v.gpu, v.acc, tuple(v.shape), v.source_hash), {}))
            by_mode.setdefault(v.result.mode, v.result)
            entries.append({**_entry(v, by_mode, rel), "winner_in_modes": modes})
    manifest = {"format": FORMAT, "version": VERSION, "contract": SIGNATURE, "exported_at": time.time(),
                "source_archive": str(Path(db).resolve()), "selection": f"best by {baseline}" if best_only else
                "every correct variant", "kernels": entries}
    tmp = out_dir / (MANIFEST + ".tmp")
    tmp.write_text(scrub(json.dumps(manifest, indent=2)))
    os.replace(tmp, out_dir / MANIFEST)
    return manifest


# ---------------------------------------------------------------- import

@dataclass
class ImportItem:
    path: Path
    source: str
    shape: tuple[int, int, int]
    acc: str
    claimed: dict[str, Any] = field(default_factory=dict)  # the manifest's entry, shown, never trusted


_STEM_SHAPE = re.compile(r"^(\d+)[_x](\d+)[_x](\d+)(?:\D|$)")


def _read_source(path: Path) -> str:
    if path.stat().st_size > MAX_SOURCE_BYTES:
        raise ArchiveIOError(f"{path}: {path.stat().st_size} bytes, over the {MAX_SOURCE_BYTES}-byte source limit")
    try:
        text = path.read_text()
    except UnicodeDecodeError:
        raise ArchiveIOError(f"{path}: not a text file") from None
    if not re.search(r"\bhgemm\s*\(", text):
        raise ArchiveIOError(f"{path}: does not define the contract function hgemm ({SIGNATURE})")
    return text


def _proposed_kernels(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """`cudal2 propose` writes one shape and accumulator for all its candidates: spread them over the entries."""
    if "candidates" not in doc:
        raise KeyError("neither 'kernels' nor 'candidates'")
    return [{**c, "shape": doc["shape"], "acc": doc.get("acc", "fp32"), "proposer": c.get("model")}
            for c in doc["candidates"]]


def plan_import(src_dir: Path, *, shape: tuple[int, int, int] | None = None,
                acc: str | None = None) -> list[ImportItem]:
    """What to import from DIR: manifest entries, plus bare .cu files whose shape comes from --shape or from a
    file name that starts with M_N_K. Everything wrong is reported at once, by file."""
    src_dir = Path(src_dir)
    if not src_dir.is_dir():
        raise ArchiveIOError(f"{src_dir} is not a folder")
    if acc is not None and acc not in ACCUMULATORS:
        raise ArchiveIOError(f"acc must be one of {ACCUMULATORS}")
    items, problems, described = [], [], set()
    mpath = src_dir / MANIFEST
    if mpath.is_file():
        try:
            doc = json.loads(mpath.read_text())
            kernels = doc["kernels"] if "kernels" in doc else _proposed_kernels(doc)
            if not isinstance(kernels, list):
                raise TypeError("'kernels' is not a list")
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise ArchiveIOError(f"{mpath}: not a manifest of `cudal2 archive export` or `cudal2 propose` "
                                 f"({type(e).__name__}: {e})") from None
        root = src_dir.resolve()
        for i, k in enumerate(kernels):
            try:
                p = (src_dir / k["file"]).resolve()
                if root not in p.parents:
                    raise ArchiveIOError(f"file {k['file']!r} points outside {src_dir}")
                described.add(p)
                a = acc or k.get("acc", "fp32")
                if a not in ACCUMULATORS:
                    raise ArchiveIOError(f"acc {a!r} is not one of {ACCUMULATORS}")
                items.append(ImportItem(p, _read_source(p), check_shape(k["shape"]), a, claimed=k))
            except (ArchiveIOError, ValueError, KeyError, TypeError, OSError) as e:
                problems.append(f"{mpath}: kernels[{i}]: {e}")
    for p in sorted(src_dir.rglob("*.cu")):
        if p.resolve() in described:
            continue
        m = _STEM_SHAPE.match(p.stem)
        shp = shape or (tuple(int(x) for x in m.groups()) if m else None)
        if shp is None:
            problems.append(f"{p}: no shape for it: not in {MANIFEST}, and its name does not start with M_N_K; "
                            "pass --shape M N K")
            continue
        try:
            items.append(ImportItem(p.resolve(), _read_source(p), check_shape(shp), acc or "fp32"))
        except (ArchiveIOError, ValueError, OSError) as e:
            problems.append(f"{p}: {e}")
    if problems:
        raise ArchiveIOError("cannot import:\n  " + "\n  ".join(problems))
    if not items:
        raise ArchiveIOError(f"no kernels in {src_dir} (no {MANIFEST} entries, no .cu files)")
    return items


def import_archive(items: list[ImportItem], seam, db: Path, *, run: str, mode: str = "offline",
                   profile: str = "quick", global_db: Path | None = None) -> list[str]:
    """Evaluate each kernel here and archive the result measured here; returns one line per kernel."""
    from agent.campaign.archive import Archive, source_hash

    archive = Archive(db)
    gdb = Archive(global_db) if global_db else None
    lines = []
    for it in items:
        h = source_hash(it.source)
        where = f"{it.path.name} {'x'.join(map(str, it.shape))} {it.acc}"
        hit = archive.find_by_hash(seam.gpu_name, it.acc, it.shape, h)
        if hit is not None:
            lines.append(f"{where}: already archived as #{hit.id} ({hit.status}); not evaluated again")
            continue
        res = seam.evaluate(it.source, it.shape, acc=it.acc, mode=mode, profile=profile)
        if res.status in NOT_ABOUT_THE_KERNEL:
            lines.append(f"{where}: not archived, the evaluation failed: {res.status}: {res.reason}")
            continue
        proposer = f"import:{it.claimed.get('proposer') or it.path.parent.name}"
        vid = archive.add(run, seam.gpu_name, it.acc, it.shape, it.source, proposer, res,
                          family=it.claimed.get("family"), params=it.claimed.get("params"))
        if gdb is not None and gdb.find_by_hash(seam.gpu_name, it.acc, it.shape, h) is None:
            gdb.add(run, seam.gpu_name, it.acc, it.shape, it.source, proposer, res, family=it.claimed.get("family"),
                    params=it.claimed.get("params"))
        sp = res.speedup("cublaslt-autotune-max") if res.ok else None
        claimed = (it.claimed.get("speedups") or {}).get("cublaslt-autotune-max")
        msg = f"{where}: #{vid} {res.status}"
        if sp is not None:
            msg += f", {sp:.3f}x vs cublaslt-autotune-max measured here"
        if claimed is not None:
            msg += f" (the manifest claimed {claimed:.3f}x on {it.claimed.get('gpu', '?')})"
        if not res.ok and res.reason:
            msg += f": {res.reason[:200]}"
        lines.append(msg)
    return lines
