"""Campaigns beyond one machine: evaluation on a Ray cluster (docs/distributed.md).

    make_seam(cluster, gpus) -> Seam        what `cudal2 campaign --cluster ...` calls

Ray is an optional extra (`pip install 'cuda-l2[ray]'`) and is imported only here, when a cluster is asked for;
the single-machine campaign (agent.campaign.driver.EvaluatorSeam over --gpus) never needs it.
"""
from __future__ import annotations

import os
from pathlib import Path

from agent.cluster.ray_seam import ClusterError, RaySeam, require_ray
from agent.cluster.routing import NoLiveGPU, ShapeRouter

REPO = Path(__file__).resolve().parents[2]


def _local_gpu_ids(gpus: list[int] | None) -> list[str]:
    """The device ids (as CUDA_VISIBLE_DEVICES spells them) of the GPUs a local cluster should own."""
    from evaluator.session import device_count

    n = device_count()
    if n == 0:
        raise ClusterError("--cluster auto starts a Ray cluster over this machine's GPUs, and it has none; give "
                           "--cluster ray://HOST:PORT of a cluster with GPU nodes")
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    ids = [x.strip() for x in visible.split(",") if x.strip()] if visible else [str(i) for i in range(n)]
    ids = ids[:n]
    if gpus is None:
        return ids
    bad = [g for g in gpus if g < 0 or g >= len(ids)]
    if bad:
        raise ClusterError(f"--gpus names GPU(s) {bad}, but this machine has {len(ids)} (0..{len(ids) - 1})")
    return [ids[g] for g in gpus]


def make_seam(cluster: str, gpus: list[int] | None = None, *, spec=None, gpu_model: str | None = None,
              **seam_kw) -> RaySeam:
    """Connect to (or start) a Ray cluster and return the campaign's seam over its GPUs.

    cluster: "ray://HOST:PORT" (Ray Client address of a running cluster; every node needs this project installed,
             the same version: nodes whose evaluator differs are left out) or "auto" (start a Ray cluster on this
             machine over its GPUs; `gpus` picks which, None = all).
    spec:    what runs on the nodes (default agent.cluster.backends.EvaluatorSpec(): the real evaluator).
    """
    from agent.cluster.backends import EvaluatorSpec

    if not cluster:
        raise ClusterError("no cluster given: --cluster ray://HOST:PORT or --cluster auto")
    ray = require_ray()
    env = {"PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)}
    if cluster == "auto":
        ids = _local_gpu_ids(gpus)
        started = False
        if not ray.is_initialized():
            # Ray reads the GPU ids it hands out (each actor gets CUDA_VISIBLE_DEVICES=<one id>) from this variable
            # when it starts its node.
            before = os.environ.get("CUDA_VISIBLE_DEVICES")
            os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(ids)
            try:
                ray.init(num_gpus=len(ids), runtime_env={"env_vars": env}, include_dashboard=False,
                         log_to_driver=False, configure_logging=False)
            finally:
                if before is None:
                    os.environ.pop("CUDA_VISIBLE_DEVICES", None)
                else:
                    os.environ["CUDA_VISIBLE_DEVICES"] = before
            started = True
        try:
            seam = RaySeam(spec or EvaluatorSpec(), gpu_model=gpu_model, **seam_kw)
        except BaseException:
            if started:
                ray.shutdown()
            raise
        seam.shutdown_ray = started
        return seam
    elif cluster.startswith("ray://"):
        if gpus is not None:
            raise ClusterError(f"--gpus {gpus} names GPUs of this machine; with --cluster {cluster} every GPU of the "
                               "cluster is used (one model per campaign)")
        try:
            ray.init(address=cluster, log_to_driver=False)
        except Exception as e:
            raise ClusterError(f"could not connect to the Ray cluster at {cluster}: {type(e).__name__}: {e}") from None
    else:
        raise ClusterError(f"--cluster takes ray://HOST:PORT or auto, not {cluster!r}")
    return RaySeam(spec or EvaluatorSpec(), gpu_model=gpu_model, **seam_kw)


__all__ = ["ClusterError", "NoLiveGPU", "RaySeam", "ShapeRouter", "make_seam", "require_ray"]
