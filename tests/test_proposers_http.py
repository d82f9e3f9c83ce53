"""The OpenAI-compatible and Anthropic backends against real local HTTP servers with scripted replies; the reply
parser; the model configuration (file + flags)."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from http_servers import (Reply, ScriptedServer, anthropic_error, anthropic_message, kernel_source,  # noqa: E402
                          openai_chat, openai_error, prompt_text)

from agent.campaign.config import ConfigError, ModelConfig, add_model_args, load_model_config  # noqa: E402
from agent.proposers.anthropic_backend import AnthropicProposer  # noqa: E402
from agent.proposers import ProposalContext, make_proposer  # noqa: E402
from agent.proposers.openai_backend import OpenAIProposer  # noqa: E402
from agent.proposers.parse import parse_reply  # noqa: E402

KEY = "sk-ant-api03-testkeyvalue0123456789"
CTX = ProposalContext(shape=(2048, 2048, 1024), acc="fp32", arch="sm_90a", gpu_name="H200",
                      gpu_facts={"sm_count": 132}, retrieval_note="no retriever configured")
KERNEL = kernel_source("t1")
FENCED = f"Try this:\n```cuda\n{KERNEL}```\nIt uses 16x16 blocks."


def fast(**kw) -> dict:
    return {"backoff_initial_s": 0.01, "backoff_max_s": 0.05, "timeout_s": 5, **kw}


def openai_proposer(server, **kw) -> OpenAIProposer:
    return OpenAIProposer(ModelConfig(backend="openai", base_url=server.base_url + "/v1", model_name="qwen-cuda",
                                      api_key_env="TEST_OPENAI_KEY", **fast(**kw)))


def anthropic_proposer(server, **kw) -> AnthropicProposer:
    return AnthropicProposer(ModelConfig(backend="anthropic", base_url=server.base_url, model_name="claude-test",
                                         api_key_env="TEST_ANTHROPIC_KEY", **fast(**kw)))


@pytest.fixture(autouse=True)
def keys(monkeypatch):
    monkeypatch.setenv("TEST_OPENAI_KEY", "sk-openai-test-0123456789abcdef")
    monkeypatch.setenv("TEST_ANTHROPIC_KEY", KEY)


# ---- OpenAI-compatible ----

def test_openai_429_then_success_records_attempts_usage_latency():
    def script(i, path, body):
        if i == 0:
            return openai_error(429, "rate limited")
        text = prompt_text(body)
        if "M=2048, N=2048, K=1024" not in text or 'extern "C" int hgemm' not in text:
            server.fail("the prompt lacks the shape or the contract")
        return Reply(200, openai_chat(FENCED, prompt_tokens=321, completion_tokens=123), delay_s=0.05)

    with ScriptedServer(script) as server:
        [p] = openai_proposer(server).propose(CTX, 1)
    assert server.failures == []
    assert p.source is not None and "// variant: t1" in p.source and p.reason == ""
    assert p.attempts == 2 and p.usage == {"prompt_tokens": 321, "completion_tokens": 123}
    assert p.latency_s >= 0.05 and p.total_s >= p.latency_s and p.model == "scripted-model"
    assert p.parse_kind == "fenced"
    body = server.requests[-1].body
    assert body["model"] == "qwen-cuda" and body["messages"][0]["role"] == "system"
    assert server.requests[-1].headers["authorization"] == "Bearer sk-openai-test-0123456789abcdef"


def test_openai_5xx_until_retries_exhausted():
    with ScriptedServer(lambda i, p, b: openai_error(502, "bad gateway")) as server:
        [p] = openai_proposer(server, max_attempts=3).propose(CTX, 1)
    assert p.source is None and len(server.requests) == 3 and p.attempts == 3
    assert "failed after 3 attempt(s)" in p.reason and "HTTP 502" in p.reason


def test_openai_retry_total_time_is_bounded():
    with ScriptedServer(lambda i, p, b: openai_error(503, "busy")) as server:
        t0 = time.monotonic()
        [p] = openai_proposer(server, max_attempts=1000, backoff_initial_s=0.1, backoff_max_s=0.1,
                              max_retry_s=0.5).propose(CTX, 1)
    assert p.source is None and time.monotonic() - t0 < 3 and 2 <= p.attempts < 20


def test_openai_timeout_is_retried_then_reported():
    with ScriptedServer(lambda i, p, b: Reply(200, openai_chat(FENCED), delay_s=1.5)) as server:
        [p] = openai_proposer(server, timeout_s=0.3, max_attempts=2).propose(CTX, 1)
    assert p.source is None and p.attempts == 2 and "timed out" in p.reason


def test_openai_timeout_then_success():
    script = lambda i, p, b: Reply(200, openai_chat(FENCED), delay_s=1.5 if i == 0 else 0)  # noqa: E731
    with ScriptedServer(script) as server:
        [p] = openai_proposer(server, timeout_s=0.3).propose(CTX, 1)
    assert p.source is not None and p.attempts == 2


def test_garbage_replies_are_reported_not_retried():
    replies = [Reply(200, "<html><body>502 proxy says hello</body></html>", headers={"content-type": "text/html"}),
               Reply(200, "{not json", headers={"content-type": "application/json"})]
    with ScriptedServer(lambda i, p, b: replies[i]) as server:
        prop = openai_proposer(server, concurrency=1)
        a = prop.propose(CTX, 1)[0]
        b = prop.propose(CTX, 1)[0]
    assert a.source is None and "not a chat completion" in a.reason and a.attempts == 1
    assert b.source is None and "not valid JSON" in b.reason and b.attempts == 1


def test_reply_without_code_and_without_contract_symbol():
    replies = ["I would use a larger tile and more pipeline stages.",
               "```cuda\n__global__ void k(half* c) { }\n```",
               "```python\nprint('hello')\n```",
               "```cuda\n#include <cuda_fp16.h>\n__global__ void k() {\n  // cut off here"]
    with ScriptedServer(lambda i, p, b: Reply(200, openai_chat(replies[i]))) as server:
        prop = openai_proposer(server, concurrency=1)
        out = [prop.propose(CTX, 1)[0] for _ in replies]
    assert all(p.source is None and p.attempts == 1 for p in out)
    assert "no kernel in the reply" in out[0].reason
    assert "does not define the contract symbol" in out[1].reason
    assert "not CUDA/C++" in out[2].reason
    assert "never closed" in out[3].reason
    assert out[0].raw.startswith("I would use")  # the raw reply is kept for the transcript


def test_client_errors_are_not_retried():
    with ScriptedServer(lambda i, p, b: openai_error(400, "temperature must be at most 2")) as server:
        [p] = openai_proposer(server).propose(CTX, 1)
    assert p.source is None and len(server.requests) == 1 and "HTTP 400" in p.reason


def test_connection_refused_is_retried_and_reported():
    with ScriptedServer(lambda i, p, b: Reply()) as server:
        url = server.base_url
    cfg = ModelConfig(backend="openai", base_url=url + "/v1", model_name="m", **fast(max_attempts=2))
    [p] = OpenAIProposer(cfg).propose(CTX, 1)
    assert p.source is None and p.attempts == 2 and "cannot reach" in p.reason


def test_n_proposals_are_requested_concurrently():
    def script(i, path, body):
        return Reply(200, openai_chat(f"```cuda\n{kernel_source(f'c{i}')}```"), delay_s=0.4)

    with ScriptedServer(script) as server:
        prop = openai_proposer(server, concurrency=4)
        prop.latch.probed = True  # past the first request, which goes alone (tests/test_llm_faults.py)
        t0 = time.monotonic()
        props = prop.propose(CTX, 4)
        wall = time.monotonic() - t0
    starts = sorted(r.at for r in server.requests)
    assert len(props) == 4 and all(p.source for p in props)
    assert len({p.source for p in props}) == 4
    assert starts[-1] - starts[0] < 0.3  # all four were in flight together, not one after another
    assert wall < 4 * 0.4
    assert [p.name for p in props] == ["step0-0", "step0-1", "step0-2", "step0-3"]


def test_search_replace_edit_against_the_parent():
    parent = kernel_source("base")
    ctx = ProposalContext(shape=(256, 256, 256), best={"id": 7, "source": parent, "speedup": 0.9})
    edit = ("Tile it:\n<<<<<<< SEARCH\n  dim3 block(16, 16), grid((N + 15) / 16, (M + 15) / 16);\n=======\n"
            "  dim3 block(32, 8), grid((N + 31) / 32, (M + 7) / 8);\n>>>>>>> REPLACE\n")
    bad = "<<<<<<< SEARCH\n  this line is not in the parent\n=======\n  x\n>>>>>>> REPLACE\n"
    replies = [edit, bad]
    with ScriptedServer(lambda i, p, b: Reply(200, openai_chat(replies[i]))) as server:
        prop = openai_proposer(server, concurrency=1)
        ok, fail = prop.propose(ctx, 1)[0], prop.propose(ctx, 1)[0]
        if "dim3 block(16, 16)" not in prompt_text(server.requests[0].body):
            pytest.fail("the parent's code was not in the prompt")
    assert ok.source is not None and "dim3 block(32, 8)" in ok.source and ok.parent == 7 and ok.parse_kind == "edit"
    assert "dim3 block(16, 16)" not in ok.source
    assert fail.source is None and "SEARCH block 1" in fail.reason and "not found" in fail.reason


# ---- Anthropic ----

def test_anthropic_429_then_success():
    def script(i, path, body):
        if path != "/v1/messages":
            server.fail(f"unexpected path {path}")
        if i == 0:
            return anthropic_error(429, "rate limited", "rate_limit_error")
        if "M=2048" not in prompt_text(body) or "kernel contract" not in body.get("system", ""):
            server.fail("the request lacks the step prompt or the system prompt")
        return Reply(200, anthropic_message(FENCED, input_tokens=900, output_tokens=450))

    with ScriptedServer(script) as server:
        [p] = anthropic_proposer(server).propose(CTX, 1)
    assert server.failures == []
    assert p.source is not None and p.attempts == 2 and p.model == "scripted-claude"
    assert p.usage == {"prompt_tokens": 900, "completion_tokens": 450}
    req = server.requests[-1]
    # this client version sends the key as a bearer token; older ones used x-api-key
    assert KEY in (req.headers.get("x-api-key"), req.headers.get("authorization", "").removeprefix("Bearer "))
    assert req.body["model"] == "claude-test" and req.body["max_tokens"] == 8192


def test_anthropic_overloaded_until_exhausted_and_timeout():
    with ScriptedServer(lambda i, p, b: anthropic_error(529, "overloaded", "overloaded_error")) as server:
        [p] = anthropic_proposer(server, max_attempts=3).propose(CTX, 1)
    assert p.source is None and p.attempts == 3 and "529" in p.reason
    with ScriptedServer(lambda i, p, b: Reply(200, anthropic_message(FENCED), delay_s=1.5)) as server:
        [p] = anthropic_proposer(server, timeout_s=0.3, max_attempts=2).propose(CTX, 1)
    assert p.source is None and "timed out" in p.reason


def test_anthropic_garbage_and_no_code():
    replies = [Reply(200, "<<garbage>>", headers={"content-type": "text/plain"}),
               Reply(200, anthropic_message("Sorry, I cannot write CUDA today."))]
    with ScriptedServer(lambda i, p, b: replies[i]) as server:
        prop = anthropic_proposer(server, concurrency=1)
        a, b = prop.propose(CTX, 1)[0], prop.propose(CTX, 1)[0]
    assert a.source is None and a.attempts == 1 and ("not a message" in a.reason or "JSON" in a.reason)
    assert b.source is None and "no kernel in the reply" in b.reason


def test_missing_key_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("TEST_ANTHROPIC_KEY")
    cfg = ModelConfig(backend="anthropic", api_key_env="TEST_ANTHROPIC_KEY", **fast())
    [p] = AnthropicProposer(cfg).propose(CTX, 1)
    assert p.source is None and "$TEST_ANTHROPIC_KEY" in p.reason and "not set" in p.reason


# ---- parsing ----

def test_parse_forms():
    assert parse_reply(KERNEL).kind == "whole-file"
    two = f"```cpp\n// helper\nint x;\n```\nand\n```c++\n{KERNEL}```"
    r = parse_reply(two)
    assert r.ok and "hgemm" in r.source and r.kind == "fenced"
    assert parse_reply("").reason == "empty reply"
    r = parse_reply("<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE\n")
    assert not r.ok and "no parent" in r.reason
    # trailing whitespace differences do not defeat an edit
    parent = "a  \nb\nc\n" + 'extern "C" int hgemm(const half* A, int M) {\n  return 0;\n}\n'
    r = parse_reply("<<<<<<< SEARCH\na\nb\n=======\nz\n>>>>>>> REPLACE\n", parent)
    assert r.ok and r.source.startswith("z\nc\n")
    r = parse_reply("<<<<<<< SEARCH\nc\n=======\nd\n>>>>>>> REPLACE\n", parent + "c\n")
    assert not r.ok and "matches 2 places" in r.reason
    big = KERNEL + "// " + "x" * 300_000 + "\n"
    assert "byte" in parse_reply(f"```cuda\n{big}```").reason


# ---- configuration ----

def parse_flags(argv):
    p = argparse.ArgumentParser()
    add_model_args(p)
    return p.parse_args(argv)


def test_config_file_and_flags(tmp_path):
    toml = tmp_path / "model.toml"
    toml.write_text('[model]\nbackend = "openai"\nbase_url = "http://10.0.0.5:8000/v1"\nmodel_name = "cuda-l2-32b"\n'
                    'api_key_env = "VLLM_KEY"\ntemperature = 0.6\nmax_tokens = 4096\nconcurrency = 2\n')
    cfg = load_model_config(parse_flags(["--config", str(toml), "--temperature", "0.9"]))
    assert (cfg.backend, cfg.base_url, cfg.model_name, cfg.api_key_env) == ("openai", "http://10.0.0.5:8000/v1",
                                                                           "cuda-l2-32b", "VLLM_KEY")
    assert cfg.temperature == 0.9 and cfg.max_tokens == 4096 and cfg.concurrency == 2
    yaml = tmp_path / "model.yaml"
    yaml.write_text("model:\n  backend: anthropic\n  model_name: claude-x\n")
    cfg = load_model_config(parse_flags(["--config", str(yaml), "--max-tokens", "1000"]))
    assert cfg.backend == "anthropic" and cfg.api_key_env == "ANTHROPIC_API_KEY" and cfg.max_tokens == 1000
    cfg = load_model_config(parse_flags(["--model", "openai", "--base-url", "http://127.0.0.1:9/v1"]))
    assert cfg.api_key_env == "OPENAI_API_KEY" and cfg.model_name
    assert load_model_config(parse_flags([])).backend == "builtin"
    assert type(make_proposer(load_model_config(parse_flags([])))).__name__ == "BuiltinProposer"


def test_config_rejects_keys_and_unknown_settings(tmp_path):
    f = tmp_path / "bad.toml"
    f.write_text('[model]\nbackend = "openai"\napi_key = "sk-live-abc"\n')
    with pytest.raises(ConfigError, match="must not be in a config file"):
        load_model_config(parse_flags(["--config", str(f)]))
    f.write_text('[model]\nbackend = "openai"\ntemprature = 0.3\n')
    with pytest.raises(ConfigError, match="unknown model setting"):
        load_model_config(parse_flags(["--config", str(f)]))
    f.write_text('[model\n')
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_model_config(parse_flags(["--config", str(f)]))
    with pytest.raises(ConfigError, match="does not exist"):
        load_model_config(parse_flags(["--config", str(tmp_path / "none.toml")]))
    with pytest.raises(ConfigError, match="temperature"):
        load_model_config(parse_flags(["--model", "openai", "--temperature", "7"]))
    with pytest.raises(SystemExit):
        parse_flags(["--model", "gemini"])


# ---- cudal2 propose ----

def test_propose_cli_writes_candidates_and_manifest(tmp_path, capsys):
    from agent.cli import main

    replies = [FENCED, "no idea", f"```cuda\n{kernel_source('t2')}```"]

    def script(i, path, body):
        if "(No reference material: retrieval was switched off.)" not in prompt_text(body):
            server.fail("the prompt does not say retrieval is off")
        return Reply(200, openai_chat(replies[i]))

    out = tmp_path / "cands"
    with ScriptedServer(script) as server:
        rc = main(["propose", "--shape", "2048", "2048", "1024", "-n", "3", "--out", str(out), "--model", "openai",
                   "--base-url", server.base_url + "/v1", "--model-name", "my-finetune", "--api-key-env",
                   "TEST_OPENAI_KEY", "--no-retrieval", "--max-tokens", "2000"])
    assert rc == 0 and server.failures == []
    man = json.loads((out / "manifest.json").read_text())
    assert man["shape"] == [2048, 2048, 1024] and man["model"]["model_name"] == "my-finetune"
    assert len(man["candidates"]) == 2 and len(man["rejected"]) == 1
    assert "no kernel in the reply" in man["rejected"][0]["reason"]
    for c in man["candidates"]:
        src = (out / c["file"]).read_text()
        assert 'extern "C" int hgemm' in src
    assert all(r.body["max_tokens"] == 2000 for r in server.requests)
    assert "## Task" in (out / "prompt.md").read_text()
    for f in out.iterdir():
        assert "sk-openai-test-0123456789abcdef" not in f.read_text()
    assert "2 candidate(s) for 2048x2048x1024" in capsys.readouterr().out


def test_propose_cli_bad_input(tmp_path, capsys):
    from agent.cli import main

    assert main(["propose", "--shape", "0", "8", "8", "--out", str(tmp_path / "o")]) == 2
    assert "M must be positive" in capsys.readouterr().err
    assert main(["propose", "--shape", "8", "8", "8", "--out", str(tmp_path / "o"), "--config",
                 str(tmp_path / "missing.toml")]) == 2
    assert "does not exist" in capsys.readouterr().err
    with ScriptedServer(lambda i, p, b: Reply(200, openai_chat("nothing"))) as server:
        rc = main(["propose", "--shape", "8", "8", "8", "-n", "1", "--out", str(tmp_path / "o"), "--model",
                   "openai", "--base-url", server.base_url + "/v1", "--no-retrieval"])
    assert rc == 1 and "0 candidate(s)" in capsys.readouterr().out


def test_propose_cli_refuses_before_asking_the_model(tmp_path, capsys, monkeypatch):
    from agent.cli import main

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    shape = ["--shape", "128", "256", "512"]
    cases = [
        (["--out", str(tmp_path / "a"), "--model", "openai", "--base-url", "https://llm.example.com/v1"],
         "$OPENAI_API_KEY, which is not set", 3),  # as a rejected key (tests/test_llm_faults.py)
        (["--out", str(tmp_path / "a"), "--model", "openai", "--base-url", "notaurl"], "is not an http(s) URL"),
        (["--out", str(tmp_path / "a"), "--base-url", "http://127.0.0.1:8000/v1"], "the builtin policy uses none"),
        (["--out", str(tmp_path / "a"), "--arch", "sm_75"], "kernel families for sm_90a"),
        (["--out", str(tmp_path / "afile" / "sub")], "cannot create the folder"),
    ]
    (tmp_path / "afile").write_text("mine")
    for flags, msg, *code in cases:
        assert main(["propose", *shape, "-n", "1", *flags]) == (code or [2])[0], flags
        err = capsys.readouterr().err
        assert msg in err and "Traceback" not in err, (flags, err)
    assert not (tmp_path / "a").exists() and (tmp_path / "afile").read_text() == "mine"
    out = tmp_path / "cands"
    assert main(["propose", *shape, "-n", "2", "--out", str(out)]) == 0
    assert "retrieval" not in capsys.readouterr().err  # the builtin policy reads none: no note about it
    before = {f.name: f.read_bytes() for f in out.iterdir()}
    assert main(["propose", "--shape", "64", "64", "64", "-n", "2", "--out", str(out)]) == 2
    assert "already holds proposed candidates" in capsys.readouterr().err
    assert {f.name: f.read_bytes() for f in out.iterdir()} == before
