"""`python -m aeval run` (not built yet: see the issue that owns it)."""

from __future__ import annotations

import argparse

from aeval.errors import AevalError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    pass


def run(args: argparse.Namespace) -> int:
    raise AevalError("'run' is not available yet in this build")
