"""A non-recursive reader of SMT-LIB's lexical syntax: tokens, and S-expressions as tuples.

It reads token by token (string literals, ``|quoted symbols|`` and ``;``
comments included) with an explicit depth counter, never the Python stack, so
200,000 levels of nesting are an error to report rather than a crash.

Written by hand because no maintained library reads SMT-LIB's lexical syntax
without recursion: general S-expression libraries (sexpdata, …) recurse per
level and do not know SMT-LIB's ``""`` string escape or ``|…|`` symbols.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from aeval.verdicts import Status
from aeval.verify.limits import DEFAULT_LIMITS, VerifyLimits

__all__ = ["PIECE", "ReadError", "SExpr", "read_forms", "read_tokens", "where"]

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


# The same alternatives without names, for the findall fast path.
PIECE = re.compile(re.sub(r"\(\?P<\w+>", "(?:", _TOKEN.pattern))
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


class ReadError(Exception):
    """Text the reader cannot accept, with the status and reason of its verdict."""

    def __init__(self, status: Status, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def where(text: str, pos: int) -> str:
    line = text.count("\n", 0, pos) + 1
    col = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return f"line {line}, column {col}"


def _bad_char(text: str, pos: int) -> ReadError:
    ch = text[pos]
    if ch == '"':
        what = "unterminated string literal"
    elif ch == "|":
        what = "unterminated or invalid |quoted symbol|"
    else:
        what = f"unexpected character {ch!r} (U+{ord(ch):04X})"
    return ReadError(Status.PARSE_ERROR, f"{what} at {where(text, pos)}")


def read_tokens(text: str, limits: VerifyLimits) -> Iterator[tuple[str, str, int]]:
    """Yield (kind, token, position), skipping whitespace and comments.

    Fast path: one ``findall`` in C, trusted only when its pieces tile the
    whole text (then it is exactly the token-by-token match); otherwise the
    slow path finds and reports the first character no token accepts.
    """
    pieces = PIECE.findall(text)
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


def _too_long_numeral(text: str, tok: str, pos: int, limits: VerifyLimits) -> ReadError:
    return ReadError(
        Status.TOO_LARGE,
        f"numeral of {len(tok)} digits at {where(text, pos)} (limit {limits.max_numeral_digits})",
    )


def _non_ascii(text: str, tok: str, pos: int) -> ReadError:
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
        for kind, tok, pos in read_tokens(text, limits):
            if kind == "lp":
                if len(stack) > limits.max_depth:
                    raise ValueError(
                        f"nesting deeper than {limits.max_depth} at {where(text, pos)}"
                    )
                stack.append([])
            elif kind == "rp":
                if len(stack) == 1:
                    raise ValueError(f"unexpected ')' at {where(text, pos)}")
                done = tuple(stack.pop())
                stack[-1].append(done)
            else:
                stack[-1].append(tok)
    except ReadError as err:
        raise ValueError(err.reason) from None
    if len(stack) != 1:
        raise ValueError(f"{len(stack) - 1} '(' not closed at the end of the text")
    return stack[0]
