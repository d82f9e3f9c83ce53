"""`--sanitize`: run the candidate once under compute-sanitizer memcheck and racecheck.

The run uses exact-size, unguarded allocations (the worker's guard bands are valid memory, so memcheck could not
see a write into them) and calls only the candidate, so every report is the candidate's.
"""
from __future__ import annotations

import ctypes
import re
import shutil
import subprocess
import sys

from evaluator.record import CheckOutcome

TOOLS = ("memcheck", "racecheck")


def run_sanitizers(so_path: str, shape, native_so: str, timeout: float = 900.0) -> list[CheckOutcome]:
    exe = shutil.which("compute-sanitizer")
    out = []
    for tool in TOOLS:
        name = f"sanitizer_{tool}"
        if exe is None:
            out.append(CheckOutcome(name, False, "compute-sanitizer is not installed; --sanitize cannot be honoured"))
            continue
        cmd = [exe, f"--tool={tool}", "--error-exitcode=99", "--print-limit=20", sys.executable, "-m",
               "evaluator.sanitize", native_so, so_path, *map(str, shape)]
        if tool == "racecheck":
            cmd[2:2] = ["--racecheck-report=hazard"]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            out.append(CheckOutcome(name, False, f"did not finish within {timeout:g} s"))
            continue
        text = p.stdout + p.stderr
        m = re.search(r"ERROR SUMMARY: (\d+) error", text)
        errors = int(m.group(1)) if m else None
        ok = p.returncode == 0 and errors == 0
        detail = "" if ok else _first_report(text, p.returncode)
        out.append(CheckOutcome(name, ok, detail, {"errors": errors, "returncode": p.returncode}))
    return out


def _first_report(text: str, rc: int) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.startswith("=========")]
    interesting = [ln for ln in lines if any(w in ln for w in ("Invalid", "hazard", "Error", "error"))]
    return (f"exit {rc}: " + " | ".join(interesting[:4]))[:600]


def _run_once(native_so: str, so_path: str, m: int, n: int, k: int) -> int:
    from evaluator.native import Native

    nat = Native(native_so, 0)
    fn = ctypes.cast(ctypes.CDLL(so_path).hgemm, ctypes.c_void_p).value
    cid = nat.register_candidate(fn, m, n, k)
    ptrs = [nat.plain_alloc(2 * e) for e in (m * k, k * n, k * n, m * n)]
    if not all(ptrs):
        print("allocation failed", file=sys.stderr)
        return 2
    nat.ok("fill_normal", ptrs[0], m * k, 1, 1.0)
    nat.ok("fill_normal", ptrs[1], k * n, 2, 1.0)
    nat.ok("transpose", ptrs[1], ptrs[2], k, n)
    rc = nat.call(cid, *ptrs)
    err = nat.sync()
    print(f"hgemm returned {rc}, stream status {err}", file=sys.stderr)
    return 0 if rc == 0 and err == 0 else 1


if __name__ == "__main__":
    a = sys.argv[1:]
    sys.exit(_run_once(a[0], a[1], int(a[2]), int(a[3]), int(a[4])))
