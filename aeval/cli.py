"""``python -m aeval``: argument parsing and dispatch, no logic of its own.

Each sub-command lives in a module under :mod:`aeval.commands` that exposes
``main(args) -> int`` (the exit code) and ``add_arguments(parser)``, or keeps
``add_arguments`` in a light ``<name>_args`` module beside it when ``main``'s
imports are heavy (:class:`Command`). This file only lists them. With no
sub-command, ``run`` is assumed, which with no API key set is the offline demo.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import signal
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from types import FrameType

from aeval.allocator import return_freed_pages
from aeval.commands.options import HelpFormatter, Parser
from aeval.errors import AevalError
from aeval.process_exit import exit_process
from aeval.version import __version__


@dataclass(frozen=True)
class Command:
    """A sub-command: the module whose ``main`` runs it, its one-line help, and the
    module whose ``add_arguments`` builds its parser when that is another one.

    A command whose ``main`` needs the engine, the server or polars keeps its
    arguments in a light ``<name>_args`` module, so ``--help`` and a mistyped flag
    do not wait for them (docs/architecture.md, "Deferred imports").
    """

    main: str
    help: str
    arguments: str | None = None  # None: main's module defines them too

    @property
    def arguments_module(self) -> str:
        return self.arguments or self.main


def _split(module: str, help: str) -> Command:
    """A command run by ``aeval.commands.<module>``, its arguments in ``<module>_args``."""
    return Command(f"aeval.commands.{module}", help, f"aeval.commands.{module}_args")


# name -> Command. Modules are imported lazily so that ``--help`` and light
# commands do not pay for Z3, datasets or the server.
COMMANDS: dict[str, Command] = {
    "run": _split("run", "run models on the benchmark (offline demo when no key is set)"),
    "resume": _split("resume", "resume an interrupted run from its directory"),
    "status": Command("aeval.commands.status", "show every shard's state of a run directory"),
    "cancel": _split("cancel", "cancel a run's remote batches"),
    "rescore": _split("rescore", "verify existing batch output files"),
    "report": _split("report", "tables and charts from run directories"),
    "leaderboard": _split(
        "leaderboard",
        "every run of a study in one table, with paired comparisons and accuracy against cost",
    ),
    "view": _split("view", "every answer of a run in one self-contained HTML page"),
    "export": Command("aeval.commands.export", "write a run as an Inspect AI eval log"),
    "serve": _split("serve", "run the local OpenAI-compatible batch server"),
    "serve-reward": _split(
        "serve_reward",
        "serve the Z3 judge as an RL reward over HTTP (OpenRLHF's remote reward protocol)",
    ),
    "synth": _split("synth", "write a synthetic benchmark"),
}

# One example per sub-command, shown under its --help.
EXAMPLES: dict[str, str] = {
    "run": "python -m aeval run --model gpt-4o-mini-2024-07-18 --trials 3 --sample-id 1-50\n"
    "  python -m aeval run --dry-run --tier small      # request files and cost, nothing sent",
    "resume": "python -m aeval resume results/20250101-120000-ab12",
    "status": "python -m aeval status results/20250101-120000-ab12 --json | jq .shards",
    "cancel": "python -m aeval cancel results/20250101-120000-ab12 --delete-files",
    "rescore": "python -m aeval rescore results/<run-id>/outputs/*.jsonl   # the run's data, "
    "into results/rescore-<id>\n"
    "  python -m aeval rescore --dataset warp-benchmark.parquet --out results/again "
    "trial1_output.jsonl",
    "report": "python -m aeval report results/<run-id> --format html --out report.html",
    "leaderboard": "python -m aeval leaderboard results/ --format html --out leaderboard.html",
    "serve": "python -m aeval serve --port 8000 --models demo --timing demo",
    "serve-reward": "python -m aeval serve-reward --port 5000 --workers 16",
    "synth": "python -m aeval synth --out big.parquet --rows 100000 --seed 1",
    "view": "python -m aeval view results/<run-id> --open",
    "export": "python -m aeval export inspect results/<run-id> --out logs/run.eval",
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser, with the full arguments of ``command`` only.

    Every sub-command is listed (for ``--help`` and "invalid choice"), but only
    the arguments module of the one being run is imported: the others would load
    polars, Z3 or the server for nothing, and its ``main`` is imported only to run.
    """
    parser = Parser(
        prog="python -m aeval",
        description="Evaluate LLM-written SMT-LIB worst-case path constraints with Z3.",
        epilog="With no COMMAND, 'run' is assumed: with no OPENAI_API_KEY set, the offline "
        "demo.\nexample:\n  python -m aeval run --help",
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"aeval {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, spec in COMMANDS.items():
        p = sub.add_parser(
            name,
            help=spec.help,
            description=spec.help,
            epilog=f"example:\n  {EXAMPLES[name]}",
            formatter_class=HelpFormatter,
        )
        if name == command:
            importlib.import_module(spec.arguments_module).add_arguments(p)
            p.set_defaults(_main=spec.main)
    return parser


EXIT_INTERRUPTED = 130  # SIGINT (Ctrl-C)
EXIT_TERMINATED = 143  # SIGTERM: 128 + 15, as a shell reports it
# The commands that drive a run directory: SIGTERM stops them as Ctrl-C does
# (clean stop, lock released, how to resume). Others keep SIGTERM's default.
_STOPPED_CLEANLY = frozenset({"run", "resume", "cancel"})


class _Terminated:
    """Whether SIGTERM arrived; while installed, SIGTERM is handled as SIGINT is."""

    def __init__(self) -> None:
        self.received = False

    def on_sigterm(self, signum: int, frame: FrameType | None) -> None:
        self.received = True
        # Do exactly what Ctrl-C does, through whatever handles SIGINT right now
        # (asyncio's runner cancels the main task; otherwise KeyboardInterrupt):
        # the run stops cleanly, the lock is released and the message says how
        # to resume or cancel.
        handler = signal.getsignal(signal.SIGINT)
        if callable(handler):
            handler(signal.SIGINT, frame)
        else:  # SIGINT ignored (started in the background with '&'): SIGTERM is still heard
            raise KeyboardInterrupt


@contextlib.contextmanager
def _sigterm_as_sigint(command: str) -> Iterator[_Terminated]:
    state = _Terminated()
    if command not in _STOPPED_CLEANLY:
        yield state
        return
    try:
        previous = signal.signal(signal.SIGTERM, state.on_sigterm)
    except ValueError:  # not the main thread (main() called from a thread): leave it be
        yield state
        return
    try:
        yield state
    finally:
        signal.signal(signal.SIGTERM, previous)


EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, as a shell reports a reader that went away


def main(argv: Sequence[str] | None = None) -> int:
    # Before any command imports polars: it reads its allocator's settings once.
    return_freed_pages()
    try:
        return _main(argv)
    except BrokenPipeError:
        # The reader went away (`status --json | head`): not an error worth a traceback.
        # Python flushes stdout again at exit; point it at /dev/null so that is quiet too.
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE


def entry() -> None:
    """The ``aeval`` console script: :func:`main`, then a quick exit
    (:func:`aeval.process_exit.exit_process`)."""
    exit_process(main())


def _main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version")):
        argv = ["run", *argv]
    args = build_parser(argv[0] if argv[0] in COMMANDS else None).parse_args(argv)
    with _sigterm_as_sigint(args.command) as terminated:
        try:
            code = int(importlib.import_module(args._main).main(args))
        except AevalError as err:
            print(f"aeval: error: {err}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            code = EXIT_INTERRUPTED
            if not terminated.received:
                print("aeval: interrupted", file=sys.stderr)
        if terminated.received and code == EXIT_INTERRUPTED:
            print("aeval: terminated (SIGTERM)", file=sys.stderr)
            return EXIT_TERMINATED
        return code
