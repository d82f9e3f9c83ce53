"""Archive export/import round trip. Imports are re-evaluated (GPU seam: recorded results), never trusted."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from http_servers import kernel_source  # noqa: E402
from test_campaign import GPU, ReplaySeam, campaign, log_records  # noqa: E402

from agent.campaign.archive import Archive, source_hash  # noqa: E402
from agent.campaign.archive_io import ArchiveIOError, export_archive, import_archive, plan_import  # noqa: E402
from evaluator.dispatch import read_manifest  # noqa: E402


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("aio")
    cfg, summary, log = campaign(tmp, [(64, 64, 64), (128, 256, 512)], budget=4)
    # once in CI the export held one shape's kernel (not reproduced in 8 loaded reruns): say why if it recurs
    assert not summary["failures"] and all(s["best_variant_id"] for s in summary["shapes"].values()) and len(
        summary["shapes"]) == 2, (summary, log[-3000:])
    return cfg


def test_export_writes_contract_files_and_manifest(run, tmp_path):
    out = tmp_path / "export"
    m = export_archive(run.run_dir / "archive.sqlite", out, run_dir=run.run_dir)
    assert m["format"] == "cuda-l2-archive" and 'extern "C" int hgemm' in m["contract"]
    assert len(m["kernels"]) == 2  # the best per shape
    arch = Archive(run.run_dir / "archive.sqlite")
    for e in m["kernels"]:
        f = out / e["file"]
        text = f.read_text()
        assert source_hash(text) == e["source_hash"]
        best = arch.best(GPU, "fp32", tuple(e["shape"]))
        assert best.source_hash == e["source_hash"]
        assert e["gpu"] == GPU and e["acc"] == "fp32" and e["arch"] == "sm_90a"
        assert e["speedups"]["cublaslt-autotune-max"] == pytest.approx(best.result.speedup("cublaslt-autotune-max"))
        assert set(e["speedups_by_mode"]) == {"offline", "server"}  # the campaign's final measurements
        assert e["checks"] and all(c["passed"] for c in e["checks"])
        assert e["timings_us"]["candidate"] > 0
    # The dispatch library reads the same manifest.
    ks = read_manifest(out)
    assert {k.shape for k in ks} == {(64, 64, 64), (128, 256, 512)}
    # Every correct variant with --all.
    m_all = export_archive(run.run_dir / "archive.sqlite", tmp_path / "all", best_only=False)
    assert len(m_all["kernels"]) == sum(1 for _, _, s in arch.shapes() for v in arch.history(GPU, "fp32", s)
                                        if v.status == "ok")


def test_import_reevaluates_and_ignores_claims(run, tmp_path):
    out = tmp_path / "export"
    export_archive(run.run_dir / "archive.sqlite", out, run_dir=run.run_dir)
    # Someone inflates the claims; the import must measure for itself.
    doc = json.loads((out / "manifest.json").read_text())
    for e in doc["kernels"]:
        e["speedups"] = {"cublaslt-autotune-max": 99.0}
    (out / "manifest.json").write_text(json.dumps(doc))
    # Plus a bare kernel whose shape comes from its file name.
    (out / "kernels" / "256_128_64_extra.cu").write_text(kernel_source("pipelined"))

    plan = plan_import(out)
    assert sorted(it.shape for it in plan) == [(64, 64, 64), (128, 256, 512), (256, 128, 64)]
    seam = ReplaySeam(tmp_path / "calls.jsonl")
    db = tmp_path / "runs" / "imported" / "archive.sqlite"
    lines = import_archive(plan, seam, db, run="imported", global_db=tmp_path / "global.sqlite")
    evals = [r for r in log_records(tmp_path / "calls.jsonl") if r["op"] == "eval"]
    assert len(evals) == 3  # every kernel evaluated here
    assert all("measured here" in ln and "claimed 99.000x" in ln for ln in lines[:2]), lines
    imp = Archive(db)
    for it in plan:
        v = imp.find_by_hash(GPU, "fp32", it.shape, source_hash(it.source))
        assert v is not None and v.run == "imported" and v.proposer.startswith("import:")
        assert v.speedup is None or v.speedup < 2.0  # the measured number, not the claim
    assert Archive(tmp_path / "global.sqlite").count() == 3
    # Importing again evaluates nothing.
    lines2 = import_archive(plan_import(out), seam, db, run="imported")
    assert all("already archived" in ln for ln in lines2)
    assert len([r for r in log_records(tmp_path / "calls.jsonl") if r["op"] == "eval"]) == 3


def test_import_errors_name_the_file(tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    (d / "mystery.cu").write_text(kernel_source("naive"))
    (d / "64_64_64_notakernel.cu").write_text("int main() { return 0; }\n")
    with pytest.raises(ArchiveIOError) as ei:
        plan_import(d)
    msg = str(ei.value)
    assert "mystery.cu: no shape" in msg and "--shape" in msg
    assert "notakernel.cu: does not define the contract function hgemm" in msg
    (d / "64_64_64_notakernel.cu").unlink()
    assert [it.shape for it in plan_import(d, shape=(32, 32, 32))] == [(32, 32, 32)]
    (d / "manifest.json").write_text(json.dumps({"kernels": [{"file": "../../etc/passwd", "shape": [1, 1, 1],
                                                              "acc": "fp32"}]}))
    with pytest.raises(ArchiveIOError, match="points outside"):
        plan_import(d, shape=(32, 32, 32))
    with pytest.raises(ArchiveIOError, match="is not a folder"):
        plan_import(tmp_path / "nope")


def test_export_refuses_a_foreign_nonempty_folder(run, tmp_path):
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    with pytest.raises(ArchiveIOError, match="not an earlier export"):
        export_archive(run.run_dir / "archive.sqlite", tmp_path / "busy")
    with pytest.raises(ArchiveIOError, match="no archive"):
        export_archive(tmp_path / "missing.sqlite", tmp_path / "x")
    (tmp_path / "afile").write_text("mine")
    for where in (tmp_path / "afile", tmp_path / "afile" / "sub"):
        with pytest.raises(ArchiveIOError, match="not a folder|cannot create"):
            export_archive(run.run_dir / "archive.sqlite", where)
    assert (tmp_path / "afile").read_text() == "mine"


def test_import_takes_what_propose_wrote(tmp_path):
    from agent.cli import main

    out = tmp_path / "cands"
    assert main(["propose", "--shape", "128", "256", "512", "-n", "2", "--acc", "fp16", "--out", str(out)]) == 0
    items = plan_import(out, shape=(1, 2, 3))  # the manifest's shape wins over --shape, as for an export
    assert len(items) == 2
    assert {it.shape for it in items} == {(128, 256, 512)} and {it.acc for it in items} == {"fp16"}
    assert all(it.claimed["family"] and it.claimed["proposer"].startswith("builtin") for it in items)
    (out / "manifest.json").write_text(json.dumps({"shape": [1, 1, 1]}))
    with pytest.raises(ArchiveIOError, match="not a manifest of `cudal2 archive export` or `cudal2 propose`"):
        plan_import(out)
