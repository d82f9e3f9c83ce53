"""Write proposed candidates to a folder: one contract `.cu` per candidate plus `candidates.json` (what the
`cudal2 propose` command prints and what `cudal2 eval --compile-only` takes)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from .builtin import BuiltinPolicy, Candidate


def write_candidates(candidates: Sequence[Candidate], out_dir: str | Path, *, shape=None, acc: str | None = None,
                     arch: str | None = None) -> list[Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths, index = [], []
    for c in candidates:
        p = out / f"{c.name}.cu"
        p.write_text(c.source)
        paths.append(p)
        index.append({"name": c.name, "file": p.name, "family": c.family, "params": c.params,
                      "rationale": c.rationale, "predicted_speedup": c.predicted_speedup})
    meta: dict[str, Any] = {"shape": list(shape) if shape else None, "acc": acc, "arch": arch, "candidates": index}
    (out / "candidates.json").write_text(json.dumps(meta, indent=1))
    return paths


def propose_to_dir(shape, out_dir: str | Path, *, acc: str = "fp32", arch: str = "sm_90a", n: int = 8,
                   seed: int = 0, history: Sequence[dict] = (), seeds: Sequence[dict] = ()) -> list[Path]:
    """One call for the CLI: propose with the built-in policy and write the sources."""
    cands = BuiltinPolicy(seed).propose(shape, acc, arch, history, n=n, seeds=seeds)
    return write_candidates(cands, out_dir, shape=shape, acc=acc, arch=arch)
