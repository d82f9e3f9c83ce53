"""scripts/device_bench.sh carries cuBLASLt-AutoTuning's picks from one device slice to the next and unpacks builds
made beforehand into its compile cache (on this CPU machine the campaign itself stops at once for want of a GPU; the
packing and unpacking around it is what runs)."""
from __future__ import annotations

import json
import os
import subprocess
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_a_slice_restores_the_runs_picks_and_returns_them_with_any_new_ones(tmp_path):
    run = tmp_path / "prev" / "r1"
    (run / "autotune_picks").mkdir(parents=True)
    (run / "autotune_picks" / "old.json").write_text(json.dumps({"key": "old"}))
    tgz = tmp_path / "runs.tgz"
    with tarfile.open(tgz, "w:gz") as t:
        t.add(run, arcname="r1")
    cache, out = tmp_path / "cache", tmp_path / "out"
    (cache / "autotune").mkdir(parents=True)
    (cache / "autotune" / "new.json").write_text(json.dumps({"key": "new"}))  # as if this slice had tuned one
    # builds made without a GPU (scripts/prebuild_first_batches.py): one cache entry, as <2 hex>/<key>/
    entry = tmp_path / "prebuilt" / "ab" / ("ab" + "0" * 62)
    entry.mkdir(parents=True)
    (entry / "info.json").write_text("{}")
    prebuilt = tmp_path / "prebuilt.tgz"
    with tarfile.open(prebuilt, "w:gz") as t:
        t.add(entry, arcname=str(entry.relative_to(tmp_path / "prebuilt")))
    env = dict(os.environ, RUN="r1", RUNS_TGZ=str(tgz), RUNS_DIR=str(tmp_path / "runs"), OUT=str(out),
               CUDAL2_CACHE=str(cache), BENCH_S="120", WHEELS=str(tmp_path / "no-wheels"), PREBUILT=str(prebuilt))
    p = subprocess.run(["bash", "scripts/device_bench.sh", "--shapes", "examples/shapes_small.txt", "--budget", "1"],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert (cache / "autotune" / "old.json").is_file(), p.stdout + p.stderr  # restored before the campaign
    assert (cache / "build" / entry.relative_to(tmp_path / "prebuilt") / "info.json").is_file()  # in the build cache
    with tarfile.open(out / "runs.tgz") as t:
        names = set(t.getnames())
    assert {"r1/autotune_picks/old.json", "r1/autotune_picks/new.json"} <= names
