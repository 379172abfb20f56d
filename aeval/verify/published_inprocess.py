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

Answers of any other plain shape (a miscounted parenthesis: an ``(and`` chain
closed early, then more terms and surplus ``)``) are read by walking the whole
script as Z3's command loop reads it (:meth:`PublishedInProcess.script_reading`):
in a lexically plain script (the row's and the answer's text plain as above) Z3's
scanner reads the same tokens as :func:`_tokens`, and its parser
(``src/parsers/smt2/smt2parser.cpp``) starts a command at every ``(`` at depth 0;
after an error anywhere in a command, ``sync_after_error`` skips to the next ``(``
at depth 0 (its count of parentheses is of every token consumed, floored at 0),
which is where the command's balanced form ends; atoms and surplus ``)`` at depth
0 are errors it skips. So the commands Z3 attempts are the balanced forms that
start at depth 0 of the floored walk, and a form left open at the end of input
runs nothing. Each form's effect: ``(push)``, ``(pop)`` and ``(check-sat)``
their own; an ``(assert X …)`` asserts what Z3's parser makes of ``(assert X)``
against the row's declarations (the binary's context holds exactly those: no
answer can declare, its commands are refused and ``:`` is not plain, so no
``:named``), or nothing on a parse error: ``parse_assert`` asserts its first
term *before* it checks for the closing ``)``, so more terms after X are an
error that leaves X asserted; ``(assert)`` is an error; any other head is
"unknown command", skipped to its matching ``)`` (the answer's heads are
screened for commands, and every ``(`` of the study's template is followed by
its own word). A form whose head is any other command, or a ``(pop)`` with no
scope open, is left to the binary. Each ``check-sat`` asks the conjunction of
the assertions of the open scopes, decided as above (fragment, time share);
fewer than two ``check-sat`` runs: "Could not parse results correctly."
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from itertools import accumulate, repeat
from operator import is_ as eq

import z3

from aeval.study_reasons import EQUIVALENT, NOT_IMPLIED, NOT_IMPLYING, UNPARSED
from aeval.verify.declarations import ParserDecls
from aeval.verify.equivalence import Directions, Verifier, _Truth
from aeval.verify.published import PublishedResult, conjunction, is_command
from aeval.verify.sexpr import PIECE, SExpr, read_forms

__all__ = ["PublishedInProcess"]

# Characters that end a line for str.splitlines (the study's C(s)) other than
# "\n" (already removed from answers), and the lexical forms left to the binary.
_LINE_BREAKS = frozenset("\r\x0b\x0c\x1c\x1d\x1e")
_UNPLAIN_CHAR = re.compile("[" + re.escape("".join(sorted(_LINE_BREAKS | set(';"|:')))) + "]")
_DEPTH_STEP = {"(": 1, ")": -1}
_NOT_AND = ["(", "not", "(", "and"]
_CLOSE_THREE = [")", ")", ")"]
# Where a token is what lies between blanks and parentheses (see _tokens): symbol
# characters, digits, blanks and parentheses; and a numeral that starts a token
# followed by anything but a blank or a parenthesis (not one token to the reader).
_SPLIT_BYTES = (
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789~!@$%^&*_-+=<>.?/ \t\n()"
)
_GLUED_NUMERAL = re.compile(r"[ \t\n()](?>[0-9]+(?:\.[0-9]+)?)[^ \t\n()]")
_ROWS_CACHED = 1024
# The share of the binary's time limit the two questions may take here: far from
# it, a different search order in the binary cannot run out of time.
_TIME_SHARE = 0.1
# Per row, what the script walk remembers (forms parsed, questions decided): the first
# few met, never evicted (the truth's own forms and questions come first in every
# script, and recur in every answer to the row); a form longer than _WALK_CACHED_CHARS
# only for the script at hand (answers' own forms rarely recur across answers).
_WALK_CACHED = 6
_WALK_CACHED_CHARS = 16_384
_SCOPE_COMMANDS = {"push", "pop", "check-sat"}
# Per row, the models the walk keeps (with 4, the in-process reading of the 15 released
# files asked the solver 905 times instead of 1,526: bench/README.md, issue 48).
_MODELS_KEPT = 4
_PUSH = ["(", "push", ")"]
_POP = ["(", "pop", ")"]
_CHECK_SAT = ["(", "check-sat", ")"]


@dataclass(slots=True)
class _Row:
    parser: ParserDecls
    truth: z3.BoolRef
    assert_text: str | None  # the truth's one assert, re-emitted (None: several)
    verbatim: str | None  # the truth's one line, when it is a plain answer itself
    truth_sat: z3.CheckSatResult | None = None
    negation_sat: z3.CheckSatResult | None = None
    # The script walk's: what an assert form parses to (None: an error), and the
    # questions decided, by the AST id of their conjunction (equal terms share one).
    parsed: dict[str, list[z3.BoolRef] | None] = field(default_factory=dict)
    # (The formula is kept with its result: an id is reused once its AST is freed.)
    decided: dict[int, tuple[z3.BoolRef, z3.CheckSatResult | None]] = field(default_factory=dict)
    # The script's two blocks that come from the row alone, for the walk (None: not
    # yet built; see PublishedInProcess._blocks).
    truth_block: _Block | None = None
    not_truth_block: _Block | None = None
    # Models of the walk's sat questions to this row, the latest first (_by_model).
    models: list[z3.ModelRef] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Block:
    """A piece of the script that comes from the row alone: its tokens, and what it
    asserts when the walk meets it at depth 0 (where it is whole balanced forms)."""

    tokens: list[str]
    terms: list[z3.BoolRef]


def _plain_text(text: str) -> bool:
    return text.isascii() and _UNPLAIN_CHAR.search(text) is None


def _tokens(text: str) -> list[str] | None:
    """The tokens of plain ``text``, or None when the reader's tokens do not tile it.

    Plain text has no comment, so the pieces left out are the blanks; every
    other piece starts with a character that is not blank (all at C speed:
    these run over every truth and answer).

    Most text is parentheses, blanks, symbols and plain numerals: then the tokens
    are what lies between blanks and parentheses, split by ``str`` methods (a third
    of the reader's time on the released answers). Text with any other character
    (``#``), or with a numeral glued to symbol characters (``12abc``, ``1.``, where
    the reader's tokens differ or do not tile), goes through the reader's own
    pattern; ``tests/test_verify_published_inprocess.py`` holds both equal.
    """
    if (
        not text.encode("utf-8", "surrogatepass").translate(None, _SPLIT_BYTES)
        and not text[:1].isdigit()
        and _GLUED_NUMERAL.search(text) is None
    ):
        return text.replace("(", " ( ").replace(")", " ) ").split()
    pieces = PIECE.findall(text)
    if sum(map(len, pieces)) != len(text):
        return None
    return list(filter(str.strip, pieces))


def _asserts(tokens: list[str], max_depth: int) -> list[str] | None:
    """One-term asserts (re-emitted), then only surplus ``)``; None for anything else.

    Read from the depth after each token, at C speed (these run over every
    truth and answer): a form ends where the depth is back at 0, and the first
    ``)`` that takes it below 0 starts the surplus. A form ``( assert X … )``
    is depth 1 at its ``(``, at ``assert``, and once per term: at an atom, or
    at the ``)`` closing a parenthesised term; so it has one term when the
    only depth 1 after ``assert`` is the token before its closing ``)``.
    """
    depths = list(accumulate(map(_DEPTH_STEP.get, tokens, repeat(0))))
    try:
        end = depths.index(-1)
    except ValueError:
        end = len(depths)
    else:
        if tokens[end:].count(")") != len(tokens) - end:
            return None  # something other than ")" after the surplus began
        del depths[end:]
    if not depths or depths[-1] != 0 or (end > max_depth and max(depths) > max_depth):
        return None
    forms = []
    start = 0
    while start < end:
        close = depths.index(0, start)
        if (
            close < start + 3
            or tokens[close] != ")"  # an atom between forms
            or tokens[start + 1] != "assert"
            or depths.index(1, start + 2) != close - 1
        ):
            return None
        forms.append(" ".join(tokens[start : close + 1]))
        start = close + 1
    return forms


# Z3's parser takes ``(div x)`` and ``(/ x)`` (left-associative operators) as
# one-argument applications, and its linear-arithmetic probe then reads their
# second argument, which is not there: the worker dies of SIGSEGV (Z3 5.4's
# src/tactic/arith/probe_arith.cpp, is_non_nira_functor, case OP_IDIV/OP_DIV;
# gpt-4.1-mini's trial-3 answer to WARP item 69 has "(div (div in10 2))").
# ``mod``, ``rem`` and ``abs`` are refused by the parser at any other arity, and
# ``(div x 2 y)`` is read as ``(div (div x 2) y)``.
_DIVISIONS = frozenset({"div", "/"})


def _one_argument_division(tokens: list[str]) -> bool:
    """Whether a ``div`` or ``/`` in ``tokens`` (a plain text's) has fewer than two arguments."""
    if _DIVISIONS.isdisjoint(tokens):
        return False
    # Per open "(": the arguments so far of a division opened there; None: not a division.
    arguments: list[int | None] = []
    previous = ""
    for token in tokens:
        if token == ")":
            if arguments and (count := arguments.pop()) is not None and count < 2:
                return True
        else:
            if previous == "(" and token in _DIVISIONS:
                arguments[-1] = 0  # the head: arguments follow
            elif arguments and (count := arguments[-1]) is not None:
                arguments[-1] = count + 1  # an atom or the "(" of a term: one more
            if token == "(":
                arguments.append(None)
        previous = token
    return False


def _long_numeral(tokens: list[str], max_digits: int) -> bool:
    if max(map(len, tokens), default=0) <= max_digits:
        return False
    return any(t[0].isdigit() and len(t) > max_digits for t in tokens)


class PublishedInProcess:
    """The published reading of plain answers, in the calling process (a verifier worker).

    Shares ``verifier``'s Z3 context, parsed ground truths and solver settings.
    """

    def __init__(self, verifier: Verifier, binary_timeout_s: float) -> None:
        self.verifier = verifier
        self._budget_s = binary_timeout_s * _TIME_SHARE
        self._rows: dict[tuple[str, str], _Row | None] = {}
        self._constants: dict[str, bool] = {}
        # Only sat or unsat is taken from it (what any complete procedure answers), so
        # the cheapest that decides: simplifying and eliminating equalities before
        # "smt" took ~30 % less CPU on the walk's questions of the released answers
        # than "smt" alone (bench/README.md, issue 48).
        self._tactic = z3.Then("simplify", "propagate-values", "solve-eqs", "smt", ctx=verifier.ctx)
        # Linear arithmetic over Int and Real (multiplication, div and mod by
        # numerals included), no quantifiers: ("is-qflira" turns down (* 2 x)).
        self._fragment = z3.And(
            z3.Probe("is-lira", ctx=verifier.ctx),
            z3.Not(z3.Probe("has-quantifiers", ctx=verifier.ctx)),
        )

    def reading(
        self,
        answer: str,
        truth: str,
        constants: str,
        directions: Directions | None = None,
    ) -> PublishedResult | None:
        """The reading of ``answer`` (the study's extraction, refused commands already
        screened), or None when the binary must decide.

        :param directions: what the verdict's check of this response decided
            (:attr:`aeval.verify.equivalence.Verifier.last_directions`), reused
            where it asked the same questions (see :meth:`_reused`).
        """
        start = time.perf_counter()
        if directions is not None:
            self._learn(truth, constants, directions)
        if not answer.startswith(("(assert ", "(assert\t")):
            return self.script_reading(answer, truth, constants, directions)
        row = self._row(truth, constants)
        if row is None:
            return None
        if answer == row.verbatim:
            # The truth's own line, whose reading below is known: T ∧ ¬T twice.
            return self._result(z3.unsat, z3.unsat, start, in_process=True)
        forms = self._forms(answer)
        if forms is None:
            return self.script_reading(answer, truth, constants, directions)
        if len(forms) == 1 and forms[0] == row.assert_text:
            # The truth itself: both checks ask T ∧ ¬T.
            return self._result(z3.unsat, z3.unsat, start, in_process=True)
        if directions is not None:
            reused = self._reused(forms, row, truth, constants, directions, start)
            if reused is not None:
                return reused
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

    def _reused(
        self,
        forms: list[str],
        row: _Row,
        truth: str,
        constants: str,
        directions: Directions,
        start: float,
    ) -> PublishedResult | None:
        """The reading from the verdict's own solver results, where it asked the same two
        questions; None otherwise.

        The verdict parsed ``directions.text`` against this row's declarations (the
        same :class:`ParserDecls` in the same context): when that text is exactly the
        answer's asserts X1 … Xn one per line, each ``(assert Xi)`` parses alone to
        the i-th term it parsed (an assert reads no other command's symbols), every
        Xi is ok, and the verdict's answer is X1 (n = 1) or And(X1 … Xn). So check 2,
        (⋀ Xi) ∧ ¬T, is the verdict's answer ∧ ¬truth; check 1 is its truth ∧ ¬answer
        when n = 1, else T alone (asked here, once per row). The same conditions as
        :meth:`reading`'s own questions then hold: both decided, the formulas in the
        fragment (T is, so T ∧ ¬A and A ∧ ¬T are when A is: the probes look at each
        subterm, and ``and``/``not`` add no arithmetic), within the time share.
        """
        if (
            directions.too_weak is None
            or directions.truth != truth
            or directions.constants != constants
            or directions.text != "\n".join(forms)
        ):
            return None
        first = directions.too_strong if len(forms) == 1 else self._truth_sat(row)
        if first is None or directions.elapsed_s + time.perf_counter() - start > self._budget_s:
            return None
        if not directions.answer.eq(row.truth) and not self._in_fragment(directions.answer):
            return None
        return self._result(first, directions.too_weak, start, in_process=True)

    def script_reading(
        self, answer: str, truth: str, constants: str, directions: Directions | None = None
    ) -> PublishedResult | None:
        """The reading of a plain answer of any shape, from a walk over the whole script
        as Z3's command loop reads it (see the module docstring); None when the
        binary must decide.

        :param directions: the verdict's check of this response: what each of its
            sanitised lines parsed to is taken for a form of the same text.
        """
        start = time.perf_counter()
        row = self._row(truth, constants)
        if (
            row is None
            or (tokens := self._screened(answer)) is None
            or max(accumulate(map(_DEPTH_STEP.get, tokens, repeat(0))), default=0)
            > self.verifier.limits.max_depth
        ):
            return None
        # The declarations are plain balanced forms: the walk starts after them at depth 0.
        # The script is read in its pieces (published_script's, each on lines of its
        # own, so its tokens are the pieces' tokens one after the other); the truth's
        # two blocks are the row's, tokenised and parsed once (see _blocks).
        blocks = self._blocks(row, truth)
        conjoined = _tokens(f"(assert (not\n{conjunction(answer)}\n))")
        if blocks is None or conjoined is None:
            return None
        truth_block, not_truth_block = blocks
        pieces: list[list[str] | _Block] = [
            _PUSH, truth_block, _POP, _PUSH, tokens, _POP,
            _PUSH, truth_block, conjoined, _CHECK_SAT, _POP,
            _PUSH, tokens, not_truth_block, _CHECK_SAT, _POP,
        ]  # fmt: skip
        scopes: list[list[z3.BoolRef]] = [[]]
        results: list[z3.CheckSatResult] = []
        # This script's forms parsed (block 2 and block 4 hold the answer's alike), and
        # the verdict's lines: the same text against the same declarations in the same
        # context parses to the same term (an assert reads no other command's symbols).
        parsed: dict[str, list[z3.BoolRef] | None] = {}
        if (
            directions is not None
            and len(directions.terms)
            and directions.truth == truth
            and directions.constants == constants
        ):
            lines = directions.text.split("\n")
            if len(lines) == len(directions.terms):
                parsed = {line: [term] for line, term in zip(lines, directions.terms, strict=True)}
        # The tokens of the pieces read token by token; a form open at a piece's end
        # goes on in the next one's.
        walk: list[str] = []
        depth = begin = 0
        for piece in pieces:
            if isinstance(piece, _Block):
                if depth == 0:
                    # Whole one-term asserts, each parsed once per row.
                    scopes[-1].extend(piece.terms)
                    continue
                piece = piece.tokens
            base = len(walk)
            walk.extend(piece)
            for i in range(base, len(walk)):
                token = walk[i]
                if token == "(":
                    if depth == 0:
                        begin = i
                    depth += 1
                elif token == ")" and depth > 0:  # at depth 0: an error, skipped (the floor)
                    depth -= 1
                    if depth == 0:
                        form = walk[begin : i + 1]
                        if not self._run(form, row, scopes, results, parsed):
                            return None
                        if len(results) == 2:
                            break
                        if form[1] != "(" and time.perf_counter() - start > self._budget_s:
                            return None
            if len(results) == 2:
                break
        if len(results) < 2:
            elapsed = (time.perf_counter() - start) * 1000.0
            return PublishedResult(False, UNPARSED, elapsed, True)
        if time.perf_counter() - start > self._budget_s:
            return None
        return self._result(results[0], results[1], start, in_process=True)

    def _blocks(self, row: _Row, truth: str) -> tuple[_Block, _Block] | None:
        """The walk's two row blocks: the truth, and ``(assert (not C(truth)))``.

        At depth 0 each is whole one-term asserts (the row is plain: every truth line
        is one), so the walk asserts what :meth:`_run` would make of each form, in order.
        """
        if row.truth_block is None or row.not_truth_block is None:
            made = []
            for text in (truth, f"(assert (not\n{conjunction(truth)}\n))"):
                tokens = _tokens(text)
                if tokens is None:
                    return None
                scopes: list[list[z3.BoolRef]] = [[]]
                depths = list(accumulate(map(_DEPTH_STEP.get, tokens, repeat(0))))
                begin = 0
                for end, depth in enumerate(depths):
                    if depth == 0 and tokens[end] == ")":
                        if not self._run(tokens[begin : end + 1], row, scopes, [], {}):
                            return None
                        begin = end + 1
                made.append(_Block(tokens, scopes[0]))
            row.truth_block, row.not_truth_block = made
        return row.truth_block, row.not_truth_block

    def _run(
        self,
        form: list[str],
        row: _Row,
        scopes: list[list[z3.BoolRef]],
        results: list[z3.CheckSatResult],
        parsed: dict[str, list[z3.BoolRef] | None],
    ) -> bool:
        """Run one command form of the walk; False: only the binary can say."""
        head = form[1]
        if head in _SCOPE_COMMANDS:
            if len(form) != 3:
                return False
            if head == "push":
                scopes.append([])
            elif head == "pop":
                if len(scopes) == 1:
                    return False
                scopes.pop()
            else:
                result = self._walk_decide(row, [t for scope in scopes for t in scope])
                if result is None:
                    return False
                results.append(result)
            return True
        if head != "assert":
            # "unknown command" unless it is a command this walk does not run.
            return head == "(" or not is_command(head)
        if len(form) < 4:
            return True  # "(assert)": an error, nothing asserted
        # Z3's parse_assert asserts its first term before it looks for the ")": the
        # first term (it ends where the depth is back at 1) is asserted however many
        # follow it.
        depths = list(accumulate(map(_DEPTH_STEP.get, form, repeat(0))))
        end = depths.index(1, 2)
        text = " ".join(form) if end == len(form) - 2 else " ".join([*form[: end + 1], ")"])
        terms: list[z3.BoolRef] | None
        if text in row.parsed:
            terms = row.parsed[text]
        elif text in parsed:
            terms = parsed[text]
        elif (known := self._negated_conjunction(form, end, row, parsed)) is not None:
            terms = parsed[text] = known[0]
        else:
            try:
                terms = list(row.parser.parse(text))
            except z3.Z3Exception:
                terms = None
            except (MemoryError, RecursionError):
                return False
            parsed[text] = terms
            if len(row.parsed) < _WALK_CACHED and len(text) <= _WALK_CACHED_CHARS:
                row.parsed[text] = terms
        if terms is not None:
            scopes[-1].extend(terms)
        return True

    def _negated_conjunction(
        self,
        form: list[str],
        end: int,
        row: _Row,
        parsed: dict[str, list[z3.BoolRef] | None],
    ) -> tuple[list[z3.BoolRef] | None] | None:
        """``( assert ( not ( and X1 … Xk ) ) )`` (the study's ``(assert (not C(a)))``)
        from what ``( assert Xi )`` parsed to, when every one is known; None: parse it.

        In plain text (no ``:named``, no declaration) Z3 reads each Xi alone: the form
        fails exactly when some ``( assert Xi )`` fails (an error or a non-Bool term, as
        ``and`` takes Bool terms only), and otherwise asserts ¬(X1 ∧ … ∧ Xk). Only
        sat or unsat is taken of what the walk asserts, so ``and`` of one term, which
        Z3 may read as the term, is the same question.
        """
        if end != len(form) - 2 or form[2:6] != _NOT_AND or form[-3:] != _CLOSE_THREE:
            return None
        inner = form[6:-3]  # balanced below, so the three ")" close and, not, assert
        if not inner:
            return None
        terms: list[z3.BoolRef] = []
        depth = begin = 0
        for i, token in enumerate(inner):
            depth += _DEPTH_STEP.get(token, 0)
            if depth < 0:
                return None
            if depth == 0:
                text = f"( assert {' '.join(inner[begin : i + 1])} )"
                found = row.parsed[text] if text in row.parsed else parsed.get(text, [])
                if found is None:
                    return (None,)  # that term is an error: so is the form
                if len(found) != 1:
                    return None  # not known (or not one term): parse the form
                terms.append(found[0])
                begin = i + 1
        if depth != 0:
            return None
        ctx = self.verifier.ctx
        return ([z3.Not(z3.And(*terms, ctx), ctx)],)

    def _walk_decide(self, row: _Row, terms: list[z3.BoolRef]) -> z3.CheckSatResult | None:
        truth = row.truth_block.terms if row.truth_block is not None else None
        if truth is not None and len(terms) == len(truth) and all(map(eq, terms, truth)):
            # The truth's block alone: the conjunction of the truth's asserts, T.
            return self._truth_sat(row)
        ctx = self.verifier.ctx
        formula = z3.And(*terms, ctx) if terms else z3.BoolVal(True, ctx)
        key = formula.get_id()
        if key in row.decided:
            return row.decided[key][1]
        result = self._by_model(row, formula) or self._decide(formula, row.models)
        if len(row.decided) < _WALK_CACHED:
            row.decided[key] = (formula, result)
        return result

    def _forms(self, answer: str) -> list[str] | None:
        """The answer's one-term asserts, if it is a plain answer (see the module doc)."""
        tokens = self._screened(answer)
        return None if tokens is None else _asserts(tokens, self.verifier.limits.max_depth)

    def _screened(self, answer: str) -> list[str] | None:
        """The answer's tokens, if it is plain text within the reading's limits (size,
        numerals) and holds no one-argument division; None: the binary decides."""
        limits = self.verifier.limits
        if not _plain_text(answer) or len(answer) > limits.max_answer_bytes:
            return None
        tokens = _tokens(answer)
        if (
            tokens is None
            or _long_numeral(tokens, limits.max_numeral_digits)
            or _one_argument_division(tokens)
        ):
            return None
        return tokens

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
        if not _plain_text(truth) or not self._plain_constants(constants):
            return None
        limits = self.verifier.limits
        lines = [line for line in truth.split("\n") if line.strip()]
        tokens: list[str] | None = None
        one: list[str] | None = None
        for line in lines:
            if not line.startswith(("(assert ", "(assert\t")):
                return None
            tokens = _tokens(line)
            if tokens is None or _one_argument_division(tokens):
                return None
            one = _asserts(tokens, limits.max_depth)
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
        # The truth's one line as an answer, when reading() would find it plain and
        # take the T ∧ ¬T path: the same checks, on the same string, done here once.
        line = lines[0]
        verbatim = (
            line
            if single is not None
            and one == [single]
            and tokens is not None
            and line == line.strip()
            and len(line) <= limits.max_answer_bytes
            and not _long_numeral(tokens, limits.max_numeral_digits)
            else None
        )
        return _Row(parsed.parser, parsed.formula, single, verbatim)

    def _plain_constants(self, constants: str) -> bool:
        """Plain declarations: declare-const/declare-fun forms, distinct names, none ``assert``."""
        known = self._constants.get(constants)
        if known is None:
            known = _plain_text(constants) and _distinct_declarations(constants)
            if len(self._constants) >= _ROWS_CACHED:
                self._constants.clear()
            self._constants[constants] = known
        return known

    def _learn(self, truth: str, constants: str, directions: Directions) -> None:
        """What the verdict's results say of T and ¬T alone: truth ∧ ¬answer sat makes
        T sat, answer ∧ ¬truth sat makes ¬T sat (a model of either is one of these).
        Taken when the check, both questions included, kept within the time share."""
        if (
            directions.truth != truth
            or directions.constants != constants
            or directions.elapsed_s > self._budget_s
            or z3.sat not in (directions.too_strong, directions.too_weak)
        ):
            return
        row = self._row(truth, constants)
        if row is None:
            return
        if row.truth_sat is None and directions.too_strong == z3.sat:
            row.truth_sat = z3.sat
        if row.negation_sat is None and directions.too_weak == z3.sat:
            row.negation_sat = z3.sat

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

    def _by_model(self, row: _Row, formula: z3.BoolRef) -> z3.CheckSatResult | None:
        """sat when a model kept from this row's earlier questions satisfies ``formula``
        (a model of it is then in hand: Z3 cannot answer unsat), in the fragment (so it
        cannot answer unknown either); None: ask the solver.

        The walk's questions to one row differ from answer to answer only in the
        answer's terms (a chain closed early at another place): a model of one
        answer's ``X ∧ ¬T`` satisfies most others'. The time share is the one of the
        question the model was found for, asked of the solver within it.
        """
        for model in row.models:
            if z3.is_true(model.eval(formula, model_completion=True)):
                return z3.sat if self._in_fragment(formula) else None
        return None

    def _decide(
        self, formula: z3.BoolRef, models: list[z3.ModelRef] | None = None
    ) -> z3.CheckSatResult | None:
        """Z3's sat or unsat for ``formula`` within the time share (None: neither, or not
        in the fragment); a model of a sat one goes first into ``models``."""
        if not self._in_fragment(formula):
            return None
        solver = self._tactic.solver()
        solver.set("timeout", max(1, int(self._budget_s * 1000)))
        solver.set("rlimit", self.verifier.limits.rlimit)
        solver.add(formula)
        result = solver.check()
        if result == z3.sat and models is not None:
            models.insert(0, solver.model())
            del models[_MODELS_KEPT:]
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


def _distinct_declarations(constants: str) -> bool:
    try:
        forms = read_forms(constants)
    except ValueError:
        return False
    names = [_declared(form) for form in forms]
    return None not in names and "assert" not in names and len(set(names)) == len(names)


def _declared(form: SExpr) -> str | None:
    if (
        isinstance(form, tuple)
        and len(form) in (3, 4)
        and form[0] in ("declare-const", "declare-fun")
        and isinstance(form[1], str)
    ):
        return form[1]
    return None
