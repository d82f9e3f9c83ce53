"""The three record formats, built from one step group's prompt and kernels.

- chat: `messages` [system, user, assistant] in the OpenAI fine-tuning format (TRL's SFTTrainer reads the same
  column); one record per correct kernel at or above --min-speedup. The split files hold `messages` alone, as an
  OpenAI upload requires; each record's other fields go to a .meta.jsonl beside it, line for line.
- preference: `prompt` [system, user], `chosen` and `rejected` [assistant] (TRL's DPOTrainer, conversational): a
  correct kernel against a kernel of the same prompt that was measurably slower, or that the evaluator refused.
- reward: `prompt` [system, user] and `completion` [assistant] (TRL's prompt-completion form, as GRPO reads it) with
  the kernel's verified reward: speedups per baseline and per timing mode, the checks, the reason for a refusal.

The assistant message is the kernel as one ```cuda block, the first form the system prompt asks for; every one is
put through the loop's reply parser before it is written, and must give back the archived kernel.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any

from agent.campaign.archive import Variant
from agent.campaign.archive_io import BASELINE_NAMES
from agent.proposers.parse import parse_reply
from evaluator.contract import MODES

FORMATS = ("chat", "preference", "reward")
# Two evaluations of one kernel differ by 1-4% with the clock of the moment (agent/campaign/driver.py, tournaments): a
# pair is only a preference when the chosen kernel measured at least this much faster.
PAIR_MIN_GAP = 0.03


def reply_for(source: str) -> str:
    return "```cuda\n" + source.strip("\n") + "\n```"


def round_trips(reply: str, source: str) -> bool:
    parsed = parse_reply(reply, None)
    return parsed.ok and parsed.source == source.strip("\n") + "\n"


def _speedup_table(result) -> dict[str, float | None]:
    return {b: (round(float(s), 6) if (s := result.speedup(b)) is not None else None) for b in BASELINE_NAMES}


def speedups_by_mode(v: Variant, finals: dict[str, list]) -> dict[str, dict[str, float | None] | None]:
    """The search's measurement in its own mode; in each mode the winner was measured again at the end, the median
    of those evaluations (agent.report's rule) where all passed."""
    from agent.report import median_measurement

    out: dict[str, dict[str, float | None] | None] = {m: None for m in MODES}
    if v.result.ok:
        out[v.result.mode] = _speedup_table(v.result)
    for mode, results in finals.items():
        if results and all(r.ok for r in results) and mode in out:
            out[mode] = _speedup_table(median_measurement(results)[0])
    return out


def kernel_fields(v: Variant, finals: dict[str, list]) -> dict[str, Any]:
    r = v.result
    return {
        "variant_id": v.id, "proposer": v.proposer, "family": v.family,
        "params": json.dumps(v.params, sort_keys=True) if v.params is not None else None,
        "source_hash": v.source_hash, "status": v.status, "correct": v.status == "ok", "reason": v.reason or "",
        "speedup": round(v.speedup, 6) if v.speedup is not None else None,
        "reward": round(float(v.reward), 6),
        "speedups": _speedup_table(r) if r.ok else {b: None for b in BASELINE_NAMES},
        "speedups_by_mode": speedups_by_mode(v, finals),
        "timing_mode": r.mode,
        "checks": [{"name": c.name, "passed": bool(c.passed), "detail": c.detail or ""} for c in r.checks],
        "max_abs_diff": r.max_abs_diff(),
    }


def positive(v: Variant, min_speedup: float | None) -> bool:
    return v.status == "ok" and v.speedup is not None and (min_speedup is None or v.speedup >= min_speedup)


def _record_id(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:20]


def chat_records(head: dict[str, Any], system: str, user: str, kernels: list[tuple[Variant, str, dict]],
                 min_speedup: float | None) -> list[dict[str, Any]]:
    out = []
    for v, source, finals in kernels:
        if not positive(v, min_speedup):
            continue
        k = kernel_fields(v, finals)
        out.append({"id": _record_id("chat", head, v.source_hash), **head,
                    "messages": [{"role": "system", "content": system}, {"role": "user", "content": user},
                                 {"role": "assistant", "content": reply_for(source)}],
                    **{f: k[f] for f in ("variant_id", "proposer", "family", "params", "source_hash", "speedup",
                                         "speedups")}})
    return out


_SIDE = ("variant_id", "proposer", "source_hash", "status", "reason", "speedup")


def preference_records(head: dict[str, Any], system: str, user: str, kernels: list[tuple[Variant, str, dict]],
                       min_speedup: float | None) -> list[dict[str, Any]]:
    out = []
    for a, src_a, fin_a in kernels:
        if not positive(a, min_speedup):
            continue
        for b, src_b, fin_b in kernels:
            if b.id == a.id:
                continue
            slower = b.status == "ok" and b.speedup is not None and a.speedup >= b.speedup * (1 + PAIR_MIN_GAP)
            if not (slower or b.status != "ok"):
                continue
            ka, kb = kernel_fields(a, fin_a), kernel_fields(b, fin_b)
            out.append({"id": _record_id("preference", head, a.source_hash, b.source_hash), **head,
                        "prompt": [{"role": "system", "content": system}, {"role": "user", "content": user}],
                        "chosen": [{"role": "assistant", "content": reply_for(src_a)}],
                        "rejected": [{"role": "assistant", "content": reply_for(src_b)}],
                        "chosen_kernel": {f: ka[f] for f in _SIDE}, "rejected_kernel": {f: kb[f] for f in _SIDE}})
    return out


def reward_records(head: dict[str, Any], system: str, user: str, kernels: list[tuple[Variant, str, dict]],
                   min_speedup: float | None) -> list[dict[str, Any]]:
    out = []
    for v, source, finals in kernels:
        out.append({"id": _record_id("reward", head, v.source_hash), **head,
                    "prompt": [{"role": "system", "content": system}, {"role": "user", "content": user}],
                    "completion": [{"role": "assistant", "content": reply_for(source)}],
                    "positive": positive(v, min_speedup), **kernel_fields(v, finals)})
    return out


BUILDERS = {"chat": chat_records, "preference": preference_records, "reward": reward_records}


def dedupe_key(fmt: str, record: dict[str, Any]) -> tuple:
    """Records that teach the same thing: the same kernel as exported for the same shape (a pair: the same two)."""
    where = (record["gpu"], record["acc"], tuple(record["shape"]))
    if fmt == "preference":
        return where + (record["chosen"][0]["content"], record["rejected"][0]["content"])
    return where + ((record["messages"] if fmt == "chat" else record["completion"])[-1]["content"],)
