"""The project's data folders: prompts/ (the jinja2 templates, the HTML report's included) and retrieval_corpus/
(the notes the knowledge store ingests). In a source checkout they sit beside agent/; an installed wheel carries them
inside the package (pyproject.toml maps them to agent.prompts and agent.retrieval_corpus)."""
from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    """`name` is "prompts" or "retrieval_corpus"."""
    for d in (_PACKAGE / name, _PACKAGE.parent / name):
        if d.is_dir():
            return d
    raise FileNotFoundError(f"the {name}/ folder is neither in the installed package ({_PACKAGE / name}) nor in a "
                            f"source checkout ({_PACKAGE.parent / name}): reinstall cuda-l2")


def code_commit() -> str | None:
    """The short commit of the source checkout this code runs from, which benchmark outputs name; outside a git
    checkout (an installed wheel, a copy of the tree on a lent GPU machine) the CUDAL2_COMMIT variable, else None."""
    import os
    import subprocess

    try:
        r = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=_PACKAGE.parent, capture_output=True,
                           text=True, timeout=10)
        if r.returncode == 0 and r.stdout.strip():
            return r.stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        pass
    return os.environ.get("CUDAL2_COMMIT") or None
