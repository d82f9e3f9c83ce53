"""The per-shape loop as a LangGraph StateGraph:

    retrieve -> propose -> evaluate -> [profile] -> record -> decide -> (retrieve | END)

One thread per (GPU model, accumulator, M, N, K), checkpointed after every node into
`<run_dir>/checkpoints.sqlite` (SqliteSaver, synchronous writes). A killed run resumes at the node it was in.
Finished evaluations are never repeated: the evaluate node archives each result the moment it has it, and looks
every source up in the archive (by hash, per gpu/acc/shape) before evaluating it — so a kill in the middle of a
step loses only the evaluation that was in flight.

`ShapeLoop` holds what one shape's loop works with; its nodes are its methods, and `LoopBudget` says when it stops.
The GPU is reached only through the injected `evaluate_fn` (signature of evaluator.api.evaluate) and the optional
`profile_fn(source, shape, *, acc, arch) -> dict | None` (NCU metrics); retrieval through `retrieve_fn(query) ->
list of passages` (dicts or objects with text/source/symbol/line/score). Nothing here imports the evaluator's GPU
code.
"""
from __future__ import annotations

import dataclasses
import sqlite3
import time
from pathlib import Path
from typing import Any, Callable

from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph

from agent.campaign.archive import Archive
from agent.files import to_wal
from agent.loop.budget import LoopBudget
from agent.loop.state import ShapeOutcome, ShapeState, thread_id
from agent.proposers.base import Proposal, ProposalContext, Proposer
from agent.proposers.deadline import EndpointFatal
from agent.proposers.feedback import carry, note_for
from agent.reply_store import ReplyStore
from agent.transcript import Transcript
from evaluator.record import NOT_ABOUT_THE_KERNEL, EvalResult

EvaluateFn = Callable[..., EvalResult]
RetrieveFn = Callable[[str], list]
ProfileFn = Callable[..., "dict[str, Any] | None"]

CHECKPOINT_FILE = "checkpoints.sqlite"


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


class ShapeLoop:
    """Run (or resume, or report the finished) loop for one shape: `ShapeLoop(...).run()`. See docs/loop.md."""

    def __init__(self, shape, *, acc: str, gpu_name: str, arch: str | None, run_dir, proposer: Proposer,
                 evaluate_fn: EvaluateFn, archive: Archive, transcript: Transcript,
                 budget: LoopBudget | None = None, retrieve_fn: RetrieveFn | None = None,
                 profile_fn: ProfileFn | None = None, gpu_facts: dict[str, Any] | None = None,
                 neighbours_k: int = 4, eval_kwargs: dict[str, Any] | None = None):
        self.m, self.n, self.k = (int(x) for x in shape)
        self.shape_l = [self.m, self.n, self.k]
        self.acc, self.gpu_name, self.arch = acc, gpu_name, arch
        self.budget = budget or LoopBudget()
        self.run_dir = Path(run_dir)
        self.proposer, self.evaluate_fn = proposer, evaluate_fn
        self.retrieve_fn, self.profile_fn = retrieve_fn, profile_fn
        self.archive, self.transcript = archive, transcript
        self.facts = dict(gpu_facts or {})
        self.neighbours_k = neighbours_k
        self.eval_kwargs = dict(eval_kwargs or {})
        self.run_name = self.run_dir.name
        self.tid = thread_id(gpu_name, acc, self.shape_l)
        self.proposer_name = getattr(proposer, "name", type(proposer).__name__)
        self.replies = ReplyStore(self.run_dir)

    # ---- helpers ----
    def _log(self, state: ShapeState, node: str, input: Any = None, output: Any = None) -> None:
        self.transcript.append(thread=self.tid, shape=self.shape_l, step=state.get("step", 0), node=node, input=input,
                               output=output, run=self.run_name)

    @staticmethod
    def _timed(fn: Callable[[ShapeState], dict[str, Any]]) -> Callable[[ShapeState], dict[str, Any]]:
        def node(state: ShapeState) -> dict[str, Any]:
            t0 = time.monotonic()
            upd = fn(state)
            upd["elapsed_s"] = upd.get("elapsed_s", state.get("elapsed_s", 0.0)) + (time.monotonic() - t0)
            return upd

        return node

    def _best_item(self) -> dict[str, Any] | None:
        b = self.archive.best(self.gpu_name, self.acc, self.shape_l)
        return b.as_history(with_source=True) if b else None

    # ---- nodes ----
    def retrieve(self, state: ShapeState) -> dict[str, Any]:
        log, retrieve_fn, shape_l = self._log, self.retrieve_fn, self.shape_l
        if retrieve_fn is None:
            return {"passages": [], "retrieval_note": "no retriever configured"}
        q = _query(shape_l, self._best_item())
        try:
            passages = [_passage_dict(p) for p in (retrieve_fn(q) or [])]
            note = "" if passages else "the retriever found nothing relevant"
        except Exception as e:  # a missing store or a broken index must not stop the search
            passages, note = [], f"retrieval unavailable ({type(e).__name__}: {e})"
        log(state, "retrieve", {"query": q}, {"passages": [{k: p[k] for k in ("source", "symbol", "line", "score")}
                                                          for p in passages], "note": note})
        return {"passages": passages, "retrieval_note": note}

    def propose(self, state: ShapeState) -> dict[str, Any]:
        archive, log, proposer, proposer_name = self.archive, self._log, self.proposer, self.proposer_name
        gpu_name, acc, shape_l, arch, facts = self.gpu_name, self.acc, self.shape_l, self.arch, self.facts
        n_per_step, budget_candidates = self.budget.n_per_step, self.budget.candidates
        neighbours_k, eval_kwargs = self.neighbours_k, self.eval_kwargs
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
            d["reply"] = self.replies.put(d.pop("raw"))
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

    def evaluate(self, state: ShapeState) -> dict[str, Any]:
        archive, log, evaluate_fn, proposer_name = self.archive, self._log, self.evaluate_fn, self.proposer_name
        gpu_name, acc, shape_l, arch, run = self.gpu_name, self.acc, self.shape_l, self.arch, self.run_name
        m, n, k = shape_l
        eval_kwargs = self.eval_kwargs
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
            if res.status not in NOT_ABOUT_THE_KERNEL:
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

    def profile(self, state: ShapeState) -> dict[str, Any]:
        archive, log, profile_fn = self.archive, self._log, self.profile_fn
        acc, arch, (m, n, k) = self.acc, self.arch, self.shape_l
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

    def record(self, state: ShapeState) -> dict[str, Any]:
        archive, log, plateau_min_gain = self.archive, self._log, self.budget.plateau_min_gain
        gpu_name, acc, shape_l = self.gpu_name, self.acc, self.shape_l
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

    def decide(self, state: ShapeState) -> dict[str, Any]:
        reason = self.budget.stop_reason(state)
        self._log(state, "decide", None, {"stop_reason": reason, "candidates": state.get("candidates", 0),
                                          "elapsed_s": round(state.get("elapsed_s", 0.0), 3),
                                          "best_speedup": state.get("best_speedup")})
        return {"stop_reason": reason}

    # ---- the graph ----
    def _graph(self) -> StateGraph:
        g = StateGraph(ShapeState)
        for fn in (self.retrieve, self.propose, self.evaluate, self.profile, self.record, self.decide):
            g.add_node(fn.__name__, self._timed(fn))
        g.add_edge(START, "retrieve")
        g.add_edge("retrieve", "propose")
        g.add_edge("propose", "evaluate")
        g.add_conditional_edges("evaluate", lambda s: "profile" if self.profile_fn is not None else "record",
                                ["profile", "record"])
        g.add_edge("profile", "record")
        g.add_edge("record", "decide")
        g.add_conditional_edges("decide", lambda s: END if s.get("stop_reason") else "retrieve", ["retrieve", END])
        return g

    def _initial_state(self) -> ShapeState:
        return {
            "run": self.run_name, "thread_id": self.tid, "gpu_name": self.gpu_name, "acc": self.acc,
            "arch": self.arch, "shape": self.shape_l,
            "step": 0, "candidates": 0, "evaluations": 0, "memo_hits": 0, "no_kernel": 0,
            "failed_steps_in_row": 0, "no_improve_steps": 0, "elapsed_s": 0.0, "tokens": {}, "passages": [],
            "retrieval_note": "", "proposals": [], "step_results": [], "profiled": [], "best_id": None,
            "best_speedup": None, "stop_reason": None, "feedback": [],
        }

    def run(self) -> ShapeOutcome:
        budget, tid, shape_l, run = self.budget, self.tid, self.shape_l, self.run_name
        self.run_dir.mkdir(parents=True, exist_ok=True)
        # Campaign lanes run several shapes of one run at once: one file, one connection each, waiting on locks.
        conn = sqlite3.connect(self.run_dir / CHECKPOINT_FILE, check_same_thread=False, timeout=120)
        try:
            to_wal(conn)  # before SqliteSaver's own switch, which fails at once where another lane is making it
            app = self._graph().compile(checkpointer=SqliteSaver(conn))
            config = {"configurable": {"thread_id": tid}, "recursion_limit": 10_000}
            snap = app.get_state(config)
            resumed = already_done = False
            # A kill between a node's end and the next checkpoint leaves that node's writes pending and `next`
            # empty: without a stop_reason the thread is unfinished all the same, and invoking resumes from them.
            if snap.values and (snap.next or not snap.values.get("stop_reason")):
                resumed = True
                self.transcript.append(thread=tid, shape=shape_l, step=snap.values.get("step", 0), node="resume",
                                       run=run, input={"next": list(snap.next)})
                final = app.invoke(None, config, durability="sync")
            elif snap.values and not budget.would_continue(snap.values):
                already_done = True
                final = snap.values
            elif snap.values:  # finished earlier, but the budget has grown: go on in the same thread
                self.transcript.append(thread=tid, shape=shape_l, step=snap.values.get("step", 0), node="extend",
                                       run=run, input={"budget_candidates": budget.candidates,
                                                       "budget_minutes": budget.minutes})
                final = app.invoke({"stop_reason": None, "no_improve_steps": 0, "failed_steps_in_row": 0}, config,
                                   durability="sync")
            else:
                self.transcript.append(thread=tid, shape=shape_l, step=0, node="start", run=run,
                                       input={"proposer": self.proposer_name, "budget_candidates": budget.candidates,
                                              "budget_minutes": budget.minutes, "n_per_step": budget.n_per_step,
                                              "target_speedup": budget.target_speedup, "plateau": budget.plateau,
                                              "arch": self.arch,
                                              # what the prompts were rendered from, for re-rendering them (cudal2
                                              # dataset export)
                                              "gpu_facts": self.facts,
                                              "mode": self.eval_kwargs.get("mode", "offline")})
                final = app.invoke(self._initial_state(), config, durability="sync")
        finally:
            conn.close()
        return ShapeOutcome(
            thread_id=tid, shape=(self.m, self.n, self.k), acc=self.acc, gpu_name=self.gpu_name,
            stop_reason=final.get("stop_reason"), steps=final.get("step", 0), candidates=final.get("candidates", 0),
            evaluations=final.get("evaluations", 0), memo_hits=final.get("memo_hits", 0),
            no_kernel=final.get("no_kernel", 0), best_variant_id=final.get("best_id"),
            best_speedup=final.get("best_speedup"), elapsed_s=final.get("elapsed_s", 0.0),
            tokens=dict(final.get("tokens") or {}), resumed=resumed, already_done=already_done,
            last_error=final.get("last_error", "") if final.get("stop_reason") == "proposer_failing" else "")


_BUDGET_FIELDS = {f.name for f in dataclasses.fields(LoopBudget)}


def run_shape(shape, *, budget: LoopBudget | None = None, **kw: Any) -> ShapeOutcome:
    """`ShapeLoop(shape, ...).run()`, the budget's fields also taken as keywords (budget_candidates=, plateau=, ...)."""
    given = {name.removeprefix("budget_"): kw.pop(name) for name in list(kw)
             if name.removeprefix("budget_") in _BUDGET_FIELDS}
    if given:
        budget = dataclasses.replace(budget, **given) if budget else LoopBudget(**given)
    return ShapeLoop(shape, budget=budget, **kw).run()
