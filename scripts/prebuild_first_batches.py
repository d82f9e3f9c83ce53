#!/usr/bin/env python3
"""Build, on a machine without a GPU, the kernels a built-in policy campaign will evaluate first, into a compile
cache that the GPU machine then starts from, so its GPUs do not wait for these nvcc runs.

    python3 scripts/prebuild_first_batches.py --shapes FILE --out cache.tgz [--arch sm_90a] [--acc fp32]
                                              [--mode offline] [--per-step 4] [--jobs N] [--cache DIR]
    python3 scripts/prebuild_first_batches.py --run RUN_DIR --out cache.tgz [--confirm-top 3] ...
    python3 scripts/prebuild_first_batches.py --run RUN_DIR --shapes FILE --out cache.tgz ...   # a resumed slice

With --run, what a resumed run's tournaments play instead: each shape's mode players (`mode_players`: the top
leaders and other families' best close behind) and their cold twins (`agent.families.cold_twin`), as archived or
rendered. A campaign whose finals were reset (a mode's `final_runs` and `mode_winners` rows deleted to measure it
again) replays those tournaments on a machine that starts bare, and a CUTLASS player takes 1-2 minutes to build.
With both, what a slice stopped mid-campaign needs on its next machine: the players of the shapes it started and the
first batches of the shapes of FILE it has not.

Each shape's first batch is what `cudal2 campaign --model builtin` proposes before any measurement
(`BuiltinPolicy.propose` with no history, in the campaign's search mode), rendered as the campaign renders it.
The builds go through the evaluator's content-hash cache (evaluator.compile), whose key holds the source, the arch,
the flags and the nvcc and CUTLASS versions: a GPU machine with the same nvcc and CUTLASS finds them, any other
rebuilds. On the GPU machine: `tar xzf cache.tgz -C "$CUDAL2_CACHE/build"` (scripts/device_bench.sh does it when
PREBUILT names the file). Later steps depend on measurements and are built there.
"""
from __future__ import annotations

import argparse
import os
import sys
import tarfile
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from evaluator.contract import MODES  # noqa: E402


def first_batches(shapes: list[tuple], acc: str, arch: str, n: int, mode: str = "offline"
                  ) -> list[tuple[tuple, str, str]]:
    """(shape, family, source) of each shape's first batch, one entry per distinct source."""
    from agent.families import render
    from agent.policy import BuiltinPolicy

    seen, out = set(), []
    for s in shapes:
        for c in BuiltinPolicy(0).propose(s, acc, arch, [], n=n, mode=mode):
            src = render(c.family, c.params, s)
            if src not in seen:
                seen.add(src)
                out.append((s, c.family, src))
    return out


def tournament_players(run_dir: Path, top: int) -> list[tuple[tuple, str, str]]:
    """(shape, family, source) of every shape's mode players in a run folder and of their cold twins, one entry per
    distinct source."""
    from agent.campaign.archive import Archive
    from agent.campaign.driver import mode_players
    from agent.families import cold_twin, render

    archive = Archive(run_dir / "archive.sqlite")
    seen, out = set(), []
    for key in archive.shapes():
        shape = tuple(key.shape)
        for v in mode_players(archive.ranked(key.gpu, key.acc, shape), top):
            twin = cold_twin(v.family, v.params, shape)
            for src in (v.read_source(), *([render(v.family, twin, shape)] if twin else [])):
                if src not in seen:
                    seen.add(src)
                    out.append((shape, v.family or "model", src))
    return out


def started_shapes(run_dir: Path) -> set[tuple]:
    """The shapes a run folder's archive holds a kernel of."""
    from agent.campaign.archive import Archive

    return {tuple(key.shape) for key in Archive(run_dir / "archive.sqlite").shapes()}


def main(argv: list[str] | None = None) -> int:
    from agent.shapes import load_shapes
    from evaluator.compile import compile_kernel

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", type=Path, help="a campaign's shape list: build each shape's first batch (with "
                                                "--run: of each shape the run has not started)")
    ap.add_argument("--run", type=Path, help="a run folder: build its tournaments' players and their cold twins")
    ap.add_argument("--confirm-top", type=int, default=3, help="the campaign's --confirm-top (default 3)")
    ap.add_argument("--out", required=True, type=Path, help="the cache as a .tgz, to unpack into $CUDAL2_CACHE/build")
    ap.add_argument("--arch", default="sm_90a")
    ap.add_argument("--acc", choices=["fp32", "fp16"], default="fp32")
    ap.add_argument("--mode", choices=MODES, default="offline", help="the campaign's --mode (default offline)")
    ap.add_argument("--per-step", type=int, default=4, help="the campaign's --per-step (default 4)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="parallel nvcc processes")
    ap.add_argument("--cache", type=Path, default=None,
                    help="build in this compile cache and keep it (default: a temporary one); what it holds already "
                         "is not built again")
    a = ap.parse_args(argv)
    if a.run is None and a.shapes is None:
        ap.error("give --shapes, --run, or both (a resumed run: its players and the shapes it has not started)")
    todo: list[tuple[tuple, str, str]] = []
    if a.run is not None:
        if not (a.run / "archive.sqlite").is_file():
            print(f"prebuild: {a.run} is not a run folder (no archive.sqlite)", file=sys.stderr)
            return 2
        todo = tournament_players(a.run, a.confirm_top)
        print(f"{len(todo)} distinct kernels among the tournament players of {a.run}", flush=True)
    if a.shapes is not None:
        shapes = load_shapes(a.shapes)
        if a.run is not None:  # a started shape's first batch is in its archive already
            started = started_shapes(a.run)
            shapes = [s for s in shapes if tuple(s) not in started]
        built = {src for _, _, src in todo}
        batches = [t for t in first_batches(shapes, a.acc, a.arch, a.per_step, a.mode) if t[2] not in built]
        todo += batches
        print(f"{len(batches)} distinct kernels in the first batches of {len(shapes)} shape"
              f"{'' if len(shapes) == 1 else 's'} of {a.shapes}", flush=True)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        cache = a.cache or Path(tmp) / "build"

        def one(item: tuple):
            shape, family, src = item
            info = compile_kernel(src, a.arch, cache_dir=cache)
            print(f"{'x'.join(map(str, shape))} {family}: {'built' if info.ok else 'FAILED'}"
                  f"{' (cached)' if info.cached else ''} ({time.monotonic() - t0:.0f} s)", flush=True)
            return info

        with ThreadPoolExecutor(max(1, a.jobs)) as ex:
            infos = list(ex.map(one, todo))
        a.out.parent.mkdir(parents=True, exist_ok=True)
        with tarfile.open(a.out, "w:gz") as tar:  # these builds' cache entries only, as <2 hex>/<key>/
            for key in sorted({i.cache_key for i in infos}):
                tar.add(cache / key[:2] / key, arcname=f"{key[:2]}/{key}")
    ok = sum(i.ok for i in infos)
    print(f"{ok} of {len(todo)} built in {time.monotonic() - t0:.0f} s; {a.out} ({a.out.stat().st_size >> 20} MiB)")
    return 0 if ok == len(todo) else 1


if __name__ == "__main__":
    sys.exit(main())
