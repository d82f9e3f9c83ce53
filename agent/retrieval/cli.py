"""`cudal2 corpus build|query|stats`."""
from __future__ import annotations

import argparse
import json
import sys

from .store import ENV_STORE, StoreError


def add_subcommands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("corpus", help="build, query or inspect the offline CUTLASS/CuTe retrieval store")
    csub = p.add_subparsers(dest="corpus_command", metavar="ACTION")
    csub.required = True
    store_help = f"store directory (default: ${ENV_STORE} or ~/.cache/cuda-l2/retrieval)"

    b = csub.add_parser("build", help="ingest the notes and CUTLASS/CuTe headers (incremental)")
    b.add_argument("--cutlass", metavar="PATH", help="a CUTLASS checkout (root or include/) instead of the pip package")
    b.add_argument("--extra", metavar="DIR", help="a directory of your own notes (.md/.txt) or code (.h/.hpp/.cu)")
    b.add_argument("--store", metavar="PATH", help=store_help)
    b.add_argument("--no-headers", action="store_true", help="notes (and --extra) only; fast")
    b.add_argument("--all-archs", action="store_true",
                   help="also ingest the Blackwell (sm100/sm120) headers; by default only the targeted archs")
    b.add_argument("--fresh", action="store_true", help="delete the store first (for a corrupt store)")
    b.add_argument("--workers", type=int, default=None, metavar="N",
                   help="embedding processes (default: one per core)")
    b.add_argument("-q", "--quiet", action="store_true")
    b.set_defaults(func=_build)

    q = csub.add_parser("query", help="print the passages retrieved for TEXT")
    q.add_argument("text", metavar="TEXT")
    q.add_argument("-k", type=int, default=5, help="number of passages (default 5)")
    q.add_argument("--budget", type=int, default=1500, help="token budget for all passages (default 1500)")
    q.add_argument("--store", metavar="PATH", help=store_help)
    q.add_argument("--json", action="store_true", help="one JSON object per passage")
    q.set_defaults(func=_query)

    s = csub.add_parser("stats", help="what the store holds")
    s.add_argument("--store", metavar="PATH", help=store_help)
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=_stats)


def _build(args: argparse.Namespace) -> int:
    from .store import build, print_progress, targeted_headers
    try:
        rep = build(store=args.store, cutlass=args.cutlass, extra=args.extra, include_headers=not args.no_headers,
                    header_filter=None if args.all_archs else targeted_headers,
                    fresh=args.fresh, log=None if args.quiet else print_progress, workers=args.workers)
    except StoreError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(rep.summary())
    return 0


def _query(args: argparse.Namespace) -> int:
    from .query import Retriever
    try:
        hits = Retriever(args.store).query(args.text, k=args.k, token_budget=args.budget)
    except (StoreError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for i, h in enumerate(hits, 1):
        if args.json:
            print(json.dumps({"rank": i, "source": h.source, "line": h.line, "symbol": h.symbol, "kind": h.kind,
                              "score": h.score, "text": h.text}))
            continue
        print(f"[{i}] {h.source}:{h.line}  {h.symbol}  ({h.kind}, score {h.score:.3f})")
        print("    " + h.text.replace("\n", "\n    "))
        print()
    if not hits:
        print("no passages", file=sys.stderr)
    return 0


def _stats(args: argparse.Namespace) -> int:
    from .store import stats
    try:
        st = stats(args.store)
    except StoreError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(st, indent=2))
        return 0
    for key, val in st.items():
        print(f"{key:16s} {val}")
    return 0
