"""How far a big shape's winner reads below the measurements that picked it (no GPU; analysis r53, an earlier session).

    python3 docs/benchmarks/data/sweeps/selection_bias.py RUN_DIR [RUN_DIR ...]   (from the repository root)

For every shape of at least 2^36 FLOP in each run folder: the winner's search and confirmation readings (speedup
against cuBLASLt-AutoTuning-max; the confirmation is a second evaluation up to an earlier session, a tournament since) and
the median of its offline final measurements, which are separate evaluations taken after the pick. The search picks
the highest of noisy readings, so the finals read lower on average; their ratio says how much of a leader's margin
is selection rather than speed.
"""
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from agent.archive import Archive  # noqa: E402
from agent.campaign import CampaignDB  # noqa: E402

BASELINE = "cublaslt-autotune-max"


def winners(run_dir: Path):
    archive, finals = Archive(run_dir / "archive.sqlite"), {}
    for f in CampaignDB(run_dir / "campaign.sqlite").finals():
        if f["mode"] == "offline":
            finals.setdefault((f["gpu"], f["acc"], f["shape"], f["variant_id"]), []).append(
                f["result"].speedup(BASELINE))
    for (gpu, acc, shape, vid), f in sorted(finals.items()):
        if 2 * math.prod(shape) < 2 ** 36:
            continue
        picked = [r.speedup(BASELINE) for r in [archive.get(vid).result] + archive.remeasures(vid)]
        # since an earlier session the confirmation is a tournament: the winner's figure there is its second picking reading
        tour = archive.tournament(gpu, acc, shape)
        picked += [x for i, x in (tour["figures"] if tour else []) if i == vid]
        yield shape, picked, statistics.median(f)


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    by_gm, by_min, flips = [], [], 0
    for d in map(Path, sys.argv[1:]):
        for shape, picked, final in winners(d):
            gm = math.exp(statistics.mean(map(math.log, picked)))
            by_gm.append(final / gm)
            by_min.append(final / min(picked))
            flips += final < 1.0 < min(picked)
            print(f"{d.name:20s} {'x'.join(map(str, shape)):17s} picked on {' / '.join(f'{x:.3f}' for x in picked):15s}"
                  f" final median {final:.3f}")
    print(f"{len(by_gm)} winners: final / geomean of the picking readings {statistics.mean(by_gm):.4f}, final / the "
          f"lowest of them {statistics.mean(by_min):.4f}; {flips} lost in the finals although every picking reading "
          f"was above 1.0")
    return 0


if __name__ == "__main__":
    sys.exit(main())
