"""The per-shape loop end to end on CPU: real scripted HTTP model servers, recorded evaluation results as the GPU
seam, a real SQLite archive, transcript and LangGraph checkpointer."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from http_servers import (RecordedEvaluator, Reply, ScriptedServer, kernel_source, openai_chat, openai_error,  # noqa: E402
                          prompt_text)

from agent.campaign.archive import Archive  # noqa: E402
from agent.campaign.config import ModelConfig  # noqa: E402
from agent.loop.shape_loop import CHECKPOINT_FILE, run_shape  # noqa: E402
from agent.proposers.openai_backend import OpenAIProposer  # noqa: E402
from agent.transcript import Transcript  # noqa: E402

SHAPE = (4096, 4096, 4096)
KEY = "sk-test-0123456789abcdefSECRETvalue"
GPU_FACTS = {"sm_count": 132, "smem_per_block_optin_kb": 227, "l2_mb": 60, "max_sm_clock_mhz": 1980}
PASSAGES = [
    {"text": "SM90 GMMA atoms: 64xNx16 warpgroup MMA reading A/B from shared memory descriptors.",
     "source": "cutlass/include/cute/atom/mma_traits_sm90_gmma.hpp", "symbol": "SM90_64x128x16_F32F16F16_SS",
     "line": 412, "score": 0.81, "kind": "header"},
    {"text": "Multistage pipelines overlap cp.async copies of stage s+1 with MMAs of stage s.",
     "source": "retrieval_corpus/notes/pipelining.md", "symbol": None, "line": 3, "score": 0.64, "kind": "note"},
]


def fenced(tag: str) -> str:
    return f"Here is the kernel.\n\n```cuda\n{kernel_source(tag)}```\n"


def proposer_for(server: ScriptedServer, **kw) -> OpenAIProposer:
    cfg = ModelConfig(backend="openai", base_url=server.base_url + "/v1", model_name="cuda-l2-test",
                      api_key_env="CUDAL2_TEST_KEY", backoff_initial_s=0.01, backoff_max_s=0.05, timeout_s=5, **kw)
    return OpenAIProposer(cfg)


def all_run_bytes(*dirs: Path) -> bytes:
    out = b""
    for d in dirs:
        for p in d.rglob("*"):
            if p.is_file():
                out += p.read_bytes()
    return out


def test_multi_step_run_shows_the_model_its_history(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDAL2_TEST_KEY", KEY)
    steps = [("naive", "broken"), ("tile128", None), ("tile128x256", "wrong"), ("pipelined-edit", "tile128"),
             ("wgmma", "wgmma")]

    def script(i, path, body):
        if path != "/v1/chat/completions":
            return Reply(404, {"error": {"message": "no such route"}})
        text = prompt_text(body)
        step = i // 2
        # What the model must have been shown by now.
        must = ["M=4096, N=4096, K=4096", "SMs: 132", "mma_traits_sm90_gmma.hpp:412",
                'extern "C" int hgemm(const half* A']
        if step >= 1:
            must += ["0.017x", "compile_error", "wgmma_fence", "vs cublaslt-autotune-max", "vs cublas-max"]
        if step >= 2:
            must += ["0.721x", "dram_throughput_pct=81.5", "bottleneck: memory-bound",
                     "regs", "48K"]
        if step >= 3:
            must += ["0.964x", "incorrect", "exceeds the bound", "runner-up #", "// variant: tile128x256"]
        if step >= 4:
            must += ["1.036x", "bottleneck: tensor-pipe-bound", "edit of #"]
        for s in must:
            if s not in text:
                server.fail(f"request {i} (step {step}) prompt lacks {s!r}")
        if body.get("model") != "cuda-l2-test" or body.get("temperature") != 0.8:
            server.fail(f"request {i}: model/temperature not sent as configured: {body.get('model')}")
        tag = steps[min(step, len(steps) - 1)][i % 2]
        if tag is None:
            return Reply(200, openai_chat("I think a larger tile would help, but I am not sure how."))
        if tag == "pipelined-edit":
            edit = ("<<<<<<< SEARCH\n// variant: tile128x256\n=======\n// variant: pipelined\n>>>>>>> REPLACE\n"
                    "<<<<<<< SEARCH\n  dim3 block(16, 16), grid((N + 15) / 16, (M + 15) / 16);\n=======\n"
                    "  dim3 block(16, 16), grid((N + 15) / 16, (M + 15) / 16);  // 3-stage pipeline\n"
                    ">>>>>>> REPLACE\n")
            return Reply(200, openai_chat("Adding a pipeline:\n" + edit))
        return Reply(200, openai_chat(fenced(tag), prompt_tokens=1000 + i, completion_tokens=500))

    profiled = []

    def profile_fn(source, shape, *, acc, arch):
        profiled.append(source.splitlines()[0])
        return {"bottleneck": {"label": "tensor-pipe-bound", "why": "fixture", "evidence": {}}, "sm_throughput_pct": 88.0}

    def retrieve(query):
        """Passages as agent.retrieval returns them (dataclasses); the query names the shape."""
        if "4096" not in query:
            raise AssertionError(f"the retrieval query does not name the shape: {query!r}")
        try:
            from agent.retrieval import Passage
        except ImportError:
            return PASSAGES
        return [Passage(**{**p, "symbol": p["symbol"] or ""}) for p in PASSAGES]

    run_dir = tmp_path / "runs" / "r1"
    archive = Archive(tmp_path / "archive" / "archive.sqlite")
    transcript = Transcript(run_dir / "transcript.jsonl", run="r1")
    evaluate = RecordedEvaluator()
    with ScriptedServer(script) as server:
        out = run_shape(SHAPE, acc="fp32", gpu_name="H200", arch="sm_90a", run_dir=run_dir,
                        proposer=proposer_for(server), evaluate_fn=evaluate, retrieve_fn=retrieve,
                        archive=archive, transcript=transcript, budget_candidates=20, n_per_step=2,
                        target_speedup=1.08, plateau=None, profile_fn=profile_fn, gpu_facts=GPU_FACTS)
    assert server.failures == []
    assert len(server.requests) == 10
    assert all(r.headers.get("authorization") == f"Bearer {KEY}" for r in server.requests)
    assert out.stop_reason == "target_reached"
    assert out.steps == 5
    assert out.best_speedup == pytest.approx(1.0886, abs=1e-4)
    assert out.candidates == 9 and out.no_kernel == 1
    # tile128 came again in step 3 and wgmma twice in step 4: each evaluated once, the repeats are archive hits.
    assert out.memo_hits == 2 and out.evaluations == 7
    assert [c["tag"] for c in evaluate.calls].count("wgmma") == 1
    assert out.tokens["prompt_tokens"] > 0 and out.tokens["completion_tokens"] > 0
    best = archive.get(out.best_variant_id)
    assert "// variant: wgmma" in best.read_source()
    edited = [v for v in archive.history("H200", "fp32", SHAPE) if "variant: pipelined" in v.read_source()]
    assert len(edited) == 1 and "3-stage pipeline" in edited[0].read_source()
    assert edited[0].parent is not None and archive.get(edited[0].parent).speedup == pytest.approx(0.9635)
    # the profiler ran on variants the evaluation left without NCU data, and its metrics were archived
    assert any("naive" in p for p in profiled) and any("pipelined" in p for p in profiled)
    assert archive.get(edited[0].id).ncu["bottleneck"]["label"] == "tensor-pipe-bound"
    # the transcript tells the whole story, and the "no code" reply has its reason recorded
    events = list(transcript.read())
    nodes = [e["node"] for e in events]
    assert nodes[0] == "start" and nodes.count("decide") == 5
    props = [p for e in events if e["node"] == "propose" for p in e["output"]["proposals"]]
    assert any("no kernel in the reply" in p["reason"] for p in props)
    assert all(p["latency_s"] > 0 for p in props)
    assert all(e["input"]["prompt"]["user"].startswith("## Task") for e in events if e["node"] == "propose")
    # checkpoints live in the run directory; the key is in no file the run wrote
    assert (run_dir / CHECKPOINT_FILE).exists()
    assert KEY.encode() not in all_run_bytes(run_dir, tmp_path / "archive")

    # Calling again with the same budget does nothing: the thread is finished.
    again = run_shape(SHAPE, acc="fp32", gpu_name="H200", arch="sm_90a", run_dir=run_dir,
                      proposer=proposer_for(server), evaluate_fn=evaluate, archive=archive, transcript=transcript,
                      budget_candidates=20, n_per_step=2, target_speedup=1.08)
    assert again.already_done and again.best_variant_id == out.best_variant_id


def test_failing_model_and_missing_retrieval_store_stop_cleanly(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDAL2_TEST_KEY", KEY)

    def script(i, path, body):
        if "retrieval unavailable" not in prompt_text(body):
            server.fail(f"request {i}: the prompt does not say why there is no reference material")
        if i % 3 == 2:  # provider errors often echo the key: it must never reach a file (a 401 would stop the
            # run at once: tests/test_llm_faults.py)
            return Reply(400, {"error": {"message": f"Bad request from key {KEY}", "type": "invalid"}})
        return openai_error(503, "overloaded")

    def no_store(q):
        raise FileNotFoundError("no retrieval store at runs/x/corpus (build it with: cudal2 corpus build)")

    run_dir = tmp_path / "runs" / "r2"
    archive = Archive(tmp_path / "archive.sqlite")
    transcript = Transcript(run_dir / "transcript.jsonl", run="r2")
    with ScriptedServer(script) as server:
        out = run_shape(SHAPE, acc="fp32", gpu_name="H200", arch="sm_90a", run_dir=run_dir,
                        proposer=proposer_for(server, max_attempts=2), evaluate_fn=RecordedEvaluator(),
                        retrieve_fn=no_store, archive=archive, transcript=transcript, budget_candidates=8,
                        n_per_step=1, max_failed_steps=3)
    assert server.failures == []
    assert out.stop_reason == "proposer_failing" and out.steps == 3 and out.candidates == 0
    reasons = [p["reason"] for e in transcript.read(node="propose") for p in e["output"]["proposals"]]
    assert len(reasons) == 3
    assert any("after 2 attempt(s)" in r and "503" in r for r in reasons)
    assert any("400" in r and "[REDACTED]" in r for r in reasons)
    notes = [e["output"]["note"] for e in transcript.read(node="retrieve")]
    assert all("no retrieval store" in n for n in notes)
    assert KEY.encode() not in all_run_bytes(run_dir) + (tmp_path / "archive.sqlite").read_bytes()


def test_plateau_and_evaluator_errors(tmp_path, monkeypatch):
    """A model that keeps sending the same kernel plateaus; an evaluator that raises is recorded, not archived."""
    monkeypatch.setenv("CUDAL2_TEST_KEY", KEY)
    calls = {"n": 0}

    def flaky_evaluate(source, shape, **kw):
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("worker pool died")
        return RecordedEvaluator()(source, shape, **kw)

    with ScriptedServer(lambda i, p, b: Reply(200, openai_chat(fenced("tile128")))) as server:
        out = run_shape(SHAPE, acc="fp16", gpu_name="H100", arch="sm_90a", run_dir=tmp_path / "r3",
                        proposer=proposer_for(server), evaluate_fn=flaky_evaluate, archive=Archive(tmp_path / "a.db"),
                        transcript=Transcript(tmp_path / "r3" / "t.jsonl"), budget_candidates=50, n_per_step=1,
                        plateau=2)
    assert out.stop_reason == "plateau"
    # step 0: evaluator raised (not archived); step 1: evaluated; steps 2-3: archive hits, no improvement.
    assert calls["n"] == 2 and out.evaluations == 1 and out.memo_hits == 2 and out.steps == 4
    ev = list(Transcript(tmp_path / "r3" / "t.jsonl").read(node="evaluate"))
    assert "worker pool died" in ev[0]["output"]["reason"]


# ---- kill and resume ----

DRIVER = textwrap.dedent("""
    import sys
    sys.path.insert(0, {tests!r})
    from http_servers import RecordedEvaluator
    from agent.campaign.archive import Archive
    from agent.campaign.config import ModelConfig
    from agent.loop.shape_loop import run_shape
    from agent.proposers.openai_backend import OpenAIProposer
    from agent.transcript import Transcript
    base, work, hang = sys.argv[1], sys.argv[2], sys.argv[3]
    cfg = ModelConfig(backend="openai", base_url=base + "/v1", model_name="m", api_key_env="CUDAL2_TEST_KEY",
                      backoff_initial_s=0.01, backoff_max_s=0.05, timeout_s=5)
    out = run_shape((4096, 4096, 4096), acc="fp32", gpu_name="H200", arch="sm_90a", run_dir=work + "/runs/k",
                    proposer=OpenAIProposer(cfg), evaluate_fn=RecordedEvaluator(work + "/evals.log", hang_on=hang or None),
                    archive=Archive(work + "/archive.sqlite"), transcript=Transcript(work + "/runs/k/t.jsonl", run="k"),
                    budget_candidates=6, n_per_step=3, plateau=None)
    print("OUTCOME", out.stop_reason, out.candidates, out.evaluations, out.resumed)
""")


def test_killed_run_resumes_without_repeating_finished_evaluations(tmp_path, monkeypatch):
    tags = ["naive", "tile128", "broken", "tile128x256", "pipelined", "wgmma"]

    def script(i, path, body):
        return Reply(200, openai_chat(fenced(tags[i]) if i < len(tags) else "no more ideas"))

    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER.format(tests=str(Path(__file__).parent)))
    env = dict(os.environ, CUDAL2_TEST_KEY=KEY, PYTHONPATH=str(Path(__file__).parents[1]))
    log = tmp_path / "evals.log"
    with ScriptedServer(script) as server:
        # First run: hangs while evaluating the 5th variant (step 1, second proposal); SIGKILL it there.
        proc = subprocess.Popen([sys.executable, str(driver), server.base_url, str(tmp_path), "pipelined"],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        deadline = time.time() + 60
        while time.time() < deadline:
            if log.exists() and "start pipelined" in log.read_text():
                break
            if proc.poll() is not None:
                pytest.fail(f"driver exited early: {proc.communicate()}")
            time.sleep(0.05)
        else:
            proc.kill()
            pytest.fail("the driver never reached the evaluation to kill")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        before = log.read_text().splitlines()
        done_before = [ln.split()[1] for ln in before if ln.startswith("done")]
        # Which reply a proposal got depends on arrival order, so the steps' contents are known only as sets.
        step0, step1 = {"naive", "tile128", "broken"}, {"tile128x256", "pipelined", "wgmma"}
        assert set(done_before[:3]) == step0 and "pipelined" not in done_before
        assert set(done_before[3:]) <= step1
        requests_before = len(server.requests)
        assert requests_before == 6  # both steps' proposals were made (step 1's were checkpointed)

        # Second run, in this process (same arguments, no hang): it resumes inside step 1's evaluate node.
        cfg = ModelConfig(backend="openai", base_url=server.base_url + "/v1", model_name="m",
                          api_key_env="CUDAL2_TEST_KEY", backoff_initial_s=0.01, backoff_max_s=0.05, timeout_s=5)
        monkeypatch.setenv("CUDAL2_TEST_KEY", KEY)
        out = run_shape(SHAPE, acc="fp32", gpu_name="H200", arch="sm_90a", run_dir=tmp_path / "runs" / "k",
                        proposer=OpenAIProposer(cfg), evaluate_fn=RecordedEvaluator(log),
                        archive=Archive(tmp_path / "archive.sqlite"),
                        transcript=Transcript(tmp_path / "runs" / "k" / "t.jsonl", run="k"),
                        budget_candidates=6, n_per_step=3, plateau=None)
        assert out.resumed and out.stop_reason == "budget_candidates" and out.candidates == 6
        # evaluations archived by the killed process in its last step still count as evaluations, not repeats
        assert out.evaluations == 6 and out.memo_hits == 0
        assert len(server.requests) == requests_before  # no model call repeated
    after = log.read_text().splitlines()[len(before):]
    done_after = [ln.split()[1] for ln in after if ln.startswith("done")]
    # What finished before the kill is not evaluated again; the interrupted one is, and the rest of the step.
    assert "pipelined" in done_after and not set(done_after) & set(done_before)
    assert set(done_before) | set(done_after) == step0 | step1 and len(done_after) == len(set(done_after))
    arch = Archive(tmp_path / "archive.sqlite")
    assert len(arch.history("H200", "fp32", (4096, 4096, 4096))) == 6
    events = list(Transcript(tmp_path / "runs" / "k" / "t.jsonl").read())
    assert any(e["node"] == "resume" and e["input"]["next"] == ["evaluate"] for e in events)
    # step 1's evaluations that finished before the kill are logged again on resume, marked recovered
    recovered = [e for e in events if e["node"] == "evaluate" and (e.get("output") or {}).get("recovered")]
    assert len(recovered) == len(done_before) - 3
    # the transcript's overview counts each of the six evaluations once, the ones logged again on resume included
    import io

    from rich.console import Console

    from agent.inspect import load_events, view_run, view_shape
    events = load_events(tmp_path / "runs" / "k" / "t.jsonl")[0]
    buf = io.StringIO()
    view_run(events, Console(file=buf, width=160), "k")
    row = next(line for line in buf.getvalue().splitlines() if "4096x4096x4096" in line)
    assert [c.strip() for c in row.strip("│ ").split("│")][1:4] == ["3", "6", "5"], row
    buf = io.StringIO()
    view_shape(events, Console(file=buf, width=200), SHAPE)  # and so does each step's status count
    assert sum(int(n) for n in re.findall(r"[a-z_]+×(\d+)", buf.getvalue())) == 6, buf.getvalue()
    assert KEY.encode() not in all_run_bytes(tmp_path / "runs")


def test_two_shapes_of_one_run_in_parallel_lanes(tmp_path, monkeypatch):
    """The campaign runs shapes of one run at once (one lane per GPU): one checkpoint file, one archive."""
    from concurrent.futures import ThreadPoolExecutor

    monkeypatch.setenv("CUDAL2_TEST_KEY", KEY)
    tags = ["naive", "tile128", "tile128x256", "pipelined", "wgmma", "broken"]
    script = lambda i, p, b: Reply(200, openai_chat(fenced(tags[i % len(tags)])))  # noqa: E731
    run_dir = tmp_path / "runs" / "lanes"
    archive = Archive(run_dir / "archive.sqlite")
    transcript = Transcript(run_dir / "transcript.jsonl", run="lanes")
    shapes = [(1024, 1024, 1024), (2048, 1024, 512)]
    with ScriptedServer(script) as server:
        def lane(shape):
            return run_shape(shape, acc="fp32", gpu_name="H200", arch="sm_90a", run_dir=run_dir,
                             proposer=proposer_for(server), evaluate_fn=RecordedEvaluator(), archive=archive,
                             transcript=transcript, budget_candidates=6, n_per_step=2, plateau=None)
        with ThreadPoolExecutor(2) as pool:
            outs = list(pool.map(lane, shapes))
    assert [o.stop_reason for o in outs] == ["budget_candidates"] * 2
    assert [o.thread_id for o in outs] == ["H200|fp32|1024x1024x1024", "H200|fp32|2048x1024x512"]
    for s in shapes:
        assert 1 <= len(archive.history("H200", "fp32", s)) <= 6
    threads = {e["thread"] for e in transcript.read()}
    assert threads == {o.thread_id for o in outs}


def test_builtin_policy_loop(tmp_path):
    """The built-in policy behind the Proposer interface: sources with family/params, history fed back, no repeats."""
    pytest.importorskip("agent.policy")
    from agent.proposers.builtin_backend import BuiltinProposer
    from evaluator.record import EvalResult
    import hashlib

    recorded = RecordedEvaluator().recorded
    names = sorted(recorded)

    def replay(source, shape, *, acc="fp32", arch=None, **kw):
        # a recorded GPU result per kernel, picked by the source's hash (the GPU seam of CPU tests)
        tag = names[int(hashlib.sha256(source.encode()).hexdigest(), 16) % len(names)]
        r = EvalResult.from_dict(recorded[tag])
        r.shape, r.acc = tuple(shape), acc
        return r

    archive = Archive(tmp_path / "a.sqlite")
    transcript = Transcript(tmp_path / "r" / "t.jsonl")
    out = run_shape((4096, 4096, 4096), acc="fp32", gpu_name="H200", arch="sm_90a", run_dir=tmp_path / "r",
                    proposer=BuiltinProposer(), evaluate_fn=replay, archive=archive, transcript=transcript,
                    budget_candidates=6, n_per_step=2, plateau=None)
    assert out.stop_reason == "budget_candidates" and out.steps == 3
    assert out.evaluations == 6 and out.memo_hits == 0  # the policy never proposes a measured config again
    hist = archive.history("H200", "fp32", (4096, 4096, 4096))
    assert len(hist) == 6 and all(v.family and v.params and v.proposer == "builtin" for v in hist)
    assert len({(v.family, json.dumps(v.params, sort_keys=True)) for v in hist}) == 6
    props = [p for e in transcript.read(node="propose") for p in e["output"]["proposals"]]
    assert all(p["raw"] and p["family"] for p in props)  # the policy's rationale is kept
    assert all(e["input"]["prompt"] is None for e in transcript.read(node="propose"))


def test_a_shape_no_family_can_run_ends_with_why(tmp_path):
    """N = 1001: every family needs N and K in whole 16-byte rows. The search used to end with 'the model returned
    no candidates'; now the loop stops with each family's refusal. N = 2046 (even, not a multiple of 8) is hopper_raw's
    with stores from registers, though no family lists a prior there."""
    pytest.importorskip("agent.policy")
    from agent.policy import BuiltinPolicy
    from agent.proposers.builtin_backend import BuiltinProposer

    def never(source, shape, **kw):
        raise AssertionError("nothing should reach the GPU")

    out = run_shape((64, 1001, 4096), acc="fp32", gpu_name="H200", arch="sm_90a", run_dir=tmp_path / "r",
                    proposer=BuiltinProposer(), evaluate_fn=never, archive=Archive(tmp_path / "a.sqlite"),
                    transcript=Transcript(tmp_path / "r" / "t.jsonl"), budget_candidates=4, n_per_step=2, plateau=None)
    assert out.stop_reason == "proposer_failing" and out.evaluations == 0
    assert out.last_error.startswith("no built-in kernel family runs 64x1001x4096")
    assert "N=1001 and K=4096 must be multiples of 8" in out.last_error and "hopper_wgmma" in out.last_error
    batch = BuiltinPolicy(0).propose((128, 2046, 12288), "fp32", "sm_90a", [], n=4)
    assert len(batch) == 4
    assert all(c.family == "hopper_raw" and c.params.get("epi", "direct") == "direct" for c in batch)


def test_an_accuracy_refusal_reaches_the_policy_through_the_loop(tmp_path):
    """fp16 run 40b: the loop's history carried no refusal reasons to the built-in policy, so a config refused for
    accuracy never got its fp32-accumulating twin. Here every wgmma kernel with fp16 accumulators is refused for
    accuracy; the search then evaluates the same configs with fp32 accumulators."""
    pytest.importorskip("agent.policy")
    from agent.proposers.builtin_backend import BuiltinProposer
    from evaluator.record import EvalResult

    recorded = RecordedEvaluator().recorded
    tag = next(t for t in sorted(recorded) if recorded[t]["status"] == "ok")

    def replay(source, shape, *, acc="fp32", arch=None, **kw):
        r = EvalResult.from_dict(recorded[tag])
        r.shape, r.acc = tuple(shape), acc
        if "ElementAcc = cutlass::half_t" in source:
            r.status, r.reason = "incorrect", "baseline_bounded_deviation: draw 1: RMS |C - ref| = 0.0769 vs 0.0615"
        return r

    archive = Archive(tmp_path / "a.sqlite")
    shape = (64, 2048, 4096)
    run_shape(shape, acc="fp16", gpu_name="H100", arch="sm_90a", run_dir=tmp_path / "r", proposer=BuiltinProposer(),
              evaluate_fn=replay, archive=archive, transcript=Transcript(tmp_path / "r" / "t.jsonl"),
              budget_candidates=6, n_per_step=3, plateau=None)
    hist = archive.history("H100", "fp16", shape)
    refused = [v for v in hist if v.family == "hopper_wgmma" and v.params["acc"] == "fp16"]
    twins = [v for v in hist if v.family == "hopper_wgmma" and v.params["acc"] == "fp32"]
    assert refused and all(v.status == "incorrect" for v in refused)
    assert twins and all(v.status == "ok" for v in twins)
    assert all(dict(t.params, acc="fp16") in [r.params for r in refused] for t in twins)


def test_minutes_budget_and_extending_a_finished_thread(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDAL2_TEST_KEY", KEY)
    tags = ["naive", "tile128", "tile128x256", "pipelined"]
    kw = dict(acc="fp32", gpu_name="H200", arch="sm_90a", run_dir=tmp_path / "r", evaluate_fn=RecordedEvaluator(),
              archive=Archive(tmp_path / "a.sqlite"), transcript=Transcript(tmp_path / "r" / "t.jsonl"),
              n_per_step=1, plateau=None)
    with ScriptedServer(lambda i, p, b: Reply(200, openai_chat(fenced(tags[i])))) as server:
        first = run_shape(SHAPE, proposer=proposer_for(server), budget_candidates=10, budget_minutes=1e-6, **kw)
        assert first.stop_reason == "budget_minutes" and first.steps == 1
        # a larger candidate budget (no time budget) continues the same thread where it stopped
        more = run_shape(SHAPE, proposer=proposer_for(server), budget_candidates=3, **kw)
    assert not more.already_done and more.stop_reason == "budget_candidates"
    assert more.candidates == 3 and more.steps == 3 and len(server.requests) == 3
    assert any(e["node"] == "extend" for e in kw["transcript"].read())


def test_a_graph_mode_search_reaches_the_policy_and_its_kernels_go_without_pdl(tmp_path):
    """The loop tells the proposer the timing mode it evaluates in (eval_kwargs): a search timed in CUDA graphs gets
    kernels launched without programmatic dependent launch, which cost up to 8% there (families.common.launch_knobs)."""
    pytest.importorskip("agent.policy")
    from agent.proposers.builtin_backend import BuiltinProposer
    from evaluator.record import EvalResult

    recorded = RecordedEvaluator().recorded
    tag, modes = sorted(recorded)[0], []

    def replay(source, shape, *, acc="fp32", arch=None, mode="offline", **kw):
        modes.append(mode)
        r = EvalResult.from_dict(recorded[tag])
        r.shape, r.acc = tuple(shape), acc
        return r

    archive = Archive(tmp_path / "a.sqlite")
    out = run_shape((1024, 2048, 64), acc="fp32", gpu_name="H200", arch="sm_90a", run_dir=tmp_path / "r",
                    proposer=BuiltinProposer(), evaluate_fn=replay, archive=archive,
                    transcript=Transcript(tmp_path / "r" / "t.jsonl"), budget_candidates=6, n_per_step=3,
                    plateau=None, eval_kwargs={"mode": "graph"})
    assert out.evaluations == 6 and set(modes) == {"graph"}
    hist = archive.history("H200", "fp32", (1024, 2048, 64))
    assert len(hist) == 6 and all(v.params.get("pdl", False) is False for v in hist)
