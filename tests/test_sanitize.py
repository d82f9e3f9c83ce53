"""How --sanitize reads compute-sanitizer, checked against stand-in tool programs on PATH (no GPU here): the
memcheck and racecheck summaries, a tool that finds errors, and one that hangs."""
import os
import stat

import pytest

from evaluator.sanitize import run_sanitizers

CLEAN = """#!/bin/sh
case "$*" in
  *--tool=racecheck*) echo "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)";;
  *) echo "========= ERROR SUMMARY: 0 errors";;
esac
"""
DIRTY = """#!/bin/sh
case "$*" in
  *--tool=racecheck*) echo "========= Error: Race reported between Write access at kernel+0x1a0"
                      echo "========= RACECHECK SUMMARY: 3 hazards displayed (3 errors, 0 warnings)"; exit 99;;
  *) echo "========= Invalid __global__ write of size 2 bytes"; echo "========= ERROR SUMMARY: 1 error"; exit 99;;
esac
"""
HANG = "#!/bin/sh\nsleep 60\n"


@pytest.fixture
def tool(tmp_path, monkeypatch):
    def install(body: str):
        exe = tmp_path / "compute-sanitizer"
        exe.write_text(body)
        exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
        monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    return install


def test_clean_reports_pass_both_tools(tool):
    tool(CLEAN)
    out = {c.name: c for c in run_sanitizers("k.so", (64, 64, 64), "n.so", timeout=30)}
    assert set(out) == {"sanitizer_memcheck", "sanitizer_racecheck"}
    assert all(c.passed and c.metrics["errors"] == 0 for c in out.values())


def test_errors_fail_with_the_report(tool):
    tool(DIRTY)
    out = {c.name: c for c in run_sanitizers("k.so", (64, 64, 64), "n.so", timeout=30)}
    assert not out["sanitizer_memcheck"].passed and "Invalid __global__ write" in out["sanitizer_memcheck"].detail
    assert not out["sanitizer_racecheck"].passed and out["sanitizer_racecheck"].metrics["errors"] == 3


def test_a_hanging_tool_times_out(tool):
    tool(HANG)
    out = run_sanitizers("k.so", (64, 64, 64), "n.so", timeout=1)
    assert all(not c.passed and "did not finish" in c.detail for c in out)
