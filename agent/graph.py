"""The per-shape loop as a LangGraph StateGraph:

    retrieve -> propose -> evaluate -> [profile] -> record -> decide -> (retrieve | END)

One thread per (GPU model, accumulator, M, N, K), checkpointed after every node into
`<run_dir>/checkpoints.sqlite` (SqliteSaver, synchronous writes). A killed run resumes at the node it was in.
Finished evaluations are never repeated: the evaluate node archives each result the moment it has it, and looks
every source up in the archive (by hash, per gpu/acc/shape) before evaluating it — so a kill in the middle of a
step loses only the evaluation that was in flight.

The GPU is reached only through the injected `evaluate_fn` (signature of evaluator.api.evaluate) and the optional
`profile_fn(source, shape, *, acc, arch) -> dict | None` (NCU metrics); retrieval through `retrieve_fn(query) ->
list of passages` (dicts or objects with text/source/symbol/line/score). Nothing here imports the evaluator's GPU
code.
"""
from __future__ import annotations

import dataclasses
import math
import sqlite3
import time
from pathlib import Path
from typing import Any, Callable

from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph

from agent.archive import Archive
from agent.proposers.base import Proposal, ProposalContext, Proposer
from agent.proposers.deadline import EndpointFatal
from agent.proposers.feedback import carry, note_for
from agent.reply_store import ReplyStore
from agent.state import ShapeOutcome, ShapeState, thread_id
from agent.transcript import Transcript
from evaluator.record import EvalResult

# Results that say nothing about the kernel (the machine or the evaluator failed): not archived, so a later run
# evaluates the kernel again instead of remembering a non-answer.
_NOT_ARCHIVED = {"no_gpu", "error"}

EvaluateFn = Callable[..., EvalResult]
RetrieveFn = Callable[[str], list]
ProfileFn = Callable[..., "dict[str, Any] | None"]

CHECKPOINT_FILE = "checkpoints.sqlite"
MAX_FAILED_STEPS = 3  # steps in a row without a single kernel from the model stop the shape


def _passage_dict(p: Any) -> dict[str, Any]:
    if isinstance(p, dict):
        d = dict(p)
    elif dataclasses.is_dataclass(p):
        d = dataclasses.asdict(p)
    else:
        d = {k: getattr(p, k, None) for k in ("text", "source", "symbol", "line", "score", "kind")}
    return {k: d.get(k) for k in ("text", "source", "symbol", "line", "score", "kind")}


def _query(shape, best: dict[str, Any] | None) -> str:
    fam = best.get("family") if best else None
    params = best.get("params") if best else None
    bottleneck = best.get("bottleneck") if best else None
    try:
        from agent.retrieval import build_query, kernel_atoms

        return build_query(tuple(shape), family=fam, params=params, bottleneck=bottleneck,
                           atoms=kernel_atoms(best.get("source") if best else None))
    except Exception:  # retrieval not installed or broken: a plain query still works with any retrieve_fn
        m, n, k = shape
        q = f"HGEMM fp16 tensor core kernel M={m} N={n} K={k} tiling shared memory pipeline"
        if fam:
            q += f" {fam}"
        if bottleneck:
            q += f" bottleneck {bottleneck}"
        return q


def _speedups(res: EvalResult) -> dict[str, float | None]:
    """Against every baseline as measured, and '<stem>-max' for each NN/TN pair (the faster of the two)."""
    out = {b: t.speedup_mean for b, t in res.baselines.items()}
    for b in list(out):
        if b.endswith(("-NN", "-TN")):
            out[b[:-3] + "-max"] = res.speedup(b[:-3] + "-max")
    return out


def _summary(p: dict[str, Any]) -> dict[str, Any]:
    return {k: p.get(k) for k in ("name", "model", "family", "params", "parent", "source_hash", "reason", "usage",
                                  "latency_s", "total_s", "attempts", "parse_kind", "error", "summary", "raw",
                                  "reply")}


def build_context(archive: Archive, *, gpu_name: str, acc: str, shape, arch: str | None,
                  gpu_facts: dict[str, Any] | None = None, step: int = 0, passages: list[dict[str, Any]] | None = None,
                  retrieval_note: str = "", neighbours_k: int = 4, mode: str = "offline",
                  feedback: list[dict[str, Any]] | None = None) -> ProposalContext:
    """What a proposer sees for one step: the archive's variants of this key, the best two with their sources,
    the best kernels of nearby shapes, and the retrieved passages."""
    shape_l = [int(x) for x in shape]
    ranked = archive.ranked(gpu_name, acc, shape_l)
    return ProposalContext(
        shape=tuple(shape_l), acc=acc, arch=arch, gpu_name=gpu_name, gpu_facts=dict(gpu_facts or {}), step=step,
        history=[v.as_history(with_source=True) for v in archive.history(gpu_name, acc, shape_l)],
        best=ranked[0].as_history(with_source=True) if ranked else None,
        runner_up=ranked[1].as_history(with_source=True) if len(ranked) > 1 else None,
        passages=list(passages or []), retrieval_note=retrieval_note,
        neighbours=[v.as_history() for v in archive.neighbours(gpu_name, acc, shape_l, k=neighbours_k)], mode=mode,
        feedback=list(feedback or []))


def run_shape(shape, *, acc: str, gpu_name: str, arch: str | None, run_dir, proposer: Proposer,
              evaluate_fn: EvaluateFn, retrieve_fn: RetrieveFn | None = None, archive: Archive,
              transcript: Transcript, budget_candidates: int = 16, budget_minutes: float | None = None,
              plateau: int | None = 4, plateau_min_gain: float = 0.005, target_speedup: float | None = None,
              n_per_step: int = 4, profile_fn: ProfileFn | None = None, gpu_facts: dict[str, Any] | None = None,
              max_failed_steps: int = MAX_FAILED_STEPS, max_steps: int | None = None, neighbours_k: int = 4,
              eval_kwargs: dict[str, Any] | None = None) -> ShapeOutcome:
    """Run (or resume, or report the finished) loop for one shape. See the module docstring and docs/loop.md."""
    m, n, k = (int(x) for x in shape)
    shape_l = [m, n, k]
    if budget_candidates < 1 or n_per_step < 1:
        raise ValueError("budget_candidates and n_per_step must be at least 1")
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    run = run_dir.name
    tid = thread_id(gpu_name, acc, shape_l)
    facts = dict(gpu_facts or {})
    eval_kwargs = dict(eval_kwargs or {})
    proposer_name = getattr(proposer, "name", type(proposer).__name__)
    if max_steps is None:
        max_steps = 4 * math.ceil(budget_candidates / n_per_step) + 4

    replies = ReplyStore(run_dir)

    def log(state: ShapeState, node: str, input: Any = None, output: Any = None) -> None:
        transcript.append(thread=tid, shape=shape_l, step=state.get("step", 0), node=node, input=input,
                          output=output, run=run)

    def timed(fn: Callable[[ShapeState], dict[str, Any]]) -> Callable[[ShapeState], dict[str, Any]]:
        def node(state: ShapeState) -> dict[str, Any]:
            t0 = time.monotonic()
            upd = fn(state)
            upd["elapsed_s"] = upd.get("elapsed_s", state.get("elapsed_s", 0.0)) + (time.monotonic() - t0)
            return upd

        node.__name__ = fn.__name__
        return node

    def best_item(state: ShapeState) -> dict[str, Any] | None:
        b = archive.best(gpu_name, acc, shape_l)
        return b.as_history(with_source=True) if b else None

    # ---- nodes ----
    def retrieve(state: ShapeState) -> dict[str, Any]:
        if retrieve_fn is None:
            return {"passages": [], "retrieval_note": "no retriever configured"}
        q = _query(shape_l, best_item(state))
        try:
            passages = [_passage_dict(p) for p in (retrieve_fn(q) or [])]
            note = "" if passages else "the retriever found nothing relevant"
        except Exception as e:  # a missing store or a broken index must not stop the search
            passages, note = [], f"retrieval unavailable ({type(e).__name__}: {e})"
        log(state, "retrieve", {"query": q}, {"passages": [{k: p[k] for k in ("source", "symbol", "line", "score")}
                                                          for p in passages], "note": note})
        return {"passages": passages, "retrieval_note": note}

    def propose(state: ShapeState) -> dict[str, Any]:
        want = min(n_per_step, budget_candidates - state.get("candidates", 0))
        step = state.get("step", 0)
        ctx = build_context(archive, gpu_name=gpu_name, acc=acc, shape=shape_l, arch=arch, gpu_facts=facts,
                            step=step, passages=state.get("passages", []),
                            retrieval_note=state.get("retrieval_note", ""), neighbours_k=neighbours_k,
                            mode=eval_kwargs.get("mode", "offline"), feedback=state.get("feedback"))
        try:
            props = proposer.propose(ctx, want)
        except EndpointFatal:
            raise  # a rejected key or an unknown model: the run stops here (exit code 3), and resumes at this step
        except Exception as e:  # the builtin policy or a backend bug: record, count as a failed step
            props = [Proposal(None, reason=f"proposer failed: {type(e).__name__}: {e}", model=proposer_name)]
        out = []
        for p in props:
            # The state is checkpointed after every node: it keeps references, not kernels and replies (sources go
            # to the archive's kernel files, replies to the run's reply store, each once per content).
            d = p.to_dict()
            src = d.pop("source")
            d["source_hash"] = archive.store_source(src) if src else None
            d["reply"] = replies.put(d.pop("raw"))
            d["raw"] = d["reply"].pop("head")
            out.append(d)
        prompt = None
        try:
            prompt = proposer.prompt_for_log(ctx) if hasattr(proposer, "prompt_for_log") else None
        except Exception as e:
            prompt = {"error": f"could not render the prompt for the log: {e}"}
        log(state, "propose", {"n": want, "prompt": prompt, "best_id": ctx.parent_id},
            {"proposals": [_summary(d) for d in out]})
        tokens = dict(state.get("tokens") or {})
        for d in out:
            for key, v in (d.get("usage") or {}).items():
                tokens[key] = tokens.get(key, 0) + int(v or 0)
        return {"proposals": out, "tokens": tokens}

    def evaluate(state: ShapeState) -> dict[str, Any]:
        results = []
        step = state.get("step", 0)
        evaluations = state.get("evaluations", 0)
        memo = state.get("memo_hits", 0)
        seen: set[str] = set()  # hashes handled by this invocation (a repeat within the step is a memo hit)
        for i, p in enumerate(state.get("proposals", [])):
            if not p.get("source_hash"):
                row = {"index": i, "variant_id": None, "status": "no_kernel", "speedup": None, "memo": False,
                       "reason": p.get("reason", "")}
                row["feedback"] = note_for(step, p, row)
                results.append(row)
                continue
            # a checkpoint written before sources left the state still holds its source
            src = p.get("source") or archive.kernel_path(p["source_hash"]).read_text()
            h = p["source_hash"]
            hit = archive.find_by_hash(gpu_name, acc, shape_l, h)
            if hit is not None:
                # Archived by this very step before a kill: a finished evaluation of this run, not a repeat.
                recovered = hit.run == run and hit.step == state.get("step", 0) and h not in seen
                seen.add(h)
                if recovered:
                    evaluations += 1
                else:
                    memo += 1
                row = {"index": i, "variant_id": hit.id, "status": hit.status, "speedup": hit.speedup,
                       "memo": not recovered, "reason": hit.reason}
                row["feedback"] = note_for(step, p, row, hit.result)
                results.append(row)
                log(state, "evaluate", {"index": i, "source_hash": h},
                    {"memo": not recovered, "recovered": recovered, "variant_id": hit.id, "status": hit.status,
                     "speedup": hit.speedup, "speedups": _speedups(hit.result)})
                continue
            t0 = time.monotonic()
            try:
                res = evaluate_fn(src, (m, n, k), acc=acc, arch=arch, **eval_kwargs)
            except Exception as e:
                res = EvalResult(status="error", reason=f"evaluate_fn raised {type(e).__name__}: {e}",
                                 shape=(m, n, k), acc=acc)
            vid = None
            seen.add(h)
            if res.status not in _NOT_ARCHIVED:
                vid = archive.add(run, gpu_name, acc, shape_l, src, p.get("model") or proposer_name, res,
                                  family=p.get("family"), params=p.get("params"), step=state.get("step", 0),
                                  parent=p.get("parent"), summary=p.get("summary") or "")
                evaluations += 1
            sp = res.speedup("cublaslt-autotune-max") if res.ok else None
            row = {"index": i, "variant_id": vid, "status": res.status, "speedup": sp, "memo": False,
                   "reason": res.reason}
            row["feedback"] = note_for(step, p, row, res)
            results.append(row)
            log(state, "evaluate", {"index": i, "source_hash": h},
                {"variant_id": vid, "memo": False, "status": res.status, "reason": res.reason, "speedup": sp,
                 "speedups": _speedups(res),
                 "seconds": round(time.monotonic() - t0, 3)})
        return {"step_results": results, "evaluations": evaluations, "memo_hits": memo}

    def profile(state: ShapeState) -> dict[str, Any]:
        done = list(state.get("profiled", []))
        ok = [r for r in state.get("step_results", []) if r["status"] == "ok" and r["variant_id"] is not None]
        if not ok or profile_fn is None:
            return {"profiled": done}
        top = max(ok, key=lambda r: r["speedup"] or 0.0)
        v = archive.get(top["variant_id"])
        if v is None or v.id in done or v.ncu or v.result.ncu:
            return {"profiled": done}
        try:
            ncu = profile_fn(v.read_source(), (m, n, k), acc=acc, arch=arch)
            note = "" if ncu else "the profiler returned nothing"
        except Exception as e:
            ncu, note = None, f"profiling failed: {type(e).__name__}: {e}"
        if ncu:
            archive.set_ncu(v.id, ncu)
        done.append(v.id)
        log(state, "profile", {"variant_id": v.id}, {"ncu": ncu, "note": note})
        return {"profiled": done}

    def record(state: ShapeState) -> dict[str, Any]:
        results = state.get("step_results", [])
        with_src = sum(1 for p in state.get("proposals", []) if p.get("source_hash"))
        no_kernel = sum(1 for r in results if r["status"] == "no_kernel")
        b = archive.best(gpu_name, acc, shape_l)
        prev = state.get("best_speedup")
        new_sp = b.speedup if b else None
        improved = new_sp is not None and (prev is None or new_sp > prev * (1 + plateau_min_gain))
        upd = {
            "step": state.get("step", 0) + 1,
            "candidates": state.get("candidates", 0) + with_src,
            "no_kernel": state.get("no_kernel", 0) + no_kernel,
            "failed_steps_in_row": 0 if with_src else state.get("failed_steps_in_row", 0) + 1,
            "last_error": "" if with_src else next((r["reason"] for r in results if r.get("reason")),
                                                   "the model returned no candidates"),
            "no_improve_steps": 0 if improved else state.get("no_improve_steps", 0) + 1,
            "best_id": b.id if b else None,
            "best_speedup": new_sp,
            "proposals": [],
            "passages": [],
            "feedback": carry(state.get("feedback") or [], [r["feedback"] for r in results if r.get("feedback")]),
        }
        log(state, "record", {"results": results},
            {"best_id": upd["best_id"], "best_speedup": new_sp, "improved": improved,
             "candidates": upd["candidates"]})
        return upd

    def decide(state: ShapeState) -> dict[str, Any]:
        reason = None
        best = state.get("best_speedup")
        if target_speedup is not None and best is not None and best >= target_speedup:
            reason = "target_reached"
        elif state.get("candidates", 0) >= budget_candidates:
            reason = "budget_candidates"
        elif budget_minutes is not None and state.get("elapsed_s", 0.0) >= budget_minutes * 60:
            reason = "budget_minutes"
        elif plateau is not None and state.get("no_improve_steps", 0) >= plateau and best is not None:
            reason = "plateau"
        elif state.get("failed_steps_in_row", 0) >= max_failed_steps:
            reason = "proposer_failing"
        elif state.get("step", 0) >= max_steps:
            reason = "max_steps"
        log(state, "decide", None, {"stop_reason": reason, "candidates": state.get("candidates", 0),
                                    "elapsed_s": round(state.get("elapsed_s", 0.0), 3), "best_speedup": best})
        return {"stop_reason": reason}

    g = StateGraph(ShapeState)
    for fn in (retrieve, propose, evaluate, profile, record, decide):
        g.add_node(fn.__name__, timed(fn))
    g.add_edge(START, "retrieve")
    g.add_edge("retrieve", "propose")
    g.add_edge("propose", "evaluate")
    g.add_conditional_edges("evaluate", lambda s: "profile" if profile_fn is not None else "record",
                            ["profile", "record"])
    g.add_edge("profile", "record")
    g.add_edge("record", "decide")
    g.add_conditional_edges("decide", lambda s: END if s.get("stop_reason") else "retrieve", ["retrieve", END])

    # Campaign lanes run several shapes of one run at once: one file, one connection each, waiting on locks.
    conn = sqlite3.connect(run_dir / CHECKPOINT_FILE, check_same_thread=False, timeout=120)
    try:
        app = g.compile(checkpointer=SqliteSaver(conn))
        config = {"configurable": {"thread_id": tid}, "recursion_limit": 10_000}
        snap = app.get_state(config)
        resumed = already_done = False
        # A kill between a node's end and the next checkpoint leaves that node's writes pending and `next` empty:
        # without a stop_reason the thread is unfinished all the same, and invoking resumes from those writes.
        if snap.values and (snap.next or not snap.values.get("stop_reason")):
            resumed = True
            transcript.append(thread=tid, shape=shape_l, step=snap.values.get("step", 0), node="resume", run=run,
                              input={"next": list(snap.next)})
            final = app.invoke(None, config, durability="sync")
        elif snap.values and not _would_continue(snap.values, budget_candidates, budget_minutes, target_speedup):
            already_done = True
            final = snap.values
        elif snap.values:  # finished earlier, but the budget has grown: go on in the same thread
            transcript.append(thread=tid, shape=shape_l, step=snap.values.get("step", 0), node="extend", run=run,
                              input={"budget_candidates": budget_candidates, "budget_minutes": budget_minutes})
            final = app.invoke({"stop_reason": None, "no_improve_steps": 0, "failed_steps_in_row": 0}, config,
                               durability="sync")
        else:
            init: ShapeState = {
                "run": run, "thread_id": tid, "gpu_name": gpu_name, "acc": acc, "arch": arch, "shape": shape_l,
                "step": 0, "candidates": 0, "evaluations": 0, "memo_hits": 0, "no_kernel": 0,
                "failed_steps_in_row": 0, "no_improve_steps": 0, "elapsed_s": 0.0, "tokens": {}, "passages": [],
                "retrieval_note": "", "proposals": [], "step_results": [], "profiled": [], "best_id": None,
                "best_speedup": None, "stop_reason": None, "feedback": [],
            }
            transcript.append(thread=tid, shape=shape_l, step=0, node="start", run=run,
                              input={"proposer": proposer_name, "budget_candidates": budget_candidates,
                                     "budget_minutes": budget_minutes, "n_per_step": n_per_step,
                                     "target_speedup": target_speedup, "plateau": plateau, "arch": arch})
            final = app.invoke(init, config, durability="sync")
    finally:
        conn.close()
    return ShapeOutcome(
        thread_id=tid, shape=(m, n, k), acc=acc, gpu_name=gpu_name, stop_reason=final.get("stop_reason"),
        steps=final.get("step", 0), candidates=final.get("candidates", 0), evaluations=final.get("evaluations", 0),
        memo_hits=final.get("memo_hits", 0), no_kernel=final.get("no_kernel", 0), best_variant_id=final.get("best_id"),
        best_speedup=final.get("best_speedup"), elapsed_s=final.get("elapsed_s", 0.0),
        tokens=dict(final.get("tokens") or {}), resumed=resumed, already_done=already_done,
        last_error=final.get("last_error", "") if final.get("stop_reason") == "proposer_failing" else "")


def _would_continue(values: dict[str, Any], budget_candidates: int, budget_minutes: float | None,
                    target_speedup: float | None) -> bool:
    """Whether a finished thread would run further under the budgets given now (a campaign re-run with more)."""
    reason = values.get("stop_reason")
    best = values.get("best_speedup")
    if target_speedup is not None and best is not None and best >= target_speedup:
        return False
    if reason == "budget_candidates":
        return values.get("candidates", 0) < budget_candidates
    if reason == "budget_minutes":
        return budget_minutes is None or values.get("elapsed_s", 0.0) < budget_minutes * 60
    if reason == "target_reached":
        return target_speedup is None or best is None or best < target_speedup
    if reason == "proposer_failing":  # the endpoint may be back (or the key set): spend what the budget has left
        return values.get("candidates", 0) < budget_candidates and (
            budget_minutes is None or values.get("elapsed_s", 0.0) < budget_minutes * 60)
    return False
