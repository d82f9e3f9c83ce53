"""`export_dataset`: campaign runs -> training records in one format, split by shape, with a manifest."""
from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path
from typing import Any

from agent.dataset.formats import BUILDERS, FORMATS, PAIR_MIN_GAP, dedupe_key, positive, reply_for, round_trips
from agent.dataset.privacy import scrub_paths, scrub_record
from agent.dataset.prompts import ArchiveAsOf, has_facts, render
from agent.dataset.runs import DatasetError, open_run, resolve_run, step_groups
from agent.dataset.splits import SPLITS, VALIDATION_FRACTION, output_paths, split_of_shapes, write_outputs
from agent.secrets import scrub
from evaluator.contract import ACCUMULATORS

# The columns TRL's trainers read, per format (everything else in a record is metadata).
TRAINER_COLUMNS = {"chat": ["messages"], "preference": ["prompt", "chosen", "rejected"],
                   "reward": ["prompt", "completion"]}


class NothingToExport(DatasetError):
    """The runs hold no record that passes the filters (exit code 1)."""


def _check_options(fmt: str, acc: str | None, min_speedup: float | None, validation_fraction: float,
                   out: Path) -> dict[str, Path]:
    if fmt not in FORMATS:
        raise DatasetError(f"format {fmt!r}: choose one of {', '.join(FORMATS)}")
    if acc is not None and acc not in ACCUMULATORS:
        raise DatasetError(f"acc {acc!r}: choose one of {', '.join(ACCUMULATORS)}")
    if min_speedup is not None and not min_speedup > 0:
        raise DatasetError(f"--min-speedup must be positive, got {min_speedup}")
    if not 0 <= validation_fraction < 1:
        raise DatasetError(f"--validation-fraction must be in [0, 1), got {validation_fraction}")
    if not out.name.endswith(".jsonl"):
        raise DatasetError(f"--out {out}: name the file NAME.jsonl (NAME.train.jsonl, NAME.validation.jsonl and "
                           "NAME.manifest.json are written beside it)")
    paths = output_paths(out)
    there = [str(p) for p in paths.values() if p.exists()]
    if there:
        raise DatasetError(f"{', '.join(there)} exist(s) already; remove them or choose another --out")
    if out.parent.exists() and not out.parent.is_dir():
        raise DatasetError(f"--out {out}: {out.parent} is not a folder")
    return paths


def _digest(hashes) -> str:
    return hashlib.sha256("\n".join(sorted(hashes)).encode()).hexdigest()


def export_dataset(runs: list[str], out: str | Path, *, fmt: str = "chat", min_speedup: float | None = None,
                   acc: str | None = None, dedupe: bool = False, runs_dir: str | Path = "runs",
                   validation_fraction: float = VALIDATION_FRACTION) -> dict[str, Any]:
    """Write the records of `runs` (names under runs_dir, or run folders) and return the manifest."""
    out = Path(out)
    paths = _check_options(fmt, acc, min_speedup, validation_fraction, out)
    if not runs:
        raise DatasetError("name at least one run")
    dirs = [resolve_run(r, runs_dir) for r in runs]
    seen_dirs = [d.resolve() for d in dirs]
    if len(set(seen_dirs)) != len(seen_dirs):
        raise DatasetError("a run is named twice")
    records: list[dict[str, Any]] = []
    skipped: Counter[str] = Counter()
    run_docs = []
    names: set[str] = set()
    for d in dirs:
        run = open_run(d)
        if run.name in names:
            raise DatasetError(f"two runs are called {run.name!r}; records name their run, so export them apart")
        names.add(run.name)
        groups = step_groups(run)
        asof = ArchiveAsOf(run.archive)
        prompts: Counter[str] = Counter()
        no_facts = 0
        try:
            for g in groups:
                if acc is not None and g.acc != acc:
                    skipped[f"accumulator is not {acc}"] += len(g.kernels)
                    continue
                kernels = []
                for v in g.kernels:
                    try:
                        src = scrub_paths(scrub(v.read_source()))
                    except OSError:
                        skipped["kernel file missing from the run's kernels/ folder"] += 1
                        continue
                    if not round_trips(reply_for(src), src):
                        skipped["the parser would not give the kernel back from its reply"] += 1
                        continue
                    if fmt == "chat" and not positive(v, min_speedup):
                        skipped["refused by the evaluator" if v.status != "ok" else "below --min-speedup"] += 1
                        continue
                    kernels.append((v, src, run.finals.get((v.gpu, v.acc, tuple(v.shape), v.source_hash), {})))
                if not kernels:
                    continue
                system, user, how = render(g, asof)
                prompts[how] += 1
                no_facts += not has_facts(g)
                head = {"run": run.name, "gpu": g.gpu, "acc": g.acc, "shape": list(g.shape), "step": g.step,
                        "prompt_from": how}
                records += [scrub_record(r) for r in BUILDERS[fmt](head, system, user, kernels, min_speedup)]
        finally:
            asof.close()
        model = run.meta.get("model") or {}
        variants = [v for g in groups for v in g.kernels]
        run_docs.append({"name": run.name, "gpus": sorted({g.gpu for g in groups}),
                         "accs": sorted({g.acc for g in groups}), "mode": run.meta.get("mode"),
                         "model": {"backend": model.get("backend"), "model_name": model.get("model_name")},
                         "proposers": dict(Counter(v.proposer for v in variants)), "variants": len(variants),
                         "variants_sha256": _digest(v.source_hash for v in variants), "prompt_groups": dict(prompts),
                         "prompts_without_gpu_facts": no_facts, "transcript": bool(run.events)})
    if dedupe:
        kept, keys = [], set()
        for r in records:
            k = dedupe_key(fmt, r)
            if k in keys:
                skipped["duplicate (--dedupe)"] += 1
                continue
            keys.add(k)
            kept.append(r)
        records = kept
    if not records:
        why = "; ".join(f"{n} {reason}" for reason, n in skipped.most_common()) or "the runs hold no kernels"
        raise NothingToExport(f"no records to export ({why})")
    split = split_of_shapes([r["shape"] for r in records], validation_fraction)
    by_split = {s: [] for s in SPLITS}
    for r in records:
        by_split[split[tuple(r["shape"])]].append(r)
    side = (lambda r: r["chosen_kernel"]) if fmt == "preference" else (lambda r: r)
    manifest = {
        "record_format": fmt, "trainer_columns": TRAINER_COLUMNS[fmt],
        "options": {"min_speedup": min_speedup, "acc": acc, "dedupe": dedupe,
                    "validation_fraction": validation_fraction, "pair_min_gap": PAIR_MIN_GAP},
        "shapes": {s: sorted(["x".join(map(str, sh)) for sh, sp in split.items() if sp == s]) for s in SPLITS},
        "counts": {"records": len(records), "by_split": {s: len(by_split[s]) for s in SPLITS},
                   "by_proposer": dict(Counter(side(r)["proposer"] for r in records)),
                   "by_status": dict(Counter(side(r).get("status", "ok") for r in records)),
                   "skipped": dict(skipped)},
        "runs": run_docs,
    }
    paths[SPLITS[0]].parent.mkdir(parents=True, exist_ok=True)
    return write_outputs(paths, by_split, manifest, only=("messages",) if fmt == "chat" else None)
