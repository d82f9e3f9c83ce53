"""`cudal2 propose`: ask the configured model for kernel candidates for one shape and write them as contract .cu
files (plus manifest.json), without a GPU. Useful to try a model endpoint, or to hand candidates to another harness.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from evaluator.contract import MODES  # the evaluator's timing modes: offline, server, graph

EXIT_BAD_INPUT = 2


def add_subcommands(sub: argparse._SubParsersAction) -> None:
    from agent.campaign.config import add_model_args
    from evaluator.api import ARCH_HELP

    p = sub.add_parser("propose", help="write a model's kernel candidates for one shape (no GPU needed)",
                       description="Ask the model for candidates for one (M, N, K) and write them as contract .cu "
                                   "files with a manifest.json into --out.")
    p.add_argument("--shape", nargs=3, type=int, required=True, metavar=("M", "N", "K"))
    p.add_argument("-n", type=int, default=8, help="number of candidates to request (default 8)")
    p.add_argument("--acc", choices=["fp32", "fp16"], default="fp32", help="accumulator (default fp32)")
    p.add_argument("--arch", default=None, help=ARCH_HELP)
    p.add_argument("--mode", choices=MODES, default="offline",
                   help="the timing mode the kernels are for (graph: replayed from a CUDA graph, launched without PDL)")
    p.add_argument("--out", required=True, metavar="DIR", help="folder for the .cu files and manifest.json")
    p.add_argument("--archive", default=None, metavar="DB",
                   help="show the model this archive's variants of the shape (history, best kernel)")
    p.add_argument("--gpu-name", default="unknown", help="GPU model whose archive entries to show (with --archive)")
    p.add_argument("--store", default=None, metavar="PATH", help="retrieval store (default: the standard location)")
    p.add_argument("--no-retrieval", action="store_true", help="do not query the CUTLASS/CuTe knowledge store")
    add_model_args(p)
    p.set_defaults(func=cmd_propose)


def _err(msg: str, code: int = EXIT_BAD_INPUT) -> int:
    print(f"error: {msg}", file=sys.stderr)
    return code


def _retrieve(shape, store: str | None, best: dict | None) -> tuple[list[dict], str]:
    try:
        from agent.loop.shape_loop import _passage_dict, _query
        from agent.retrieval import Retriever

        q = _query(list(shape), best)
        return [_passage_dict(p) for p in Retriever(store).query(q)], ""
    except Exception as e:  # no store yet, or retrieval not installed: propose without passages
        return [], f"retrieval unavailable ({type(e).__name__}: {e})"


def cmd_propose(args: argparse.Namespace) -> int:
    from agent.campaign.archive import Archive, source_hash
    from agent.campaign.config import ConfigError, MissingKeyError, load_model_config
    from agent.loop.shape_loop import build_context
    from agent.proposers import ProposalContext, make_proposer
    from agent.proposers.budget import check_budget
    from agent.proposers.deadline import EXIT_FATAL, EndpointFatal
    from agent.secrets import register_env, scrub, scrub_obj
    from evaluator.contract import check_shape

    try:
        shape = check_shape(args.shape)
    except ValueError as e:
        return _err(str(e))
    if args.n < 1:
        return _err("-n must be at least 1")
    if args.arch is None:
        from evaluator.api import default_arch

        args.arch = default_arch()
    try:
        cfg = load_model_config(args)
        check_budget(cfg)
        cfg.api_key()  # an unset key stops here, before any request (exit code 3, as a rejected key)
    except MissingKeyError as e:
        return _err(str(e), EXIT_FATAL)
    except ConfigError as e:
        return _err(str(e))
    register_env(cfg.api_key_env)
    if cfg.key_notice():
        print(f"note: {cfg.key_notice()}", file=sys.stderr)
    if cfg.backend == "builtin":
        from agent.families.common import ARCHS

        if args.arch not in ARCHS:
            return _err(f"--arch {args.arch}: the builtin policy has kernel families for {', '.join(ARCHS)}")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        return _err(f"--out {out} exists and is not a folder")
    if (out / "manifest.json").exists():
        # a second set of candidates would orphan the first set's files: their manifest would be gone
        return _err(f"--out {out} already holds proposed candidates (manifest.json); choose a new folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        return _err(f"--out {out}: cannot create the folder: {e.strerror or e}")

    if args.archive:
        if not Path(args.archive).is_file():
            return _err(f"--archive {args.archive} does not exist")
        ctx = build_context(Archive(args.archive), gpu_name=args.gpu_name, acc=args.acc, shape=shape,
                            arch=args.arch, mode=args.mode)
    else:
        ctx = ProposalContext(shape=shape, acc=args.acc, arch=args.arch, gpu_name=args.gpu_name, mode=args.mode)
    if args.no_retrieval:
        ctx.retrieval_note = "retrieval was switched off"
    elif cfg.backend == "builtin":  # as in a campaign: the policy reads no reference material
        ctx.retrieval_note = "the builtin policy reads no reference material"
    else:
        ctx.passages, ctx.retrieval_note = _retrieve(shape, args.store, ctx.best)
        if ctx.retrieval_note:
            print(f"note: {ctx.retrieval_note}; proposing without reference material", file=sys.stderr)

    proposer = make_proposer(cfg)
    t0 = time.time()
    try:
        props = proposer.propose(ctx, args.n)
    except ModuleNotFoundError as e:
        return _err(f"the {cfg.backend} proposer needs {e.name}, which is not installed here")
    except EndpointFatal as e:  # a rejected key, an unknown model: no further request was sent
        return _err(scrub(str(e)), EXIT_FATAL)
    except ConfigError as e:
        return _err(str(e))

    m, n, k = shape
    written, rejected = [], []
    for i, p in enumerate(props):
        if p.source is None:
            rejected.append({"index": i, "reason": p.reason, "raw": p.raw[:4000], "attempts": p.attempts,
                             "usage": p.usage})  # 4000 characters: the manifest stays small whatever the reply
            continue
        stem = "".join(c if c.isalnum() or c in "-_" else "_" for c in (p.name or f"cand{i}"))[:60]
        fname = f"{i:02d}_{stem}.cu"
        (out / fname).write_text(p.source)
        written.append({"file": fname, "name": p.name, "family": p.family, "params": p.params,
                        "source_hash": source_hash(p.source), "model": p.model, "usage": p.usage,
                        "latency_s": round(p.latency_s, 3), "attempts": p.attempts, "parse_kind": p.parse_kind,
                        "parent": p.parent, "rationale": p.raw[:4000] if cfg.backend == "builtin" else ""})
    prompt = proposer.prompt_for_log(ctx)
    if prompt:
        (out / "prompt.md").write_text(scrub(f"# system\n\n{prompt['system']}\n# user\n\n{prompt['user']}"))
    manifest = {"shape": [m, n, k], "acc": args.acc, "arch": args.arch, "gpu_name": args.gpu_name,
                "model": cfg.public_dict(), "requested": args.n, "created": t0,
                "seconds": round(time.time() - t0, 3), "retrieval_note": ctx.retrieval_note,
                "passages": [{k2: p.get(k2) for k2 in ("source", "symbol", "line", "score")} for p in ctx.passages],
                "candidates": written, "rejected": rejected}
    (out / "manifest.json").write_text(json.dumps(scrub_obj(manifest), indent=2))
    print(f"{len(written)} candidate(s) for {m}x{n}x{k} written to {out}"
          + (f"; {len(rejected)} reply(ies) without a usable kernel (reasons in manifest.json)" if rejected else ""))
    for r in rejected[:5]:
        print(f"  rejected #{r['index']}: {r['reason']}", file=sys.stderr)
    return 0 if written else 1
