"""Sphinx extension: the command-line reference, written from aeval's argparse parsers.

At ``builder-inited`` it writes ``_generated/cli.md``: for ``python -m aeval`` and each
sub-command in :data:`aeval.cli.COMMANDS`, the ``--help`` text exactly as the parser
prints it (options, defaults and the example). A renamed option or a new sub-command
changes the page at the next build; nothing is copied by hand.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aeval.cli import COMMANDS, build_parser

if TYPE_CHECKING:  # the page is also written without Sphinx (tests/test_docs_site.py)
    from sphinx.application import Sphinx

# argparse wraps at the terminal's width; the page is read in a browser at 100.
WIDTH = "100"


def _subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices[name]
    raise LookupError(name)


def cli_markdown() -> str:
    """The page: the top-level help, then one section per sub-command."""
    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        top = build_parser(None)
        parts = [
            "# Command line\n",
            "Every sub-command's `--help`, as the parser prints it today: this page is "
            "written by the docs build from `aeval.cli` (docs/_ext/aeval_cli.py). "
            "With no sub-command, `run` is assumed.\n",
            "```text\n" + top.format_help() + "```\n",
        ]
        for name, command in COMMANDS.items():
            sub = _subparser(build_parser(name), name)
            parts.append(f"## `{name}`\n\n{command.help[0].upper()}{command.help[1:]}.\n")
            parts.append("```text\n" + sub.format_help() + "```\n")
        return "\n".join(parts)
    finally:
        if previous is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = previous


def write_if_changed(path: Path, text: str) -> None:
    """Write only when different, so an unchanged page is not rebuilt."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def _generate(app: Sphinx) -> None:
    write_if_changed(Path(app.srcdir) / "_generated" / "cli.md", cli_markdown())


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("builder-inited", _generate)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
