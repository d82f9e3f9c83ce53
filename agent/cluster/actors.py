"""The Ray side: one actor per GPU (owning that GPU's evaluator worker subprocess) and the build task for CPU slots.

The classes here are plain Python; `remote_classes()` wraps them with Ray when a cluster is used, so importing
this module needs no Ray.
"""
from __future__ import annotations

import os
import time

from agent.cluster.backends import _node_tag, evaluator_fingerprint


class GpuActor:
    """Lives on one GPU of one node for the whole campaign. Evaluations run one at a time (the actor's queue is
    the GPU's queue), so two lanes sharing a GPU never time at once."""

    def __init__(self, spec):
        import ray

        ids = ray.get_gpu_ids()
        if len(ids) != 1:
            raise RuntimeError(f"a GPU actor must own exactly one GPU, Ray gave it {ids}")
        self.gpu_id = int(ids[0])
        self.backend = spec.open(self.gpu_id)
        self.tag = {**_node_tag(), "gpu_id": self.gpu_id, "gpu_name": self.backend.gpu_name,
                    "arch": self.backend.arch, "fingerprint": evaluator_fingerprint(), "pid": os.getpid(),
                    "profiles": bool(getattr(self.backend, "profiles", False))}
        self.evaluations = 0

    def info(self) -> dict:
        return dict(self.tag, evaluations=self.evaluations)

    def evaluate(self, source: str, shape, acc: str, mode: str, profile: str, artifact=None,
                 rivals: dict | None = None, rounds: int | None = None) -> dict:
        t0 = time.monotonic()
        d = self.backend.evaluate(source, tuple(shape), acc=acc, mode=mode, profile=profile, artifact=artifact,
                                  rivals=rivals, rounds=rounds)
        self.evaluations += 1
        # Where it ran, next to the evaluator's own GPU description (gpu_index, clocks, driver).
        d["gpu"] = {**(d.get("gpu") or {}), "node_id": self.tag.get("node_id"), "node_ip": self.tag.get("node_ip"),
                    "host": self.tag.get("host"), "ray_gpu_id": self.gpu_id,
                    "actor_seconds": round(time.monotonic() - t0, 3)}
        return d

    def gpu_facts(self) -> dict:
        return self.backend.gpu_facts()

    def profile(self, source: str, shape, acc: str) -> dict | None:
        return self.backend.profile(source, tuple(shape), acc=acc)

    def close(self) -> None:
        self.backend.close()


def build_task(spec, source: str, arch: str) -> dict:
    return spec.build(source, arch)


def remote_classes(ray, *, gpu_resource: float = 1.0, actor_cpus: float = 1.0, build_cpus: float = 1.0):
    """(RemoteGpuActor, remote_build): the actor holds one GPU and one CPU core (the evaluator's host side must not
    compete with builds for it); each build holds one CPU slot. Builds are retried by Ray when their node dies."""
    actor = ray.remote(num_gpus=gpu_resource, num_cpus=actor_cpus, max_restarts=1, max_task_retries=0)(GpuActor)
    build = ray.remote(num_cpus=build_cpus, max_retries=3)(build_task)
    return actor, build
