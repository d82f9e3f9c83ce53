"""RaySeam: the campaign's GPU seam over a Ray cluster.

The campaign driver (agent.campaign.driver.run_campaign) stays one process: it proposes, archives and checkpoints; this
seam only decides where builds and evaluations run.

- One GpuActor per GPU on every node (pinned to its node), each with its own evaluator worker subprocess.
- Builds: Ray tasks of one CPU slot anywhere in the cluster, started the moment the campaign's compile-ahead sees a
  proposal; the library travels to the GPU node through the object store.
- Routing: a shape sticks to one GPU (agent.cluster.routing); new shapes go to the least-loaded GPU; all GPUs are
  of one model (the archive is keyed by it).
- Failure: when an actor or its node dies with an evaluation in flight, the evaluation is sent to another GPU; the
  driver archives only results it received, so nothing finished is lost and nothing lost is archived. Lost actors
  are pinged now and then and rejoin when they answer; GPUs of nodes that join later get actors too.
- Every result is tagged with where it ran: result.gpu gets node_id, node_ip, host, ray_gpu_id, and
  result.gpu["cluster"] the attempts and the GPUs lost on the way.
"""
from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from agent.campaign.driver import CampaignError, Seam
from agent.cluster.routing import NoLiveGPU, ShapeRouter
from evaluator.record import EvalResult


MAX_HELD_BUILDS = 1024


class ClusterError(CampaignError):
    """The cluster cannot run this campaign (no Ray, no GPUs, mixed models, unreachable address)."""


def require_ray():
    try:
        import ray
    except ImportError:
        raise ClusterError("--cluster needs Ray, which is not installed here: pip install 'cuda-l2[ray]' (or "
                           "pip install 'ray>=2.40'); without --cluster the campaign runs on this machine's GPUs "
                           "(--gpus)") from None
    return ray


@dataclass
class ActorRef:
    key: str  # "<node>/gpu<id>"
    handle: Any
    info: dict


class RaySeam(Seam):
    shutdown_ray = False
    tournaments = True  # rivals go to the actor, whose evaluator builds and times them beside the candidate

    def __init__(self, spec, *, gpu_model: str | None = None, ncu: bool | None = None, max_attempts: int = 3, eval_timeout_s: float = 1800.0,
                 wait_for_gpu_s: float = 600.0, probe_every_s: float = 15.0, actor_options: dict | None = None,
                 start_timeout_s: float = 300.0):
        ray = self.ray = require_ray()
        if not ray.is_initialized():
            raise ClusterError("Ray is not connected (call agent.cluster.make_seam, or ray.init first)")
        from agent.cluster.actors import remote_classes

        self.spec, self.gpu_model = spec, gpu_model
        self.max_attempts, self.eval_timeout_s, self.wait_for_gpu_s = max_attempts, eval_timeout_s, wait_for_gpu_s
        self.probe_every_s, self.start_timeout_s = probe_every_s, start_timeout_s
        self._Actor, self._build = remote_classes(ray, **(actor_options or {}))
        self._spec_ref = ray.put(spec)
        self._lock = threading.Lock()
        self._builds: dict[str, Any] = {}  # source hash -> ObjectRef of the build artifact
        self._probes: dict[str, Any] = {}
        self._last_probe = 0.0
        self.actors: dict[str, ActorRef] = {}
        self.retired: list[dict] = []  # actors lost or left out, with why
        self.events: list[dict] = []  # losses and retries, for the run's log
        self._pending: list[tuple] = []  # (node, handle, info ref, asked at)
        self._launch(self._gpu_nodes())
        self._collect(self.start_timeout_s)
        if not self.actors:
            if self.retired:  # GPUs there, but no actor started on one: say why
                raise ClusterError("no GPU actor of the Ray cluster started: " + "; ".join(
                    r["why"] for r in self.retired))
            raise ClusterError("the Ray cluster has no GPU: start its nodes with GPUs (ray start --num-gpus N), or "
                               "run without --cluster")
        models = Counter(a.info["gpu_name"] for a in self.actors.values())
        if gpu_model is None and len(models) > 1:
            self.close()
            raise ClusterError(f"the cluster mixes GPU models ({dict(models)}); a campaign times one model (the "
                               "archive is keyed by it): pass gpu_model=NAME and run one campaign per model")
        self.gpu_name = gpu_model or next(iter(models))
        for k, a in list(self.actors.items()):
            if a.info["gpu_name"] != self.gpu_name:
                self._retire(k, f"GPU model {a.info['gpu_name']!r} is not this campaign's {self.gpu_name!r}")
        if not self.actors:
            raise ClusterError(f"no GPU of model {gpu_model!r} in the cluster (it has {dict(models)})")
        from agent.cluster.backends import evaluator_fingerprint

        mine = self.fingerprint = evaluator_fingerprint()
        for k, a in list(self.actors.items()):
            if a.info["fingerprint"] != mine:
                self._retire(k, f"its evaluator code differs from the driver's ({a.info['fingerprint']} != {mine}): "
                                "install the same cuda-l2 version on every node")
        if not self.actors:
            raise ClusterError("no node runs the driver's evaluator version: " + "; ".join(
                r["why"] for r in self.retired))
        archs = {a.info["arch"] for a in self.actors.values()}
        self.arch = sorted(archs)[0]
        self.router: ShapeRouter[str] = ShapeRouter(list(self.actors))
        # Nsight Compute profiles only where every GPU node has ncu (auto), or as asked.
        self.profiles = all(a.info.get("profiles") for a in self.actors.values()) if ncu is None else ncu
        self._facts: dict | None = None

    # ------------------------------------------------------------ cluster membership

    def _gpu_nodes(self) -> dict[str, int]:
        return {n["NodeID"]: int(n["Resources"].get("GPU", 0)) for n in self.ray.nodes()
                if n.get("Alive") and n["Resources"].get("GPU", 0) >= 1}

    def _on_node(self, node: str) -> int:
        """Actors this seam has (or is starting, or left out on purpose) on a node."""
        return (sum(1 for a in self.actors.values() if a.info.get("node_id") == node)
                + sum(1 for p in self._pending if p[0] == node)
                + sum(1 for r in self.retired if r.get("node_id") == node and r.get("left_out")))

    def _launch(self, nodes: dict[str, int]) -> None:
        """Ask for one actor per GPU of each node that has fewer; they join when they have opened their GPU."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        for node, n in nodes.items():
            for _ in range(n - self._on_node(node)):
                h = self._Actor.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)).remote(
                    self.spec)  # by value: a restarted actor must not depend on an object that may be gone
                self._pending.append((node, h, h.info.remote(), time.monotonic()))

    def _collect(self, wait_s: float) -> list[str]:
        """Actors that have started (waiting up to wait_s for them); those past start_timeout_s are left out."""
        added = []
        deadline = time.monotonic() + wait_s
        while self._pending:
            refs = [p[2] for p in self._pending]
            ready, _ = self.ray.wait(refs, num_returns=len(refs), timeout=max(0.0, deadline - time.monotonic()))
            still = []
            for node, h, ref, t0 in self._pending:
                if ref in ready:
                    try:
                        info = self.ray.get(ref)
                    except Exception as e:  # a GPU that cannot start its evaluator is left out, with the reason
                        self.retired.append({"node_id": node, "why": f"actor failed to start: {_short(e)}",
                                             "left_out": True})
                        self.ray.kill(h)
                        continue
                    key = f"{info.get('node_ip') or info.get('host')}:{info['node_id'][:8]}/gpu{info['gpu_id']}"
                    self.actors[key] = ActorRef(key, h, info)
                    added.append(key)
                elif time.monotonic() - t0 > self.start_timeout_s:
                    self.retired.append({"node_id": node, "left_out": True,
                                         "why": f"actor did not start within {self.start_timeout_s:g} s"})
                    self.ray.kill(h)
                else:
                    still.append((node, h, ref, t0))
            self._pending = still
            if time.monotonic() >= deadline:
                break
        return added

    def _retire(self, key: str, why: str) -> None:
        a = self.actors.pop(key)
        self.retired.append({"key": key, "node_id": a.info.get("node_id"), "why": why, "left_out": True})
        try:
            self.ray.kill(a.handle)
        except Exception:
            pass

    def _maintain(self) -> None:
        """Now and then: ping lost actors (they rejoin when Ray restarted them) and give GPUs of new nodes actors."""
        from ray.exceptions import ActorDiedError

        now = time.monotonic()
        with self._lock:
            if now - self._last_probe < self.probe_every_s:
                return
            self._last_probe = now
            load = self.router.load()
            for k, st in load.items():
                if st["alive"] or k not in self.actors:
                    self._probes.pop(k, None)
                    continue
                ref = self._probes.get(k)
                if ref is None:
                    self._probes[k] = self.actors[k].handle.info.remote()
                    continue
                ready, _ = self.ray.wait([ref], timeout=0)
                if ready:
                    del self._probes[k]
                    try:
                        self.ray.get(ref)
                    except ActorDiedError as e:
                        # Gone for good (killed, or out of restarts): its node's GPU, if the node lives, gets a
                        # new actor below.
                        a = self.actors.pop(k)
                        self.retired.append({"key": k, "node_id": a.info.get("node_id"), "why": _short(e)})
                        continue
                    except Exception:
                        continue  # restarting: ask again later
                    self.router.revive(k)
                    self.events.append({"event": "rejoined", "gpu": k, "t": time.time()})
            # GPUs without an actor (a new node, or one whose actor died for good) get one; it joins once started,
            # without holding up the evaluations in the meantime.
            self._launch({n: c for n, c in self._gpu_nodes().items() if c > self._on_node(n)})
            for k in self._collect(0.0):
                if self.actors[k].info["gpu_name"] != self.gpu_name or self.actors[k].info["fingerprint"] != \
                        self.fingerprint:
                    self._retire(k, "another GPU model or evaluator version")
                    continue
                self.router.add(k)
                self.router.revive(k)  # the same GPU as a lost actor's comes back under its key
                self.events.append({"event": "joined", "gpu": k, "t": time.time()})

    # ------------------------------------------------------------ the Seam

    @property
    def lanes(self) -> int:  # type: ignore[override]
        """Two lanes per live GPU, as on one machine: while one lane's candidate is on the GPU, the other
        proposes and builds."""
        return 2 * max(1, len(self.router.live()) if hasattr(self, "router") else len(self.actors))

    def compile(self, source: str) -> None:
        """Start the build on a CPU slot of the cluster and return at once; evaluate() waits for it."""
        self._build_ref(source)

    def _build_ref(self, source: str):
        from agent.campaign.archive import source_hash

        h = source_hash(source)
        with self._lock:
            ref = self._builds.get(h)
            if ref is None:
                ref = self._builds[h] = self._build.remote(self._spec_ref, source, self.arch)
                # Builds of proposals that are never evaluated (the loop found them archived) must not pile up in
                # the object store; a dropped one is simply built again if it is evaluated after all.
                while len(self._builds) > MAX_HELD_BUILDS:
                    self._builds.pop(next(iter(self._builds)))
            return ref

    def _forget_build(self, source: str) -> None:
        from agent.campaign.archive import source_hash

        with self._lock:
            self._builds.pop(source_hash(source), None)

    def evaluate(self, source: str, shape, *, acc: str, mode: str, profile: str,
                 rivals: dict[str, str] | None = None, rounds: int | None = None) -> EvalResult:
        ray = self.ray
        from ray.exceptions import GetTimeoutError, ObjectLostError, RayActorError, RayTaskError

        shape = tuple(shape)
        art = self._build_ref(source)
        ray.wait([art], fetch_local=False)  # the build runs elsewhere; do not pull the library to the driver
        lost: list[dict] = []
        tried: set[str] = set()
        use_artifact = True
        for attempt in range(1, self.max_attempts + 1):
            self._maintain()
            try:
                k = self._acquire(shape, tried)
            except NoLiveGPU as e:
                return self._error(shape, acc, mode, profile, source, str(e), lost)
            a = self.actors[k]
            try:
                ref = a.handle.evaluate.remote(source, list(shape), acc, mode, profile, art if use_artifact else None,
                                               rivals, rounds)
                d = ray.get(ref, timeout=self.eval_timeout_s)
            except (RayActorError, GetTimeoutError) as e:
                # The actor (or its node) is gone, or hung past any evaluation's length: retry on another GPU.
                why = _short(e)
                self.router.lost(k, why)
                if isinstance(e, GetTimeoutError):
                    ray.kill(a.handle, no_restart=False)
                tried.add(k)
                lost.append({"gpu": k, "why": why})
                self.events.append({"event": "lost", "gpu": k, "shape": list(shape), "why": why, "t": time.time()})
                continue
            except ObjectLostError as e:  # the build's node died before the library was fetched: build again
                self._forget_build(source)
                art = self._build_ref(source)
                lost.append({"gpu": k, "why": f"build lost: {_short(e)}"})
                continue
            except RayTaskError as e:
                if use_artifact and _caused_by_build(e):
                    use_artifact = False  # the GPU node builds it itself
                    lost.append({"gpu": k, "why": f"build task failed: {_short(e)}"})
                    continue
                return self._error(shape, acc, mode, profile, source, f"GPU actor {k} failed: {_short(e)}", lost)
            finally:
                self.router.release(k, shape)
            res = EvalResult.from_dict(d)
            res.gpu["cluster"] = {"gpu": k, "attempts": attempt, "lost": lost}
            if lost:
                self.events.append({"event": "retried", "gpu": k, "shape": list(shape), "attempts": attempt,
                                    "t": time.time()})
            self._forget_build(source)
            return res
        return self._error(shape, acc, mode, profile, source,
                           f"evaluation lost {len(lost)} time(s): " + "; ".join(x["why"] for x in lost), lost)

    def gpu_facts(self) -> dict[str, Any]:
        """The GPU model's facts for the prompt, from one of its actors (all are the same model)."""
        if self._facts is None:
            for k in self.router.live():
                try:
                    self._facts = self.ray.get(self.actors[k].handle.gpu_facts.remote(), timeout=300)
                    break
                except Exception:
                    continue
        return dict(self._facts or {})

    def profile(self, source: str, shape, *, acc: str, arch: str | None = None) -> dict | None:
        """Nsight Compute on the shape's own GPU (where its build is cached); None where profiling is off or the
        GPU is lost (profiling is an extra: the loop goes on without it)."""
        if not self.profiles:
            return None
        try:
            k = self.router.acquire(tuple(shape))
        except NoLiveGPU:
            return None
        try:
            return self.ray.get(self.actors[k].handle.profile.remote(source, list(shape), acc),
                                timeout=self.eval_timeout_s)
        except Exception:
            return None
        finally:
            self.router.release(k, tuple(shape))

    def _acquire(self, shape, tried: set[str]) -> str:
        """A live GPU for the shape; with none alive, wait (a restarted actor or a new node may come) up to
        wait_for_gpu_s before giving up."""
        deadline = time.monotonic() + self.wait_for_gpu_s
        while True:
            try:
                return self.router.acquire(shape, exclude=tried)
            except NoLiveGPU:
                if time.monotonic() > deadline:
                    raise
                time.sleep(1.0)
                self._last_probe = 0.0
                self._maintain()

    def _error(self, shape, acc, mode, profile, source, reason, lost) -> EvalResult:
        from agent.campaign.archive import source_hash

        # status "error" is never archived by the loop: the candidate is evaluated again later, not lost.
        return EvalResult(status="error", reason=reason, shape=tuple(shape), acc=acc, mode=mode, profile=profile,
                          source_hash=source_hash(source), code_length=len(source),
                          gpu={"cluster": {"lost": lost}})

    def where(self) -> dict[str, dict]:
        """Per GPU: node, model, liveness, load."""
        load = self.router.load()
        return {k: {**{f: a.info.get(f) for f in ("node_id", "node_ip", "host", "gpu_id", "gpu_name", "arch")},
                    **load.get(k, {})} for k, a in self.actors.items()}

    def close(self) -> None:
        for a in list(self.actors.values()):
            try:
                self.ray.get(a.handle.close.remote(), timeout=30)
            except Exception:
                pass
            try:
                self.ray.kill(a.handle)
            except Exception:
                pass
        if self.shutdown_ray:  # a cluster this campaign started for itself (--cluster auto)
            self.ray.shutdown()


def _short(e: BaseException, n: int = 300) -> str:
    s = f"{type(e).__name__}: {e}".strip().replace("\n", " ")
    return s[:n]


def _caused_by_build(e) -> bool:
    return "build_task" in str(e)
