"""Keep the machine that made a run out of its exported records: no API keys, no absolute paths.

Keys go through agent.secrets (the values of secret-looking environment variables and well-known key formats). Paths
come from compile logs, evaluator reasons and retrieval notes (/tmp/cuda-l2-build/..., /home/NAME/...), and from
whatever a model wrote into a kernel's comments: every absolute path becomes `<path>/` plus its last part, which is
all a reader of the record can use.
"""
from __future__ import annotations

import re
from typing import Any

from agent.secrets import scrub_obj

# An absolute POSIX path of two parts or more, not inside a URL or a relative path (the character before the first
# slash is none of word, '.', '~', ':', '/', '-'), and Windows drive paths.
_POSIX = re.compile(r"(?<![\w.~:/\-])/(?:[^\s/\"'`:;,()<>\[\]{}|\\]+/)+([^\s/\"'`:;,()<>\[\]{}|\\]*)")
_WINDOWS = re.compile(r"\b[A-Za-z]:\\(?:[^\s\\\"'`<>|]+\\)+([^\s\\\"'`<>|]*)")
PLACEHOLDER = "<path>/"


def scrub_paths(text: str) -> str:
    text = _POSIX.sub(lambda m: PLACEHOLDER + m.group(1), text)
    return _WINDOWS.sub(lambda m: PLACEHOLDER + m.group(1), text)


def _paths_obj(obj: Any) -> Any:
    if isinstance(obj, str):
        return scrub_paths(obj)
    if isinstance(obj, dict):
        return {k: _paths_obj(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_paths_obj(v) for v in obj]
    return obj


def scrub_record(record: dict[str, Any]) -> dict[str, Any]:
    return _paths_obj(scrub_obj(record))


def has_absolute_path(text: str) -> bool:
    return bool(_POSIX.search(text) or _WINDOWS.search(text))


def strings_in(obj: Any):
    """Every string inside a JSON-like value (for checking what an export wrote)."""
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, (dict, list)):
        for v in (obj.values() if isinstance(obj, dict) else obj):
            yield from strings_in(v)
