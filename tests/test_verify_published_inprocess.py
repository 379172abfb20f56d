"""The published reading in-process agrees with the z3 binary, item for item.

Every item of a constructed corpus (every repair kind, every verdict category,
hostile input) is read both ways, the binary alone and the worker's default
(in-process where provable, the binary otherwise); the two must give the same
outcome and the same reason, and the in-process path must have read the plain
answers itself (so the agreement is not the binary agreeing with itself).
"""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anyio
import polars as pl
import pytest
import z3
from answer_corpus import answers_for, hostile

from aeval.study_reasons import EQUIVALENT, NOT_IMPLIED, NOT_IMPLYING
from aeval.verdicts import CheckResult
from aeval.verify import VerifierPool
from aeval.verify.equivalence import Verifier
from aeval.verify.limits import DEFAULT_LIMITS
from aeval.verify.published import PublishedResult, check_published
from aeval.verify.published_inprocess import PublishedInProcess, _asserts, _tokens
from aeval.verify.sexpr import PIECE

INTS = "(declare-const x Int)\n(declare-const y Int)"
ROWS = [
    ("(assert (and (> x 0) (< x 5) (distinct x y)))", INTS),
    ("(assert (and (> x 0) (< x 0)))", INTS),  # unsatisfiable truth: check 1 is unsat alone
    ("(assert (or (> x 0) (<= x 0)))", INTS),  # valid truth: its negation is unsat
    ("(assert (and (> (* 2 r) 1) (< r 3)))", "(declare-const r Real)"),
]
# Kinds whose outcome the shape of the script decides: read without the binary on a plain row.
PLAIN_KINDS = {
    "verbatim",
    "verbatim_think",
    "spaced",
    "tab",
    "double_not",
    "several_asserts",
    "several_one_line",
    "surplus_end",
    "surplus_end_spaced",
    "dropped_conjunct",
    "too_strong",
    "false",
    "true",
    "unknown_symbol",
    "not_boolean",
    "sort_error",
    "first_of_two",
    "let",
}
Item = tuple[str, str, str, str]  # kind, response, truth, constants


def both_ways(items: list[Item]) -> list[tuple[PublishedResult, PublishedResult]]:
    reader = PublishedInProcess(Verifier(DEFAULT_LIMITS), DEFAULT_LIMITS.timeout_s)
    default = [check_published(r, t, c, in_process=reader.reading) for _, r, t, c in items]
    with ThreadPoolExecutor(2) as pool:
        binary = list(pool.map(lambda item: check_published(*item[1:]), items))
    return list(zip(default, binary, strict=True))


def assert_agree(items: list[Item]) -> set[str]:
    """Both ways agree on every item; returns the kinds read in-process somewhere."""
    mismatches = []
    read_here = set()
    for (kind, response, truth, _), (default, binary) in zip(items, both_ways(items), strict=True):
        assert not binary.in_process
        if default.in_process:
            read_here.add(kind)
        if (default.correct, default.reason) != (binary.correct, binary.reason):
            mismatches.append((kind, truth[:60], response[:80], default, binary))
    assert mismatches == []
    return read_here


def test_in_process_and_binary_agree_on_constructed_rows() -> None:
    truth, constants = ROWS[0]
    items = [(k, r, truth, constants) for k, r in answers_for(truth, constants)]
    # The unsatisfiable and the valid truth: a kind of each outcome read in-process
    # (every kind of them in the slow test).
    few = {"verbatim", "several_asserts", "unknown_symbol", "too_strong", "surplus_end", "true"}
    items += [(k, r, t, c) for t, c in ROWS[1:3] for k, r in answers_for(t, c) if k in few]
    items += [(k, r, truth, constants) for k, r in hostile()]
    read_here = assert_agree(items)
    assert read_here >= PLAIN_KINDS
    # What only the binary can settle went to the binary; an unclosed answer runs no
    # check-sat at all (read without Z3: tests/test_verify_published_session.py).
    assert not read_here & {"comment", "fenced", "nonlinear", "deep"}
    assert "unclosed" in read_here
    # Plain answers of other shapes: the walk over the script as Z3 reads it.
    walked = {"bare_term", "split_assert", "surplus_middle", "atom_before", "atom_after"}
    assert walked <= read_here


def test_a_row_outside_the_plain_shape_goes_to_the_binary() -> None:
    multi = "(assert (> x 0))\n  (assert (< x 5))"  # the indented line is not in C(truth)
    reader = PublishedInProcess(Verifier(DEFAULT_LIMITS), DEFAULT_LIMITS.timeout_s)
    content = "<answer>(assert (> x 0))</answer>"
    assert reader.reading("(assert (> x 0))", multi, INTS) is None
    result = check_published(content, multi, INTS, in_process=reader.reading)
    assert not result.in_process
    # C(truth) is "(and (> x 0))": the answer implies it, and with the indented
    # assert in block 3 the truth implies the answer: the study's quirk, correct.
    assert (result.correct, result.reason) == (True, EQUIVALENT)


@pytest.mark.anyio
async def test_the_pool_reads_in_process_unless_the_binary_is_forced() -> None:
    truth, constants = ROWS[0]
    content = f"<answer>{truth}</answer>"
    async with VerifierPool(workers=1, published=True) as pool:
        fast = await pool.check_published(content, truth, constants)
    async with VerifierPool(workers=1, published=True, published_binary=True) as audit:
        slow = await audit.check_published(content, truth, constants)
    assert fast.in_process and not slow.in_process
    assert (fast.correct, fast.reason) == (slow.correct, slow.reason) == (True, EQUIVALENT)


@pytest.mark.slow
def test_in_process_and_binary_agree_on_the_benchmark(benchmark_path: Path) -> None:
    rows = pl.read_parquet(benchmark_path).select("answer", "constants").rows()
    chosen = rows[:: len(rows) // 60]
    items = [(k, r, t, c) for t, c in chosen for k, r in answers_for(t, c)]
    items += [(k, r, t, c) for t, c in ROWS for k, r in answers_for(t, c)]
    items += [(k, r, ROWS[0][0], INTS) for k, r in hostile()]
    read_here = assert_agree(items)
    assert read_here >= PLAIN_KINDS


@pytest.mark.anyio
async def test_both_readings_in_one_request_are_the_two_calls_results() -> None:
    items = [(r, t, c) for t, c in ROWS[:1] for _, r in answers_for(t, c)]
    items += [(r, ROWS[0][0], INTS) for _, r in hostile()]

    def key(check: CheckResult, published: PublishedResult) -> tuple[object, ...]:
        # Which counterexample Z3 finds depends on the worker's history: that
        # there is one is the verdict's.
        witness = check.counterexample is not None
        return (check.status, check.reason, check.repaired, check.direction, witness,
                published.correct, published.reason)  # fmt: skip

    both: list[tuple[CheckResult, PublishedResult]] = [None] * len(items)  # type: ignore[list-item]
    apart: list[tuple[CheckResult, PublishedResult]] = [None] * len(items)  # type: ignore[list-item]

    async def one(pool: VerifierPool, other: VerifierPool, i: int) -> None:
        both[i] = await pool.check_both(*items[i])
        # Another pool: this one remembers the published readings it gave.
        apart[i] = (await other.check(*items[i]), await other.check_published(*items[i]))

    async with (
        VerifierPool(workers=1, published=True) as pool,
        VerifierPool(workers=1, published=True) as other,
        anyio.create_task_group() as tg,
    ):
        for i in range(len(items)):
            tg.start_soon(one, pool, other, i)
    read_here = sum(p.in_process for _, p in both)
    assert [key(*b) for b in both] == [key(*a) for a in apart]
    assert read_here >= len(PLAIN_KINDS)  # most plain answers came back with their check


def _asserts_by_hand(tokens: list[str], max_depth: int) -> list[str] | None:
    """The shape check token by token, as the module docstring states it."""
    forms: list[str] = []
    depth = start = terms = 0
    surplus = False
    for i, tok in enumerate(tokens):
        if surplus:
            if tok != ")":
                return None
        elif tok == "(":
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
        elif depth == 1 and i == start + 1:
            if tok != "assert":
                return None
        elif depth == 1:
            terms += 1
    return forms if depth == 0 and forms else None


def test_the_shape_check_reads_tokens_as_a_hand_written_reader_does() -> None:
    rng = random.Random(23)
    alphabet = ["(", ")", "assert", "x", "1", "and"]
    terms = [["x"], ["(", "and", "x", "(", "y", ")", ")"], [], ["x", "y"], ["(", "x", ")"]]
    for _ in range(20_000):
        if rng.random() < 0.5:
            tokens = [rng.choice(alphabet) for _ in range(rng.randint(0, 12))]
        else:
            tokens = []
            for _ in range(rng.randint(1, 3)):
                tokens += ["(", "assert", *rng.choice(terms), ")"]
            tokens += [")"] * rng.randint(0, 2)
            if rng.random() < 0.3:
                tokens.insert(rng.randrange(len(tokens) + 1), rng.choice(alphabet))
        depth = rng.choice([1, 2, 3, 4_000])
        assert _asserts(tokens, depth) == _asserts_by_hand(tokens, depth), (tokens, depth)


def _tokens_by_the_reader(text: str) -> list[str] | None:
    """The reader's own pattern, alone: its tokens if they tile the text, else None."""
    pieces = PIECE.findall(text)
    if sum(map(len, pieces)) != len(text):
        return None
    return [piece for piece in pieces if piece.strip()]


def test_the_split_tokens_are_the_readers_own() -> None:
    """``_tokens`` splits at blanks and parentheses where that gives the reader's tokens;
    on text mixing every kind of character either way, it gives what the reader gives."""
    rng = random.Random(48)
    alphabet = [*'()ab19.#x: \t\n-_`[\r\x1f\x0b;"|é', "12a", "1.5", "1.", "x1.5y"]
    alphabet += ["#b01", "#x1f", "in10", "0.0", "00", "(assert", " (> in0 5)", "\ud800"]
    for _ in range(100_000):
        text = "".join(rng.choices(alphabet, k=rng.randint(0, 14)))
        assert _tokens(text) == _tokens_by_the_reader(text), text
    # Both ways are taken.
    assert _tokens("(assert (> in0 5))") == ["(", "assert", "(", ">", "in0", "5", ")", ")"]
    assert _tokens("(> 12abc 1)") is None
    assert _tokens("(= x #b01)") == ["(", "=", "x", "#b01", ")"]


def _sat(formula: z3.BoolRef) -> z3.CheckSatResult:
    solver = z3.Solver(ctx=formula.ctx)
    solver.add(formula)
    return solver.check()


def test_the_verdicts_directions_are_what_a_solver_says_of_each() -> None:
    """What a check records of its two directions (reused by the published reading) is
    what an independent solver says of truth ∧ ¬answer and answer ∧ ¬truth, on the
    answer Z3 parsed from the recorded text."""
    verifier = Verifier(DEFAULT_LIMITS)
    recorded = 0
    for truth, constants in ROWS:
        for kind, response in [*answers_for(truth, constants), *hostile()]:
            for details in (True, False):
                check = verifier.check(response, truth, constants, details)
                directions = verifier.last_directions
                if directions is None:
                    continue
                recorded += 1
                assert (directions.truth, directions.constants) == (truth, constants)
                row = verifier._truth(truth, constants)
                assert not isinstance(row, str)
                answer = z3.And(*row.parser.parse(directions.text), verifier.ctx)
                t = row.formula
                assert _sat(z3.Xor(answer, directions.answer)) == z3.unsat, kind
                expected = (_sat(z3.And(t, z3.Not(answer))), _sat(z3.And(answer, z3.Not(t))))
                recorded_pair = (directions.too_strong, directions.too_weak)
                for got, want in zip(recorded_pair, expected, strict=True):
                    assert got is None or got == want, (kind, details)
                if check.status.value == "equivalent":
                    assert expected == (z3.unsat, z3.unsat)
    assert recorded > 2 * len(ROWS) * 10


def test_the_reading_from_the_verdicts_directions_is_its_own_and_the_binarys() -> None:
    """The default's reading after a check (the worker's "both" request) reuses the
    check's solver results; it equals the reading that asks Z3 itself, and the binary's."""
    items = [(k, r, t, c) for t, c in ROWS for k, r in answers_for(t, c)]
    items += [(k, r, ROWS[0][0], INTS) for k, r in hostile()]
    verifier = Verifier(DEFAULT_LIMITS)
    reader = PublishedInProcess(verifier, DEFAULT_LIMITS.timeout_s)
    own = PublishedInProcess(Verifier(DEFAULT_LIMITS), DEFAULT_LIMITS.timeout_s)
    reused_kinds = set()
    original = reader._reused

    def spy(*args: object) -> PublishedResult | None:
        result = original(*args)  # type: ignore[arg-type]
        if result is not None:
            reused_kinds.add(current)
        return result

    reader._reused = spy  # type: ignore[method-assign]
    mismatches = []
    for current, response, truth, constants in items:
        verifier.check(response, truth, constants)
        directions = verifier.last_directions
        with_verdict = check_published(
            response,
            truth,
            constants,
            in_process=lambda a, t, c, d=directions: reader.reading(a, t, c, d),
        )
        alone = check_published(response, truth, constants, in_process=own.reading)
        binary = check_published(response, truth, constants)
        if not (
            (with_verdict.correct, with_verdict.reason)
            == (alone.correct, alone.reason)
            == (binary.correct, binary.reason)
        ):
            mismatches.append((current, truth[:40], with_verdict, alone, binary))
    assert mismatches == []
    # Read from the verdict's results: one assert and several, each outcome.
    reused = {"double_not", "several_asserts", "too_strong", "dropped_conjunct", "false"}
    assert reused <= reused_kinds


def test_directions_of_another_answer_or_row_are_not_reused() -> None:
    truth, constants = ROWS[0]
    verifier = Verifier(DEFAULT_LIMITS)
    reader = PublishedInProcess(verifier, DEFAULT_LIMITS.timeout_s)
    verifier.check("<answer>(assert (> x 0))</answer>", truth, constants)
    wrong = verifier.last_directions
    assert wrong is not None and (wrong.too_strong, wrong.too_weak) == (z3.unsat, z3.sat)
    # Another answer, another row: what the check decided of (> x 0) (the truth
    # implies it) is not used; reused, it would read both as "not implying".
    for answer, row in [("(assert (< x 0))", ROWS[0]), ("(assert (> x 0))", ROWS[2])]:
        got = reader.reading(answer, row[0], row[1], wrong)
        want = check_published(f"<answer>{answer}</answer>", *row)
        assert got is not None and (got.correct, got.reason) == (want.correct, want.reason)


def test_the_walk_asserts_an_asserts_first_term_before_its_missing_close() -> None:
    """``(assert T X)``: Z3's parse_assert asserts T, then fails on X. Check 1 asks
    T ∧ ¬(T ∧ X), unsat when T implies X; check 2 asks T ∧ ¬T: the binary reads it
    correct. Had the walk asserted nothing (an error, it would seem), check 2 would
    ask ¬T alone: sat, "Generated does not imply original"."""
    truth, constants = ROWS[0]
    t = truth[len("(assert ") : -1]
    content = f"<answer>(assert {t} (> x -1))</answer>"
    reader = PublishedInProcess(Verifier(DEFAULT_LIMITS), DEFAULT_LIMITS.timeout_s)
    walked = reader.script_reading(f"(assert {t} (> x -1))", truth, constants)
    binary = check_published(content, truth, constants)
    assert walked is not None and walked.in_process
    assert (walked.correct, walked.reason) == (binary.correct, binary.reason) == (True, EQUIVALENT)


def test_the_walk_takes_sat_from_a_model_of_an_earlier_question_to_the_row() -> None:
    """Two answers closed early then more, to one row (T: 0 < x < 5, x ≠ y): the first's
    checks ask T ∧ ¬X1 (unsat) and X1 ∧ ¬T (sat) of the solver, X1 = (> x 0) ∧ (< x 9);
    the second's check 2, (> x 0) ∧ ¬T, is satisfied by every model of the first's: sat
    without the solver ("Generated does not imply original", the binary's reading); its
    check 1, T ∧ ¬(> x 0), is unsat, which no model can say: the solver."""
    truth, constants = ROWS[0]
    reader = PublishedInProcess(Verifier(DEFAULT_LIMITS), DEFAULT_LIMITS.timeout_s)
    solved: list[z3.BoolRef] = []
    decide = reader._decide

    def counted(formula: z3.BoolRef, models: list[z3.ModelRef] | None = None) -> object:
        solved.append(formula)
        return decide(formula, models)

    reader._decide = counted  # type: ignore[method-assign]
    answers = ["(assert (and (> x 0) (< x 9)))) (> y 0)", "(assert (> x 0))) (> y 0)"]
    calls = []
    for answer in answers:
        before = len(solved)
        walked = reader.script_reading(answer, truth, constants)
        binary = check_published(f"<answer>{answer}</answer>", truth, constants)
        assert walked is not None and walked.in_process
        assert (walked.correct, walked.reason) == (binary.correct, binary.reason)
        calls.append(len(solved) - before)
    assert binary.reason == NOT_IMPLYING
    assert calls == [2, 1]


def test_the_walk_takes_the_verdicts_terms_and_builds_a_negated_conjunction_of_known_ones() -> None:
    """A surplus ``)``: the walk's first form is the verdict's sanitised line (its term
    taken, not parsed again), and the study's ``(assert (not (and X)))`` is built from
    the term of ``(assert X)``; where ``(assert X)`` is an error (an undeclared name),
    so is that form. Each reading is the one without the verdict's terms and the
    binary's, and Z3's parser is not called for a form whose terms are known."""
    truth, constants = ROWS[0]
    verifier = Verifier(DEFAULT_LIMITS)
    reader = PublishedInProcess(verifier, DEFAULT_LIMITS.timeout_s)
    answers = [
        "(assert (and (> x 0) (< x 5) (distinct x y))))",  # equivalent, then a surplus ")"
        "(assert (and (> x 0) (< x 9))))",  # too weak
        "(assert (and (> x 0) (< x 5 z))))",  # z is not declared: an error, no verdict terms
    ]
    parses: list[str] = []
    row = reader._row(truth, constants)
    assert row is not None and reader._blocks(row, truth) is not None  # the row's, once
    parse = row.parser.parse

    def counted(text: str) -> z3.AstVector:
        parses.append(text)
        return parse(text)

    row.parser.parse = counted  # type: ignore[method-assign]
    reasons = []
    for answer in answers:
        content = f"<answer>{answer}</answer>"
        verifier.check(content, truth, constants)
        directions = verifier.last_directions
        parses.clear()
        walked = reader.script_reading(answer, truth, constants, directions)
        conjunctions = [text for text in parses if text.startswith("( assert ( not ( and")]
        assert conjunctions == [], answer
        if directions is not None:
            assert parses == [], answer  # the answer's own form: the verdict's line
        alone = PublishedInProcess(Verifier(DEFAULT_LIMITS), DEFAULT_LIMITS.timeout_s)
        other = alone.script_reading(answer, truth, constants)
        binary = check_published(content, truth, constants)
        assert walked is not None and other is not None and walked.in_process
        assert (walked.correct, walked.reason) == (other.correct, other.reason)
        assert (walked.correct, walked.reason) == (binary.correct, binary.reason)
        reasons.append(binary.reason)
    assert reasons == [EQUIVALENT, NOT_IMPLYING, NOT_IMPLIED]  # the last asserts nothing
