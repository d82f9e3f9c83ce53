"""The plain result record: the one thing that crosses from evaluator/ to agent/.

Everything here is JSON-serialisable so that archives, transcripts and outside tools can read it without
importing the evaluator.
"""
from __future__ import annotations

import dataclasses
import json
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

# Status values, from "never ran" to "ran and was timed".
SCREEN_REJECTED = "screen_rejected"
COMPILE_ERROR = "compile_error"
COMPILE_TIMEOUT = "compile_timeout"
NO_GPU = "no_gpu"
UNSUPPORTED_SHAPE = "unsupported_shape"  # the kernel returned non-zero: it declines this shape
CRASH = "crash"  # worker died (segfault, abort) or a sticky CUDA error (illegal address, ...)
TIMEOUT = "timeout"  # hang
INCORRECT = "incorrect"  # ran, failed a correctness check; never timed
ESCAPED_WORK = "escaped_work"  # work not finished at its end event
ERROR = "error"  # the evaluator itself failed (bad input, missing tool)
COMPILED = "compiled"  # --compile-only succeeded
OK = "ok"  # correct and timed

STATUSES = (SCREEN_REJECTED, COMPILE_ERROR, COMPILE_TIMEOUT, NO_GPU, UNSUPPORTED_SHAPE, CRASH, TIMEOUT,
            INCORRECT, ESCAPED_WORK, ERROR, COMPILED, OK)
# Results that say nothing about the kernel (the machine or the evaluator failed): a campaign does not archive them,
# so a later run evaluates the kernel again instead of remembering a non-answer.
NOT_ABOUT_THE_KERNEL = frozenset({NO_GPU, ERROR})


@dataclass
class CompileInfo:
    ok: bool
    arch: str
    nvcc_version: str
    flags: list[str]
    source_hash: str
    cache_key: str
    cached: bool = False
    seconds: float = 0.0  # this call: the nvcc build, or the cache look-up when cached
    build_seconds: float = 0.0  # the nvcc build that made the library, kept on cache hits (the compile cost)
    log: str = ""
    so_path: str | None = None
    registers: int | None = None  # per thread, of the heaviest kernel in the file
    smem_bytes: int | None = None  # static shared memory per block, heaviest kernel
    spill_stores: int = 0
    spill_loads: int = 0
    stack_bytes: int = 0
    kernels: list[dict[str, Any]] = field(default_factory=list)  # per-kernel ptxas report


@dataclass
class CheckOutcome:
    name: str
    passed: bool
    detail: str = ""
    metrics: dict[str, Any] = field(default_factory=dict)


@dataclass
class Timing:
    """Times of one callable (candidate or baseline) over the timed rounds, in microseconds."""
    name: str
    median_us: float
    mean_us: float
    min_us: float
    samples: int
    # Speedup of the candidate against this callable (t_this / t_candidate); None for the candidate itself.
    speedup_mean: float | None = None  # the paper's eq. 2: mean over rounds of per-round ratios
    speedup_median: float | None = None
    speedup_ci95: tuple[float, float] | None = None  # bootstrap over rounds
    detail: dict[str, Any] = field(default_factory=dict)  # e.g. the cuBLASLt algorithm chosen

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Timing":
        d = dict(d)
        if d.get("speedup_ci95") is not None:
            d["speedup_ci95"] = tuple(d["speedup_ci95"])
        return cls(**d)


BEST_NVIDIA = "best-nvidia"


def baseline_family(baseline: str, present) -> list[str] | None:
    """The timed baselines a composite name stands for (None: `baseline` names one baseline). '-max': the NN and
    TN variants of a baseline and their runners-up ('#2', ...); BEST_NVIDIA: every baseline."""
    if baseline == BEST_NVIDIA:
        return list(present)
    if not baseline.endswith("-max"):
        return None
    stem = baseline[: -len("-max")]
    return [n for n in present if n.split("#")[0] in (f"{stem}-NN", f"{stem}-TN")]


@dataclass
class EvalResult:
    status: str
    reason: str = ""
    shape: tuple[int, int, int] = (0, 0, 0)
    acc: str = "fp32"
    mode: str = "offline"  # offline | server
    profile: str = "quick"  # quick | paper
    source_hash: str = ""
    code_length: int = 0
    compile: CompileInfo | None = None
    checks: list[CheckOutcome] = field(default_factory=list)
    candidate: Timing | None = None
    baselines: dict[str, Timing] = field(default_factory=dict)
    # kernels timed beside the candidate in the same rounds (a tournament); speedups are the candidate's over each
    rivals: dict[str, Timing] = field(default_factory=dict)
    gpu: dict[str, Any] = field(default_factory=dict)
    ncu: dict[str, Any] | None = None
    wall_seconds: float = 0.0
    # seconds this evaluation kept its GPU from other evaluations (a wait for a GPU held by another lane excluded);
    # None in records made before it was kept
    gpu_seconds: float | None = None
    created_at: float = field(default_factory=time.time)

    @property
    def ok(self) -> bool:
        return self.status == OK

    def baseline_timing(self, baseline: str) -> Timing | None:
        """The timing a baseline name stands for. A '-max' name means the fastest in these rounds of the NN and TN
        variants (AutoTuning's runners-up included: cublaslt-autotune-NN#2, ...); BEST_NVIDIA the fastest of all
        baselines timed in these rounds, chosen by median, so the pick is made in the measurement's own regime."""
        names = baseline_family(baseline, self.baselines)
        if names is not None:
            return min((self.baselines[n] for n in names), key=lambda t: t.median_us, default=None)
        return self.baselines.get(baseline)

    def speedup(self, baseline: str, stat: str = "mean") -> float | None:
        """Speedup against a baseline (`baseline_timing` says which timing a composite name picks)."""
        t = self.baseline_timing(baseline)
        if t is None:
            return None
        return t.speedup_mean if stat == "mean" else t.speedup_median

    def head_to_head(self, baseline: str = "cublaslt-autotune-max") -> dict[str, float]:
        """Each kernel of a tournament (the candidate as "candidate", and every rival) against `baseline`: the median
        over rounds of t_baseline / t_kernel, all from the same rounds. For a '-max' name the baseline is the variant
        with the lower median, as in `speedup`. Empty without the round-by-round times."""
        rounds = (self.candidate.detail.get("timing", {}).get("rounds_us") if self.candidate else None) or {}
        names = baseline_family(baseline, {n: None for n in rounds if n != "candidate" and not n.startswith("rival:")})
        if names is not None:
            baseline = min(names, key=lambda n: sorted(rounds[n])[len(rounds[n]) // 2], default=baseline)
        base = rounds.get(baseline)
        if not base:
            return {}
        out = {}
        for name, ts in rounds.items():
            if name == "candidate" or name.startswith("rival:"):
                out[name.removeprefix("rival:")] = statistics.median(b / t for b, t in zip(base, ts))
        return out

    def rivals_refused(self) -> dict[str, str]:
        """The tournament's rivals whose output was wrong after a timed batch, by name, with why; they have no
        figure in `head_to_head`."""
        return dict((self.candidate.detail.get("timing", {}).get("rivals_refused") if self.candidate else None) or {})

    def gpu_time(self) -> float:
        """`gpu_seconds` where it was kept; an older record has only its wall time less the compile, which also
        counts any wait for a GPU that another shape's evaluation held (several lanes over one GPU)."""
        if self.gpu_seconds is not None:
            return self.gpu_seconds
        return self.wall_seconds - (self.compile.seconds if self.compile else 0.0)

    def max_abs_diff(self) -> float | None:
        for c in self.checks:
            if c.name == "baseline_bounded_deviation" and "max_abs_diff" in c.metrics:
                return float(c.metrics["max_abs_diff"])
        return None

    def reward(self, baseline: str = "cublaslt-autotune-max", alpha: float = 0.1, beta: float = 1e-5) -> float:
        """The paper's eq. 3: mean speedup − α·max-abs-diff − β·code length; incorrect kernels get −1."""
        if not self.ok:
            return -1.0
        s = self.speedup(baseline) or 0.0
        return s - alpha * (self.max_abs_diff() or 0.0) - beta * self.code_length

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self, **kw: Any) -> str:
        return json.dumps(self.to_dict(), **kw)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "EvalResult":
        d = dict(d)
        if d.get("compile") is not None:
            d["compile"] = CompileInfo(**d["compile"])
        d["checks"] = [CheckOutcome(**c) for c in d.get("checks", [])]
        if d.get("candidate") is not None:
            d["candidate"] = Timing.from_dict(d["candidate"])
        d["baselines"] = {k: Timing.from_dict(v) for k, v in d.get("baselines", {}).items()}
        d["rivals"] = {k: Timing.from_dict(v) for k, v in d.get("rivals", {}).items()}
        d["shape"] = tuple(d.get("shape", (0, 0, 0)))
        return cls(**d)

    @classmethod
    def from_json(cls, s: str) -> "EvalResult":
        return cls.from_dict(json.loads(s))
