"""scripts/prior_diff.py: the shapes a change of the priors touches, between a git revision and the working tree."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from script_module import REPO, has_commit, load_script  # noqa: E402


@pytest.mark.skipif(not has_commit("HEAD"), reason="needs the project's git history")
def test_the_working_tree_against_its_own_head_changes_nothing_it_has_not_edited(capsys):
    dirty = subprocess.run(["git", "status", "--porcelain", "agent"], cwd=REPO, capture_output=True, text=True).stdout
    if dirty.strip():
        pytest.skip("agent/ has uncommitted changes")
    assert load_script("prior_diff").main(["HEAD", "--families", "hopper_wgmma", "--random", "200"]) == 0
    out = capsys.readouterr().out
    assert "0 of 1000 grid shapes and 0 of" in out and "0 of them in a sample" in out


@pytest.mark.skipif(not has_commit("8f4336c"), reason="a shallow clone without the commit before the one-wave tiles")
def test_the_one_wave_tiles_show_up_against_the_commit_before_them(capsys):
    load_script("prior_diff").main(["8f4336c", "--families", "hopper_wgmma", "--random", "0", "--show", "200"])
    out = capsys.readouterr().out
    # the five in a sample are those whose batched split took its cold twin's hint: two skinny long-K shapes
    # (551a711), and three whose operand read once takes 8-32 MiB (the batched split's floor since)
    assert "of 1000 grid shapes" in out and "5 of them in a sample" in out
    assert "12288x256x12288 hopper_wgmma: ['256x192s/coop/pers', '128x256/coop/pers'] -> " \
           "['128x192s/coop/pers', '128x192s/ping/pers']" in out


def test_an_unknown_revision_is_a_clear_error():
    with pytest.raises(SystemExit, match="git archive no-such-rev failed"):
        load_script("prior_diff").main(["no-such-rev", "--random", "0"])


@pytest.mark.skipif(not has_commit("920be5b"), reason="a shallow clone without the commit before the feasibility fixes")
def test_feasible_shows_the_priors_the_pool_dropped(capsys):
    """At 920be5b small's split variants carried the cluster prior's cluster_k: listed, never proposed."""
    load_script("prior_diff").main(["920be5b", "--families", "small", "--random", "0", "--first", "4", "--feasible",
                                    "--show", "1000"])
    out = capsys.readouterr().out
    assert "first 4 feasible priors of small: 66 of 1000 grid shapes" in out
    line = next(ln for ln in out.splitlines() if ln.startswith("  64x512x2048 sample small:"))
    was, now = line.split(": ", 1)[1].split(" -> ")
    assert was.count("'") // 2 == 2 and now.count("'") // 2 == 4
