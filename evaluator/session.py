"""A session on one machine's GPUs: compile, evaluate, profile and the GPU's facts, over one WorkerPool.

The campaign (agent.campaign.driver.EvaluatorSeam) and a cluster's GPU actor (agent.cluster.backends.EvaluatorGPU)
both measure through it; agent/ reaches the evaluator only through this module, evaluator.api, evaluator.record and
evaluator.contract.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from evaluator.api import evaluate
from evaluator.compile import SCREEN_PREFIX, TIMEOUT_PREFIX, CompileInfo, _cache_root, compile_kernel, source_hash
from evaluator.gpu import device_count, device_name, has_gpu, native_arch
from evaluator.pool import WorkerPool
from evaluator.record import EvalResult

__all__ = ["CompileInfo", "GPUChoiceError", "GPUSession", "compile_kernel", "device_count", "has_gpu",
           "install_artifact", "source_hash"]


class GPUChoiceError(ValueError):
    """GPUs that this machine does not have, or of more than one model."""


class GPUSession:
    """Evaluations on `gpus`, each handed to whichever of them is idle.

    `visible`: where the process sees its one GPU under another index (a Ray actor's CUDA_VISIBLE_DEVICES makes it
    device 0 while the worker is given the id itself); its facts are read there and its evaluations pinned to it."""
    tournaments = True  # evaluate() takes rivals= and rounds=: leaders timed in the candidate's rounds

    def __init__(self, gpus: list[int], ncu: bool | None = None, *, visible: int | None = None):
        if visible is None:
            n = device_count()
            bad = [g for g in gpus if g < 0 or g >= n]
            if bad:
                raise GPUChoiceError(f"names GPU(s) {bad}, but this machine has {n} (0..{n - 1})")
            names = {g: device_name(g) for g in gpus}
            if len(set(names.values())) > 1:
                raise GPUChoiceError(f"mixes GPU models {names}; a campaign times one model (the archive is keyed "
                                     "by it): run one campaign per model")
            self.gpu_name = names[gpus[0]]
            self.arch = native_arch(gpus[0])
        else:
            self.gpu_name = device_name(visible)
            self.arch = native_arch(visible)
        self.gpus = gpus
        self._pinned = gpus[0] if visible is not None else None
        self.lanes = 2 * len(gpus)
        self.pool = WorkerPool(gpus=gpus, arch=self.arch)
        self.profiles = shutil.which("ncu") is not None if ncu is None else ncu
        self._facts: dict[str, Any] | None = None

    def compile(self, source: str) -> None:
        """Warm the build cache; errors surface in evaluate()."""
        compile_kernel(source, self.arch)

    def evaluate(self, source: str, shape, *, acc: str, mode: str, profile: str,
                 rivals: dict[str, str] | None = None, rounds: int | None = None) -> EvalResult:
        return evaluate(source, tuple(shape), acc=acc, mode=mode, profile=profile, arch=self.arch, pool=self.pool,
                        gpu=self._pinned, rivals=rivals, rounds=rounds)

    def gpu_facts(self) -> dict[str, Any]:
        """What the prompt tells the model about the GPU (SMs, shared memory, L2, clocks)."""
        if self._facts is None:
            g = self.pool.gpu_info(self.gpus[0])
            self._facts = {"name": g.get("name"), "sm_count": g.get("sms"),
                           "smem_per_block_optin_kb": (g.get("smem_optin") or 0) // 1024 or None,
                           "l2_mb": round((g.get("l2_bytes") or 0) / 2**20) or None,
                           "compute_capability": f"{g.get('cc_major')}.{g.get('cc_minor')}",
                           "max_sm_clock_mhz": g.get("max_sm_clock_mhz"), "mem_clock_mhz": g.get("max_mem_clock_mhz"),
                           "driver": g.get("driver_version")}
        return self._facts

    def profile(self, source: str, shape, *, acc: str, arch: str | None = None) -> dict | None:
        """Nsight Compute record of a candidate (None where profiling is off or it does not build)."""
        if not self.profiles:
            return None
        from evaluator.profile import profile_candidate

        info = compile_kernel(source, self.arch)  # cached: the loop only profiles variants it evaluated
        if not info.ok:
            return None
        # another lane's evaluation on this GPU would be timed beside ncu's replays: hold the GPU's lane meanwhile
        with self.pool.holding(self.gpus[0]) as g:
            return profile_candidate(info.so_path, tuple(shape), self.pool.native_so(), acc=acc, gpu=g)

    def close(self) -> None:
        self.pool.close()


def install_artifact(art: dict | None, cache_dir: Path | None = None) -> bool:
    """Put a build made on another node into this node's build cache, so the evaluator finds it there instead of
    building again. Same layout as evaluator.compile's cache (one directory per key, published with one rename).
    Returns whether an entry was installed. A build this node would key differently (another nvcc or CUTLASS) is
    simply never looked up: the evaluator builds it here, which is slower but never wrong."""
    if not art or not art.get("info"):
        return False
    info = dict(art["info"])
    key = info.get("cache_key") or ""
    if not re.fullmatch(r"[0-9a-f]{64}", key):
        return False
    if not info.get("ok") and (info.get("log", "").startswith((SCREEN_PREFIX, TIMEOUT_PREFIX))):
        return False  # the evaluator does not cache these either
    if info.get("ok") and not art.get("so"):
        return False
    root = _cache_root(cache_dir)
    entry = root / key[:2] / key
    if (entry / "info.json").is_file():
        return False
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f"tmp-{key[:12]}-", dir=root))
    try:
        if art.get("so"):
            (tmp / "kernel.so").write_bytes(art["so"])
        info.update(so_path=None, cached=False)
        (tmp / "info.json").write_text(json.dumps(info, indent=1))
        entry.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.rename(tmp, entry)
        except OSError:  # published by someone else meanwhile: theirs is equivalent
            shutil.rmtree(tmp, ignore_errors=True)
            return False
        return True
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
