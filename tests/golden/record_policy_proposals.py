"""Record what the built-in policy proposes for a fixed set of shapes and histories (tests/test_policy_golden.py
checks that the current code proposes exactly this, byte for byte). Rerun only when a change to the policy's
behaviour is meant: `python3 tests/golden/record_policy_proposals.py`."""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from agent.families import canonical  # noqa: E402
from agent.policy import BuiltinPolicy, costmodel  # noqa: E402

OUT = Path(__file__).with_name("policy_proposals.json")
# launch-bound, output-bound small K, skinny long K, mid, one wave big, many waves big, and a non-Hopper target
CASES = [((64, 64, 256), "fp32", "sm_90a", "offline"), ((128, 4096, 128), "fp32", "sm_90a", "graph"),
         ((64, 2048, 4096), "fp16", "sm_90a", "offline"), ((1024, 1024, 1024), "fp32", "sm_90a", "offline"),
         ((1024, 4096, 8192), "fp32", "sm_90a", "offline"), ((8192, 4096, 16384), "fp32", "sm_90a", "offline"),
         ((8192, 4096, 16384), "fp16", "sm_80", "offline"), ((256, 2048, 16384), "fp32", "sm_90a", "offline")]
LABELS = ("memory-bound", "occupancy-limited", "launch-bound", None)


def _record(c, shape, arch, i, r) -> dict:
    """A history item in the loop's format, its speedup from the cost model (deterministic); every fifth fails to
    compile, every seventh is refused for accuracy, every third carries a bottleneck label, some spill."""
    status, reason = "ok", None
    if (i + r) % 5 == 0:
        status = "compile_error"
    elif (i + r) % 7 == 3:
        status, reason = "incorrect", "baseline_bounded_deviation: too far"
    speedup = None
    if status == "ok":
        speedup = BuiltinPolicy._baseline_guess_us(shape) / costmodel.estimate_us(c.family, c.params, shape, arch)
        speedup *= 1.0 + 0.03 * ((i * 7 + r * 3) % 5 - 2)
    label = LABELS[(i + 2 * r) % len(LABELS)]
    return {"family": c.family, "params": c.params, "status": status, "reason": reason, "speedup": speedup,
            "resources": {"spill_stores": 4} if i == 2 else {}, "ncu": None,
            "bottleneck": {"label": label} if label else None}


def proposals() -> list[dict]:
    out = []
    for shape, acc, arch, mode in CASES:
        pol = BuiltinPolicy(3)
        seeds = [{"family": c.family, "params": c.params, "shape": [shape[0] * 2, shape[1], shape[2]], "speedup": 0.9}
                 for c in BuiltinPolicy(5).propose((shape[0] * 2, shape[1], shape[2]), acc, arch, [], n=3, mode=mode)]
        history: list[dict] = []
        for r in range(3):
            batch = pol.propose(shape, acc, arch, history, n=8, seeds=seeds if r == 0 else (), mode=mode)
            out.append({"shape": list(shape), "acc": acc, "arch": arch, "mode": mode, "round": r,
                        "candidates": [{"family": c.family, "params": canonical(c.params), "name": c.name,
                                        "source_sha256": hashlib.sha256(c.source.encode()).hexdigest(),
                                        "rationale": c.rationale} for c in batch]})
            history.extend(_record(c, shape, arch, i, r) for i, c in enumerate(batch))
    return out


if __name__ == "__main__":
    OUT.write_text(json.dumps(proposals(), indent=1) + "\n")
    print(f"wrote {OUT}")
