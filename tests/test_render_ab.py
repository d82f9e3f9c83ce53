"""scripts/render_ab.py: the kernels a template change alters, old and new render of the same params in one spec."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from script_module import has_commit, load_script  # noqa: E402


@pytest.mark.skipif(not has_commit("94a4b6a"), reason="a shallow clone without the commit before the rolled k loops")
def test_the_rolled_k_loops_change_every_hopper_raw_render_and_the_spec_names_both_files(tmp_path, capsys):
    """Since 94a4b6a hopper_raw's template rolls the k-block loops outside ping-pong kernels (K_LOOPS), so every
    kernel renders differently; hopper_wgmma's did not change."""
    shapes = tmp_path / "shapes.txt"
    shapes.write_text("1024 2048 64\n1024 256 512\n")
    out = tmp_path / "probe"
    m = load_script("render_ab")
    assert m.main(["94a4b6a", "--family", "hopper_raw", "--shapes", str(shapes), "--out", str(out)]) == 0
    assert "2 of 2 hopper_raw kernels render differently" in capsys.readouterr().out
    spec = json.loads((out / "spec.json").read_text())
    assert [e["role"] for e in spec] == ["old (94a4b6a)", "new"] * 2
    for old, new in zip(spec[::2], spec[1::2]):
        assert old["params"] == new["params"] and old["shape"] == new["shape"]
        old_src, new_src = (out / old["source"]).read_text(), (out / new["source"]).read_text()
        assert "K_LOOPS" not in old_src and "#define K_LOOPS" in new_src
    rolled = (out / spec[1]["source"]).read_text()  # 1024x2048x64: a cooperative tile, rolled
    assert '#define K_LOOPS _Pragma("unroll 1")' in rolled
    assert m.main(["94a4b6a", "--family", "hopper_wgmma", "--shapes", str(shapes), "--out", str(tmp_path / "a")]) == 0
    assert "0 of 2 hopper_wgmma kernels render differently" in capsys.readouterr().out
    assert json.loads((tmp_path / "a" / "spec.json").read_text()) == []


def test_an_unknown_family_and_no_priors_are_clear_errors(tmp_path):
    shapes = tmp_path / "shapes.txt"
    shapes.write_text("64 64 64\n")
    m = load_script("render_ab")
    with pytest.raises(SystemExit, match="--family 'nope': one of"):
        m.main(["HEAD", "--family", "nope", "--shapes", str(shapes), "--out", str(tmp_path / "o")])
    with pytest.raises(SystemExit, match="--first must be at least 1"):
        m.main(["HEAD", "--family", "small", "--shapes", str(shapes), "--out", str(tmp_path / "o"), "--first", "0"])


@pytest.mark.skipif(not has_commit("94a4b6a"), reason="a shallow clone without the commit before the rolled k loops")
def test_sizes_show_the_rolled_loops_halving_a_cooperative_kernel_and_sparing_ping_pong(tmp_path, capsys):
    shapes = tmp_path / "shapes.txt"
    shapes.write_text("1024 2048 64\n1024 256 512\n")
    args = ["94a4b6a", "--family", "hopper_raw", "--shapes", str(shapes), "--out", str(tmp_path / "p"), "--sizes"]
    assert load_script("render_ab").main(args) == 0
    lines = [ln for ln in capsys.readouterr().out.splitlines() if "bytes of machine code" in ln]
    assert len(lines) == 2
    coop, pingpong = (float(ln.rsplit("(", 1)[1].rstrip("x)")) for ln in lines)
    assert coop < 0.7 and pingpong == 1.0
