"""Child processes that may hang (nvcc, ncu, compute-sanitizer): run in their own process group, so a timeout
kills everything they forked (cicc, ptxas, the profiled program), not only the direct child."""
from __future__ import annotations

import os
import signal
import subprocess


def run_in_group(cmd: list[str], timeout: float, *, cwd: str | None = None,
                 env: dict | None = None) -> tuple[int | None, str]:
    """(return code, or None on timeout; stdout and stderr together)."""
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            errors="replace", start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
        return proc.returncode, out
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, _ = proc.communicate()
        return None, out or ""
