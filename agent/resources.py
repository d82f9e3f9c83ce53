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
    """The short commit of the code this runs from, which benchmark outputs name: CUDAL2_COMMIT where it is set,
    else the source checkout's HEAD, else None (an installed wheel). The variable comes first because a lent GPU
    machine's copy of the tree may carry a .git whose HEAD is an earlier commit than the files it runs (a run there
    recorded 236ba79 for code at 0c98b30)."""
    import os
    import subprocess

    if os.environ.get("CUDAL2_COMMIT"):
        return os.environ["CUDAL2_COMMIT"]
    try:
        r = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=_PACKAGE.parent, capture_output=True,
                           text=True, timeout=10)
        if r.returncode == 0 and r.stdout.strip():
            return r.stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        pass
    return None
