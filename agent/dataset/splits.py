"""Train and validation splits by shape, the output files and their manifest.

A shape's split follows from its own hash alone, so it stays in the same split however many runs or shapes a later
export adds (a record of a validation shape never leaks into a later train split). With few shapes the hash may put
none in validation, or none in train: then the shape with the lowest (highest) hash moves over, so that both hold
at least one shape whenever there are two.
"""
from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

from agent.files import replace_text

SPLITS = ("train", "validation")
VALIDATION_FRACTION = 0.1
FORMAT = "cuda-l2-dataset"
VERSION = 1


def _unit(shape) -> float:
    h = hashlib.sha256("x".join(str(int(x)) for x in shape).encode()).hexdigest()
    return int(h[:12], 16) / 16**12


def split_of_shapes(shapes, fraction: float = VALIDATION_FRACTION) -> dict[tuple[int, int, int], str]:
    shapes = sorted({tuple(int(x) for x in s) for s in shapes}, key=_unit)
    out = {s: ("validation" if _unit(s) < fraction else "train") for s in shapes}
    if len(shapes) >= 2:
        if "validation" not in out.values():
            out[shapes[0]] = "validation"
        if "train" not in out.values():
            out[shapes[-1]] = "train"
    return out


def output_paths(out: Path) -> dict[str, Path]:
    """--out DIR/NAME.jsonl -> DIR/NAME.train.jsonl, DIR/NAME.validation.jsonl, DIR/NAME.manifest.json, and the
    splits' metadata sidecars DIR/NAME.train.meta.jsonl, DIR/NAME.validation.meta.jsonl (chat format)."""
    stem = out.name[: -len(".jsonl")] if out.name.endswith(".jsonl") else out.name
    paths = {s: out.with_name(f"{stem}.{s}.jsonl") for s in SPLITS}
    paths.update({f"{s}.meta": out.with_name(f"{stem}.{s}.meta.jsonl") for s in SPLITS})
    paths["manifest"] = out.with_name(f"{stem}.manifest.json")
    return paths


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _jsonl(records: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in records)


def write_outputs(paths: dict[str, Path], records: dict[str, list[dict[str, Any]]], manifest: dict[str, Any],
                  only: tuple[str, ...] | None = None) -> dict[str, Any]:
    """The two splits (JSON Lines), then the manifest with their counts and hashes. With `only`, a split file holds
    just those keys of each record (the OpenAI fine-tuning upload refuses any other), and the rest of each record
    goes to the split's .meta.jsonl, line for line."""
    files = {}
    for split in SPLITS:
        recs = records[split]
        main = [{k: r[k] for k in only} for r in recs] if only else recs
        replace_text(paths[split], _jsonl(main))
        files[split] = {"file": paths[split].name, "records": len(recs), "sha256": sha256_file(paths[split])}
        if only:
            meta = paths[f"{split}.meta"]
            replace_text(meta, _jsonl([{k: v for k, v in r.items() if k not in only} for r in recs]))
            files[split].update(meta_file=meta.name, meta_sha256=sha256_file(meta))
    manifest = {"format": FORMAT, "version": VERSION, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "files": files, **manifest}
    replace_text(paths["manifest"], json.dumps(manifest, indent=2, sort_keys=False) + "\n")
    return manifest
