"""Any OpenAI-compatible chat-completions endpoint: OpenAI itself, vLLM, SGLang, Ollama, a fine-tuned CUDA-L2 model."""
from __future__ import annotations

import json
import threading

import openai

from agent.campaign.config import ModelConfig
from agent.proposers.base import ChatProposer, ChatReply, FatalError, RetryableError
from agent.proposers.deadline import classify_status, http_client, timeout_message


def retry_after(exc: Exception) -> float | None:
    resp = getattr(exc, "response", None)
    try:
        v = resp.headers.get("retry-after") if resp is not None else None
        return float(v) if v else None
    except (TypeError, ValueError):
        return None


class OpenAIProposer(ChatProposer):
    def __init__(self, config: ModelConfig):
        super().__init__(config)
        self._client: openai.OpenAI | None = None
        self._lock = threading.Lock()

    def client(self) -> openai.OpenAI:
        with self._lock:
            if self._client is None:
                # Retries are ours (bounded, recorded); the client's own would hide attempts. Its HTTP client
                # holds each request to the deadline call_with_retries sets.
                self._client = openai.OpenAI(api_key=self.config.api_key(), base_url=self.config.base_url,
                                             timeout=self.config.timeout_s, max_retries=0,
                                             http_client=http_client(self.config.timeout_s))
            return self._client

    def _call(self, system: str, user: str) -> ChatReply:
        c = self.config
        try:
            r = self.client().chat.completions.create(
                model=c.model_name, temperature=c.temperature, max_tokens=c.max_tokens,
                messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
                extra_body=dict(c.extra) or None)  # server-specific fields (vLLM's top_k, ...) pass as is
        except openai.APITimeoutError as e:
            raise RetryableError(timeout_message(c.timeout_s, c.base_url)) from e
        except openai.APIConnectionError as e:
            raise RetryableError(f"cannot reach {c.base_url}: {e}") from e
        except openai.APIStatusError as e:
            err = classify_status(e.status_code, e.message, where=c.base_url, model=c.model_name,
                                  key_env=c.api_key_env)
            if isinstance(err, RetryableError):
                err.retry_after = retry_after(e)
            raise err from e
        except (json.JSONDecodeError, openai.APIResponseValidationError) as e:
            raise FatalError(f"the reply from {c.base_url} is not valid JSON: {e}") from e
        if not hasattr(r, "choices"):  # a 200 with a non-JSON body comes back as a plain string
            raise FatalError(f"the reply from {c.base_url} is not a chat completion: {str(r)[:200]!r}")
        if not r.choices:
            raise FatalError("the reply has no choices")
        text = r.choices[0].message.content or ""
        u = r.usage
        usage = {"prompt_tokens": getattr(u, "prompt_tokens", 0) or 0,
                 "completion_tokens": getattr(u, "completion_tokens", 0) or 0} if u else {}
        return ChatReply(text=text, usage=usage, model=r.model or c.model_name or "")
