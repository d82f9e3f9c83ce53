"""The `cudal2` command. Each subcommand lives in the module that owns it; this file only wires them up."""
from __future__ import annotations

import argparse
import importlib
import sys

# Module -> the subcommands it adds. A part whose third-party dependency is missing (say retrieval without
# chromadb on a bare GPU machine) loses only its own subcommands, which then say what to install.
_COMMAND_MODULES = {
    "evaluator.cli": ["eval", "baselines"],
    "evaluator.profile_cli": ["profile"],
    "agent.propose_cli": ["propose"],
    "agent.retrieval.cli": ["corpus"],
    "agent.campaign.cli": ["campaign", "archive", "inspect", "report"],
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cudal2", description="Find HGEMM kernels faster than cuBLAS/cuBLASLt.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, commands in _COMMAND_MODULES.items():
        try:
            mod = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if not e.name or e.name.split(".")[0] in ("agent", "evaluator"):
                raise  # our own code is broken: say so loudly
            for cmd in commands:
                p = sub.add_parser(cmd, help=f"(unavailable: needs the '{e.name}' package)")
                p.set_defaults(func=_missing(cmd, e.name))
            continue
        mod.add_subcommands(sub)
    return parser


def _missing(cmd: str, package: str):
    def run(args) -> int:
        print(f"cudal2 {cmd} needs the Python package '{package}', which is not installed here: "
              f"bash scripts/setup.sh (or pip install -e .) installs it", file=sys.stderr)
        return 2
    return run


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
