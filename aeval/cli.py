"""``python -m aeval``: argument parsing and dispatch, no logic of its own.

Each sub-command lives in the module that owns its stage and exposes two
functions: ``add_arguments(parser)`` and ``run(args) -> int`` (the exit code).
This file only lists them. With no sub-command, ``run`` is assumed, which
with no API key set is the offline demo.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from aeval.errors import AevalError

# name -> (module, one-line help). Modules are imported lazily so that
# ``--help`` and light commands do not pay for Z3, datasets or the server.
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("aeval.commands.run", "run models on the benchmark (offline demo when no key is set)"),
    "resume": ("aeval.commands.resume", "resume an interrupted run from its directory"),
    "status": ("aeval.commands.status", "show every shard's state of a run directory"),
    "cancel": ("aeval.commands.cancel", "cancel a run's remote batches"),
    "rescore": ("aeval.commands.rescore", "verify existing batch output files"),
    "report": ("aeval.commands.report", "tables and charts from run directories"),
    "view": ("aeval.commands.view", "every answer of a run in one self-contained HTML page"),
    "serve": ("aeval.commands.serve", "run the local OpenAI-compatible batch server"),
    "synth": ("aeval.commands.synth", "write a synthetic benchmark"),
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser, with the full arguments of ``command`` only.

    Every sub-command is listed (for ``--help`` and "invalid choice"), but only
    the module of the one being run is imported: the others would load polars,
    Z3 or the server for nothing.
    """
    parser = argparse.ArgumentParser(
        prog="python -m aeval",
        description="Evaluate LLM-written SMT-LIB worst-case path constraints with Z3.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if name == command:
            module = importlib.import_module(module_name)
            module.add_arguments(p)
            p.set_defaults(_module=module)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help")):
        argv = ["run", *argv]
    args = build_parser(argv[0] if argv[0] in COMMANDS else None).parse_args(argv)
    try:
        return int(args._module.run(args))
    except AevalError as err:
        print(f"aeval: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("aeval: interrupted", file=sys.stderr)
        return 130
