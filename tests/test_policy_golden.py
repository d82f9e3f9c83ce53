"""The built-in policy proposes exactly what it proposed when tests/golden/policy_proposals.json was recorded: the
same kernels (their sources' hashes), names and rationales, in the same order, for a fixed set of shapes, histories
and seeds. A refactor of the policy, the families or the cost model must leave this unchanged."""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "golden"))
from record_policy_proposals import OUT, proposals  # noqa: E402


def _without_sources(batch: dict) -> dict:
    return {**batch, "candidates": [{k: v for k, v in c.items() if k != "source_sha256"} for c in batch["candidates"]]}


def test_the_policy_proposes_what_it_proposed_when_recorded():
    want = json.loads(Path(OUT).read_text())
    got = proposals()
    assert len(got) == len(want)
    for g, w in zip(got, want):
        where = (g["shape"], g["acc"], g["arch"], g["round"])
        assert _without_sources(g) == _without_sources(w), where
        changed = sorted({c["family"] for c, d in zip(g["candidates"], w["candidates"])
                          if c["source_sha256"] != d["source_sha256"]})
        # the same configs rendered to other text: a template changed (a comment too), so every kernel of these
        # families has a new hash, and the archive and the build cache see them as new kernels
        assert not changed, f"{where}: the same configs render to other sources in {changed}"
