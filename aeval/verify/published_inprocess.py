"""The published reading without the z3 binary, for the answers whose outcome is provable.

The study's script (:func:`aeval.verify.published.published_script`) runs two
``check-sat``s. For most answers what they decide follows from the script's
shape alone, and the two satisfiability questions can then be asked of Z3
in this process:

* the row is *plain*: its declarations are ``declare-const``/``declare-fun``
  forms with distinct names (none named ``assert``), and every non-blank line
  of its ground truth is one ``(assert T)`` starting the line, so
  ``C(truth)`` is exactly the conjunction T of the truth's asserts;
* the answer (the study's extraction) is *plain*: ASCII, no comment, string,
  ``|quoted symbol|`` or keyword (nothing that hides a parenthesis from a
  scanner or names a term across the script's scopes), no line break
  other than the removed ``\\n`` (``str.splitlines`` splits on ``\\r`` too), it
  starts with ``(assert`` and a blank, and it is n ≥ 1 balanced one-term
  asserts X1 … Xn, optionally followed by surplus ``)`` only.

Then every command of the script is one balanced form (the surplus ``)`` are
errors Z3 skips without touching a command), nothing of the answer ever sits
at a command's head, and Z3's error recovery skips exactly the command that
failed. So, with ok(Xi) meaning "``(assert Xi)`` parses against the row's
declarations as a Boolean" (Z3's own parser, as the binary's):

* check 1 asks T ∧ ¬X1 when n = 1 and ok(X1); otherwise its
  ``(assert (not C(answer)))`` fails (n ≥ 2 puts ``(assert X2)`` inside
  ``not``, where ``assert`` is an unknown constant) and it asks T alone;
* check 2 asks (⋀ of the ok Xi) ∧ ¬T.

Each question goes to Z3's solver here. A ``sat``/``unsat`` is what the binary
(the same Z3 build) answers too; the reading is given only when both are
decided, the formulas are quantifier-free linear arithmetic (where Z3 is
complete, so the binary's incremental solver cannot answer ``unknown``) and
both took a small fraction of the binary's time limit (so the binary would
not run out of it). Anything else returns ``None``: the binary decides.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import z3

from aeval.verify.declarations import ParserDecls
from aeval.verify.equivalence import Verifier, _Truth
from aeval.verify.published import (
    EQUIVALENT,
    NOT_IMPLIED,
    NOT_IMPLYING,
    PublishedResult,
)
from aeval.verify.sexpr import PIECE, SExpr, read_forms

__all__ = ["PublishedInProcess"]

# Characters that end a line for str.splitlines (the study's C(s)) other than
# "\n" (already removed from answers), and the lexical forms left to the binary.
_LINE_BREAKS = frozenset("\r\x0b\x0c\x1c\x1d\x1e")
_UNPLAIN = _LINE_BREAKS | frozenset(';"|:')
_SKIPPED_FIRST = frozenset(" \t\r\n\f\v;")
_ROWS_CACHED = 1024
# The share of the binary's time limit the two questions may take here: far from
# it, a different search order in the binary cannot run out of time.
_TIME_SHARE = 0.1


@dataclass(slots=True)
class _Row:
    parser: ParserDecls
    truth: z3.BoolRef
    assert_text: str | None  # the truth's one assert, re-emitted (None: several)
    truth_sat: z3.CheckSatResult | None = None
    negation_sat: z3.CheckSatResult | None = None


def _plain_text(text: str) -> bool:
    return text.isascii() and not any(c in _UNPLAIN for c in text)


def _tokens(text: str) -> list[str] | None:
    """The tokens of ``text``, or None when the reader's tokens do not tile it."""
    pieces = PIECE.findall(text)
    if sum(map(len, pieces)) != len(text):
        return None
    return [t for t in pieces if t[0] not in _SKIPPED_FIRST]


def _asserts(tokens: list[str], max_depth: int) -> list[str] | None:
    """One-term asserts (re-emitted), then only surplus ``)``; None for anything else."""
    forms: list[str] = []
    depth = 0
    start = 0
    terms = 0
    surplus = False
    for i, tok in enumerate(tokens):
        if surplus:
            if tok != ")":
                return None
            continue
        if tok == "(":
            if depth == 0:
                start, terms = i, 0
            elif depth == 1:
                terms += 1
            depth += 1
            if depth > max_depth:
                return None
        elif tok == ")":
            if depth == 0:
                if not forms:
                    return None
                surplus = True
                continue
            depth -= 1
            if depth == 0:
                if tokens[start + 1] != "assert" or terms != 1:
                    return None
                forms.append(" ".join(tokens[start : i + 1]))
        elif depth == 0:
            return None  # an atom between forms
        elif depth == 1:
            if i == start + 1:
                if tok != "assert":
                    return None
            else:
                terms += 1
    return forms if depth == 0 and forms else None


class PublishedInProcess:
    """The published reading of plain answers, in the calling process (a verifier worker).

    Shares ``verifier``'s Z3 context, parsed ground truths and solver settings.
    """

    def __init__(self, verifier: Verifier, binary_timeout_s: float) -> None:
        self.verifier = verifier
        self._budget_s = binary_timeout_s * _TIME_SHARE
        self._rows: dict[tuple[str, str], _Row | None] = {}
        # Linear arithmetic over Int and Real (multiplication, div and mod by
        # numerals included), no quantifiers: ("is-qflira" turns down (* 2 x)).
        self._fragment = z3.And(
            z3.Probe("is-lira", ctx=verifier.ctx),
            z3.Not(z3.Probe("has-quantifiers", ctx=verifier.ctx)),
        )

    def reading(self, answer: str, truth: str, constants: str) -> PublishedResult | None:
        """The reading of ``answer`` (the study's extraction, refused commands already
        screened), or None when the binary must decide."""
        start = time.perf_counter()
        if (
            not _plain_text(answer)
            or not answer.startswith("(assert")
            or answer[7:8]
            not in (
                " ",
                "\t",
            )
        ):
            return None
        limits = self.verifier.limits
        if len(answer) > limits.max_answer_bytes:
            return None
        tokens = _tokens(answer)
        if tokens is None or any(
            t[0].isdigit() and len(t) > limits.max_numeral_digits for t in tokens
        ):
            return None
        forms = _asserts(tokens, limits.max_depth)
        if forms is None:
            return None
        row = self._row(truth, constants)
        if row is None:
            return None
        if len(forms) == 1 and forms[0] == row.assert_text:
            # The truth itself: both checks ask T ∧ ¬T.
            return self._result(z3.unsat, z3.unsat, start, in_process=True)
        parsed: list[z3.BoolRef] = []
        for form in forms:
            try:
                vector = row.parser.parse(form)
            except z3.Z3Exception:
                continue  # the binary reports it and carries on
            except (MemoryError, RecursionError):
                return None
            parsed.extend(vector)
        ctx = self.verifier.ctx
        answer_ok = len(forms) == len(parsed)
        if len(forms) == 1 and answer_ok:
            first = self._decide(z3.And(row.truth, z3.Not(parsed[0], ctx), ctx))
        else:
            first = self._truth_sat(row)
        if first is None:
            return None
        if parsed:
            second = self._decide(z3.And(*parsed, z3.Not(row.truth, ctx), ctx))
        else:
            second = self._negation_sat(row)
        if second is None or time.perf_counter() - start > self._budget_s:
            return None
        return self._result(first, second, start, in_process=True)

    # -- the row ------------------------------------------------------------------------

    def _row(self, truth: str, constants: str) -> _Row | None:
        key = (truth, constants)
        if key in self._rows:
            return self._rows[key]
        row = self._plain_row(truth, constants)
        if len(self._rows) >= _ROWS_CACHED:
            self._rows.clear()
        self._rows[key] = row
        return row

    def _plain_row(self, truth: str, constants: str) -> _Row | None:
        if not _plain_text(truth) or not _plain_text(constants):
            return None
        try:
            forms = read_forms(constants)
        except ValueError:
            return None
        names = [_declared(form) for form in forms]
        if None in names or "assert" in names or len(set(names)) != len(names):
            return None
        lines = [line for line in truth.split("\n") if line.strip()]
        for line in lines:
            if not line.startswith("(assert") or line[7:8] not in (" ", "\t"):
                return None
            tokens = _tokens(line)
            if tokens is None:
                return None
            one = _asserts(tokens, self.verifier.limits.max_depth)
            if one is None or len(one) != 1:
                return None
            if line.rstrip()[-1:] != ")" or tokens.count("(") != tokens.count(")"):
                return None  # surplus ")" in a truth line would shift C(truth)
        parsed = self.verifier._truth(truth, constants)
        if not isinstance(parsed, _Truth) or not lines:
            return None
        if not self._in_fragment(parsed.formula):
            return None
        single = parsed.text if len(lines) == 1 and "\n" not in parsed.text else None
        return _Row(parsed.parser, parsed.formula, single)

    def _truth_sat(self, row: _Row) -> z3.CheckSatResult | None:
        if row.truth_sat is None:
            row.truth_sat = self._decide(row.truth)
        return row.truth_sat

    def _negation_sat(self, row: _Row) -> z3.CheckSatResult | None:
        if row.negation_sat is None:
            row.negation_sat = self._decide(z3.Not(row.truth, self.verifier.ctx))
        return row.negation_sat

    # -- deciding -----------------------------------------------------------------------

    def _in_fragment(self, formula: z3.BoolRef) -> bool:
        goal = z3.Goal(ctx=self.verifier.ctx)
        goal.add(formula)
        return bool(self._fragment(goal))

    def _decide(self, formula: z3.BoolRef) -> z3.CheckSatResult | None:
        if not self._in_fragment(formula):
            return None
        solver = self.verifier._solver(tactic=True)
        solver.set("timeout", max(1, int(self._budget_s * 1000)))
        solver.add(formula)
        result = solver.check()
        return result if result in (z3.sat, z3.unsat) else None

    @staticmethod
    def _result(
        first: z3.CheckSatResult, second: z3.CheckSatResult, start: float, *, in_process: bool
    ) -> PublishedResult:
        elapsed = (time.perf_counter() - start) * 1000.0
        if first != z3.unsat:
            return PublishedResult(False, NOT_IMPLIED, elapsed, in_process)
        if second != z3.unsat:
            return PublishedResult(False, NOT_IMPLYING, elapsed, in_process)
        return PublishedResult(True, EQUIVALENT, elapsed, in_process)


def _declared(form: SExpr) -> str | None:
    if (
        isinstance(form, tuple)
        and len(form) in (3, 4)
        and form[0] in ("declare-const", "declare-fun")
        and isinstance(form[1], str)
    ):
        return form[1]
    return None
