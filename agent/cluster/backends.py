"""What runs on a cluster node: the per-GPU evaluation backend (inside a GPU actor) and the build (a CPU task).

A backend *spec* is a small picklable object sent to the nodes; it has two methods:
    build(source, arch) -> artifact dict        on a CPU slot of any node
    open(gpu_id) -> GPU backend                 inside the actor that owns that GPU
and a GPU backend has gpu_name, arch, evaluate(source, shape, acc=, mode=, profile=, artifact=) -> EvalResult
dict, and close().

EvaluatorSpec is the real one: builds with evaluator.compile and ships the shared library to the GPU node through
Ray's object store (a CPU node's build cache is not the GPU node's); evaluates with evaluator.api over a WorkerPool
of the one GPU the actor owns. RecordedSpec answers from results recorded on a GPU, so a cluster's plumbing
(actors, routing, retries, the driver's archive) can be exercised on machines without GPUs.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def evaluator_fingerprint() -> str:
    """A hash of the evaluator's code: nodes that would measure differently (another version of the checks or the
    timing) must not feed one archive."""
    h = hashlib.sha256()
    root = REPO / "evaluator"
    for p in sorted([*root.glob("*.py"), *root.glob("native/*.cu")]):
        h.update(p.relative_to(root).as_posix().encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def _node_tag() -> dict:
    """Where this process runs: Ray's node id and IP where Ray is up, the host name otherwise."""
    import socket

    tag = {"host": socket.gethostname()}
    try:
        import ray

        if ray.is_initialized():
            ctx = ray.get_runtime_context()
            tag["node_id"] = ctx.get_node_id()
            tag["node_ip"] = ray.util.get_node_ip_address()
    except ImportError:
        pass
    return tag


# ---------------------------------------------------------------- build artifacts

def build_artifact(source: str, arch: str) -> dict:
    """Build (or find in this node's cache) and return the result with the library's bytes."""
    from evaluator.session import compile_kernel

    info = compile_kernel(source, arch)
    so = Path(info.so_path).read_bytes() if info.ok and info.so_path else None
    d = dataclasses.asdict(info)
    return {"info": d, "so": so, "built_on": _node_tag()}


# ---------------------------------------------------------------- the real evaluator

@dataclasses.dataclass
class EvaluatorSpec:
    """The evaluator on the GPU the actor was given."""

    def build(self, source: str, arch: str) -> dict:
        return build_artifact(source, arch)

    def open(self, gpu_id: int) -> "EvaluatorGPU":
        return EvaluatorGPU(gpu_id)


class EvaluatorGPU:
    """The actor's one GPU as a GPU session (evaluator.session), answering with plain dicts for Ray."""

    def __init__(self, gpu_id: int):
        from evaluator.session import GPUSession, device_count

        # Ray exposes the actor's GPU as device 0 of CUDA_VISIBLE_DEVICES=<gpu_id>; the worker subprocess is given
        # the id itself (WorkerProcess sets CUDA_VISIBLE_DEVICES to it), so both see the same chip.
        if device_count() < 1:
            raise RuntimeError(f"GPU actor for GPU {gpu_id} sees no CUDA device (CUDA_VISIBLE_DEVICES="
                               f"{os.environ.get('CUDA_VISIBLE_DEVICES')!r})")
        self.gpu_id = gpu_id
        self.session = GPUSession([gpu_id], visible=0)
        self.gpu_name, self.arch, self.profiles = self.session.gpu_name, self.session.arch, self.session.profiles

    def gpu_facts(self) -> dict:
        return self.session.gpu_facts()

    def profile(self, source: str, shape, *, acc: str) -> dict | None:
        return self.session.profile(source, shape, acc=acc)

    def evaluate(self, source: str, shape, *, acc: str, mode: str, profile: str, artifact: dict | None = None,
                 rivals: dict | None = None, rounds: int | None = None) -> dict:
        from evaluator.session import install_artifact

        install_artifact(artifact)  # the rivals are built here (compile cache): they were built before, by the search
        return self.session.evaluate(source, shape, acc=acc, mode=mode, profile=profile, rivals=rivals,
                                     rounds=rounds).to_dict()

    def close(self) -> None:
        self.session.close()


# ---------------------------------------------------------------- recorded results (no GPU)

@dataclasses.dataclass
class RecordedSpec:
    """Answers each evaluation with the result recorded on a GPU for the kernel's `// variant: TAG` line.

    `log` (a file on a filesystem the nodes share) gets one JSON line per event: "start" and "finish" of every
    evaluation with the actor's GPU and node, "build" of every compile task, so a test can see what ran where.
    """
    recorded: dict  # tag -> EvalResult dict
    log: str | None = None
    delay: float = 0.0
    gpu_name: str = "NVIDIA H200"
    arch: str = "sm_90a"
    default_tag: str | None = None  # the answer for kernels without a `// variant:` line (dry runs of real proposers)

    def _write(self, rec: dict) -> None:
        if self.log:
            with open(self.log, "a") as f:
                f.write(json.dumps(rec) + "\n")
                f.flush()
                os.fsync(f.fileno())

    def build(self, source: str, arch: str) -> dict:
        from agent.campaign.archive import source_hash

        self._write({"op": "build", "hash": source_hash(source), "pid": os.getpid(), "t": time.time()})
        return {"info": None, "so": None, "built_on": _node_tag(), "source_hash": source_hash(source)}

    def open(self, gpu_id: int) -> "RecordedGPU":
        return RecordedGPU(self, gpu_id)


class RecordedGPU:
    def __init__(self, spec: RecordedSpec, gpu_id: int):
        self.spec, self.gpu_id = spec, gpu_id
        self.gpu_name, self.arch = spec.gpu_name, spec.arch
        self.profiles = False

    def gpu_facts(self) -> dict:
        return {"name": self.gpu_name, "recorded": True}

    def profile(self, source: str, shape, *, acc: str) -> dict | None:
        return None

    def evaluate(self, source: str, shape, *, acc: str, mode: str, profile: str, artifact: dict | None = None,
                 rivals: dict | None = None, rounds: int | None = None) -> dict:
        from agent.campaign.archive import source_hash
        from evaluator.record import EvalResult

        m = re.search(r"// variant: (\S+)", source)
        tag = m.group(1) if m else (self.spec.default_tag or "")
        h = source_hash(source)
        # a recorded result has no rivals' rounds: the campaign keeps its pooled ranking (the log shows who was asked)
        base = {"hash": h, "shape": list(shape), "mode": mode, "gpu": self.gpu_id, "pid": os.getpid(),
                "rivals": sorted(rivals or {}), **_node_tag()}
        self.spec._write({"op": "start", **base, "t": time.time()})
        time.sleep(self.spec.delay)
        if tag not in self.spec.recorded:
            res = EvalResult(status="error", reason=f"no recorded result for variant {tag!r}", shape=tuple(shape),
                             acc=acc, mode=mode, profile=profile, source_hash=h)
        else:
            res = EvalResult.from_dict(self.spec.recorded[tag])
            res = dataclasses.replace(res, shape=tuple(shape), acc=acc, mode=mode, profile=profile, source_hash=h,
                                      code_length=len(source),
                                      gpu=dict(res.gpu, gpu_index=self.gpu_id, name=self.gpu_name))
        self.spec._write({"op": "finish", **base, "status": res.status, "t": time.time()})
        return res.to_dict()

    def close(self) -> None:
        pass
