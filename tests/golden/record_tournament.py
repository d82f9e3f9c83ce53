#!/usr/bin/env python3
"""Records tests/golden/tournament_result.json on a GPU machine: one evaluation of the WMMA reference kernel with
two rivals timed in its rounds (another build of itself, and the naive reference). The CPU tests replay it as the
answer of a seam asked for a tournament (tests/test_campaign.py).

    python3 tests/golden/record_tournament.py OUT.json
"""
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from evaluator.api import evaluate  # noqa: E402

kernels = REPO / "tests" / "kernels"
wmma = (kernels / "reference_wmma.cu").read_text()
res = evaluate(wmma, (1024, 1024, 1024), rivals={"twin": wmma + "\n// another build\n",
                                                 "naive": (kernels / "reference_naive.cu").read_text()})
if not res.ok or set(res.rivals) != {"twin", "naive"}:
    sys.exit(f"not recorded: {res.status}: {res.reason[:500]}")
Path(sys.argv[1]).write_text(json.dumps(res.to_dict(), indent=1) + "\n")
print(json.dumps(res.head_to_head()))
