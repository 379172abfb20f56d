"""The published reading: the WARP study's own evaluator, reproduced step by step.

The study (dannkoh/WARP-evaluation, ``src/gpt-evaluator.ipynb``) scored each
output line like this, and :func:`check_published` does exactly the same:

1. the answer is the text between the FIRST ``<answer>`` and the next
   ``</answer>`` (the study split the text on the tags, so a second
   ``<answer>`` also ends it, and without a closing tag it runs to the end of
   the text), stripped, with every ``"\\n"`` removed; no
   ``<answer>`` tag or nothing in it is incorrect ("Failed to extract
   response.");
2. one SMT-LIB script goes to the ``z3`` command line on stdin: the row's
   declarations, then ``(push)`` truth ``(pop)``, ``(push)`` answer ``(pop)``,
   then ``(push)`` truth ``(assert (not C(answer)))`` ``(check-sat)`` ``(pop)``
   and ``(push)`` answer ``(assert (not C(truth)))`` ``(check-sat)`` ``(pop)``,
   where C(s) is ``(and `` + the space-joined ``line.strip()[8:-1]`` of every
   line of s that starts with ``(assert`` + ``)``. Each inserted text sits on
   lines of its own, as in the study (a ``;`` in an answer comments out the
   rest of *its* line only). Z3 reports a malformed command and carries on;
3. of stdout, the lines that are exactly ``sat``, ``unsat`` or ``unknown``
   count; fewer than two is incorrect ("Could not parse results correctly."),
   and the answer is correct iff the first two are both ``unsat``.

Note that C is computed on the answer *after* newline removal, so a
multi-line answer is one line and only its first ``(assert`` is unwrapped: the
study's quirk, kept on purpose (this reading exists to reproduce its numbers).

What is added, for safety only: the ``z3`` binary is the one the z3-solver
wheel installed (never whatever ``z3`` is first on PATH), it gets the answer on
stdin through an argv list (never a shell) in an empty temporary working
directory, under a wall-clock timeout, Z3's own ``-T:``/``-memory:`` limits and
the calling worker's address-space cap; and an answer holding any SMT-LIB
command other than ``assert`` (``(echo "unsat")`` would forge a result,
``(include …)`` would read a file) is refused before it reaches Z3, with the
reason recorded. The study had no timeout: an answer that Z3 cannot settle in
the budget is incorrect here.
"""

from __future__ import annotations

import importlib.metadata
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from aeval.study_reasons import EQUIVALENT, NO_ANSWER, NOT_IMPLIED, NOT_IMPLYING, UNPARSED
from aeval.verify.published_session import (
    Z3Session,
    answer_left_open,
    die_with_parent,
    open_to_the_end,
    row_commands_only,
    z3_memory_mb,
)

__all__ = [
    "PublishedResult",
    "check_published",
    "conjunction",
    "extract_published",
    "forbidden_command",
    "is_command",
    "published_script",
    "published_without_binary",
    "read_published_output",
    "z3_binary",
]

# Outcomes Z3 settled (not a timeout): the same script always gives the same one.
DETERMINED = frozenset({NOT_IMPLIED, NOT_IMPLYING, EQUIVALENT})
# How the reason of an answer refused before Z3 starts (a function of the answer alone).
REFUSED = "refused: "

_RESULTS = ("sat", "unsat", "unknown")
# The reason of a z3 killed after its budget.
_KILLED = "z3 killed after {timeout:g} s (the study had no time limit)"
# Longer answers are refused before Z3 starts.
_MAX_CHARS = 16 * 1024 * 1024


# Z3 4.x's command names (its "(help)" list plus the SMT-LIB 2.6 standard's)
# that are not ``assert``. Names by prefix cover the families Z3 may extend.
_COMMANDS = frozenset(
    """
    apply assert-not assert-soft assume check-sat check-sat-assuming check-sat-using
    declare-const declare-datatype declare-datatypes declare-fun declare-map declare-rel
    declare-sort declare-tactic declare-var define-const define-fun define-fun-rec
    define-funs-rec define-sort del display display-dimacs echo euf-project eufi eval exit
    ff-boolean-certify ff-certify ff-check-native-proof ff-integrated-certify get-assertions
    get-assignment get-consequences get-info get-interpolant get-model get-objectives
    get-option get-proof get-proof-graph get-unsat-assumptions get-unsat-core
    get-user-tactics get-value help help-simplifier help-tactic include infer labels maximize
    mbi mbp mbp-qel minimize model-add model-del pop prefer push qe-lite qel query reset
    reset-assertions reset-preferences rule set-info set-initial-value set-logic set-option
    set-simplifier simplify
    """.split()  # noqa: SIM905 (a word list reads better than 80 quoted strings)
)
_COMMAND_PREFIXES = (
    "get-",
    "set-",
    "declare-",
    "define-",
    "check-sat",
    "reset",
    "dbg-",
    "help",
    "assert-",
    "model-",
    "display",
)
# "(" then whitespace or comments (over-generous: any line break ends one),
# then a symbol, plain or |quoted| (Z3 runs "(|echo| …)" as echo). Every "("
# of the answer is looked at, nested or not: with unbalanced parentheses any of
# them may open a top-level command.
# A comment must run to a line break or the end, so the pattern matches one way
# only (no backtracking blow-up on "(; ; ; …").
_HEAD = re.compile(r"\((?:\s|;[^\n\r]*(?:[\n\r]|$))*(\|[^|]*\||[^\s()|\";]+)")


@dataclass(frozen=True, slots=True)
class PublishedResult:
    """The published reading of one answer: correct or not, and the study's reason."""

    correct: bool
    reason: str
    elapsed_ms: float = 0.0
    # Read in the worker without the z3 binary (aeval.verify.published_inprocess).
    in_process: bool = False


def extract_published(content: str | None) -> str | None:
    """The study's extraction: first ``<answer>`` to the next ``</answer>``, stripped, no ``\\n``.

    ``None`` when there is no content, no ``<answer>`` tag, or nothing inside.
    """
    if not content or "<answer>" not in content:
        return None
    # [1] of a full split: a second "<answer>" ends the block as "</answer>" does.
    body = content.split("<answer>", 2)[1].split("</answer>", 1)[0]
    return body.strip().replace("\n", "") or None


def conjunction(text: str) -> str:
    """C(s): ``(and `` + the space-joined ``line.strip()[8:-1]`` of ``(assert`` lines + ``)``."""
    terms = [line.strip()[8:-1] for line in text.splitlines() if line.startswith("(assert")]
    return f"(and {' '.join(terms)})"


def is_command(name: str) -> bool:
    """Whether Z3 would run ``(name …)`` as a command (its list, and the families by prefix)."""
    return name in _COMMANDS or name == "assert" or name.startswith(_COMMAND_PREFIXES)


def forbidden_command(answer: str) -> str | None:
    """The first SMT-LIB command other than ``assert`` in ``answer``, or None."""
    # Each distinct head once, in order of first appearance (a long answer has
    # thousands of "(" but a handful of distinct operators).
    heads: list[str] = _HEAD.findall(answer)
    for name in dict.fromkeys(heads):
        bare = name[1:-1] if name.startswith("|") else name
        if bare == "assert":
            continue
        if bare in _COMMANDS or bare.startswith(_COMMAND_PREFIXES):
            return name
    return None


def published_script(constants: str, truth: str, answer: str) -> str:
    """The study's SMT-LIB script for one answer (comments left out; line breaks kept)."""
    return (
        f"{constants}\n"
        f"(push)\n{truth}\n(pop)\n"
        f"(push)\n{answer}\n(pop)\n"
        f"(push)\n{truth}\n(assert (not\n{conjunction(answer)}\n))\n(check-sat)\n(pop)\n"
        f"(push)\n{answer}\n(assert (not\n{conjunction(truth)}\n))\n(check-sat)\n(pop)\n"
    )


def read_published_output(stdout: str) -> PublishedResult:
    """Decide from Z3's stdout as the study did: the first two result lines must be ``unsat``."""
    results = [line for line in stdout.strip().splitlines() if line in _RESULTS]
    if len(results) < 2:
        return PublishedResult(False, UNPARSED)
    if results[0] != "unsat":
        return PublishedResult(False, NOT_IMPLIED)
    if results[1] != "unsat":
        return PublishedResult(False, NOT_IMPLYING)
    return PublishedResult(True, EQUIVALENT)


@cache
def z3_binary() -> Path:
    """The ``z3`` executable installed by the z3-solver wheel (found from its metadata).

    :raises FileNotFoundError: the installed z3-solver has no ``z3`` executable.
    """
    try:
        files = importlib.metadata.files("z3-solver") or []
    except importlib.metadata.PackageNotFoundError:
        files = []
    for entry in files:
        if entry.name in ("z3", "z3.exe"):
            path = Path(str(entry.locate())).resolve()
            if path.is_file() and os.access(path, os.X_OK):
                return path
    raise FileNotFoundError(
        "the installed z3-solver package ships no z3 executable (reinstall z3-solver)"
    )


def published_without_binary(
    content: str | None,
    truth: str,
    constants: str,
    *,
    in_process: Callable[[str, str, str], PublishedResult | None] | None,
    max_chars: int = _MAX_CHARS,
) -> PublishedResult | None:
    """The published reading where the z3 binary need not run (no answer, a refused
    answer, or what ``in_process`` reads); None when only the binary can say.

    Never raises beyond what ``in_process`` raises.
    """
    start = time.perf_counter()
    screened = _screen(content, max_chars, start)
    if isinstance(screened, PublishedResult):
        return screened
    if in_process is None:
        return None
    return _unclosed(screened, truth, constants, start) or in_process(screened, truth, constants)


def _unclosed(answer: str, truth: str, constants: str, start: float) -> PublishedResult | None:
    """The reading of an answer that leaves the script inside one command to its end
    (an unclosed ``(assert``): no ``check-sat`` runs, so no result line is printed
    (:func:`aeval.verify.published_session.open_to_the_end`); None for any other."""
    if not answer_left_open(answer) or not row_commands_only(truth, constants):
        return None
    script = published_script(constants, truth, answer)
    answer_end = len(f"{constants}\n(push)\n{truth}\n(pop)\n(push)\n{answer}")
    if not open_to_the_end(script, answer_end):
        return None
    return PublishedResult(False, UNPARSED, (time.perf_counter() - start) * 1000.0, True)


def _screen(content: str | None, max_chars: int, start: float) -> str | PublishedResult:
    """The study's extraction, or the result of an answer that never reaches Z3."""

    def done(reason: str) -> PublishedResult:
        return PublishedResult(False, reason, (time.perf_counter() - start) * 1000.0)

    answer = extract_published(content)
    if answer is None:
        return done(NO_ANSWER)
    if len(answer) > max_chars:
        return done(f"{REFUSED}answer of {len(answer)} characters (limit {max_chars})")
    command = forbidden_command(answer)
    if command is not None:
        return done(f"{REFUSED}the answer holds the SMT-LIB command '{command}' (only assert)")
    return answer


def check_published(
    content: str | None,
    truth: str,
    constants: str,
    *,
    timeout_s: float = 10.0,
    memory_mb: int = 1_536,
    max_chars: int = _MAX_CHARS,
    in_process: Callable[[str, str, str], PublishedResult | None] | None = None,
    session: Z3Session | None = None,
    declined: bool = False,
) -> PublishedResult:
    """The published reading of one response (see the module docstring). Never raises.

    :param in_process: given the extracted answer (refused commands screened out),
        the truth and the declarations, the reading without the binary, or None
        when the binary must decide (:class:`aeval.verify.published_inprocess.
        PublishedInProcess`); None: the binary reads every answer.
    :param session: a ``z3 -in`` kept across answers
        (:class:`aeval.verify.published_session.Z3Session`), for the scripts it
        reads as a fresh process does; None: a fresh process per answer.
    :param declined: :func:`published_without_binary` with this ``in_process``
        already returned None for this response (in the request that checked it):
        the answer goes to the binary without asking again.
    """
    start = time.perf_counter()

    def done(correct: bool, reason: str) -> PublishedResult:
        return PublishedResult(correct, reason, (time.perf_counter() - start) * 1000.0)

    answer = _screen(content, max_chars, start)
    if isinstance(answer, PublishedResult):
        return answer
    if in_process is not None and not declined:
        known = in_process(answer, truth, constants)
        if known is not None:
            return known
        unclosed = _unclosed(answer, truth, constants, start)
        if unclosed is not None:
            return unclosed
    text = published_script(constants, truth, answer)
    if session is not None and session.reads(text, truth, constants):
        try:
            stdout = session.read(text)
        except TimeoutError:
            return done(False, _KILLED.format(timeout=timeout_s))
        except OSError:
            stdout = None  # a fresh process says why
        if stdout is not None:
            result = read_published_output(stdout)
            return done(result.correct, result.reason)
    try:
        script = text.encode("utf-8")
    except UnicodeEncodeError as err:
        return done(False, f"Error running Z3: {err}")
    try:
        argv = [
            str(z3_binary()),
            "-in",
            f"-T:{max(1, math.ceil(timeout_s))}",
            f"-memory:{z3_memory_mb(memory_mb)}",
        ]
        with tempfile.TemporaryDirectory(prefix="aeval-z3-") as cwd:
            proc = subprocess.run(
                argv,
                input=script,
                capture_output=True,
                cwd=cwd,
                env={},
                timeout=timeout_s,
                check=False,
                preexec_fn=die_with_parent if sys.platform == "linux" else None,
            )
    except subprocess.TimeoutExpired:
        return done(False, _KILLED.format(timeout=timeout_s))
    except OSError as err:
        return done(False, f"Error running Z3: {err}")
    result = read_published_output(proc.stdout.decode("utf-8", "replace"))
    return done(result.correct, result.reason)
