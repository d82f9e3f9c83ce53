"""Endpoints that misbehave, each played by a real local server: a body that trickles, a server that goes silent
and drops the connection, a rejected key (401, 403), an unknown model, an unset key, garbage. A request never
outlives its deadline, retries stop at --max-retry-seconds, and an answer no retry can fix stops the run at once
with exit code 3 and no further request."""
from __future__ import annotations

import io
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from http_servers import (Reply, ScriptedServer, anthropic_error, kernel_source, openai_chat,  # noqa: E402
                          openai_error, prompt_text)

from agent.cli import main  # noqa: E402
from agent.campaign.config import ConfigError, MissingKeyError, ModelConfig, is_loopback_url  # noqa: E402
from agent.proposers.base import ProposalContext  # noqa: E402
from agent.proposers.deadline import EndpointFatal  # noqa: E402
from agent.proposers.openai_backend import OpenAIProposer  # noqa: E402

KEY = "sk-faults-0123456789abcdefSECRET"
CTX = ProposalContext(shape=(512, 512, 512), arch="sm_90a", retrieval_note="switched off")
FENCED = f"Summary: a naive kernel\n```cuda\n{kernel_source('f1')}```\n"


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv("FAULTS_KEY", KEY)


def openai_cfg(server, **kw) -> ModelConfig:
    base = dict(backend="openai", base_url=server.base_url + "/v1", model_name="qwen-cuda", api_key_env="FAULTS_KEY",
                backoff_initial_s=0.05, backoff_max_s=0.1, timeout_s=1.0, max_attempts=2, max_retry_s=3.0)
    return ModelConfig(**{**base, **kw})


def propose_cli(server, tmp_path, *extra: str, n: int = 4, key_env: str = "FAULTS_KEY",
                base: str | None = None) -> int:
    return main(["propose", "--shape", "512", "512", "512", "-n", str(n), "--out", str(tmp_path / "out"),
                 "--no-retrieval", "--model", "openai", "--base-url", base or server.base_url + "/v1",
                 "--model-name", "qwen-cuda", "--api-key-env", key_env, *extra])


# ---------------------------------------------------------------- deadlines

def test_a_trickling_body_is_cut_at_the_deadline():
    """One byte every 0.2 s of a valid reply would take over a minute; the request ends at its 1 s deadline."""
    with ScriptedServer(lambda i, p, b: Reply(200, openai_chat(FENCED), trickle_s=0.2)) as server:
        t0 = time.monotonic()
        [p] = OpenAIProposer(openai_cfg(server, max_attempts=1)).propose(CTX, 1)
        took = time.monotonic() - t0
    assert p.source is None and "timed out" in p.reason and "1 s deadline" in p.reason
    assert 0.9 < took < 2.5, took


def test_a_silent_server_that_drops_the_connection_is_cut_at_the_deadline():
    with ScriptedServer(lambda i, p, b: Reply(drop_after_s=30)) as server:
        t0 = time.monotonic()
        [p] = OpenAIProposer(openai_cfg(server, max_attempts=1)).propose(CTX, 1)
        took = time.monotonic() - t0
    assert p.source is None and "timed out" in p.reason and took < 2.5, (took, p.reason)


def test_a_connection_dropped_early_is_retried():
    replies = [Reply(drop_after_s=0.1), Reply(200, openai_chat(FENCED))]
    with ScriptedServer(lambda i, p, b: replies[i]) as server:
        [p] = OpenAIProposer(openai_cfg(server)).propose(CTX, 1)
    assert p.source is not None and p.attempts == 2 and p.summary == "a naive kernel"


def test_retries_stop_at_max_retry_seconds_and_each_one_is_announced():
    notes: list[str] = []
    with ScriptedServer(lambda i, p, b: Reply(drop_after_s=30)) as server:
        prop = OpenAIProposer(openai_cfg(server, timeout_s=0.5, max_attempts=100, max_retry_s=2.0))
        prop.on_note = notes.append
        t0 = time.monotonic()
        [p] = prop.propose(CTX, 1)
        took = time.monotonic() - t0
    assert p.source is None and took < 3.0, took
    assert 2 <= p.attempts <= 5 and "max-retry-seconds 2" in p.reason
    assert notes and all("timed out" in n for n in notes)
    assert "retrying in" in notes[0] and "giving up" in notes[-1]


def test_request_timeout_flag_and_config_file(tmp_path, capsys):
    """--request-timeout on propose, and request_timeout in the config file (the flag wins over the file)."""
    with ScriptedServer(lambda i, p, b: Reply(200, openai_chat(FENCED), delay_s=2.0)) as server:
        t0 = time.monotonic()
        rc = propose_cli(server, tmp_path, "--request-timeout", "0.5", "--max-retry-seconds", "1", n=1)
        took = time.monotonic() - t0
        err = capsys.readouterr().err
        assert rc == 1 and took < 6.0, (took, err)  # the first command in the process imports the clients
        assert "timed out" in err and "0.5 s deadline" in err and "--max-retry-seconds 1" in err
        cfg = tmp_path / "model.toml"
        cfg.write_text("[model]\nrequest_timeout = 5\nmax_retry_seconds = 8\n")
        rc = main(["propose", "--shape", "512", "512", "512", "-n", "1", "--out", str(tmp_path / "out2"),
                   "--no-retrieval", "--model", "openai", "--base-url", server.base_url + "/v1", "--config", str(cfg),
                   "--api-key-env", "FAULTS_KEY"])
        assert rc == 0, capsys.readouterr().err
    from agent.campaign.config import model_config_from_dict

    c = model_config_from_dict({"backend": "openai", "request_timeout": 7, "max_retry_seconds": 9})
    assert (c.timeout_s, c.max_retry_s) == (7, 9)


# ---------------------------------------------------------------- fatal answers

@pytest.mark.parametrize("status", [401, 403])
def test_a_rejected_key_stops_at_the_first_answer(tmp_path, capsys, status):
    def script(i, path, body):
        return Reply(status, {"error": {"message": f"Incorrect API key provided: {KEY}", "type": "auth"}})

    with ScriptedServer(script) as server:
        rc = propose_cli(server, tmp_path, "--request-timeout", "5", n=8)
        sent = len(server.requests)
    err = capsys.readouterr().err
    assert rc == 3, err
    assert sent == 1, f"{sent} requests were sent after the first {status}"
    assert f"HTTP {status}" in err and "$FAULTS_KEY" in err and KEY not in err


def test_an_unknown_model_stops_and_names_the_model(tmp_path, capsys):
    with ScriptedServer(lambda i, p, b: openai_error(404, "The model `qwen-cuda` does not exist.")) as server:
        rc = propose_cli(server, tmp_path, n=6)
        sent = len(server.requests)
    err = capsys.readouterr().err
    assert rc == 3 and sent == 1 and "'qwen-cuda'" in err and "--model-name" in err


def test_an_unknown_model_as_a_400_and_anthropic_403():
    with ScriptedServer(lambda i, p, b: openai_error(400, "Invalid model name passed in model=qwen-cuda")) as server:
        with pytest.raises(EndpointFatal, match="qwen-cuda"):
            OpenAIProposer(openai_cfg(server)).propose(CTX, 3)
        assert len(server.requests) == 1
    pytest.importorskip("anthropic")  # the GPU machine's carried wheels leave it out
    from agent.proposers.anthropic_backend import AnthropicProposer

    with ScriptedServer(lambda i, p, b: anthropic_error(403, "permission denied", "permission_error")) as server:
        cfg = ModelConfig(backend="anthropic", base_url=server.base_url, model_name="claude-x",
                          api_key_env="FAULTS_KEY", timeout_s=2)
        prop = AnthropicProposer(cfg)
        with pytest.raises(EndpointFatal, match=r"\$FAULTS_KEY"):
            prop.propose(CTX, 2)
        with pytest.raises(EndpointFatal):  # latched: the next step sends nothing
            prop.propose(CTX, 2)
        assert len(server.requests) <= 2  # the two of the first step may both be in flight; none after


def test_an_unset_key_stops_before_any_request(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("FAULTS_KEY")
    with ScriptedServer(lambda i, p, b: Reply(200, openai_chat(FENCED))) as server:
        # a remote-looking host: the key is required
        rc = propose_cli(server, tmp_path, base="http://localhost.invalid:9/v1")
        err = capsys.readouterr().err
        assert rc == 3 and "$FAULTS_KEY" in err and "not set" in err
        # the loopback address: a notice names the header sent, and the request carries it
        rc = propose_cli(server, tmp_path, n=1)
        err = capsys.readouterr().err
        assert rc == 0, err
        assert "Authorization: Bearer no-key" in err and "$FAULTS_KEY is not set" in err
        assert server.requests[0].headers["authorization"] == "Bearer no-key"


def test_loopback_is_parsed_not_matched():
    for url in ("http://127.0.0.1:8000/v1", "http://127.1.2.3/v1", "http://[::1]:8000/v1", "http://localhost:8000",
                "http://LOCALHOST./v1"):
        assert is_loopback_url(url), url
    for url in ("http://localhost.invalid/v1", "http://127.0.0.1.nip.io/v1", "http://my-localhost/v1",
                "https://api.openai.com/v1", "http://10.0.0.1/v1", None, "not a url"):
        assert not is_loopback_url(url), url
    with pytest.raises(MissingKeyError):
        ModelConfig(backend="openai", base_url="http://localhost.invalid/v1", api_key_env="UNSET_VAR_X").api_key()


def test_garbage_is_reported_per_reply_and_does_not_stop_the_run():
    replies = [Reply(200, "<html>502 proxy</html>", headers={"content-type": "text/html"}),
               Reply(200, b"\x00\xff\x13garbage", headers={"content-type": "application/json"}),
               Reply(200, openai_chat(FENCED))]
    with ScriptedServer(lambda i, p, b: replies[i]) as server:
        prop = OpenAIProposer(openai_cfg(server, concurrency=1))
        out = [prop.propose(CTX, 1)[0] for _ in range(3)]
    assert out[0].source is None and out[1].source is None and out[2].source is not None
    assert prop.latch.error is None


def test_context_budget_leaves_room_for_the_reply():
    tight = ModelConfig(backend="openai", base_url="http://127.0.0.1:1/v1", context_tokens=8192, max_tokens=8000)
    with pytest.raises(ConfigError, match="--context-tokens 8192 with --max-tokens 8000"):
        OpenAIProposer(tight)
    with pytest.raises(ConfigError, match="leaves"):  # and on the command line, before anything is sent
        from agent.proposers.budget import check_budget

        check_budget(tight)
    from agent.proposers.budget import step_budget
    from agent.proposers.prompt import estimate_tokens, render_system

    c = ModelConfig(backend="openai", base_url="http://127.0.0.1:1/v1")
    system = render_system()
    assert step_budget(c, system) + estimate_tokens(system) + c.max_tokens <= 32768


# ---------------------------------------------------------------- campaigns

def _campaign(tmp_path, model, shapes, lanes=2):
    from rich.console import Console

    from agent.campaign.driver import CampaignConfig
    from agent.campaign.cli import finish_campaign
    from test_campaign import ReplaySeam

    cfg = CampaignConfig(run="faults", shapes=shapes, budget_candidates=2, runs_dir=tmp_path / "runs",
                         global_archive=None, n_per_step=1, lanes=lanes, final_modes=(), confirm_top=0)
    buf = io.StringIO()
    rc = finish_campaign(cfg, ReplaySeam(tmp_path / "calls.jsonl", lanes=lanes), model,
                         console=Console(file=buf, width=400), live=False)
    return rc, buf.getvalue()


def test_a_401_stops_every_lane_of_a_campaign(tmp_path, capsys):
    with ScriptedServer(lambda i, p, b: openai_error(401, "invalid api key")) as server:
        rc, out = _campaign(tmp_path, openai_cfg(server), [(64, 64, 64), (128, 128, 128), (256, 256, 256)])
        sent = len(server.requests)
    err = capsys.readouterr().err
    assert rc == 3, out
    assert sent <= 2, f"{sent} requests: the lanes went on after the first 401"  # one probe per lane at most
    assert "HTTP 401" in err and "$FAULTS_KEY" in err and "no further requests were sent" in err
    assert "[256x256x256] failed: not started" in out


def test_a_lane_on_a_dead_endpoint_says_so_and_the_others_go_on(tmp_path):
    """Requests about one shape hang (the server says nothing, then drops them); the other shape's are answered.
    The hung lane reports each timeout as it happens and gives up after its retries; the other lane finishes."""
    def script(i, path, body):
        if "M=64, N=64, K=64" in prompt_text(body):
            return Reply(drop_after_s=30)
        return Reply(200, openai_chat(f"Summary: tiled\n```cuda\n{kernel_source('tile128' if i % 2 else 'naive')}```"))

    with ScriptedServer(script) as server:
        t0 = time.monotonic()
        rc, out = _campaign(tmp_path, openai_cfg(server, timeout_s=0.5, max_attempts=1), [(64, 64, 64),
                                                                                             (128, 128, 128)])
        took = time.monotonic() - t0
    assert rc == 1, out  # the dead lane's shape failed; the run says so
    assert "[64x64x64] model: " in out and "timed out" in out
    assert "[128x128x128] done" in out
    assert took < 30, took
