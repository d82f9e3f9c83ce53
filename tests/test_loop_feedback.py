"""What the model hears from one step to the next (a real scripted server, recorded results as the GPU): why its
replies failed, the contrast between a kernel and its one-idea child, its own summary lines as descriptions; and
what a run keeps on disk when replies are huge (bounded, once per content, never in the checkpoints)."""
from __future__ import annotations

import io
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from http_servers import RecordedEvaluator, Reply, ScriptedServer, kernel_source, openai_chat, prompt_text  # noqa: E402

from agent.campaign.archive import Archive  # noqa: E402
from agent.campaign.config import ModelConfig  # noqa: E402
from agent.loop.shape_loop import CHECKPOINT_FILE, build_context, run_shape  # noqa: E402
from agent.proposers.base import Proposal, Proposer  # noqa: E402
from agent.proposers.openai_backend import OpenAIProposer  # noqa: E402
from agent.proposers.budget import render_prompt  # noqa: E402
from agent.reply_store import REPLY_CAP_BYTES  # noqa: E402
from agent.transcript import Transcript  # noqa: E402

SHAPE = (4096, 4096, 4096)
EDIT_TO_TILE128 = ("Summary: tile 128x128 instead of the naive kernel\nBigger tiles reuse A and B.\n"
                   "<<<<<<< SEARCH\n// variant: naive\n=======\n// variant: tile128\n>>>>>>> REPLACE\n")


def fenced(tag: str, summary: str = "") -> str:
    return (f"Summary: {summary}\n" if summary else "") + f"```cuda\n{kernel_source(tag)}```\n"


def proposer(server, **kw) -> OpenAIProposer:
    return OpenAIProposer(ModelConfig(backend="openai", base_url=server.base_url + "/v1", model_name="m",
                                      api_key_env="UNSET_LOCAL_KEY", timeout_s=5, backoff_initial_s=0.01, **kw))


def test_failures_are_fed_back_and_pairs_contrasted(tmp_path):
    steps = [
        [fenced("naive", "a naive kernel"), "I would tile it, but I am not sure how.\nMaybe 128x128 tiles."],
        [fenced("broken", "wgmma attempt"), fenced("naive")],  # a build failure, and a repeat of #1
        [EDIT_TO_TILE128, fenced("wrong", "a full file that gets the rows wrong")],
        [fenced("pipelined", "pipelined"), fenced("tile128x256", "wider tile")],
    ]
    prompts: list[str] = []

    def script(i, path, body):
        prompts.append(prompt_text(body))
        step = i // 2
        return Reply(200, openai_chat(steps[min(step, len(steps) - 1)][i % 2]))

    def profile_fn(source, shape, *, acc, arch):
        if "variant: naive" in source:
            return {"bottleneck": {"label": "latency-bound"}, "duration_us": 9000.0, "sm_throughput_pct": 20.0}
        return {"bottleneck": {"label": "memory-bound"}, "duration_us": 210.0, "sm_throughput_pct": 48.2}

    run_dir = tmp_path / "runs" / "fb"
    archive = Archive(tmp_path / "archive.sqlite")
    transcript = Transcript(run_dir / "transcript.jsonl", run="fb")
    with ScriptedServer(script) as server:
        prop = proposer(server)
        prop.latch.probed = True  # both replies of a step in one go, as after the first request
        out = run_shape(SHAPE, acc="fp32", gpu_name="H200", arch="sm_90a", run_dir=run_dir, proposer=prop,
                        evaluate_fn=RecordedEvaluator(), archive=archive, transcript=transcript,
                        budget_candidates=7, n_per_step=2, plateau=None, profile_fn=profile_fn)
    assert server.failures == [] and out.steps == 4, out
    # every step's prompt differs from the one before it
    step_prompts = prompts[::2]
    assert len(set(step_prompts)) == len(step_prompts)
    p1, p2, p3 = step_prompts[1], step_prompts[2], step_prompts[3]
    assert "## What went wrong last time" not in step_prompts[0]
    assert "## What went wrong last time" in p1 and "a reply held no kernel" in p1
    assert "I would tile it, but I am not sure how." in p1  # the reply's first lines
    assert "did not compile" in p2 and 'identifier "wgmma_fence" is undefined' in p2
    assert "duplicate of variant #1" in p2
    assert "failed (incorrect)" in p3 and "exceeds the bound" in p3
    # the contrastive pair: #1 (naive) -> its edit (tile128), speedups, metric deltas and the diff side by side
    assert "## Contrasts: variants that differ in one idea" in p3
    assert "-> #" in p3 and ": tile 128x128 instead of the naive kernel" in p3
    assert "| sm_throughput_pct | 20 | 48.2 | +28.2 |" in p3 and "| bottleneck | latency-bound | memory-bound |" in p3
    assert "-// variant: naive" in p3 and "+// variant: tile128" in p3
    assert "explain in one or two sentences per pair what made the faster kernel faster" in p3
    # descriptions from the summary lines; a parent for the edit only
    hist = {v.read_source().splitlines()[0]: v for v in archive.history("H200", "fp32", SHAPE)}
    edit, whole = hist["// variant: tile128"], hist["// variant: wrong"]
    assert edit.parent == hist["// variant: naive"].id and edit.summary.startswith("tile 128x128")
    assert whole.parent is None and whole.summary == "a full file that gets the rows wrong"
    assert f"edit of #{edit.parent}: tile 128x128" in p3 and "a naive kernel" in p3
    # the dataset's view: the prompt of a step rendered again from the archive's history
    ctx = build_context(archive, gpu_name="H200", acc="fp32", shape=SHAPE, arch="sm_90a", step=4)
    system, user, dropped = render_prompt(ctx, prop.config)
    assert "Summary:" in system and "## Contrasts" in user and dropped == []


def test_the_context_budget_drops_parts_and_the_transcript_says_which(tmp_path):
    def script(i, path, body):
        return Reply(200, openai_chat(fenced(["naive", "tile128", "tile128x256", "pipelined"][i % 4], f"v{i}")))

    run_dir = tmp_path / "runs" / "bud"
    transcript = Transcript(run_dir / "transcript.jsonl", run="bud")
    passages = [{"text": "x " * 1500, "source": f"cute/p{j}.hpp", "symbol": f"S{j}", "line": 1, "score": 0.5}
                for j in range(6)]
    with ScriptedServer(script) as server:
        run_shape(SHAPE, acc="fp32", gpu_name="H200", arch="sm_90a", run_dir=run_dir,
                  proposer=proposer(server, context_tokens=8192, max_tokens=4096),
                  evaluate_fn=RecordedEvaluator(), retrieve_fn=lambda q: passages,
                  archive=Archive(tmp_path / "a.sqlite"), transcript=transcript, budget_candidates=6, n_per_step=2,
                  plateau=None)
    dropped = [e["input"]["prompt"]["dropped"] for e in transcript.read(node="propose")]
    assert any("retrieved passage(s)" in " ".join(d) for d in dropped), dropped
    for e in transcript.read(node="propose"):
        from agent.proposers.prompt import estimate_tokens

        p = e["input"]["prompt"]
        assert estimate_tokens(p["system"]) + estimate_tokens(p["user"]) + 4096 <= 8192


def test_huge_replies_are_kept_once_capped_and_out_of_the_checkpoints(tmp_path):
    """Four 5 MB replies over two steps (one repeated): a bounded run folder and small checkpoints."""
    pad = "reasoning " * 500_000  # 5 MB

    def script(i, path, body):
        tag = ["naive", "tile128"][i % 2]
        return Reply(200, openai_chat(f"Summary: big {i % 2}\n{pad}\n```cuda\n{kernel_source(tag)}```\n"))

    run_dir = tmp_path / "runs" / "big"
    transcript = Transcript(run_dir / "transcript.jsonl", run="big")
    with ScriptedServer(script) as server:
        run_shape(SHAPE, acc="fp32", gpu_name="H200", arch="sm_90a", run_dir=run_dir, proposer=proposer(server),
                  evaluate_fn=RecordedEvaluator(), archive=Archive(tmp_path / "a.sqlite"), transcript=transcript,
                  budget_candidates=4, n_per_step=2, plateau=None)
    files = sorted((run_dir / "replies").iterdir())
    assert len(files) == 2  # the same two replies in both steps: stored once each
    assert all(f.stat().st_size <= REPLY_CAP_BYTES + 200 for f in files)
    assert "[cut:" in files[0].read_text()[-200:]
    assert (run_dir / "transcript.jsonl").stat().st_size < 400_000
    assert (run_dir / CHECKPOINT_FILE).stat().st_size < 2_000_000
    props = [p for e in transcript.read(node="propose") for p in e["output"]["proposals"]]
    assert all(p["reply"]["chars"] > 5_000_000 and p["reply"]["file"].startswith("replies/") for p in props)


class _Many(Proposer):
    """A fast proposer for a long run: a new kernel (unknown to the recorded results: a compile error) and a long
    rationale at every step."""
    name = "many"

    def propose(self, context, n):
        return [Proposal(kernel_source(f"k{context.step}-{i}"), raw="why " * 20_000, model="many",
                         summary=f"variant {context.step}") for i in range(n)]


def test_inspect_stays_under_a_second_on_a_100_step_run(tmp_path):
    from rich.console import Console

    from agent.inspect import inspect_run

    run_dir = tmp_path / "runs" / "long"
    transcript = Transcript(run_dir / "transcript.jsonl", run="long")
    out = run_shape((64, 64, 64), acc="fp32", gpu_name="H200", arch="sm_90a", run_dir=run_dir, proposer=_Many(),
                    evaluate_fn=RecordedEvaluator(), archive=Archive(run_dir / "archive.sqlite"),
                    transcript=transcript, budget_candidates=100, n_per_step=1, plateau=None, max_steps=100,
                    max_failed_steps=1000)
    assert out.steps == 100
    for kw in ({}, {"shape": (64, 64, 64)}, {"shape": (64, 64, 64), "step": 99}):
        t0 = time.perf_counter()
        inspect_run("long", runs_dir=tmp_path / "runs", console=Console(file=io.StringIO(), width=160), **kw)
        took = time.perf_counter() - t0
        assert took < 1.0, (kw, took)
