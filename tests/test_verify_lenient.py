"""Lenient repairs on the benchmark's own ground truths, through the real verifier.

Each ground truth is damaged the ways real answers are (surplus ``)``, ``)``
missing at the end, the answer left inside ``<think>``, a conjunction closed too
early): the repair must recover it as ``equivalent`` and name itself. The same
damage done to a wrong answer (the truth with one conjunct flipped) must get
exactly the verdict the undamaged wrong answer gets, which an independent Z3
solve confirms is not ``equivalent``: a repair never creates a false
``equivalent``. Strict accuracy never counts any of them (``repaired`` is set).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import polars as pl
import pytest
import z3
from answer_corpus import truth_conjuncts

from aeval.verdicts import CheckResult, Status
from aeval.verify import VerifierPool, VerifyLimits
from aeval.verify.equivalence import Verifier


@dataclass(frozen=True)
class Row:
    truth: str
    constants: str
    parts: tuple[str, ...]  # the truth's conjuncts as SMT-LIB text, in order

    def conjunction(self, parts: tuple[str, ...] | None = None) -> str:
        return "(assert (and " + " ".join(parts or self.parts) + "))"

    def mutant_parts(self) -> tuple[str, ...]:
        """The truth's conjuncts with the middle one flipped: a wrong answer."""
        j = len(self.parts) // 2
        return (*self.parts[:j], _flip(self.parts[j]), *self.parts[j + 1 :])

    def mutant(self) -> str:
        return self.conjunction(self.mutant_parts())


def _flip(part: str) -> str:
    return part[len("(not ") : -1].strip() if part.startswith("(not ") else f"(not {part})"


def _conjuncts(truth: str, constants: str, ctx: z3.Context) -> tuple[str, ...]:
    return tuple(" ".join(f.sexpr().split()) for f in truth_conjuncts(truth, constants, ctx))


def _rows(dataset: pl.DataFrame, step: int, shorter_than: int | None = None) -> list[Row]:
    """Every ``step``-th row (of those whose truth is shorter than ``shorter_than``)."""
    frame = dataset.select("answer", "constants")
    if shorter_than is not None:
        frame = frame.filter(pl.col("answer").str.len_chars() < shorter_than)
    ctx = z3.Context()
    rows = []
    for r in frame[::step].iter_rows(named=True):
        truth = r["answer"].strip()
        assert truth.startswith("(assert (") and truth.endswith(")"), truth[:80]
        rows.append(Row(truth, r["constants"], _conjuncts(truth, r["constants"], ctx)))
    assert all(len(row.parts) >= 2 for row in rows)
    return rows


def oracle_equivalent(a: str, b: str, constants: str) -> bool:
    """Independent of aeval's reader and solver set-up: plain Z3 on the script text."""
    ctx = z3.Context()
    fa, fb = (z3.And(*z3.parse_smt2_string(constants + "\n" + s, ctx=ctx)) for s in (a, b))
    solver = z3.Solver(ctx=ctx)
    solver.set("timeout", 20_000)
    solver.add(z3.Xor(fa, fb))
    verdict = solver.check()
    assert verdict != z3.unknown, solver.reason_unknown()
    return verdict == z3.unsat


def tagged(answer: str) -> str:
    return f"<think>working…</think>\n<answer>\n{answer}\n</answer>"


@dataclass(frozen=True)
class Case:
    what: str
    response: str
    repaired: str  # the repairs the verdict must name


def damaged(answer: str, ks: list[int]) -> Iterator[Case]:
    """Every kind of damage done to one well-formed single-assert answer."""
    body = answer[len("(assert ") : -1]
    for k in ks:
        yield Case(f"{k} surplus ')'", tagged(answer + ")" * k), "dropped_extra_parens")
        # k "(and" opened too many: k ")" missing at the very end.
        opened = "(assert " + "(and " * k + body + ")"
        yield Case(f"{k} ')' missing", tagged(opened), "closed_parens")
        yield Case(
            f"{k} surplus ')' in think",
            f"<think>ok <answer>{answer}{')' * k}</answer></think> Done.",
            "answer_in_think+dropped_extra_parens",
        )
    trailing = len(answer) - len(answer.rstrip(")"))
    for k in range(1, trailing + 1):
        yield Case(f"last {k} ')' cut", tagged(answer[:-k]), "closed_parens")
    yield Case("in think", f"<think>so <answer>{answer}</answer></think>", "answer_in_think")
    yield Case(
        "in think, revised",
        f"<think><answer>(assert false)</answer>, no: <answer>{answer}</answer></think>",
        "answer_in_think+last_of_several_answers",
    )
    yield Case("before a lone </think>", f"<answer>{answer}</answer></think>", "answer_in_think")


def miscounted(parts: tuple[str, ...], ks: list[int]) -> Iterator[Case]:
    """The conjunction closed k parentheses too early, then finished as meant (k surplus)."""
    j = max(1, len(parts) // 2)
    head, tail = " ".join(parts[:j]), " ".join(parts[j:])
    for k in ks:
        text = f"(assert (and {head}{')' * k} {tail}))"
        # k == 1: (assert (and …) rest…)) — one assert with several terms;
        # k >= 2: (assert (and …)) rest…))) — bare terms after the assert.
        form = "split_assert" if k == 1 else "wrapped_bare_term"
        yield Case(f"and closed {k} early", tagged(text), f"dropped_extra_parens+{form}")


def check_all(verifier: Verifier, rows: list[Row], ks: list[int]) -> int:
    checked = 0
    for row in rows:
        mutant = row.mutant()
        wrong = verifier.check(tagged(mutant), row.truth, row.constants)
        # The undamaged wrong answer: not equivalent, and Z3 on its own agrees.
        assert wrong.status is Status.NOT_EQUIVALENT, (row.truth[:80], wrong)
        assert not oracle_equivalent(row.truth, mutant, row.constants)
        for answer, cases, expect in [
            (row.truth, [*damaged(row.truth, ks), *miscounted(row.parts, ks)], None),
            (mutant, [*damaged(mutant, ks), *miscounted(row.mutant_parts(), ks)], wrong),
        ]:
            for case in cases:
                got = verifier.check(case.response, row.truth, row.constants)
                assert got.repaired == case.repaired, (case.what, answer[:80], got)
                if expect is None:
                    assert got.status is Status.EQUIVALENT, (case.what, answer[:80], got)
                else:
                    assert (got.status, got.direction) == (expect.status, expect.direction), (
                        case.what,
                        got,
                    )
                checked += 1
    return checked


@pytest.fixture(scope="module")
def verifier() -> Verifier:
    return Verifier()


def test_repairs_recover_sampled_truths_and_never_make_a_wrong_answer_equivalent(
    dataset: pl.DataFrame, verifier: Verifier
) -> None:
    # Short truths keep the default run fast; the slow test below takes all 671.
    rows = _rows(dataset, step=100, shorter_than=3_000)
    assert len(rows) >= 5
    assert check_all(verifier, rows, ks=[1, 3, 50]) > len(rows) * 2 * 15


@pytest.mark.parametrize("step", [97, pytest.param(1, marks=pytest.mark.slow)])
def test_any_number_of_surplus_parens_up_to_50(
    dataset: pl.DataFrame, verifier: Verifier, step: int
) -> None:
    for row in _rows(dataset, step=step):
        for k in range(1, 51):
            for response in (tagged(row.truth + ")" * k), tagged(row.truth + "\n" + ") " * k)):
                got = verifier.check(response, row.truth, row.constants)
                assert (got.status, got.repaired) == (Status.EQUIVALENT, "dropped_extra_parens")


def test_an_answer_that_may_be_cut_off_is_not_closed_past_two_parens(
    dataset: pl.DataFrame, verifier: Verifier
) -> None:
    row = _rows(dataset, step=200)[1]
    body = row.truth[len("(assert ") : -1]
    for k in (1, 2, 3, 10):
        cut = "<answer>(assert " + "(and " * k + body + ")"  # no </answer>: maybe cut off
        got = verifier.check(cut, row.truth, row.constants)
        if k <= 2:
            assert (got.status, got.repaired) == (
                Status.EQUIVALENT,
                "unclosed_answer+closed_parens",
            )
        else:
            assert got.status is Status.PARSE_ERROR and "cut off" in got.reason, got
            assert got.repaired == "unclosed_answer"


def test_a_block_outside_think_always_wins(dataset: pl.DataFrame, verifier: Verifier) -> None:
    for row in _rows(dataset, step=150):
        inside_right = f"<think><answer>{row.truth}</answer></think><answer>{row.mutant()}</answer>"
        got = verifier.check(inside_right, row.truth, row.constants)
        assert got.status is Status.NOT_EQUIVALENT and got.repaired is None, got
        inside_wrong = f"<think><answer>{row.mutant()}</answer></think><answer>{row.truth}</answer>"
        got = verifier.check(inside_wrong, row.truth, row.constants)
        assert got.status is Status.EQUIVALENT and got.repaired is None, got


@pytest.mark.parametrize(
    ("response", "status"),
    [
        ("<answer>(assert (> x 1))" + ")" * 10_000_000 + "</answer>", Status.TOO_LARGE),
        ("<think><answer>(assert (> x 1))" + ")" * 300_000 + "</answer></think>", Status.TOO_LARGE),
        ("<answer>(assert " + "(not " * 200_000 + "(> x 1)</answer>", Status.TOO_LARGE),
        ("<answer>(assert " + "(not " * 5_000 + "(> x 1)</answer>", Status.TOO_LARGE),
        (
            "<think><answer>(assert " + "(not " * 5_000 + "(> x 1)</answer></think>",
            Status.TOO_LARGE,
        ),
    ],
)
def test_repairs_never_let_a_huge_or_deep_answer_through(
    response: str, status: Status, verifier: Verifier
) -> None:
    got = verifier.check(response, "(assert (> x 1))", "(declare-const x Int)")
    assert got.status is status, got


@pytest.mark.anyio
async def test_the_worker_pool_gives_the_same_repaired_verdicts(dataset: pl.DataFrame) -> None:
    row = _rows(dataset, step=300)[1]
    cases = [*damaged(row.truth, [3]), *miscounted(row.parts, [1, 2, 3])]
    async with VerifierPool(VerifyLimits(), workers=2) as pool:
        results: list[CheckResult] = [
            await pool.check(case.response, row.truth, row.constants) for case in cases
        ]
    assert [(r.status, r.repaired) for r in results] == [
        (Status.EQUIVALENT, case.repaired) for case in cases
    ]


@pytest.mark.slow
def test_repairs_on_every_ground_truth_of_the_benchmark(
    dataset: pl.DataFrame, verifier: Verifier
) -> None:
    rows = _rows(dataset, step=1)
    assert len(rows) == 671
    assert check_all(verifier, rows, ks=[1, 4, 50]) > 671 * 2 * 15
