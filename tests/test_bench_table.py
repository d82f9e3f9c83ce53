"""The built-in policy benchmark's generated table (scripts/bench_builtin_policy.py), read from a run folder."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from script_module import load_script  # noqa: E402
from http_servers import RecordedEvaluator, kernel_source, scaled_result  # noqa: E402

from agent.campaign.archive import Archive  # noqa: E402
from evaluator.record import EvalResult  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SHAPE = (4096, 4096, 4096)


def _bench():
    return load_script("bench_builtin_policy")


def _run(tmp_path: Path, name: str = "r", shape=SHAPE, gpu: str = "H200",
         tags=("naive", "tile128", "wgmma"), acc: str = "fp32") -> tuple[Path, float, float]:
    ev, run = RecordedEvaluator(), tmp_path / "runs" / name
    a = Archive(run / "archive.sqlite")
    for tag in tags:
        a.add(name, gpu, acc, shape, kernel_source(tag), "builtin", ev(kernel_source(tag), shape),
              family="hopper_wgmma")
    best = a.ranked(gpu, acc, shape)[0]
    second = scaled_result(best.result, 0.98)
    a.add_remeasure(best.id, second)
    return run, best.result.speedup("cublaslt-autotune-max"), second.speedup("cublaslt-autotune-max")


def test_the_table_shows_the_winners_search_measurements(tmp_path):
    run, first, second = _run(tmp_path)
    args = argparse.Namespace(acc="fp32", shapes="shapes.txt", budget=3, per_step=3, ncu="off", lanes=None)
    md = _bench().summarise_run(run, args)
    row = next(line for line in md.splitlines() if line.startswith("| 4096 | 4096 | 4096 |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    header = next(line for line in md.splitlines() if line.startswith("| M | N | K |"))
    names = [c.strip() for c in header.strip("|").split("|")]
    assert len(cells) == len(names)
    assert cells[names.index("search measurements")] == f"{first:.3f} / {second:.3f}"
    assert cells[names.index("family")] == "hopper_wgmma"
    assert cells[names.index("tried")] == "3"
    # the code the run measured with: campaign.json's commits, one per start that changed it
    assert "- code: the run records no commit" in md
    (run / "campaign.json").write_text(json.dumps({"commits": ["aaa1111", "bbb2222"]}))
    assert "- code: commits aaa1111, bbb2222 (each start of the campaign)" in _bench().summarise_run(run, args)
    # resumed after starts that predate the record: the recorded commits, and that earlier starts named none
    (run / "campaign.json").write_text(json.dumps({"commits": ["unrecorded", "ccc3333"]}))
    assert ("- code: commit ccc3333 (the starts that recorded one; earlier starts predate that record, see the page "
            "that cites the run)") in _bench().summarise_run(run, args)


def test_each_mode_also_gives_the_figures_against_best_nvidia(tmp_path):
    run = tmp_path / "runs" / "r"
    r = RecordedEvaluator()(kernel_source("wgmma"), SHAPE)
    auto = min((t for n, t in r.baselines.items() if n.startswith("cublaslt-autotune")), key=lambda t: t.median_us)
    # cuBLAS faster than AutoTuning's pick in these rounds: best NVIDIA is cuBLAS
    r.baselines["cublas-NN"].median_us = auto.median_us * 0.95
    r.baselines["cublas-NN"].speedup_mean = auto.speedup_mean * 0.95
    Archive(run / "archive.sqlite").add("r", "H200", "fp32", SHAPE, kernel_source("wgmma"), "builtin", r,
                                        family="hopper_wgmma")
    args = argparse.Namespace(acc="fp32", shapes="shapes.txt", budget=3, per_step=3, ncu="off", lanes=None)
    md = _bench().summarise_run(run, args)
    at, bn = r.speedup("cublaslt-autotune-max"), r.speedup("best-nvidia")
    assert bn == pytest.approx(at * 0.95)
    head, line = md.split("Against best NVIDIA")[0], next(x for x in md.splitlines() if x.startswith("Against best"))
    assert f"geomean {at:.3f}, win rate" in head
    assert f"geomean {bn:.3f}, win rate" in line and f"min {bn:.3f}, geomean {bn:.3f}." in line


def test_a_tournaments_pick_shows_its_tournament_figure_and_the_header_says_how_it_was_chosen(tmp_path):
    run, first, second = _run(tmp_path)
    a = Archive(run / "archive.sqlite")
    ranked = a.ranked("H200", "fp32", SHAPE)
    args = argparse.Namespace(acc="fp32", shapes="shapes.txt", budget=3, per_step=3, ncu="off", lanes=None)

    def row_of(md):
        header = next(line for line in md.splitlines() if line.startswith("| M | N | K |"))
        row = next(line for line in md.splitlines() if line.startswith("| 4096 | 4096 | 4096 |"))
        return dict(zip((c.strip() for c in header.strip("|").split("|")), (c.strip() for c in row.strip("|").split("|"))))

    before = row_of(_bench().summarise_run(run, args))
    played = scaled_result(ranked[1].result, 1.0)
    played.wall_seconds = 40.0
    for _ in range(2):  # the latest tournament counts, once
        a.add_tournament("H200", "fp32", SHAPE, {ranked[0].id: 1.001, ranked[1].id: 1.0123}, played)
    md = _bench().summarise_run(run, args)
    assert "timed head to head in the same rounds of one evaluation (a tournament, 15 rounds)" in md
    after = row_of(md)
    # the tournament's pick is the search's second, and its row shows its figure there
    assert after["search measurements"] == f"{ranked[1].speedup:.3f} · T 1.012"
    spent = 40.0 - (played.compile.seconds if played.compile else 0)
    assert float(after["GPU s"]) - float(before["GPU s"]) == pytest.approx(spent, abs=0.11)


def test_a_table_over_several_gpus_says_which_one_measured_each_shape(tmp_path):
    """A run whose slices landed on two lent machines: the notes say which GPU measured each shape's figure (its
    median final where there is one), so two runs can be compared shape by shape on the same footing."""
    from agent.campaign.db import CampaignDB

    run, _, _ = _run(tmp_path)
    a = Archive(run / "archive.sqlite")
    args = argparse.Namespace(acc="fp32", shapes="shapes.txt", budget=3, per_step=3, ncu="off", lanes=None)
    ev = RecordedEvaluator()
    for shape in [(2048, 2048, 2048), (1024, 1024, 1024)]:
        res = ev(kernel_source("tile128"), shape)
        res.gpu["gpu_uuid"] = "GPU-2222bbbb-0000-0000-0000-000000000000"
        a.add("r", "H200", "fp32", shape, kernel_source("tile128"), "builtin", res, family="hopper_wgmma")
    md = _bench().summarise_run(run, args)
    assert "figures measured on" not in md  # one GPU named: SHAPE's records carry no UUID
    best = a.ranked("H200", "fp32", SHAPE)[0]
    final = scaled_result(best.result, 0.97)
    final.gpu["gpu_uuid"] = "GPU-1111aaaa-0000-0000-0000-000000000000"
    CampaignDB(run / "campaign.sqlite").put_final("H200", "fp32", SHAPE, "offline", best.id, best.source_hash, final)
    md = _bench().summarise_run(run, args)
    assert "- figures measured on 1111aaaa: 4096×4096×4096; 2222bbbb: the other 2 shapes\n" in md
    assert _bench().figures_by_gpu([]) == ""


def test_a_resumed_run_says_which_modes_each_gpu_measured():
    """A run resumed on another machine may time one shape's modes on both: the note names the modes, never
    "the other N shapes" for shapes that the first GPU measured too."""
    from types import SimpleNamespace

    def row(uuid, mode, shape):
        return SimpleNamespace(result=SimpleNamespace(gpu={"gpu_uuid": uuid}), mode=mode, shape=shape)

    a, b = "GPU-1111aaaa-0000", "GPU-2222bbbb-0000"
    s1, s2 = (4096, 4096, 2048), (8192, 2048, 2048)
    rows = [row(a, "back-to-back", s1), row(a, "back-to-back", s2), row(a, "separated", s1), row(b, "separated", s2),
            row(b, "server", s1), row(b, "server", s2)]
    assert _bench().figures_by_gpu(rows) == (
        "- figures measured on 1111aaaa: back-to-back (every shape) and separated (4096×4096×2048); "
        "2222bbbb: separated (8192×2048×2048) and server (every shape)")


def test_an_unfinished_run_marks_the_figures_that_are_still_the_searchs(tmp_path):
    """Without a final measurement the table shows the search's own figure, which chose the kernel and reads high:
    it is marked, and the targets line says it is provisional; once the final is in, both go away."""
    from agent.campaign.db import CampaignDB

    run, first, _ = _run(tmp_path)
    args = argparse.Namespace(acc="fp32", shapes="shapes.txt", budget=3, per_step=3, ncu="off", lanes=None)
    md = _bench().summarise_run(run, args)
    row = next(line for line in md.splitlines() if line.startswith("| 4096 | 4096 | 4096 |"))
    assert f"| {first:.3f} * |" in row
    assert "Unfinished run: 1 of 1 shapes" in md and "Provisional (see above). Targets" in md
    best = Archive(run / "archive.sqlite").ranked("H200", "fp32", SHAPE)[0]
    final = scaled_result(best.result, 0.95)
    CampaignDB(run / "campaign.sqlite").put_final("H200", "fp32", SHAPE, "offline", best.id, best.source_hash, final)
    md = _bench().summarise_run(run, args)
    row = next(line for line in md.splitlines() if line.startswith("| 4096 | 4096 | 4096 |"))
    assert f"| {final.speedup('cublaslt-autotune-max'):.3f} |" in row
    assert "Unfinished" not in md and "Provisional" not in md


def test_a_correct_kernel_without_the_autotuning_figure_is_named_not_dropped(tmp_path):
    """The summary leaves a shape out of a baseline's counts when that baseline was not timed beside it (torch on a
    power-steady big shape); for cuBLASLt-AutoTuning, which is always timed, that is a fault, and the table names
    the shape and calls its targets provisional."""
    from agent.campaign.db import CampaignDB

    run, _, _ = _run(tmp_path)
    args = argparse.Namespace(acc="fp32", shapes="shapes.txt", budget=3, per_step=3, ncu="off", lanes=None)
    best = Archive(run / "archive.sqlite").ranked("H200", "fp32", SHAPE)[0]
    final = scaled_result(best.result, 0.95)
    for name in [n for n in final.baselines if n.startswith("cublaslt-autotune")]:
        del final.baselines[name]
    CampaignDB(run / "campaign.sqlite").put_final("H200", "fp32", SHAPE, "offline", best.id, best.source_hash, final)
    md = _bench().summarise_run(run, args)
    assert ("**1 shapes have a correct kernel but no cublaslt-autotune-max figure and are left out of the figures "
            "above: 4096×4096×4096.**") in md
    assert "Provisional (see above). Targets" in md


def test_finals_stopped_part_way_are_named(tmp_path):
    """A run stopped during its finals: a shape with no final in a mode is named above that mode's table (it is not
    in it), and a shape with fewer evaluations than the run's most is marked; a complete mode says neither."""
    from agent.campaign.db import CampaignDB

    run, _, _ = _run(tmp_path)
    ev, a, db = RecordedEvaluator(), Archive(run / "archive.sqlite"), CampaignDB(run / "campaign.sqlite")
    other = (2048, 2048, 2048)
    a.add("r", "H200", "fp32", other, kernel_source("wgmma"), "builtin", ev(kernel_source("wgmma"), other),
          family="hopper_wgmma")
    for shape in (SHAPE, other):
        best = a.ranked("H200", "fp32", shape)[0]
        for rep in range(3):
            db.put_final("H200", "fp32", shape, "offline", best.id, best.source_hash,
                         scaled_result(best.result, 0.97 + 0.01 * rep), rep=rep)
    best = a.ranked("H200", "fp32", SHAPE)[0]
    db.put_final("H200", "fp32", SHAPE, "server", best.id, best.source_hash, scaled_result(best.result, 0.9))
    args = argparse.Namespace(acc="fp32", shapes="shapes.txt", budget=3, per_step=3, ncu="off", lanes=None,
                              final_repeats=3)
    offline, server = _bench().summarise_run(run, args).split("## server")
    assert "no offline final" not in offline and "†" not in offline and "Provisional" not in offline
    assert "1 of the run's shapes have no server final yet and are not in this section: 2048×2048×2048." in server
    assert "| 2048 | 2048 | 2048 |" not in server
    assert "1 shapes (marked †) have fewer than 3 final evaluations so far." in server
    row = next(line for line in server.splitlines() if line.startswith("| 4096 | 4096 | 4096 |"))
    assert " † |" in row


def test_report_only_writes_into_a_new_folder(tmp_path):
    run, _, _ = _run(tmp_path)
    out = tmp_path / "not" / "there"
    p = subprocess.run([sys.executable, "scripts/bench_builtin_policy.py", "--report-only", "--run", "r",
                        "--runs-dir", str(run.parent), "--out", str(out)], cwd=REPO, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "| 4096 | 4096 | 4096 |" in (out / "builtin_policy_fp32.md").read_text()


def test_device_bench_resumes_from_the_previous_slices_runs_tgz(tmp_path):
    """scripts/device_bench.sh on a machine that starts bare: the run folder comes in as runs.tgz and goes out again,
    with the table (here the report of a finished run, so nothing needs a GPU)."""
    run, _, _ = _run(tmp_path)
    tgz = tmp_path / "in.tgz"
    subprocess.run(["tar", "czf", str(tgz), "-C", str(run.parent), "r"], check=True)
    out, bare = tmp_path / "out", tmp_path / "bare"
    env = {**os.environ, "RUN": "r", "RUNS_TGZ": str(tgz), "RUNS_DIR": str(bare), "OUT": str(out),
           "WHEELS": str(tmp_path / "no-wheels")}
    p = subprocess.run(["bash", "scripts/device_bench.sh", "--report-only"], cwd=REPO, env=env, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "| 4096 | 4096 | 4096 |" in (out / "builtin_policy_fp32.md").read_text()
    listed = subprocess.run(["tar", "tzf", str(out / "runs.tgz")], check=True, capture_output=True, text=True).stdout
    assert "r/archive.sqlite" in listed.split()
    assert (bare / "r" / "archive.sqlite").is_file()


def test_targets_are_judged_before_rounding():
    bench = _bench()
    line = bench.targets({"geomean": 1.2414, "win_rate": 20 / 24}, [0.96991, 1.03])
    assert "geomean ≥ 1.15: met (1.2414)" in line
    assert "win rate ≥ 90%: not met (83%)" in line
    assert "min over shapes ≥ 2^36 FLOP ≥ 0.97: not met (0.9699)" in line  # prints as 0.970 in the summary line
    assert "≥ 0.97: met (0.9700)" in bench.targets({"geomean": 1.0, "win_rate": 1.0}, [0.97])
    assert "≥ 0.97: no data" in bench.targets({"geomean": 1.0, "win_rate": 1.0}, [])


def test_the_targets_line_is_for_fp32_offline_only(tmp_path):
    bench = _bench()
    args = dict(shapes="shapes.txt", budget=3, per_step=3, ncu="off", lanes=None)
    fp32 = bench.summarise_run(_run(tmp_path)[0], argparse.Namespace(acc="fp32", **args))
    assert fp32.count("Targets (fp32, offline") == 1
    fp16 = bench.summarise_run(_run(tmp_path, "h", acc="fp16")[0], argparse.Namespace(acc="fp16", **args))
    assert "(fp16 accumulation)" in fp16 and "Targets" not in fp16


def test_repeated_finals_report_the_median_evaluation_and_all_of_them(tmp_path):
    """Three final evaluations: the figure (and its CI) is the middle one's, and every one is listed, so the spread
    between evaluations is visible beside one evaluation's CI; of two, the lower one is shown, never a blend."""
    from agent.campaign.db import CampaignDB

    run, _, _ = _run(tmp_path)
    args = argparse.Namespace(acc="fp32", shapes="shapes.txt", budget=3, per_step=3, ncu="off", lanes=None)
    best = Archive(run / "archive.sqlite").ranked("H200", "fp32", SHAPE)[0]
    cdb = CampaignDB(run / "campaign.sqlite")
    finals = [scaled_result(best.result, f) for f in (1.0, 0.9, 0.95)]
    speedups = [f.speedup("cublaslt-autotune-max") for f in finals]
    for rep, res in enumerate(finals[:2]):
        cdb.put_final("H200", "fp32", SHAPE, "offline", best.id, best.source_hash, res, rep)

    def cells():
        md = _bench().summarise_run(run, args)
        header = next(line for line in md.splitlines() if line.startswith("| M | N | K |"))
        row = next(line for line in md.splitlines() if line.startswith("| 4096 | 4096 | 4096 |"))
        return dict(zip([c.strip() for c in header.strip("|").split("|")], [c.strip() for c in row.strip("|").split("|")]))

    c = cells()
    assert c["speedup vs AutoTuning-max"] == f"{min(speedups[:2]):.3f}"
    cdb.put_final("H200", "fp32", SHAPE, "offline", best.id, best.source_hash, finals[2], 2)
    c = cells()
    assert c["speedup vs AutoTuning-max"] == f"{sorted(speedups)[1]:.3f}"
    assert c["final measurements"] == " / ".join(f"{s:.3f}" for s in sorted(speedups))


def _retimed(r, base: float, kernel: float):
    """The same evaluation with every baseline's median time scaled by `base` and the kernel's by `kernel`."""
    d = r.to_dict()
    for t in d["baselines"].values():
        t["median_us"] *= base
    d["candidate"]["median_us"] *= kernel
    return EvalResult.from_dict(d)


def test_finals_whose_baselines_moved_and_the_kernel_held_are_marked(tmp_path):
    """Server finals of small shapes saw every NVIDIA baseline slower by 10-16% in one of three evaluations while the
    kernel held (docs/evaluator.md): the figure then depends on which one is the median, and the table says so."""
    from agent.campaign.db import CampaignDB
    from agent.report import collect_rows, write_report

    run, _, _ = _run(tmp_path)
    args = argparse.Namespace(acc="fp32", shapes="shapes.txt", budget=3, per_step=3, ncu="off", lanes=None)
    best = Archive(run / "archive.sqlite").ranked("H200", "fp32", SHAPE)[0]
    cdb = CampaignDB(run / "campaign.sqlite")
    for rep, (base, kernel) in enumerate([(1.0, 1.0), (1.14, 1.0), (1.0, 1.01)]):
        cdb.put_final("H200", "fp32", SHAPE, "server", best.id, best.source_hash,
                      _retimed(best.result, base, kernel), rep)
    for rep, (base, kernel) in enumerate([(1.0, 1.0), (1.14, 1.13), (1.01, 1.0)]):  # both moved: clock, not baselines
        cdb.put_final("H200", "fp32", SHAPE, "offline", best.id, best.source_hash,
                      _retimed(best.result, base, kernel), rep)
    spread = {r.mode: r.extra["final_spread"] for r in collect_rows(run)}
    assert spread["server"] == pytest.approx((1.14, 1.01)) and spread["offline"] == pytest.approx((1.14, 1.13))
    md = _bench().summarise_run(run, args)
    server, offline = md.split("## server")[1], md.split("## offline")[1].split("## ")[0]
    assert "1 shapes (marked ‡)" in server and _row(server, SHAPE)[3].endswith("‡")
    assert "Without them, against best NVIDIA: no shape left" in server  # the run has this one shape
    assert "‡" not in offline
    targets = md.split("## Targets")[1].split("## ")[0]  # the targets that stand on it say so too
    assert "baselines moved between the finals while the kernel held (‡ below; the median may read high): " \
           "server: 4096×4096×4096" in targets
    html = write_report(collect_rows(run), run="r", out_path=tmp_path / "r.html").read_text()
    assert html.count("the fastest baseline moved 14%, the kernel 1%") == 1


def test_a_final_evaluation_that_failed_a_check_is_shown_not_dropped(tmp_path):
    from agent.campaign.db import CampaignDB
    from agent.report import collect_rows, write_report

    run, _, _ = _run(tmp_path)
    args = argparse.Namespace(acc="fp32", shapes="shapes.txt", budget=3, per_step=3, ncu="off", lanes=None)
    best = Archive(run / "archive.sqlite").ranked("H200", "fp32", SHAPE)[0]
    cdb = CampaignDB(run / "campaign.sqlite")
    cdb.put_final("H200", "fp32", SHAPE, "offline", best.id, best.source_hash, scaled_result(best.result, 0.97), 0)
    bad = EvalResult.from_dict(dict(best.result.to_dict(), status="wrong_result"))
    cdb.put_final("H200", "fp32", SHAPE, "offline", best.id, best.source_hash, bad, 1)
    md = _bench().summarise_run(run, args)
    row = next(line for line in md.splitlines() if line.startswith("| 4096 | 4096 | 4096 |"))
    assert "**wrong_result**" in row
    rows = collect_rows(run)
    [r] = [r for r in rows if r.mode == "offline"]
    assert r.extra["final_failed"] == ["wrong_result"] and len(r.extra["final_speedups"]) == 1
    html = write_report(rows, run="r", out_path=tmp_path / "r.html").read_text()
    assert "final evaluations that failed: wrong_result" in html
    # every server final failed: that mode's row has no figure (the search ran offline) and says why
    cdb.put_final("H200", "fp32", SHAPE, "server", best.id, best.source_hash,
                  EvalResult.from_dict(dict(bad.to_dict(), mode="server", status="crash")), 0)
    [s] = [r for r in collect_rows(run) if r.mode == "server"]
    assert s.result is None and not s.final and s.extra["final_failed"] == ["crash"]
    md = _bench().summarise_run(run, args)
    # (one server evaluation against the two offline ones, so it is also marked as short)
    assert "Unfinished" not in md and "| - † | - | **crash** |" in md.split("## server")[1]


def _report(tmp_path: Path, *runs: str, flags=()) -> subprocess.CompletedProcess:
    extra = [x for r in runs[1:] for x in ("--with-run", r)]
    return subprocess.run([sys.executable, "scripts/bench_builtin_policy.py", "--report-only", "--run", runs[0],
                           *extra, "--runs-dir", str(tmp_path / "runs"), "--out", str(tmp_path / "out"), *flags],
                          cwd=REPO, capture_output=True, text=True)


def _record(run: Path, **settings) -> None:
    """The campaign.json a campaign leaves in its run folder (only the keys the header reads)."""
    (run / "campaign.json").write_text(json.dumps(settings))


def test_the_header_states_what_the_run_was_made_with(tmp_path):
    """A fp16 run summarised without --acc was once titled fp32, with the default budget: the header's settings
    come from the run; a flag that contradicts it, or a shape file that is not the run's list, is refused."""
    run, _, _ = _run(tmp_path, "h", acc="fp16")
    _record(run, acc="fp16", budget_candidates=12, n_per_step=3, shapes=[list(SHAPE)])
    shapes = tmp_path / "shapes.txt"
    shapes.write_text("# the run's list\n4096 4096 4096\n")
    p = _report(tmp_path, "h", flags=["--shapes", str(shapes)])
    assert p.returncode == 0, p.stderr
    assert not (tmp_path / "out" / "builtin_policy_fp32.md").exists()
    md = (tmp_path / "out" / "builtin_policy_fp16.md").read_text()
    assert md.startswith("# Built-in policy benchmark (fp16 accumulation)")
    assert "- budget: 12 candidates" in md and "--budget 12 --per-step 3 --acc fp16" in md
    assert "Targets" not in md  # the targets are for fp32
    assert "quick timing profile" in md and "the 3 leaders" in md and "--final-repeats" not in md
    # settings the script does not take as flags are still the run's
    _record(run, acc="fp16", budget_candidates=12, n_per_step=3, shapes=[list(SHAPE)], profile="paper",
            confirm_top=0, final_repeats=5)
    assert _report(tmp_path, "h", flags=["--shapes", str(shapes)]).returncode == 0
    md = (tmp_path / "out" / "builtin_policy_fp16.md").read_text()
    assert "paper timing profile" in md and "(`--confirm-top 0`)" in md and "--final-repeats 5`" in md
    for flags, said in ((["--shapes", str(shapes), "--acc", "fp32"], "--acc fp32, but run h was made with fp16"),
                        (["--shapes", str(shapes), "--budget", "8"], "--budget 8, but run h was made with 12"),
                        ([], "is not the runs' shape list (1 shapes)")):
        p = _report(tmp_path, "h", flags=flags)
        assert p.returncode == 2 and said in p.stderr, (flags, p.stderr)


def test_the_header_gives_the_ncu_and_lanes_the_run_was_made_with(tmp_path):
    """A report made afterwards once headed a run made with --ncu off --lanes 8 with `--ncu auto` and no --lanes:
    both now come from the run's record; runs that differ in them (they change no figure) are still combined, and
    the command leaves out what they differ in."""
    shapes = tmp_path / "shapes.txt"
    shapes.write_text("4096 4096 4096\n")
    run, _, _ = _run(tmp_path, "a")
    _record(run, acc="fp32", budget_candidates=16, shapes=[list(SHAPE)], ncu="off", lanes=8)
    assert _report(tmp_path, "a", flags=["--shapes", str(shapes)]).returncode == 0
    md = (tmp_path / "out" / "builtin_policy_fp32.md").read_text()
    assert "--acc fp32 --ncu off --lanes 8" in md
    small = (64, 64, 128)
    run, _, _ = _run(tmp_path, "b", shape=small)
    _record(run, acc="fp32", budget_candidates=16, shapes=[list(small)], ncu="off", lanes=4)
    shapes.write_text("4096 4096 4096\n64 64 128\n")
    p = _report(tmp_path, "a", "b", flags=["--shapes", str(shapes)])
    assert p.returncode == 0, p.stderr
    md = (tmp_path / "out" / "builtin_policy_fp32.md").read_text()
    assert "--acc fp32 --ncu off" in md and "--lanes" not in md.split("- command:")[1].split("\n")[0]


def test_runs_made_with_different_budgets_are_not_combined(tmp_path):
    for name, budget, shape in (("a", 12, SHAPE), ("b", 6, (64, 64, 128))):
        run, _, _ = _run(tmp_path, name, shape=shape)
        _record(run, acc="fp32", budget_candidates=budget, shapes=[list(shape)])
    p = _report(tmp_path, "a", "b", flags=["--shapes", "/no/such/file"])
    assert p.returncode == 2 and "different --budget (a: 12, b: 6)" in p.stderr
    assert not (tmp_path / "out").exists()


def test_archive_rows_of_another_accumulator_are_refused(tmp_path):
    """Without a campaign.json the archive still says how the run accumulated."""
    _run(tmp_path, "h", acc="fp16")
    p = _report(tmp_path, "h", flags=["--acc", "fp32"])
    assert p.returncode == 2 and "accumulate in fp16, not fp32" in p.stderr


def _row(md: str, shape) -> list[str]:
    line = next(x for x in md.splitlines() if x.startswith("| " + " | ".join(map(str, shape)) + " |"))
    return [c.strip() for c in line.strip("|").split("|")]


def test_runs_of_shape_subsets_make_one_table(tmp_path):
    """A benchmark spread over runs of its shape subsets (runs 15 and 14): one table over their union, a shape
    measured in both taken from the run named last, and its cost from that run's archive."""
    small = (64, 64, 128)
    _run(tmp_path, "big")
    _run(tmp_path, "small", shape=small, tags=("naive", "tile128"))
    _run(tmp_path, "again", tags=("naive",))  # SHAPE once more, one candidate
    p = _report(tmp_path, "big", "small", "again")
    assert p.returncode == 0, p.stderr
    md = (tmp_path / "out" / "builtin_policy_fp32.md").read_text()
    assert "over 2 shapes" in md
    assert "runs combined: `big`, `small`, `again`" in md and "--with-run small --with-run again" in md
    header = _row(md, ("M", "N", "K"))
    assert _row(md, SHAPE)[header.index("tried")] == "1"  # from `again`, not `big`
    assert _row(md, small)[header.index("tried")] == "2"


def test_runs_from_different_gpus_are_not_combined(tmp_path):
    _run(tmp_path, "h200")
    _run(tmp_path, "h100", shape=(64, 64, 128), gpu="H100")
    p = _report(tmp_path, "h200", "h100")
    assert p.returncode == 2
    assert "different GPUs (H100, H200)" in p.stderr
    assert not (tmp_path / "out").exists()


def test_a_missing_run_is_named(tmp_path):
    _run(tmp_path, "r")
    p = _report(tmp_path, "r", "typo")
    assert p.returncode == 2 and "no run at" in p.stderr and "typo" in p.stderr
    p = subprocess.run([sys.executable, "scripts/bench_builtin_policy.py", "--run", "r", "--with-run", "r",
                        "--runs-dir", str(tmp_path / "runs")], cwd=REPO, capture_output=True, text=True)
    assert p.returncode == 2 and "add --report-only" in p.stderr


def test_a_run_searched_in_graph_mode_gets_its_own_table(tmp_path):
    """A campaign timed in graph mode (--mode graph) is summarised into builtin_policy_<acc>_graph.md, with a section
    for each mode its winners were re-measured in and the search mode in the header and the command; naming another
    mode for that run is refused."""
    from agent.campaign.db import CampaignDB

    run, _, _ = _run(tmp_path)
    (run / "campaign.json").write_text(json.dumps({"acc": "fp32", "mode": "graph", "budget_candidates": 3,
                                                   "n_per_step": 3, "shapes": [list(SHAPE)]}))
    best = Archive(run / "archive.sqlite").ranked("H200", "fp32", SHAPE)[0]
    db = CampaignDB(run / "campaign.sqlite")
    for mode, scale in (("graph", 0.9), ("offline", 0.95)):
        db.put_final("H200", "fp32", SHAPE, mode, best.id, best.source_hash, scaled_result(best.result, scale))
    out, shapes = tmp_path / "out", tmp_path / "shapes.txt"
    shapes.write_text("4096 4096 4096\n")
    cmd = [sys.executable, "scripts/bench_builtin_policy.py", "--report-only", "--run", "r", "--shapes", str(shapes),
           "--runs-dir", str(run.parent), "--out", str(out)]
    p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    md = (out / "builtin_policy_fp32_graph.md").read_text()
    assert not (out / "builtin_policy_fp32.md").exists()
    assert md.startswith("# Built-in policy benchmark (fp32 accumulation, searched in graph mode)")
    assert "re-measured in offline, graph against every baseline" in md
    assert "--mode graph --final-modes graph,offline`" in md  # not the default graph,offline,server
    offline, graph = md.split("## graph")
    assert "## offline" in offline and "Targets (fp32, offline" in offline and "Targets" not in graph
    row = next(line for line in graph.splitlines() if line.startswith("| 4096 | 4096 | 4096 |"))
    assert f"| {scaled_result(best.result, 0.9).speedup('cublaslt-autotune-max'):.3f} |" in row
    p = subprocess.run(cmd + ["--mode", "offline"], cwd=REPO, capture_output=True, text=True)
    assert p.returncode == 2 and "--mode offline, but run r was made with graph" in p.stderr


def test_the_table_names_the_physical_gpus_behind_its_figures(tmp_path):
    """Slices of one run land on different lent machines: the device line counts the physical GPUs (UUIDs) of every
    measurement in the table, the search's included; records without a UUID (before it was recorded) add none."""
    from agent.campaign.db import CampaignDB

    run, _, _ = _run(tmp_path)
    args = argparse.Namespace(acc="fp32", shapes="shapes.txt", budget=3, per_step=3, ncu="off", lanes=None)
    assert "physical GPU" not in _bench().summarise_run(run, args)
    a = Archive(run / "archive.sqlite")
    best = a.ranked("H200", "fp32", SHAPE)[0]
    searched = scaled_result(best.result, 0.5)
    searched.gpu["gpu_uuid"] = "GPU-1111aaaa-0000-0000-0000-000000000000"
    a.add("r", "H200", "fp32", SHAPE, kernel_source("slow"), "builtin", searched, family="hopper_wgmma")
    final = scaled_result(best.result, 0.97)
    final.gpu["gpu_uuid"] = "GPU-2222bbbb-0000-0000-0000-000000000000"
    CampaignDB(run / "campaign.sqlite").put_final("H200", "fp32", SHAPE, "offline", best.id, best.source_hash, final)
    md = _bench().summarise_run(run, args)
    assert "- device: H200 (2 physical GPUs: 1111aaaa, 2222bbbb); date:" in md


def test_gpu_seconds_count_the_time_a_gpu_was_held_not_the_wait_for_it(tmp_path):
    """Eight shapes in flight over one GPU wait for each other: their wall times summed to 68 GPU-minutes
    where the whole run held the machine 18 minutes. Records that kept the time they held a GPU are summed as that;
    a run with older records says that its column is wall time."""
    args = argparse.Namespace(acc="fp32", shapes="shapes.txt", budget=3, per_step=3, ncu="off", lanes=None)
    assert "predate the GPU time" in _bench().summarise_run(_run(tmp_path / "old")[0], args)
    ev, run = RecordedEvaluator(), tmp_path / "new" / "runs" / "r"
    a = Archive(run / "archive.sqlite")
    held = {"naive": 1.25, "tile128": 2.5, "wgmma": 4.0}
    for tag, s in held.items():
        res = ev(kernel_source(tag), SHAPE)
        res.gpu_seconds, res.wall_seconds = s, 60.0  # 60 s of wall, most of it waiting for the GPU
        a.add("r", "H200", "fp32", SHAPE, kernel_source(tag), "builtin", res, family="hopper_wgmma")
    best = a.ranked("H200", "fp32", SHAPE)[0]
    again = scaled_result(best.result, 0.98)
    again.gpu_seconds = 0.5
    a.add_remeasure(best.id, again)
    md = _bench().summarise_run(run, args)
    assert "predate the GPU time" not in md
    header = next(line for line in md.splitlines() if line.startswith("| M | N | K |"))
    row = next(line for line in md.splitlines() if line.startswith("| 4096 | 4096 | 4096 |"))
    cells = dict(zip((c.strip() for c in header.strip("|").split("|")), (c.strip() for c in row.strip("|").split("|"))))
    assert float(cells["GPU s"]) == pytest.approx(sum(held.values()) + 0.5, abs=0.06)


def test_the_campaign_runs_on_the_gpus_named_and_the_agent_cli_takes_them():
    import argparse

    from agent.campaign.cli import _gpu_list

    bench = _bench()
    a = argparse.Namespace(shapes="s.txt", budget=16, acc="fp32", runs_dir="runs", mode="offline", final_modes=None,
                           final_repeats=3, per_step=4, ncu="off", lanes=8, gpus="0,1")
    cmd = bench.campaign_cmd(a, "r")
    assert cmd[cmd.index("--gpus") + 1] == "0,1" and _gpu_list("0,1") == [0, 1]
    assert "--gpus" not in bench.campaign_cmd(argparse.Namespace(**{**vars(a), "gpus": None}), "r")


def test_the_big_shape_and_server_targets_are_judged_on_finals_only():
    """bench_targets.judge: an each-shape target is missed by any shape below it, even before the others have
    finals; an aggregate (a geomean, a share won, the mean GPU time) waits for every shape; met needs all of them."""
    judge = load_script("bench_targets").judge
    big, big2, small, skinny = (4096, 4096, 4096), (8192, 8192, 1024), (64, 64, 128), (128, 2048, 12288)
    shapes = [big, big2, small, skinny]
    every = {"back-to-back": {big: 1.04, big2: 1.03, small: 1.5, skinny: 1.06},
             "separated": {big: 1.01, big2: 0.99, small: 1.4, skinny: 1.05},
             "offline": {big: 1.05, big2: 1.04, small: 1.4, skinny: 1.07},
             "server": {big: 1.0, big2: 1.02, small: 1.3, skinny: 1.2}}
    lines = judge(every, shapes, {s: 120.0 for s in shapes})
    line = lambda start: next(x for x in lines if x.startswith(start))  # noqa: E731
    assert line("- shapes ≥ 2^36 FLOP, each ≥ 1.00 back-to-back:").endswith("met (2 of 2, min 1.030)")
    assert "not met (2 of 2, min 0.990; misses: 8192×8192×1024 0.990)" in line(
        "- shapes ≥ 2^36 FLOP, each ≥ 1.00 sep")
    assert line("- shapes ≥ 2^36 FLOP, geomean ≥ 1.03 back-to-back:").endswith(": met (1.035)")
    assert "not met" in line("- shapes ≥ 2^36 FLOP, geomean ≥ 1.03 separated:")
    assert ": met (" in line("- server mode, geomean ≥ 1.10:")  # 1.124
    assert "met (75%, 3 of 4; misses: 4096×4096×4096 1.000)" in line("- server mode, ≥ 75%")  # a tie is no win
    assert line("- skinny long-K (min(M, N) ≤ 256, K ≥ 8192), each ≥ 1.05 separated:").endswith(
        "met (1 of 1, min 1.050)")
    assert line("- GPU time").endswith("met (2.00 over 4 shapes)")
    part = {m: {s: x for s, x in f.items() if s != big2} for m, f in every.items()}
    lines = judge(part, shapes, {s: 120.0 for s in shapes if s != big2})
    assert "not met (1 of 2, min 0.990" not in " ".join(lines)
    assert next(x for x in lines if "each ≥ 1.00 back-to-back" in x).startswith(
        "- shapes ≥ 2^36 FLOP, each ≥ 1.00 back-to-back: not judged yet (1 of 2, min 1.040); 1 shape without a "
        "final")
    assert next(x for x in lines if "geomean ≥ 1.03 back-to-back" in x).startswith(
        "- shapes ≥ 2^36 FLOP, geomean ≥ 1.03 back-to-back: not judged yet (1.040)")
    low = dict(part, separated={big: 0.98, small: 1.4, skinny: 1.05})
    assert "not met (1 of 2, min 0.980; misses: 4096×4096×4096 0.980); 1 shape without a final yet" in " ".join(
        judge(low, shapes, {}))
    assert next(x for x in judge(low, shapes, {}) if x.startswith("- GPU time")).endswith(
        "not judged yet (no record); 4 shapes without a search yet")


def test_the_table_opens_with_the_targets_for_fp32(tmp_path):
    run, _, _ = _run(tmp_path)
    args = argparse.Namespace(acc="fp32", shapes="shapes.txt", budget=3, per_step=3, ncu="off", lanes=None)
    md = _bench().summarise_run(run, args)
    head = md.split("## offline")[0]
    assert "## Targets: big shapes and server mode" in head
    assert ("- shapes ≥ 2^36 FLOP, each ≥ 1.00 back-to-back: not judged yet (0 of 1, no final); 1 shape "
            "without") in head
    run16, _, _ = _run(tmp_path, name="h", acc="fp16")
    assert "## Targets" not in _bench().summarise_run(run16, argparse.Namespace(**{**vars(args), "acc": "fp16"}))


def test_the_regimes_table_takes_each_regimes_median_final(tmp_path):
    """scripts/regimes_table.py puts the regimes side by side: each figure the median of the winner's finals in that
    regime (not the last one taken), an offline final only where it was power-steady, a failed one shown."""
    from agent.campaign.db import CampaignDB

    run, _, _ = _run(tmp_path)
    best = Archive(run / "archive.sqlite").ranked("H200", "fp32", SHAPE)[0]
    cdb = CampaignDB(run / "campaign.sqlite")
    server = [scaled_result(best.result, f) for f in (1.1, 1.0, 1.2)]  # the last one is not the median
    for rep, r in enumerate(server):
        cdb.put_final("H200", "fp32", SHAPE, "server", best.id, best.source_hash, r, rep)
    cdb.put_final("H200", "fp32", SHAPE, "offline", best.id, best.source_hash, best.result, 0)  # not steady
    broken = EvalResult.from_dict({**best.result.to_dict(), "status": "incorrect", "reason": "wrong outputs"})
    cdb.put_final("H200", "fp32", SHAPE, "separated", best.id, best.source_hash, broken, 0)
    table = load_script("regimes_table")
    data = table.figures(run)
    entry = data["shapes"]["x".join(map(str, SHAPE))]
    assert entry["server"]["best"] == pytest.approx(server[0].speedup("best-nvidia"), abs=1e-4)
    assert entry["server"]["best"] != pytest.approx(server[2].speedup("best-nvidia"), abs=1e-3)
    assert entry["server"]["evaluations"] == 3
    fastest = server[0].baselines[entry["server"]["fastest"]]
    assert entry["server"]["us"] == [round(server[0].candidate.median_us, 3), round(fastest.median_us, 3)]
    assert "steady" not in entry and "offline" not in entry  # the separated regime's twin, left out
    assert entry["separated"] == {"status": "incorrect"}
    data.update(date="2026-11-28", commit="abc1234", data_file="d.json", command="c")
    assert "the median of up to 3 evaluations" in table.render(data)
    # the commits: the run's record, after --commit where the record (or its earlier starts) named none
    assert table.code_commits({"commits": ["a1", "b2"]}, "x9") == "a1, b2"
    assert table.code_commits({"commits": ["unrecorded", "b2"]}, "x9 to y8") == "x9 to y8, b2"
    assert table.code_commits({}, "x9") == "x9" and table.code_commits({}, "") == "(not recorded by the run)"
    # without --date the header names the day the run record was last updated (UTC)
    assert table.record_day({"created": 1795900000.0, "updated": 1795929452.7}) == "2026-11-29"
    assert table.record_day({}) == ""


def test_the_regimes_table_says_how_much_more_our_kernels_pay_going_cold():
    """Where a regime's times are kept, the table gives each shape's excess cold cost (our server time less our
    separated time, less the same for best NVIDIA) and what server mode would read without it; older data files,
    without the times, render as before."""
    table = load_script("regimes_table")
    shapes = {"64x64x256": {"server": {"best": 1.04, "us": [5.0, 5.2]}, "separated": {"best": 1.5, "us": [2.0, 3.0]}},
              "128x128x128": {"server": {"best": 1.0, "us": [6.0, 6.0]}, "separated": {"best": 1.2, "us": [3.0, 3.5]}},
              "8192x8192x8192": {"server": {"best": 1.0, "us": [1000.0, 1000.0]},
                                 "separated": {"best": 1.0, "us": [990.0, 990.0]}}}
    assert table.extra_cold_us(shapes["64x64x256"]) == pytest.approx(0.8)
    assert table.extra_cold_us({"server": {"best": 1.0}, "separated": {"best": 1.0}}) is None
    data = {"shapes": shapes, "date": "2026-11-29", "commit": "abc1234", "data_file": "d.json", "command": "c"}
    text = table.render(data)
    # 0.8 and 0.5 us below 2^36; without them 5.2 / 4.2, 6 / 5.5 and 1
    assert "by +0.65 µs (median of 2 shapes below 2^36 FLOP; +0.50 to +0.80)" in text
    without = (5.2 / 4.2 * 6.0 / 5.5 * 1.0) ** (1 / 3)
    now = (5.2 / 5.0) ** (1 / 3)
    assert f"would read {without:.3f} over 3 shapes, against {now:.3f}" in text
    assert "| excess cold cost, µs |" in text and "| +0.80 |" in text and "| +0.00 |" in text
    for e in shapes.values():
        for r in e.values():
            del r["us"]
    old = table.render(data)
    assert "excess cold cost" not in old and "cold cost" not in old


def test_the_previous_tables_offline_figure_is_read_where_it_is_marked(tmp_path):
    """The comparison with an older table once took a marked offline figure (1.480 ‡, baselines moved) as missing
    and read the shape's next row instead, a server or back-to-back figure from a later section."""
    old = tmp_path / "old.md"
    old.write_text("## offline\n\n| M | N | K | speedup vs AutoTuning-max | family |\n|---|---|---|---|---|\n"
                   "| 512 | 512 | 64 | 1.480 ‡ | a |\n| 64 | 64 | 64 | — | a |\n| 128 | 128 | 128 | 1.2 | a |\n\n"
                   "## server\n\n| 512 | 512 | 64 | 0.982 | a |\n| 64 | 64 | 64 | 0.9 | a |\n"
                   "| 128 | 128 | 128 | 1.0 | a |\n")
    assert load_script("regimes_table").previous_offline(old) == {"512x512x64": 1.48, "128x128x128": 1.2}


def test_the_regimes_table_combines_the_slices_of_a_benchmark(tmp_path):
    """A benchmark run in slices (one run each) makes one regimes table: every run's shapes, a shape in several from
    the run named last, each run's commits named; runs of different GPU models are refused."""
    from agent.campaign.db import CampaignDB

    def finals(name, shape, factor, gpu="H200", commits=("abc1234",)):
        run, _, _ = _run(tmp_path, name, shape=shape, gpu=gpu)
        best = Archive(run / "archive.sqlite").ranked(gpu, "fp32", shape)[0]
        cdb = CampaignDB(run / "campaign.sqlite")
        for rep in range(3):
            r = scaled_result(best.result, factor)
            r.gpu = {**r.gpu, "name": f"NVIDIA {gpu}"}
            cdb.put_final(gpu, "fp32", shape, "server", best.id, best.source_hash, r, rep)
        _record(run, acc="fp32", commits=list(commits), updated=1795929452.7)
        return run

    small = (64, 64, 128)
    a = finals("a", SHAPE, 1.0, commits=("1111111",))
    b = finals("b", small, 1.0, commits=("2222222", "3333333"))
    again = finals("again", SHAPE, 1.2, commits=("4444444",))
    data, out = tmp_path / "d.json", tmp_path / "t.md"

    def table(*runs):
        return subprocess.run([sys.executable, "scripts/regimes_table.py", *[x for r in runs for x in ("--run", str(r))],
                               "--data", str(data), "--out", str(out)], cwd=REPO, capture_output=True, text=True)

    p = table(a, b, again)
    assert p.returncode == 0, p.stderr
    figures = json.loads(data.read_text())
    assert set(figures["shapes"]) == {"4096x4096x4096", "64x64x128"}
    one = load_script("regimes_table").figures(again)["shapes"]["4096x4096x4096"]["server"]["best"]
    assert figures["shapes"]["4096x4096x4096"]["server"]["best"] == one  # the last run named
    md = out.read_text()
    assert "1111111 (run a); 2222222, 3333333 (run b); 4444444 (run again)" in md and "measured 2026-11-29" in md
    other = finals("h100", small, 1.0, gpu="H100")
    p = table(a, other)
    assert p.returncode == 2 and "different GPU models" in p.stderr
