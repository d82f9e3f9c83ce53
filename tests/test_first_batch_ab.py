"""scripts/first_batch_ab.py: the first batches a change moves, between a git revision and the working tree, and a
same-rounds probe spec of both."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from script_module import has_commit, load_script  # noqa: E402


@pytest.mark.skipif(not has_commit("b3be6bd"), reason="a shallow clone without the commit before the 64-row cluster split")
def test_the_64_row_split_moves_one_batch_slot_and_the_spec_times_both(tmp_path, capsys):
    """At b3be6bd hopper_raw's slot on 4096x128x8192 held 128x128 over a 3-CTA cluster, now 64x128 over 2, and the
    wgmma batched split in the first slot now carries its cold twin's hint; the first batch of 512x2048x8192 did not
    move. The spec holds the shared slots once and both of each moved one."""
    shapes = tmp_path / "shapes.txt"
    shapes.write_text("4096 128 8192\n512 2048 8192\n")
    spec = tmp_path / "spec.json"
    assert load_script("first_batch_ab").main(["b3be6bd", "--shapes", str(shapes), "--spec", str(spec)]) == 0
    out = capsys.readouterr().out
    assert "1 of 2 first batches change (0 in a sample)" in out and "4096x128x8192: slots [0, 3] differ" in out
    entries = json.loads(spec.read_text())
    assert {tuple(e["shape"]) for e in entries} == {(4096, 128, 8192)}
    roles = {e["role"] for e in entries}
    assert {"old #0", "new #0", "old #1; new #1", "old #2; new #2", "old #3", "new #3"} == roles
    moved = {e["role"]: e["params"] for e in entries if e["role"] in ("old #3", "new #3")}
    assert (moved["old #3"]["tile_m"], moved["old #3"]["cluster_k"]) == (128, 3)
    assert (moved["new #3"]["tile_m"], moved["new #3"]["cluster_k"]) == (64, 2)
    hinted = {e["role"]: e["params"] for e in entries if e["role"] in ("old #0", "new #0")}
    assert hinted["new #0"] == {**hinted["old #0"], "l2_evict_first": hinted["new #0"]["l2_evict_first"]}
    assert hinted["old #0"].get("l2_evict_first", "none") == "none" != hinted["new #0"]["l2_evict_first"]


@pytest.mark.skipif(not has_commit("94a4b6a"), reason="a shallow clone without the commit before the narrow fits")
def test_a_slim_spec_holds_the_moved_slots_and_the_first_only(tmp_path, capsys):
    """Since 94a4b6a 296x4032x14976's fitting tile (hopper_raw, slot 3) is a swapped 192x64 split in three, where it
    was 128x160; slots 0-2 did not move, so the slim spec keeps slot 0 (once, shared) and both slot 3s. The spec's
    folder need not exist."""
    shapes = tmp_path / "shapes.txt"
    shapes.write_text("296 4032 14976\n")
    spec = tmp_path / "not_yet" / "spec.json"
    assert load_script("first_batch_ab").main(["94a4b6a", "--shapes", str(shapes), "--spec", str(spec), "--slim"]) == 0
    assert "296x4032x14976: slots [3] differ" in capsys.readouterr().out
    entries = {e["role"]: e["params"] for e in json.loads(spec.read_text())}
    assert set(entries) == {"old #0; new #0", "old #3", "new #3"}
    assert (entries["old #3"]["tile_m"], entries["old #3"]["tile_n"]) == (128, 160)
    assert (entries["new #3"]["tile_m"], entries["new #3"]["tile_n"], entries["new #3"]["schedule"]) == (
        192, 64, "cooperative3")


def test_the_listing_names_the_moved_slots_and_counts_what_it_leaves_out():
    listing = load_script("first_batch_ab").listing
    a, b = ["wgmma", {"tile_m": 128}], ["raw", {"tile_m": 64}]
    changed = [((64, 128, 1024), [a, a, b], [a, b, b]), ((128, 256, 512), [a], [a, b])]
    assert listing(changed, 5) == ["  64x128x1024: slots [1] differ", "  128x256x512: slots [1] differ"]
    assert listing(changed, 1) == ["  64x128x1024: slots [1] differ", "  ... and 1 more (--show 2 lists them)"]
    assert listing([], 20) == []


def test_an_empty_sample_and_an_unknown_revision_are_clear_errors():
    with pytest.raises(SystemExit, match="--sample must be at least 1"):
        load_script("first_batch_ab").main(["HEAD", "--sample", "0"])
    with pytest.raises(SystemExit, match="git archive no-such-rev failed"):
        load_script("first_batch_ab").main(["no-such-rev", "--sample", "1"])


@pytest.mark.skipif(not has_commit("595d91a"), reason="a shallow clone without the commit before the batched hint")
def test_a_shape_file_names_its_shapes_for_the_spec_sample_shapes_too(tmp_path, capsys):
    """256x2048x16384 is a dev-sample shape whose batched priors took the hint after 595d91a: a grid draw would keep
    it out of the spec, a shape file that names it does not."""
    shapes = tmp_path / "shapes.txt"
    shapes.write_text("256 2048 16384\n")
    spec = tmp_path / "spec.json"
    assert load_script("first_batch_ab").main(["595d91a", "--shapes", str(shapes), "--spec", str(spec)]) == 0
    assert "1 of 1 first batches change (1 in a sample)" in capsys.readouterr().out
    entries = json.loads(spec.read_text())
    assert {tuple(e["shape"]) for e in entries} == {(256, 2048, 16384)}
    assert any(e["params"].get("l2_evict_first", "none") != "none" and e["role"].startswith("new") for e in entries)
