"""The `cudal2` command. Each subcommand lives in the module that owns it; this file only wires them up."""
from __future__ import annotations

import argparse
import importlib
import sys

# (module, function that adds its subcommands). Modules are imported only when the CLI starts, so a broken
# optional part (say retrieval without chromadb) costs its own subcommands, not the whole tool.
_COMMAND_MODULES = [
    "evaluator.cli",  # eval, baselines
    "evaluator.profile_cli",  # profile
    "agent.propose_cli",  # propose
    "agent.retrieval.cli",  # corpus build|query|stats
    "agent.campaign_cli",  # campaign, archive, inspect, report
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cudal2", description="Find HGEMM kernels faster than cuBLAS/cuBLASLt.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in _COMMAND_MODULES:
        try:
            mod = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name and (e.name == name or name.startswith(e.name + ".")):
                continue  # that part is not built yet
            raise
        mod.add_subcommands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
