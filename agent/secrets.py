"""Keep API keys out of every file a run writes.

Keys are only ever read from the environment (see agent/campaign/config.py). Anything that may echo one back — an
error
message from a provider, a repr of a request, a reply quoting its headers — passes through `scrub` before it is
written to a transcript, an archive or a manifest. Two nets: the exact values of secret-looking environment variables
(and of any variable registered with `register_env`), and patterns of well-known key formats.
"""
from __future__ import annotations

import os
import re
import threading
from typing import Any

REDACTED = "[REDACTED]"

# Names whose values are secrets wherever they appear.
_SECRET_NAME = re.compile(r"(API_?KEY|TOKEN|SECRET|PASSWORD|ACCESS_KEY)", re.IGNORECASE)
_MIN_SECRET_LEN = 8  # shorter values ("1", "true") would redact ordinary text

_PATTERNS = [
    re.compile(r"\bsk-ant-[A-Za-z0-9_\-]{8,}"),  # Anthropic
    re.compile(r"\bsk-(?:proj-|svcacct-)?[A-Za-z0-9_\-]{16,}"),  # OpenAI
    re.compile(r"\bhf_[A-Za-z0-9]{20,}"),  # Hugging Face
    re.compile(r"\bAKIA[0-9A-Z]{16}"),  # AWS access key id
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"),  # GitHub
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._\-~+/]{12,}=*"),  # Authorization: Bearer <token>
    re.compile(r"(?i)((?:x-api-key|api[_-]?key|authorization)[\"']?\s*[:=]\s*[\"']?)[^\s\"',}]{8,}"),
]

_registered: set[str] = set()
_lock = threading.Lock()


def register_env(name: str | None) -> None:
    """Treat the value of environment variable `name` as a secret, whatever it is called."""
    if name:
        with _lock:
            _registered.add(name)


def secret_values() -> list[str]:
    vals = set()
    with _lock:
        names = set(_registered)
    for k, v in os.environ.items():
        if (k in names or _SECRET_NAME.search(k)) and v and len(v) >= _MIN_SECRET_LEN:
            vals.add(v)
    return sorted(vals, key=len, reverse=True)  # longest first, so a key containing another is fully replaced


def scrub(text: str, extra: tuple[str, ...] | list[str] = ()) -> str:
    if not text:
        return text
    for v in list(extra) + secret_values():
        if v and len(v) >= _MIN_SECRET_LEN and v in text:
            text = text.replace(v, REDACTED)
    for pat in _PATTERNS:
        if pat.groups:
            text = pat.sub(lambda m: m.group(1) + REDACTED, text)
        else:
            text = pat.sub(REDACTED, text)
    return text


def scrub_obj(obj: Any, extra: tuple[str, ...] | list[str] = ()) -> Any:
    """Scrub every string inside a JSON-like structure (keys included)."""
    if isinstance(obj, str):
        return scrub(obj, extra)
    if isinstance(obj, dict):
        return {scrub_obj(k, extra) if isinstance(k, str) else k: scrub_obj(v, extra) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [scrub_obj(v, extra) for v in obj]
    return obj
