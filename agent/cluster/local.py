"""PinnedLocalSeam: this machine's GPUs without Ray, with each shape's evaluations kept on one GPU.

agent.campaign.driver.EvaluatorSeam hands every evaluation to whichever GPU is idle; this seam routes by shape the
way the
Ray seam does (agent.cluster.routing), so a shape's speedups all come from one chip. It needs no Ray, which is
why the two-GPU device benchmark (scripts/bench_distributed.py) can run where Ray cannot be installed.
"""
from __future__ import annotations

import socket

from agent.campaign.driver import EvaluatorSeam
from agent.cluster.routing import ShapeRouter
from evaluator.record import EvalResult


class PinnedLocalSeam(EvaluatorSeam):
    def __init__(self, gpus: list[int]):
        super().__init__(gpus)
        self.router: ShapeRouter[int] = ShapeRouter(list(gpus))
        self.host = socket.gethostname()

    def evaluate(self, source: str, shape, *, acc: str, mode: str, profile: str,
                 rivals: dict[str, str] | None = None, rounds: int | None = None) -> EvalResult:
        from evaluator.api import evaluate

        g = self.router.acquire(tuple(shape))
        try:
            res = evaluate(source, tuple(shape), acc=acc, mode=mode, profile=profile, arch=self.arch,
                           pool=self.pool, gpu=g, rivals=rivals, rounds=rounds)
        finally:
            self.router.release(g, tuple(shape))
        res.gpu.setdefault("host", self.host)
        return res
