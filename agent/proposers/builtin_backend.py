"""The built-in search policy (agent/policy) behind the Proposer interface: no LLM, no network."""
from __future__ import annotations

import time

from agent.campaign.config import ModelConfig
from agent.proposers.base import Proposal, ProposalContext, Proposer
from agent.proposers.parse import has_contract_symbol


class BuiltinProposer(Proposer):
    def __init__(self, config: ModelConfig | None = None, seed: int | None = None):
        self.config = config or ModelConfig(backend="builtin")
        self.seed = self.config.seed if seed is None else seed
        self.name = "builtin"
        self._policy = None

    def policy(self):
        if self._policy is None:
            from agent.policy import BuiltinPolicy  # imported late: the policy is an optional, separate part

            self._policy = BuiltinPolicy(self.seed)
        return self._policy

    def propose(self, context: ProposalContext, n: int) -> list[Proposal]:
        if n < 1:
            return []
        keys = ("family", "params", "status", "reason", "speedup", "resources", "ncu", "bottleneck")
        history = [{k: h.get(k) for k in keys} for h in context.history]
        # The policy's seeds are configurations that did well on nearby shapes (it adapts them to this one).
        seeds = [{k: nb.get(k) for k in ("family", "params", "shape", "speedup")} for nb in context.neighbours
                 if nb.get("family") and isinstance(nb.get("params"), dict)]
        arch = context.arch or "sm_90a"
        t0 = time.monotonic()
        cands = self.policy().propose(tuple(context.shape), context.acc, arch, history, n=n, seeds=seeds,
                                      mode=context.mode)
        dt = time.monotonic() - t0
        if not cands and not history and (why := self.policy().unsupported(context.shape, context.acc, arch)):
            m, n_, k = context.shape
            return [Proposal(None, reason=f"no built-in kernel family runs {m}x{n_}x{k} ({why})", model="builtin",
                             total_s=dt, attempts=1, parse_kind="policy")]
        out = []
        for c in cands[:n]:
            src = getattr(c, "source", None)
            reason = ""
            if not src:
                src, reason = None, f"the policy produced no source for {getattr(c, 'name', '?')}"
            elif not has_contract_symbol(src):
                src, reason = None, f"the policy's {getattr(c, 'name', '?')} does not define the hgemm contract symbol"
            out.append(Proposal(src, reason=reason, raw=getattr(c, "rationale", "") or "", latency_s=dt / max(1, len(cands)),
                                total_s=dt, attempts=1, model="builtin", parent=context.parent_id,
                                name=getattr(c, "name", "") or "", family=getattr(c, "family", None),
                                params=dict(getattr(c, "params", None) or {}), parse_kind="policy"))
        return out
