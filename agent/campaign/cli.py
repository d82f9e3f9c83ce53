"""Subcommands: campaign, archive export|import, inspect, report."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from evaluator.contract import MODES  # the evaluator's timing modes: offline, server, graph

EXIT_BAD_INPUT = 2


def _err(msg: str, code: int = EXIT_BAD_INPUT) -> int:
    print(f"error: {msg}", file=sys.stderr)
    return code


def _gpu_list(text: str) -> list[int]:
    try:
        gpus = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--gpus takes GPU indices like 0,1 (got {text!r})") from None
    if not gpus or len(set(gpus)) != len(gpus) or min(gpus) < 0:
        raise argparse.ArgumentTypeError(f"--gpus takes distinct non-negative GPU indices like 0,1 (got {text!r})")
    return gpus


def _positive_int(text: str) -> int:
    v = int(text)
    if v < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return v


def _positive_float(text: str) -> float:
    v = float(text)
    if not v > 0:
        raise argparse.ArgumentTypeError("must be positive")
    return v


def add_subcommands(sub: argparse._SubParsersAction) -> None:
    from agent.campaign.config import add_model_args

    p = sub.add_parser("campaign", help="search kernels for every shape in a shape file (resumable)",
                       description="Run the per-shape loop over a shape list. Re-running the same command resumes. "
                                   "Kernels are built for the architecture of the GPU they are timed on (a campaign "
                                   "needs a GPU; without one, `cudal2 propose` writes candidates for --arch, default "
                                   "sm_90a).")
    p.add_argument("--shapes", required=True, metavar="FILE", help="one 'M N K' per line; '#' comments")
    add_model_args(p)
    b = p.add_mutually_exclusive_group()
    b.add_argument("--budget", type=_positive_int, default=None, metavar="N",
                   help="candidates per shape (default 16)")
    b.add_argument("--minutes", type=_positive_float, default=None, metavar="M",
                   help="wall-clock budget for the whole campaign, split over the shapes")
    p.add_argument("--acc", choices=["fp32", "fp16"], default="fp32", help="accumulator (default fp32)")
    p.add_argument("--mode", choices=MODES, default="offline",
                   help="timing mode of the search (graph: offline batches replayed from a CUDA graph; the winner "
                        "is re-measured in --final-modes at the end)")
    p.add_argument("--profile", choices=["quick", "paper"], default="quick", help="timing profile of the search")
    p.add_argument("--gpus", type=_gpu_list, default=None, metavar="0,1,...",
                   help="GPU indices (default 0; with --cluster auto: all)")
    p.add_argument("--cluster", default=None, metavar="ray://HOST:PORT|auto",
                   help="evaluate on a Ray cluster (pip install 'cuda-l2[ray]'); auto: one started here over --gpus")
    p.add_argument("--run", default=None, metavar="NAME", help="run name (default: the shape file's stem)")
    p.add_argument("--runs-dir", default="runs", metavar="DIR")
    p.add_argument("--per-step", type=_positive_int, default=4, metavar="N", help="proposals per step (default 4)")
    p.add_argument("--lanes", type=_positive_int, default=None, metavar="N",
                   help="shapes worked on at once (default 2 per GPU); more keeps many CPU cores compiling "
                        "(CUTLASS builds take minutes) while the GPU evaluates one candidate at a time")
    p.add_argument("--global-archive", default=None, metavar="DB",
                   help="global archive (default $CUDAL2_ARCHIVE or ~/.cache/cuda-l2/archive.sqlite)")
    p.add_argument("--no-global", action="store_true", help="neither seed from nor add to the global archive")
    p.add_argument("--no-retrieval", action="store_true", help="do not query the CUTLASS/CuTe knowledge store")
    p.add_argument("--ncu", choices=["auto", "on", "off"], default="auto",
                   help="profile each step's fastest variant with Nsight Compute (auto: when ncu is installed)")
    p.add_argument("--final-modes", default="offline,server", metavar="MODES",
                   help="re-measure each shape's best kernel in these modes at the end (offline, server, graph; "
                        "'' for none)")
    p.add_argument("--final-repeats", type=_positive_int, default=3, metavar="N",
                   help="separate evaluations of each final measurement; reports take their median (default 3: "
                        "one evaluation's CI misses the spread between evaluations)")
    p.add_argument("--confirm-top", type=int, choices=range(0, 9), default=3, metavar="N",
                   help="before choosing each shape's winner, time its N leaders head to head in the same rounds of "
                        "one evaluation and take the fastest there (default 3; 0: the search's fastest measurement "
                        "wins)")
    p.add_argument("--no-mode-winners", action="store_true",
                   help="measure the search's winner in every final mode; by default each final mode other than "
                        "the search's times the same leaders head to head in that mode and measures its own winner")
    p.set_defaults(func=cmd_campaign)

    a = sub.add_parser("archive", help="export or import contract kernels")
    asub = a.add_subparsers(dest="archive_command", metavar="ACTION")
    asub.required = True
    e = asub.add_parser("export", help="write the best kernel per (GPU, acc, shape) as .cu files + manifest.json")
    e.add_argument("dir", metavar="DIR")
    e.add_argument("--run", default=None, help="export this run's archive (default: the global archive)")
    e.add_argument("--runs-dir", default="runs", metavar="DIR")
    e.add_argument("--archive", default=None, metavar="DB", help="export this archive file instead")
    e.add_argument("--all", action="store_true", help="every correct variant, not only the best per shape")
    e.set_defaults(func=cmd_export)
    i = asub.add_parser("import", help="re-evaluate contract kernels from DIR and add them to an archive")
    i.add_argument("dir", metavar="DIR", help="a folder of .cu files, with or without a manifest.json")
    i.add_argument("--run", default="import", help="archive them under runs/RUN (default: import)")
    i.add_argument("--runs-dir", default="runs", metavar="DIR")
    i.add_argument("--shape", type=int, nargs=3, metavar=("M", "N", "K"),
                   help="shape for .cu files the manifest does not describe")
    i.add_argument("--acc", choices=["fp32", "fp16"], default=None, help="override the manifest's accumulator")
    i.add_argument("--mode", choices=MODES, default="offline")
    i.add_argument("--gpu", type=int, default=0, help="GPU index (default 0)")
    i.add_argument("--no-global", action="store_true", help="do not add them to the global archive")
    i.set_defaults(func=cmd_import)

    s = sub.add_parser("inspect", help="read a run's transcript in the terminal")
    s.add_argument("run", metavar="RUN", help="run name (under --runs-dir) or run folder")
    s.add_argument("--shape", type=int, nargs=3, metavar=("M", "N", "K"), help="one shape's steps")
    s.add_argument("--step", type=int, default=None, metavar="I",
                   help="with --shape: one step in full (prompt, proposals, results)")
    s.add_argument("--diff", type=int, nargs=2, default=None, metavar=("I", "J"),
                   help="diff the best kernel of step I against that of step J")
    s.add_argument("--runs-dir", default="runs", metavar="DIR")
    s.add_argument("--max-lines", type=int, default=200, help="lines shown of each long text (default 200)")
    s.set_defaults(func=cmd_inspect)

    r = sub.add_parser("report", help="write one self-contained HTML report for a run")
    r.add_argument("run", metavar="RUN", help="run name (under --runs-dir) or run folder")
    r.add_argument("--runs-dir", default="runs", metavar="DIR")
    r.add_argument("-o", "--out", default=None, metavar="FILE", help="default: runs/RUN/report.html")
    r.set_defaults(func=cmd_report)


# ---------------------------------------------------------------- campaign

def cmd_campaign(args: argparse.Namespace) -> int:
    from agent.campaign.config import ConfigError, MissingKeyError, load_model_config
    from agent.campaign.driver import CampaignConfig, CampaignError, EvaluatorSeam, global_archive_path
    from agent.proposers.budget import check_budget
    from agent.proposers.deadline import EXIT_FATAL
    from agent.shapes import ShapeFileError, load_shapes

    try:  # all bad input is refused here, before the GPU check and before a worker starts
        model = load_model_config(args)
        check_budget(model)
        try:
            model.api_key()
        except MissingKeyError as e:
            return _err(str(e), EXIT_FATAL)
        if model.key_notice():
            print(f"note: {model.key_notice()}", file=sys.stderr)
        cfg = CampaignConfig(run=args.run or Path(args.shapes).stem, shapes=load_shapes(args.shapes), acc=args.acc,
                             mode=args.mode, profile=args.profile,
                             budget_candidates=None if args.minutes is not None else (args.budget or 16),
                             budget_minutes=args.minutes, runs_dir=Path(args.runs_dir),
                             global_archive=None if args.no_global else Path(args.global_archive
                                                                             or global_archive_path()),
                             final_modes=tuple(m for m in args.final_modes.split(",") if m),
                             final_repeats=args.final_repeats, confirm_top=args.confirm_top,
                             mode_winners=not args.no_mode_winners, n_per_step=args.per_step, lanes=args.lanes,
                             ncu=args.ncu)
    except (ShapeFileError, ConfigError, CampaignError) as e:
        return _err(str(e))
    from evaluator.session import has_gpu

    if not args.cluster and not has_gpu():
        print("cudal2 campaign needs a CUDA GPU to time kernels, and this machine has none (no usable libcuda or "
              "no device).\nWhat works here: cudal2 eval KERNEL.cu --compile-only, cudal2 propose, cudal2 report "
              "and cudal2 inspect on runs made elsewhere.", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        ncu = {"auto": None, "on": True, "off": False}[args.ncu]
        if args.cluster:  # agent.cluster imports Ray only here; a ClusterError is a CampaignError
            from agent.cluster import make_seam

            seam = make_seam(args.cluster, args.gpus, ncu=ncu)
        else:
            seam = EvaluatorSeam(args.gpus or [0], ncu=ncu)
    except (ConfigError, CampaignError) as e:
        return _err(str(e))
    retrieve_fn = None if args.no_retrieval or model.backend == "builtin" else _retriever()
    return finish_campaign(cfg, seam, model, retrieve_fn)


def _retriever():
    """The knowledge store's query function, or None (with a note) where no store has been built."""
    try:
        from agent.retrieval import Retriever

        r = Retriever()
        if r.count() == 0:
            raise RuntimeError("the store is empty")
    except Exception as e:
        print(f"note: retrieval off ({e}); build the store with `cudal2 corpus build`", file=sys.stderr)
        return None
    return lambda q: r.query(q)


def finish_campaign(cfg, seam, model, retrieve_fn=None, console=None, live=None) -> int:
    """Run, print the outcome, return the exit code (shared by the CLI and tests that bring their own seam)."""
    from agent.campaign.driver import CampaignError, run_campaign
    from agent.proposers import make_proposer
    from agent.proposers.deadline import EXIT_FATAL, latch_for

    try:
        summary = run_campaign(cfg, seam=seam, make_proposer=lambda: make_proposer(model), retrieve_fn=retrieve_fn,
                               model_public=model.public_dict(), console=console, live=live)
    except CampaignError as e:
        return _err(str(e))
    finally:
        seam.close()
    fatal = latch_for(model).error
    if fatal is not None:  # every lane stopped at its next request; a re-run resumes each shape where it stopped
        return _err(f"{fatal}\nno further requests were sent; fix this and run the same command again to resume "
                    f"(run {cfg.run})", EXIT_FATAL)
    out = console.print if console is not None else print
    done = [s for s in summary["shapes"] if s not in summary["failures"]]
    out(f"run {cfg.run}: {len(done)} shape(s) finished, {len(summary['failures'])} failed; "
        f"archive {cfg.run_dir / 'archive.sqlite'}")
    for s, e in summary["failures"].items():
        out(f"  {s}: {e}" + ("" if s in summary["model_failures"] else f" (trace in {cfg.run_dir / 'errors.log'})"))
    out(f"next: cudal2 report {cfg.run} · cudal2 inspect {cfg.run} · cudal2 archive export DIR --run {cfg.run}")
    return 1 if summary["failures"] else 0


# ---------------------------------------------------------------- archive

def cmd_export(args: argparse.Namespace) -> int:
    from agent.campaign.archive_io import ArchiveIOError, export_archive
    from agent.campaign.driver import global_archive_path

    if args.archive:
        db = Path(args.archive)
    elif args.run:
        db = Path(args.runs_dir) / args.run / "archive.sqlite"
    else:
        db = global_archive_path()
    try:
        manifest = export_archive(db, Path(args.dir), best_only=not args.all, run_dir=_run_dir_of(db))
    except ArchiveIOError as e:
        return _err(str(e))
    print(f"exported {len(manifest['kernels'])} kernel(s) from {db} to {args.dir}/ (manifest.json)")
    return 0


def _run_dir_of(db: Path) -> Path | None:
    return db.parent if (db.parent / "campaign.sqlite").is_file() else None


def cmd_import(args: argparse.Namespace) -> int:
    from agent.campaign.archive_io import ArchiveIOError, import_archive, plan_import
    from agent.campaign.driver import CampaignError, EvaluatorSeam, check_run_place, global_archive_path
    from evaluator.session import has_gpu

    try:
        check_run_place(args.run, args.runs_dir)
        plan = plan_import(Path(args.dir), shape=tuple(args.shape) if args.shape else None, acc=args.acc)
    except (ArchiveIOError, CampaignError) as e:
        return _err(str(e))
    if not has_gpu():
        print(f"cudal2 archive import re-evaluates every kernel ({len(plan)} found in {args.dir}) and needs a CUDA "
              "GPU for that; this machine has none.", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        seam = EvaluatorSeam([args.gpu])
    except CampaignError as e:
        return _err(str(e))
    try:
        report = import_archive(plan, seam, Path(args.runs_dir) / args.run / "archive.sqlite", run=args.run,
                                mode=args.mode,
                                global_db=None if args.no_global else global_archive_path())
    finally:
        seam.close()
    for line in report:
        print(line)
    return 0


# ---------------------------------------------------------------- inspect, report

def cmd_inspect(args: argparse.Namespace) -> int:
    from agent.inspect import InspectError, inspect_run

    try:
        return inspect_run(args.run, shape=tuple(args.shape) if args.shape else None, step=args.step,
                           diff=tuple(args.diff) if args.diff else None, runs_dir=args.runs_dir,
                           max_lines=args.max_lines)
    except InspectError as e:
        return _err(str(e))


def cmd_report(args: argparse.Namespace) -> int:
    from agent.report import ReportError, report_run

    try:
        out = report_run(args.run, runs_dir=args.runs_dir, out=args.out)
    except ReportError as e:
        return _err(str(e))
    print(f"wrote {out}")
    return 0
