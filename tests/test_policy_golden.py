"""The built-in policy proposes exactly what it proposed when tests/golden/policy_proposals.json was recorded: the
same kernels (their sources' hashes), names and rationales, in the same order, for a fixed set of shapes, histories
and seeds. A refactor of the policy, the families or the cost model must leave this unchanged."""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "golden"))
from record_policy_proposals import OUT, proposals  # noqa: E402


def test_the_policy_proposes_what_it_proposed_when_recorded():
    want = json.loads(Path(OUT).read_text())
    got = proposals()
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g == w, (g["shape"], g["acc"], g["arch"], g["round"])
