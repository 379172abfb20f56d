"""The answer sanitiser: only top-level ``(assert term)`` forms may reach Z3.

The answer is read with the non-recursive reader of :mod:`aeval.verify.sexpr`,
so 200,000 levels of nesting are a ``too_large`` verdict rather than a crash.
What it hands on is *re-emitted from the tokens it read* (comments dropped), so
Z3 parses exactly what was checked here and nothing an answer smuggles past
the reader.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import accumulate, repeat

from aeval.verdicts import Status
from aeval.verify.extract import Repair
from aeval.verify.limits import DEFAULT_LIMITS, VerifyLimits
from aeval.verify.sexpr import PIECE, ReadError, read_tokens, where

__all__ = ["COMMANDS", "Rejection", "Sanitised", "sanitise"]

# Every SMT-LIB 2.6 command and Z3's extensions. Any of them at the top level of
# an answer, other than ``assert``, is a ``forbidden_command``; so is any other
# head shaped like a command (declare-*, define-*, get-*, set-*, check-*).
COMMANDS: frozenset[str] = frozenset(
    {
        "assert", "check-sat", "check-sat-assuming", "check-sat-using", "declare-const",
        "declare-datatype", "declare-datatypes", "declare-fun", "declare-sort", "declare-var",
        "declare-rel", "declare-map", "define-const", "define-fun", "define-fun-rec",
        "define-funs-rec", "define-sort", "echo", "exit", "get-assertions", "get-assignment",
        "get-info", "get-model", "get-option", "get-proof", "get-unsat-assumptions",
        "get-unsat-core", "get-value", "get-objectives", "get-consequences", "pop", "push",
        "reset", "reset-assertions", "set-info", "set-logic", "set-option", "include", "eval",
        "simplify", "display", "minimize", "maximize", "assert-soft", "apply", "rule", "query",
        "help", "labels", "set-initial-value",
    }
)  # fmt: skip
_COMMAND_PREFIXES = ("declare-", "define-", "get-", "set-", "check-")

# An answer that runs to the end of the response (no closing tag ended it) may
# have been cut off by the token limit: more than this many unclosed "(" there
# may hide conjuncts never written, so they are not closed. An answer that the
# model ended itself gets any number closed.
MAX_CLOSED_IF_CUT = 2

_SKIPPED_FIRST = frozenset(" \t\r\n\f\v;")
_DELTA = {"(": 1, ")": -1}


@dataclass(frozen=True, slots=True)
class Rejection:
    """Why an answer (or a ground truth) cannot go to Z3."""

    status: Status
    reason: str


@dataclass(frozen=True, slots=True)
class Sanitised:
    """Top-level ``(assert …)`` forms, re-emitted from tokens, and the repairs used."""

    asserts: tuple[str, ...]
    repairs: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        return "\n".join(self.asserts)


def _emit(tokens: list[str]) -> str:
    # One space between tokens: what Z3 reads is exactly the token sequence.
    return " ".join(tokens)


def _is_command(head: str) -> bool:
    return head in COMMANDS or head.startswith(_COMMAND_PREFIXES)


def sanitise(
    text: str,
    limits: VerifyLimits = DEFAULT_LIMITS,
    *,
    lenient: bool = True,
    may_be_cut: bool = False,
) -> Sanitised | Rejection:
    """Check that ``text`` is only top-level ``(assert term)`` forms and re-emit them.

    Statuses of a :class:`Rejection`: ``too_large`` (size, depth, numeral
    length), ``parse_error`` (lexical errors, unbalanced parentheses, stray text,
    an assert with other than one term), ``forbidden_command`` (naming it),
    ``no_answer`` (nothing but whitespace and comments).

    With ``lenient`` (for answers; ground truths are read strictly), a miscount
    of parentheses is read the one way it can be, each repair named:
    ``)`` with nothing open, at the end or between forms, are dropped
    (``dropped_extra_parens``, any number); ``(`` left open at the end are closed
    there (``closed_parens``, any number, but at most two when ``may_be_cut``:
    the answer runs to the end of a response that may have been cut off); an
    assert with several terms asserts each (``split_assert``); a bare term such
    as ``(and …)`` is asserted (``wrapped_bare_term``). The latter two are the
    same conjunction however early a miscounted ``)`` closed the ``and``.
    Repairs never lift the size, depth or numeral limits.
    """
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > limits.max_answer_bytes:
        return Rejection(
            Status.TOO_LARGE, f"answer of {size} bytes (limit {limits.max_answer_bytes})"
        )
    fast = _sanitise_fast(text, limits)
    if fast is not None:
        return fast
    try:
        return _sanitise(text, limits, lenient, may_be_cut)
    except ReadError as err:
        return Rejection(err.status, err.reason)


def _sanitise_fast(text: str, limits: VerifyLimits) -> Sanitised | None:
    """The common case (well-formed asserts, nothing to repair) at C speed, or ``None``.

    Same decisions as :func:`_sanitise` on the inputs it accepts; anything
    unusual (non-ASCII, long digit runs, untiled text, unbalanced or too deep
    nesting, stray atoms, forms other than a one-term assert) returns ``None``
    and the token-by-token path decides and explains.
    """
    if not text.isascii() or re.search(
        f"(?<![0-9])[0-9]{{{limits.max_numeral_digits + 1},}}", text
    ):
        return None
    pieces = PIECE.findall(text)
    if sum(map(len, pieces)) != len(text):
        return None
    tokens = [t for t in pieces if t[0] not in _SKIPPED_FIRST]
    if not tokens:
        return None
    depths = list(accumulate(map(_DELTA.get, tokens, repeat(0))))
    if min(depths) < 0 or depths[-1] != 0 or max(depths) > limits.max_depth:
        return None
    asserts = []
    start = 0
    while start < len(depths):
        end = depths.index(0, start)  # the form's closing ")" (or a stray atom)
        if (
            tokens[start] != "("
            or tokens[start + 1] != "assert"
            or depths[start:end].count(1) != 3  # "(", "assert" and one term
        ):
            return None
        asserts.append(_emit(tokens[start : end + 1]))
        start = end + 1
    return Sanitised(tuple(asserts))


@dataclass(slots=True)
class _Form:
    """One top-level form as read: its head symbol, tokens and where each element starts."""

    pos: int
    head: str | None = None
    tokens: list[str] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)  # index in tokens of each element


def _sanitise(
    text: str, limits: VerifyLimits, lenient: bool, may_be_cut: bool = False
) -> Sanitised | Rejection:
    forms: list[_Form] = []
    form = _Form(0)
    depth = 0
    surplus_at: int | None = None  # position of the first ')' with nothing open
    surplus = 0
    for kind, tok, pos in read_tokens(text, limits):
        if kind == "rp" and depth == 0:
            surplus_at = pos if surplus_at is None else surplus_at
            surplus += 1
            continue
        if surplus_at is not None and not lenient:
            raise ReadError(Status.PARSE_ERROR, f"unexpected ')' at {where(text, surplus_at)}")
        if kind == "lp":
            if depth == 0:
                form = _Form(pos)
            elif depth == 1:
                form.starts.append(len(form.tokens))
            depth += 1
            if depth > limits.max_depth:
                raise ReadError(
                    Status.TOO_LARGE,
                    f"nesting deeper than {limits.max_depth} levels at {where(text, pos)}",
                )
        elif kind == "rp":
            depth -= 1
            if depth == 0:
                forms.append(form)
        elif depth == 0:
            raise ReadError(
                Status.PARSE_ERROR,
                f"text outside any command at {where(text, pos)}: {tok[:40]!r}",
            )
        elif depth == 1:
            if not form.starts and kind == "sym":
                form.head = tok
            form.starts.append(len(form.tokens))
        form.tokens.append(tok)

    repairs: list[str] = []
    if surplus:
        if not lenient:
            assert surplus_at is not None
            return Rejection(
                Status.PARSE_ERROR,
                f"unbalanced parentheses: {surplus} surplus ')' from {where(text, surplus_at)}",
            )
        repairs.append(Repair.DROPPED_EXTRA_PARENS)
    if depth:
        if not lenient or (may_be_cut and depth > MAX_CLOSED_IF_CUT):
            cut = " (it runs to the end of the response, which may be cut off)" if lenient else ""
            return Rejection(
                Status.PARSE_ERROR,
                f"unbalanced parentheses: {depth} '(' not closed at the end of the answer{cut}",
            )
        form.tokens.extend(")" * depth)
        forms.append(form)
        repairs.append(Repair.CLOSED_PARENS)
    if not forms:
        return Rejection(Status.NO_ANSWER, "the answer holds no S-expression")

    for f in forms:
        if f.head is not None and f.head != "assert" and _is_command(f.head):
            return Rejection(
                Status.FORBIDDEN_COMMAND,
                f"forbidden command '{f.head}' at {where(text, f.pos)}: only (assert …) is allowed",
            )
    asserts: list[str] = []
    for f in forms:
        if f.head == "assert":
            terms = len(f.starts) - 1
            if terms == 1:
                asserts.append(_emit(f.tokens))
            elif terms > 1 and lenient:
                # (assert X Y …) asserts X and Y …: what (assert X) Y … means too.
                ends = [*f.starts[2:], len(f.tokens) - 1]
                for start, end in zip(f.starts[1:], ends, strict=True):
                    asserts.append(_emit(["(", "assert", *f.tokens[start:end], ")"]))
                _note(repairs, Repair.SPLIT_ASSERT)
            else:
                return Rejection(
                    Status.PARSE_ERROR,
                    f"(assert …) at {where(text, f.pos)} takes exactly one term, got {terms}",
                )
        elif lenient:
            asserts.append(_emit(["(", "assert", *f.tokens, ")"]))
            _note(repairs, Repair.WRAPPED_BARE_TERM)
        else:
            return Rejection(
                Status.PARSE_ERROR,
                f"top-level form at {where(text, f.pos)} is not an (assert …) command",
            )
    return Sanitised(tuple(asserts), tuple(repairs))


def _note(repairs: list[str], repair: str) -> None:
    if repair not in repairs:
        repairs.append(repair)
