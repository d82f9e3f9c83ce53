"""Anthropic's Messages API (base_url override for proxies and the tests' local server)."""
from __future__ import annotations

import json
import threading

import anthropic

from agent.campaign.config import ModelConfig
from agent.proposers.base import ChatProposer, ChatReply, FatalError, RetryableError
from agent.proposers.deadline import classify_status, http_client, timeout_message
from agent.proposers.openai_backend import retry_after


class AnthropicProposer(ChatProposer):
    def __init__(self, config: ModelConfig):
        super().__init__(config)
        self._client: anthropic.Anthropic | None = None
        self._lock = threading.Lock()

    def client(self) -> anthropic.Anthropic:
        with self._lock:
            if self._client is None:
                kw = {"base_url": self.config.base_url} if self.config.base_url else {}
                self._client = anthropic.Anthropic(api_key=self.config.api_key(), timeout=self.config.timeout_s,
                                                   max_retries=0, http_client=http_client(self.config.timeout_s),
                                                   **kw)
            return self._client

    def _call(self, system: str, user: str) -> ChatReply:
        c = self.config
        where = c.base_url or "the Anthropic API"
        try:
            # This client no longer takes `temperature` (recent Claude models fix it); settings it lacks go
            # through `extra` as raw body fields.
            r = self.client().messages.create(model=c.model_name, max_tokens=c.max_tokens, system=system,
                                              messages=[{"role": "user", "content": user}],
                                              extra_body=dict(c.extra) or None)
        except anthropic.APITimeoutError as e:
            raise RetryableError(timeout_message(c.timeout_s, where)) from e
        except anthropic.APIConnectionError as e:
            raise RetryableError(f"cannot reach {where}: {e}") from e
        except anthropic.APIStatusError as e:
            err = classify_status(e.status_code, e.message, where=where, model=c.model_name, key_env=c.api_key_env)
            if isinstance(err, RetryableError):
                err.retry_after = retry_after(e)
            raise err from e
        except (json.JSONDecodeError, anthropic.APIResponseValidationError) as e:
            raise FatalError(f"the reply from {where} is not valid JSON: {e}") from e
        if not hasattr(r, "content"):
            raise FatalError(f"the reply from {where} is not a message: {str(r)[:200]!r}")
        text = "".join(getattr(b, "text", "") for b in (r.content or []) if getattr(b, "type", "") == "text")
        u = r.usage
        usage = {"prompt_tokens": getattr(u, "input_tokens", 0) or 0,
                 "completion_tokens": getattr(u, "output_tokens", 0) or 0} if u else {}
        return ChatReply(text=text, usage=usage, model=getattr(r, "model", "") or c.model_name or "")
