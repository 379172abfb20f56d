"""Pieces every sub-command's arguments use: value types and help layout.

Values are checked while the command line is parsed, so a bad one is reported
by argparse, once, naming the flag, before anything is created or loaded.
"""

from __future__ import annotations

import argparse
import difflib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Literal, NoReturn, TypeVar

from aeval.errors import ConfigError

N = TypeVar("N", int, float)


def _number(kind: Callable[[str], N], low: N, strict: bool, what: str) -> Callable[[str], N]:
    def parse(text: str) -> N:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}") from None
        if value < low or (strict and value == low):
            raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}")
        return value

    parse.__name__ = what  # argparse names the type in some messages
    return parse


positive_int = _number(int, 0, True, "a positive integer")
non_negative_int = _number(int, 0, False, "an integer >= 0")
positive_float = _number(float, 0.0, True, "a positive number")


def at_least(low: int) -> Callable[[str], int]:
    """An integer type with a floor (``--memory-mb`` below 256 cannot start Python)."""
    return _number(int, low, False, f"an integer >= {low}")


# What ``report`` and ``leaderboard`` write (``--format``); aeval.commands.report_output
# writes each.
Format = Literal["table", "md", "csv", "json", "html", "latex"]
FORMATS: tuple[Format, ...] = ("table", "md", "csv", "json", "html", "latex")


def add_output_argument(parser: argparse.ArgumentParser, help: str) -> None:
    """``--out``/``-o FILE`` (``args.output``) of a command that writes one page or table."""
    parser.add_argument("--out", "-o", dest="output", type=Path, metavar="FILE", help=help)


def add_listen_arguments(parser: argparse.ArgumentParser, *, port: int) -> None:
    """``--host`` and ``--port`` of a command that serves HTTP (loopback by default)."""
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument(
        "--port", type=int, default=port, help="port to listen on (0: any free port)"
    )


def add_token_arguments(parser: argparse.ArgumentParser, *, env: str, what: str,
                        flag: str = "--token-file") -> None:  # fmt: skip
    """``--token-file`` (``args.token_file``) and ``--no-auth`` of a command that serves HTTP:
    the token is read from ``env`` or the file (not from the command line, which ``ps`` shows)."""
    parser.add_argument(
        flag,
        dest="token_file",
        type=Path,
        metavar="FILE",
        help=f"require 'Authorization: Bearer TOKEN' with the {what} in FILE (or set {env}; "
        "needed on a host that is not loopback)",
    )
    parser.add_argument(
        "--no-auth",
        action="store_true",
        help="listen on a host that is not loopback without a token: anyone who can reach "
        "the port can use it",
    )


def listen_token(env: str, token_file: Path | None) -> str | None:
    """The token from ``--token-file`` (its first line) or the ``env`` variable, if any.

    :raises ConfigError: the file cannot be read or holds no token.
    """
    if token_file is None:
        return os.environ.get(env) or None
    try:
        token = token_file.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"{token_file}: cannot read the token ({err})") from None
    if not token or "\n" in token:
        raise ConfigError(f"{token_file}: expected one line holding the token")
    return token


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Help that shows each option's default when it has one worth showing.

    Options whose help already says its default (or that default to nothing)
    are left as written; the epilog (the examples) keeps its line breaks.
    """

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            "default" in text
            or default is None
            or default is False
            or default is argparse.SUPPRESS
            or not action.option_strings
            or isinstance(action, argparse._StoreConstAction | argparse._VersionAction)
        ):
            return action.help
        shown = ",".join(map(str, default)) if isinstance(default, list | tuple) else default
        return f"{text} (default: {shown})" if text else f"(default: {shown})"


class Parser(argparse.ArgumentParser):
    """argparse with a "did you mean" for mistyped options (argparse has one from 3.14)."""

    def error(self, message: str) -> NoReturn:
        hint = self._suggestion(message)
        super().error(message + hint)

    def _suggestion(self, message: str) -> str:
        prefix = "unrecognized arguments: "
        if prefix not in message:
            return ""
        # The sub-command's options too: argparse reports them from the top parser.
        parsers = [self]
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                parsers.extend(action.choices.values())
        known = sorted(
            {s for p in parsers for a in p._actions for s in a.option_strings if s.startswith("--")}
        )
        hints = []
        for word in message.split(prefix, 1)[1].split():
            if not word.startswith("-"):
                continue
            flag = word.split("=", 1)[0]
            close = difflib.get_close_matches(flag, known, n=1, cutoff=0.6)
            if close:
                hints.append((flag, close[0]))
        if len(hints) == 1:
            return f" (did you mean {hints[0][1]}?)"
        listed = ", ".join(f"{new} for {old}" for old, new in hints)
        return f" (did you mean {listed}?)" if hints else ""
