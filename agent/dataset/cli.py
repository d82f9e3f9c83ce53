"""`cudal2 dataset export RUN... --out FILE.jsonl`: training records from campaign runs."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

EXIT_BAD_INPUT = 2


def add_subcommands(sub: argparse._SubParsersAction) -> None:
    from agent.dataset.formats import FORMATS
    from agent.dataset.splits import VALIDATION_FRACTION

    d = sub.add_parser("dataset", help="export campaign runs as fine-tuning data")
    dsub = d.add_subparsers(dest="dataset_command", metavar="ACTION")
    dsub.required = True
    e = dsub.add_parser(
        "export", help="write chat (SFT), preference (DPO) or reward (RL) records from runs",
        description="Every kernel a run archived, from every proposer, with the prompt the loop rendered for its "
                    "step. Writes NAME.train.jsonl and NAME.validation.jsonl (split by shape) and NAME.manifest.json "
                    "beside --out NAME.jsonl.")
    e.add_argument("runs", nargs="+", metavar="RUN", help="run name (under --runs-dir) or run folder")
    e.add_argument("--out", required=True, metavar="FILE.jsonl")
    e.add_argument("--format", choices=FORMATS, default="chat",
                   help="chat: OpenAI fine-tuning messages (SFT); preference: prompt/chosen/rejected pairs (DPO); "
                        "reward: prompt/completion with speedups and checks (RL). Default chat")
    e.add_argument("--min-speedup", type=float, default=None, metavar="X",
                   help="a correct kernel is a positive only at or above X against cublaslt-autotune-max")
    e.add_argument("--acc", choices=["fp32", "fp16"], default=None, help="only this accumulator's kernels")
    e.add_argument("--dedupe", action="store_true", help="one record per kernel and shape (per pair, for DPO)")
    e.add_argument("--validation-fraction", type=float, default=VALIDATION_FRACTION, metavar="F",
                   help=f"share of shapes held out for validation (default {VALIDATION_FRACTION})")
    e.add_argument("--runs-dir", default="runs", metavar="DIR")
    e.set_defaults(func=cmd_export)


def cmd_export(args: argparse.Namespace) -> int:
    from agent.dataset import DatasetError, NothingToExport, export_dataset
    from agent.dataset.splits import output_paths

    try:
        m = export_dataset(args.runs, args.out, fmt=args.format, min_speedup=args.min_speedup, acc=args.acc,
                           dedupe=args.dedupe, runs_dir=args.runs_dir,
                           validation_fraction=args.validation_fraction)
    except NothingToExport as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except DatasetError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    paths = output_paths(Path(args.out))
    c = m["counts"]
    print(f"{c['records']} {args.format} record(s) from {len(m['runs'])} run(s): "
          f"{c['by_split']['train']} train ({len(m['shapes']['train'])} shape(s)) in {paths['train']}, "
          f"{c['by_split']['validation']} validation ({len(m['shapes']['validation'])} shape(s)) in "
          f"{paths['validation']}; manifest {paths['manifest']}")
    if args.format == "chat":
        print(f"  each record's run, shape, step, kernel and speedups: {paths['train.meta'].name} and "
              f"{paths['validation.meta'].name}, line for line")
    for reason, n in c["skipped"].items():
        print(f"  left out {n}: {reason}")
    return 0
