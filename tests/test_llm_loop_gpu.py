"""The LLM loop on the GPU: a campaign with the OpenAI backend against a local scripted model that answers with real
kernels (the `small` family's mma.sync kernel, edits of it, one reply without a kernel, one that does not build),
the real evaluator, Nsight Compute on and retrieval from the CUTLASS/CuTe store. The transcript must show a failure
fed back into a later prompt and a contrastive pair (with NCU metric changes) in a prompt.

Run on the device with scripts/device_llm_loop.sh (it installs the carried wheels and builds the store first);
$CUDAL2_RETRIEVAL_STORE names the store, and with $OUT set the run's transcript, archive and report are copied
there."""
from __future__ import annotations

import io
import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from http_servers import Reply, ScriptedServer, openai_chat, prompt_text  # noqa: E402

pytestmark = pytest.mark.gpu

SHAPE = (1024, 1024, 1024)
BASE = {"bm": 64, "bn": 64, "bk": 32, "wm": 2, "wn": 2, "stages": 3, "split_k": 1}
_BEST = re.compile(r"## The best kernel so far: #(\d+).*?```cuda\n(.*?)```", re.DOTALL)
_STAGES = re.compile(r"constexpr int STAGES = (\d+);")


def _kernel(params: dict) -> str:
    from agent.families import render

    return render("small", params, SHAPE, "sm_90a")


def scripted_model():
    """The model: request i of the run -> a reply (the probe request comes alone, then two per step)."""
    tried_stages: set[int] = {3}

    def reply(i: int, path: str, body: dict) -> Reply:
        text = prompt_text(body)
        m = _BEST.search(text)
        if i == 0:
            return Reply(200, openai_chat("Summary: mma.sync kernel, 64x64 tiles, 3-stage cp.async pipeline\n"
                                          f"```cuda\n{_kernel(BASE)}```\n"))
        if i == 1:  # a reply without a kernel: the next prompt must name it
            return Reply(200, openai_chat("I would raise the pipeline depth first.\nLet me think about the tile "
                                          "size before writing code."))
        if i == 2:  # a kernel that does not build
            broken = _kernel({**BASE, "bm": 128, "wm": 4}).replace("constexpr int STAGES", "constexpr int STAGES_")
            return Reply(200, openai_chat(f"Summary: 128-row tiles\n```cuda\n{broken}```\n"))
        if m is not None:  # an edit of the best kernel that changes one idea: its pipeline depth
            cur = int(_STAGES.search(m.group(2)).group(1))
            new = next((s for s in (4, 2, 5, 6) if s not in tried_stages), None)
            if new is not None and i % 2 == 1:
                tried_stages.add(new)
                return Reply(200, openai_chat(
                    f"Summary: {new} pipeline stages instead of {cur}\nThe profile shows long scoreboard stalls.\n"
                    f"<<<<<<< SEARCH\nconstexpr int STAGES = {cur};\n=======\nconstexpr int STAGES = {new};\n"
                    ">>>>>>> REPLACE\n"))
        alt = [{**BASE, "bn": 128, "wn": 4}, {**BASE, "bm": 32, "wm": 1}, {**BASE, "bk": 64}][i % 3]
        return Reply(200, openai_chat(f"Summary: a whole new file with {alt}\n```cuda\n{_kernel(alt)}```\n"))

    return reply


def test_llm_loop_with_ncu_and_retrieval(tmp_path):
    # a device set up from the slim wheels (fetch_device_wheels.sh --no-retrieval) has no retrieval stack at all
    pytest.importorskip("chromadb", reason="no chromadb here: scripts/device_llm_loop.sh carries the full wheel set")
    from rich.console import Console

    from agent.campaign.driver import CampaignConfig, EvaluatorSeam
    from agent.campaign.cli import finish_campaign
    from agent.campaign.config import ModelConfig
    from agent.retrieval import Retriever

    from agent.retrieval import StoreError

    try:  # $CUDAL2_RETRIEVAL_STORE: a store built on this machine (scripts/device_llm_loop.sh builds it first)
        retriever = Retriever()
    except StoreError as e:
        pytest.skip(f"no retrieval store here ({e}); scripts/device_llm_loop.sh builds one and runs this test")
    assert retriever.count() > 1000, "the retrieval store holds no headers: build it with `cudal2 corpus build`"
    seam = EvaluatorSeam([0], ncu=True)
    cfg = CampaignConfig(run="llmloop", shapes=[SHAPE], budget_candidates=8, runs_dir=tmp_path, n_per_step=2,
                         global_archive=None, final_modes=(), confirm_top=0)
    buf = io.StringIO()
    with ScriptedServer(scripted_model()) as server:
        model = ModelConfig(backend="openai", base_url=server.base_url + "/v1", model_name="scripted-kernels",
                            api_key_env="NO_KEY_FOR_THE_LOCAL_SERVER", timeout_s=60, max_attempts=2)
        rc = finish_campaign(cfg, seam, model, retrieve_fn=lambda q: retriever.query(q),
                             console=Console(file=buf, width=200), live=False)
        assert server.failures == []
    run_dir = cfg.run_dir
    if os.environ.get("OUT"):
        for name in ("transcript.jsonl", "archive.sqlite"):
            shutil.copy(run_dir / name, Path(os.environ["OUT"]) / name)
        (Path(os.environ["OUT"]) / "campaign.txt").write_text(buf.getvalue())
    assert rc == 0, buf.getvalue()
    events = [json.loads(line) for line in (run_dir / "transcript.jsonl").open()]
    prompts = [e["input"]["prompt"]["user"] for e in events if e["node"] == "propose"]
    assert any("## What went wrong last time" in p and "I would raise the pipeline depth first." in p
               for p in prompts), "no prompt names the reply without a kernel"
    assert any("did not compile" in p for p in prompts), "no prompt names the build failure"
    pairs = [p for p in prompts if "## Contrasts: variants that differ in one idea" in p]
    assert pairs, "no prompt holds a contrastive pair"
    assert any(re.search(r"\| (sm_throughput_pct|duration_us|dram_throughput_pct) \| [\d.]+ \| [\d.]+ \|", p)
               for p in pairs), "the contrastive pairs carry no NCU metric changes"
    retrieved = [e for e in events if e["node"] == "retrieve"]
    assert retrieved and all(e["output"]["passages"] for e in retrieved), [e["output"] for e in retrieved]
    assert any(not p["source"].startswith("retrieval_corpus/") for e in retrieved for p in e["output"]["passages"])
    assert any("the kernel's API:" in e["input"]["query"] for e in retrieved)
    from agent.campaign.archive import Archive

    hist = Archive(run_dir / "archive.sqlite").history(seam.gpu_name, "fp32", SHAPE)
    edits = [v for v in hist if v.parent is not None]
    assert edits and all("pipeline stages" in v.summary for v in edits)
    assert all(v.parent is None for v in hist if "whole new file" in v.summary)
    if os.environ.get("OUT"):
        from agent.report import report_run

        report_run("llmloop", runs_dir=tmp_path, out=Path(os.environ["OUT"]) / "report.html")
