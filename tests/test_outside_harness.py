"""scripts/outside_harness.py without a GPU: an export of a campaign builds with the contract's own nvcc command
(no evaluator flags) and the report renders; the timing half runs on the device (docs/benchmarks/outside_harness.md)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from test_campaign import campaign  # noqa: E402

from agent.campaign.archive_io import export_archive  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def test_exported_kernels_build_with_the_contract_command(tmp_path):
    cfg, summary, _ = campaign(tmp_path, [(64, 64, 64)], budget=4)
    export_archive(cfg.run_dir / "archive.sqlite", tmp_path / "export", run_dir=cfg.run_dir)
    out = tmp_path / "oh"
    r = subprocess.run([sys.executable, "scripts/outside_harness.py", str(tmp_path / "export"), "--out", str(out),
                        "--compile-only", "--jobs", "1"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads((out / "outside_harness.json").read_text())
    assert [row["built"] for row in doc["rows"]] == [True]
    assert (out / "build" / "64_64_64_fp32_nvidia-h200.so").is_file()
    md = (out / "outside_harness.md").read_text()
    assert "built 1 of 1" in md and "| 64 | 64 | 64 |" in md


def test_a_kernel_that_needs_more_than_the_contract_command_is_reported(tmp_path):
    (tmp_path / "export" / "kernels").mkdir(parents=True)
    (tmp_path / "export" / "kernels" / "k.cu").write_text(
        '#include <cuda_fp16.h>\n#ifndef EVALUATOR_ONLY_FLAG\n#error needs a flag the contract does not pass\n#endif\n')
    (tmp_path / "export" / "manifest.json").write_text(json.dumps({"kernels": [
        {"file": "kernels/k.cu", "shape": [64, 64, 64], "speedups": {}, "family": "x"}]}))
    r = subprocess.run([sys.executable, "scripts/outside_harness.py", str(tmp_path / "export"), "--out",
                        str(tmp_path / "oh"), "--compile-only"], cwd=REPO, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 1
    md = (tmp_path / "oh" / "outside_harness.md").read_text()
    assert "built 0 of 1" in md and "needs a flag the contract does not pass" in md
