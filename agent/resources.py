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
    else the source checkout's HEAD, with "+dirty" where tracked files differ from it, else None (an installed
    wheel). The variable comes first because a lent GPU machine's copy of the tree may carry a .git whose HEAD is an
    earlier commit than the files it runs (a run there recorded 236ba79 for code at 0c98b30); such a copy reads
    dirty, so a figure never names a commit whose code it did not run without saying so."""
    import os
    import subprocess

    if os.environ.get("CUDAL2_COMMIT"):
        return os.environ["CUDAL2_COMMIT"]

    def git(*args: str) -> str | None:
        try:
            r = subprocess.run(["git", *args], cwd=_PACKAGE.parent, capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return r.stdout.strip() if r.returncode == 0 else None

    head = git("rev-parse", "--short", "HEAD")
    if not head:
        return None
    changed = git("status", "--porcelain", "--untracked-files=no")
    return f"{head}+dirty" if changed else head
