"""A non-recursive SMT-LIB S-expression reader and the answer sanitiser built on it.

Only top-level ``(assert term)`` forms may reach Z3. This module reads the
answer token by token (string literals, ``|quoted symbols|`` and ``;`` comments
included) with an explicit depth counter, never the Python stack, so 200,000
levels of nesting are a ``too_large`` verdict rather than a crash. What it hands
on is *re-emitted from the tokens it read* (comments dropped), so Z3 parses
exactly what was checked here and nothing an answer smuggles past the reader.

Written by hand because no maintained library reads SMT-LIB's lexical syntax
without recursion: general S-expression libraries (sexpdata, …) recurse per
level and do not know SMT-LIB's ``""`` string escape or ``|…|`` symbols.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import accumulate, repeat

from aeval.verdicts import Status
from aeval.verify.extract import Repair
from aeval.verify.limits import DEFAULT_LIMITS, VerifyLimits

__all__ = [
    "COMMANDS",
    "Rejection",
    "SExpr",
    "Sanitised",
    "read_forms",
    "sanitise",
]

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

_SYM = r"A-Za-z0-9~!@$%^&*_\-+=<>.?/"
_SYM_START = r"A-Za-z~!@$%^&*_\-+=<>.?/"
_TOKEN = re.compile(
    r"(?P<ws>[ \t\r\n\f\v]+)"
    r"|(?P<comment>;[^\n\r]*)"
    r"|(?P<lp>\()"
    r"|(?P<rp>\))"
    r'|(?P<string>"(?:[^"]|"")*")'
    r"|(?P<qsym>\|[^|\\]*\|)"
    # A numeral glued to symbol characters ("12abc") matches nothing: parse error.
    rf"|(?P<num>(?:[0-9]+(?:\.[0-9]+)?|#x[0-9A-Fa-f]+|#b[01]+)(?![{_SYM}]))"
    rf"|(?P<kw>:[{_SYM}]+)"
    rf"|(?P<sym>[{_SYM_START}][{_SYM}]*)"
)
_SKIPPED_FIRST = frozenset(" \t\r\n\f\v;")
_DELTA = {"(": 1, ")": -1}


# The same alternatives without names, for the findall fast path.
_PIECE = re.compile(re.sub(r"\(\?P<\w+>", "(?:", _TOKEN.pattern))
_KIND_OF_FIRST: dict[str, str] = {
    **dict.fromkeys(" \t\r\n\f\v;", "skip"),
    "(": "lp",
    ")": "rp",
    '"': "string",
    "|": "qsym",
    ":": "kw",
    "#": "num",
    **dict.fromkeys("0123456789", "num"),
}

SExpr = str | tuple["SExpr", ...]


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


class _ReadError(Exception):
    def __init__(self, status: Status, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def _where(text: str, pos: int) -> str:
    line = text.count("\n", 0, pos) + 1
    col = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return f"line {line}, column {col}"


def _bad_char(text: str, pos: int) -> _ReadError:
    ch = text[pos]
    if ch == '"':
        what = "unterminated string literal"
    elif ch == "|":
        what = "unterminated or invalid |quoted symbol|"
    else:
        what = f"unexpected character {ch!r} (U+{ord(ch):04X})"
    return _ReadError(Status.PARSE_ERROR, f"{what} at {_where(text, pos)}")


def _tokens(text: str, limits: VerifyLimits) -> Iterator[tuple[str, str, int]]:
    """Yield (kind, token, position), skipping whitespace and comments.

    Fast path: one ``findall`` in C, trusted only when its pieces tile the
    whole text (then it is exactly the token-by-token match); otherwise the
    slow path finds and reports the first character no token accepts.
    """
    pieces = _PIECE.findall(text)
    if sum(map(len, pieces)) != len(text):
        yield from _tokens_slow(text, limits)
        return
    kinds = _KIND_OF_FIRST
    max_digits = limits.max_numeral_digits
    pos = 0
    for tok in pieces:
        kind = kinds.get(tok[0], "sym")
        if kind != "skip":
            if kind == "num":
                if len(tok) > max_digits:
                    raise _too_long_numeral(text, tok, pos, limits)
            elif (kind == "string" or kind == "qsym") and not tok.isascii():
                raise _non_ascii(text, tok, pos)
            yield kind, tok, pos
        pos += len(tok)


def _too_long_numeral(text: str, tok: str, pos: int, limits: VerifyLimits) -> _ReadError:
    return _ReadError(
        Status.TOO_LARGE,
        f"numeral of {len(tok)} digits at {_where(text, pos)} (limit {limits.max_numeral_digits})",
    )


def _non_ascii(text: str, tok: str, pos: int) -> _ReadError:
    # Keeps Z3's C API from ever seeing text it may encode differently.
    bad = next(i for i, c in enumerate(tok) if not c.isascii())
    return _bad_char(text, pos + bad)


def _tokens_slow(text: str, limits: VerifyLimits) -> Iterator[tuple[str, str, int]]:
    pos, end = 0, len(text)
    match = _TOKEN.match
    while pos < end:
        m = match(text, pos)
        if m is None:
            raise _bad_char(text, pos)
        kind = m.lastgroup
        assert kind is not None
        if kind == "ws" or kind == "comment":
            pos = m.end()
            continue
        tok = m.group()
        if kind in ("string", "qsym") and not tok.isascii():
            raise _non_ascii(text, tok, pos)
        if kind == "num" and len(tok) > limits.max_numeral_digits:
            raise _too_long_numeral(text, tok, pos, limits)
        yield kind, tok, pos
        pos = m.end()


def read_forms(text: str, limits: VerifyLimits = DEFAULT_LIMITS) -> list[SExpr]:
    """Read every top-level S-expression of ``text`` into nested tuples of token strings.

    Uses an explicit stack: nesting deeper than ``limits.max_depth`` raises
    :class:`ValueError` (never :class:`RecursionError`). Meant for small trusted
    inputs such as the dataset's declarations; answers go through :func:`sanitise`.
    """
    stack: list[list[SExpr]] = [[]]
    try:
        for kind, tok, pos in _tokens(text, limits):
            if kind == "lp":
                if len(stack) > limits.max_depth:
                    raise ValueError(
                        f"nesting deeper than {limits.max_depth} at {_where(text, pos)}"
                    )
                stack.append([])
            elif kind == "rp":
                if len(stack) == 1:
                    raise ValueError(f"unexpected ')' at {_where(text, pos)}")
                done = tuple(stack.pop())
                stack[-1].append(done)
            else:
                stack[-1].append(tok)
    except _ReadError as err:
        raise ValueError(err.reason) from None
    if len(stack) != 1:
        raise ValueError(f"{len(stack) - 1} '(' not closed at the end of the text")
    return stack[0]


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
    except _ReadError as err:
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
    pieces = _PIECE.findall(text)
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
    for kind, tok, pos in _tokens(text, limits):
        if kind == "rp" and depth == 0:
            surplus_at = pos if surplus_at is None else surplus_at
            surplus += 1
            continue
        if surplus_at is not None and not lenient:
            raise _ReadError(Status.PARSE_ERROR, f"unexpected ')' at {_where(text, surplus_at)}")
        if kind == "lp":
            if depth == 0:
                form = _Form(pos)
            elif depth == 1:
                form.starts.append(len(form.tokens))
            depth += 1
            if depth > limits.max_depth:
                raise _ReadError(
                    Status.TOO_LARGE,
                    f"nesting deeper than {limits.max_depth} levels at {_where(text, pos)}",
                )
        elif kind == "rp":
            depth -= 1
            if depth == 0:
                forms.append(form)
        elif depth == 0:
            raise _ReadError(
                Status.PARSE_ERROR,
                f"text outside any command at {_where(text, pos)}: {tok[:40]!r}",
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
                f"unbalanced parentheses: {surplus} surplus ')' from {_where(text, surplus_at)}",
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
                f"forbidden command '{f.head}' at {_where(text, f.pos)}: "
                "only (assert …) is allowed",
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
                    f"(assert …) at {_where(text, f.pos)} takes exactly one term, got {terms}",
                )
        elif lenient:
            asserts.append(_emit(["(", "assert", *f.tokens, ")"]))
            _note(repairs, Repair.WRAPPED_BARE_TERM)
        else:
            return Rejection(
                Status.PARSE_ERROR,
                f"top-level form at {_where(text, f.pos)} is not an (assert …) command",
            )
    return Sanitised(tuple(asserts), tuple(repairs))


def _note(repairs: list[str], repair: str) -> None:
    if repair not in repairs:
        repairs.append(repair)
