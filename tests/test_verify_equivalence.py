"""Equivalence on the real benchmark: identities, rewrites, mutants, injections, hostile input."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
import z3
from answer_corpus import truth_conjuncts

from aeval.verdicts import CheckResult, Status
from aeval.verify import VerifyLimits, check_response, parse_declarations
from aeval.verify.equivalence import Verifier


@pytest.fixture(scope="module")
def rows(benchmark_path: Path) -> list[dict[str, str]]:
    return pl.read_parquet(benchmark_path).select("answer", "constants").to_dicts()


@pytest.fixture(scope="module")
def verifier() -> Verifier:
    return Verifier()


def tagged(answer: str) -> str:
    return f"<think>working…</think>\n<answer>\n{answer}\n</answer>"


def confirm(result: CheckResult, truth: str, answer: str, constants: str) -> None:
    """Substitute the counterexample into both formulas; Z3 must agree with the direction."""
    ctx = z3.Context()
    decls = parse_declarations(constants, ctx)
    assert result.counterexample, result
    pairs = [(decls[k], z3.IntVal(int(v), ctx)) for k, v in result.counterexample.items()]
    t, a = (
        z3.simplify(z3.substitute(z3.And(*z3.parse_smt2_string(s, decls=decls, ctx=ctx)), *pairs))
        for s in (truth, answer)
    )
    if result.direction == "too_strong":
        assert z3.is_true(t) and z3.is_false(a), (t, a)
    elif result.direction == "too_weak":
        assert z3.is_true(a) and z3.is_false(t), (t, a)
    else:
        assert result.direction == "both"
        assert z3.is_true(t) != z3.is_true(a), (t, a)


def test_every_ground_truth_is_equivalent_to_itself(rows, verifier) -> None:
    statuses = [verifier.check(tagged(r["answer"]), r["answer"], r["constants"]) for r in rows]
    assert len(statuses) == 671
    assert {s.status for s in statuses} == {Status.EQUIVALENT}
    assert all(s.repaired is None for s in statuses)


def test_every_ground_truth_is_equivalent_to_a_flattened_reordered_rewrite(rows, verifier) -> None:
    ctx = z3.Context()
    for r in rows:
        parts = truth_conjuncts(r["answer"], r["constants"], ctx)
        # One assert per conjunct, last first: different text, same constraint.
        rewrite = "\n".join(f"(assert {c.sexpr()})" for c in reversed(parts))
        result = verifier.check(tagged(rewrite), r["answer"], r["constants"])
        assert result.status is Status.EQUIVALENT, (r["answer"][:200], result)


def _flip(c: z3.BoolRef) -> z3.BoolRef:
    flips = {z3.Z3_OP_GE: "<", z3.Z3_OP_LE: ">", z3.Z3_OP_GT: "<=", z3.Z3_OP_LT: ">="}
    kind = c.decl().kind()
    if kind in flips:
        a, b = c.children()
        return {"<": a < b, ">": a > b, "<=": a <= b, ">=": a >= b}[flips[kind]]
    return c.children()[0] if z3.is_not(c) else z3.Not(c)


def test_mutants_are_not_equivalent_with_direction_and_confirmed_counterexample(
    rows, verifier
) -> None:
    ctx = z3.Context()
    seen_directions = set()
    for i, r in enumerate(rows[::3]):
        truth, constants = r["answer"], r["constants"]
        parts = truth_conjuncts(truth, constants, ctx)
        k = i % len(parts)
        # A flipped comparison: the answer rejects every input the truth admits.
        flipped = [*parts[:k], _flip(parts[k]), *parts[k + 1 :]]
        answer = "(assert (and true " + " ".join(p.sexpr() for p in flipped) + "))"
        result = verifier.check(tagged(answer), truth, constants)
        assert result.status is Status.NOT_EQUIVALENT, result
        assert result.direction in ("too_strong", "both"), result
        confirm(result, truth, answer, constants)
        seen_directions.add(result.direction)
        if len(parts) < 2:
            continue
        # A dropped conjunct can only make the answer weaker; it is equivalent
        # exactly when the rest implies the dropped part (checked independently).
        rest = [*parts[:k], *parts[k + 1 :]]
        answer = "(assert (and true " + " ".join(p.sexpr() for p in rest) + "))"
        result = verifier.check(tagged(answer), truth, constants)
        oracle = z3.Solver(ctx=ctx)
        oracle.add(*rest, z3.Not(parts[k]))
        if oracle.check() == z3.unsat:
            assert result.status is Status.EQUIVALENT, result
        else:
            assert result.status is Status.NOT_EQUIVALENT, result
            assert result.direction == "too_weak", result
            confirm(result, truth, answer, constants)
            seen_directions.add(result.direction)
    assert seen_directions >= {"too_strong", "too_weak"}


TRUTH = "(assert (and (> x 1) (< y 10)))"
CONSTANTS = "(declare-const x Int)\n(declare-const y Int)"
WRONG = "(assert (> x 100))"

INJECTIONS = [
    f"{WRONG}\n(check-sat)",
    f"{WRONG}\n(reset)\n{TRUTH}",
    f"(push 1)\n{WRONG}\n(pop 1)\n{TRUTH}",
    f'{WRONG}\n(echo "unsat")\n(echo "unsat")',
    '(echo "unsat")',
    f"{WRONG})\n(check-sat)\n(",
    f"{WRONG}\n(exit)\n{TRUTH}",
    f"{WRONG}\n(set-option :timeout 1)",
    f"{WRONG}\n(reset-assertions)\n{TRUTH}",
    "(define-fun x () Int 5)\n(assert (> x 1))",
    "(declare-const z Int)\n(assert (> z 1))",
    f'(assert (= x "))(reset)(assert true)(assert (= x 1"))\n{WRONG}',
    f"{WRONG} ; )) (reset) {TRUTH}",
    f"{WRONG}\x00{TRUTH}",
    "(assert (let ((x 5) (y 0)) (and (> x 1) (< y 10))))",
    "(assert (! (> x 100) :named truth))",
    '(include "/etc/passwd")',
    f"{WRONG}\n(check-sat-using (then simplify smt))",
    "(assert (=> false (and (> x 1) (< y 10))))",
    "(assert (or (and (> x 1) (< y 10)) (> x 1000)))",
    f"(assert |(check-sat)|)\n{TRUTH}",
    f"</answer>{WRONG}<answer>",
    f"{WRONG}</answer> and the real one: <answer>{WRONG}",
    "(assert (exists ((x Int)) (and (> x 1) (< y 10))))",
    "(assert (forall ((y Int)) (> x 1)))",
]


@pytest.mark.parametrize("answer", INJECTIONS)
def test_injection_attempts_never_yield_equivalent(answer: str) -> None:
    result = check_response(f"<answer>{answer}</answer>", TRUTH, CONSTANTS)
    assert result.status is not Status.EQUIVALENT, result
    assert result.reason


@pytest.mark.parametrize(
    ("response", "status"),
    [
        ("<answer>(assert " + "x" * 10_000_000 + ")</answer>", Status.TOO_LARGE),
        ("<answer>" + "(" * 200_000 + ")" * 200_000 + "</answer>", Status.TOO_LARGE),
        (f"<answer>{TRUTH}\x00</answer>", Status.PARSE_ERROR),
        (
            b"<answer>(assert (> x \xff\xfe 1))</answer>".decode("utf-8", "surrogateescape"),
            Status.PARSE_ERROR,
        ),
        ("<answer>(assert (> x \ud800))</answer>", Status.PARSE_ERROR),
        ("<answer>(assert (> x " + "9" * 300_000 + "))</answer>", Status.TOO_LARGE),
        ("x" * 20_000_000, Status.TOO_LARGE),
    ],
)
def test_hostile_answers_get_a_verdict(response: str, status: Status) -> None:
    result = check_response(response, TRUTH, CONSTANTS)
    assert result.status is status, result


@pytest.mark.parametrize(
    ("answer", "status", "needle"),
    [
        ("(assert (> in18 1))", Status.UNKNOWN_SYMBOL, "'in18'"),
        ("(assert (> (f x) 1))", Status.UNKNOWN_SYMBOL, "'f'"),
        ("(assert (+ x 1))", Status.PARSE_ERROR, "not Boolean"),
        ("(assert (and x (> y 1)))", Status.PARSE_ERROR, "Z3 says"),
        ("(check-sat)", Status.FORBIDDEN_COMMAND, "'check-sat'"),
        ("(assert (> x 1)) (assert (< y 10))", Status.EQUIVALENT, ""),
        ("(assert (and (< y 10) (> x 1)))", Status.EQUIVALENT, ""),
        ("(assert (> x 1))", Status.NOT_EQUIVALENT, "too weak"),
    ],
)
def test_statuses_explain_themselves(answer: str, status: Status, needle: str) -> None:
    result = check_response(f"<answer>{answer}</answer>", TRUTH, CONSTANTS)
    assert result.status is status, result
    assert needle in result.reason


def test_repairs_are_named_and_still_checked() -> None:
    result = check_response(
        "<answer>```smt2\n(assert (and (> x 1) (< y 10))\n```", TRUTH, CONSTANTS
    )
    assert result.status is Status.EQUIVALENT
    assert result.repaired == "unclosed_answer+code_fence+closed_parens"


@pytest.mark.parametrize(
    ("truth", "constants"),
    [
        ("(assert (> x 1)", CONSTANTS),
        ("(assert (> q 1))", CONSTANTS),
        ("(assert (> x 1))", "(declare-const x Foo)"),
        ("(assert (> x 1))", "(define-fun x () Int 3)"),
        ("(assert (> x 1)) (check-sat)", CONSTANTS),
    ],
)
def test_a_broken_ground_truth_is_never_the_models_fault(truth: str, constants: str) -> None:
    result = check_response(f"<answer>{TRUTH}</answer>", truth, constants)
    assert result.status is Status.BAD_GROUND_TRUTH, result


def test_nothing_leaks_between_checks_in_a_reused_context() -> None:
    v = Verifier()
    assert v.check("<answer>(assert (> z 1))</answer>", "(assert (> z 1))", "(declare-const z Int)")
    # z was declared for the previous row only: here it is unknown.
    got = v.check("<answer>(assert (> z 1))</answer>", TRUTH, CONSTANTS)
    assert got.status is Status.UNKNOWN_SYMBOL
    # Same name, another sort in another row.
    real = v.check(
        "<answer>(assert (> x 0.5))</answer>", "(assert (> x 0.5))", "(declare-const x Real)"
    )
    assert real.status is Status.EQUIVALENT
    assert v.check(f"<answer>{TRUTH}</answer>", TRUTH, CONSTANTS).status is Status.EQUIVALENT


def test_solver_timeout_is_a_timeout_verdict() -> None:
    hard = "(assert (= (+ (* x x x) (* y y y) (* z z z)) 33))"
    limits = VerifyLimits(solver_timeout_ms=200)
    constants = CONSTANTS + "\n(declare-const z Int)"
    result = check_response(f"<answer>{hard}</answer>", "(assert (> x 1))", constants, limits)
    assert result.status in (Status.TIMEOUT, Status.NOT_EQUIVALENT), result


@pytest.mark.parametrize(
    ("truth", "constants"),
    [
        ("(assert (> q 1))", CONSTANTS),  # undeclared in the row
        ("(assert (> x 1))", "(declare-const x Foo)"),  # unknown sort
    ],
)
def test_a_verbatim_copy_of_a_broken_truth_is_still_bad_ground_truth(
    truth: str, constants: str
) -> None:
    # Token-identical answers skip the second Z3 parse; that shortcut must only
    # ever apply after the truth itself parsed against the declarations.
    result = check_response(f"<answer>{truth}</answer>", truth, constants)
    assert result.status is Status.BAD_GROUND_TRUTH, result


def test_same_tokens_in_another_layout_are_equivalent_and_a_changed_token_is_not() -> None:
    truth = "(assert (and (> x 1) (< x 5)))"
    relaid = "<answer>(assert\n  (and (> x 1)   ; lower bound\n       (< x 5)))</answer>"
    assert check_response(relaid, truth, CONSTANTS).status is Status.EQUIVALENT
    changed = "<answer>(assert (and (> x 1) (< x 6)))</answer>"
    assert check_response(changed, truth, CONSTANTS).status is Status.NOT_EQUIVALENT


def test_a_verbatim_copy_over_the_answer_size_limit_is_still_too_large() -> None:
    truth = "(assert (and " + " ".join(f"(> x {i})" for i in range(400)) + "))"
    limits = VerifyLimits(max_answer_bytes=1024)
    result = check_response(f"<answer>{truth}</answer>", truth, CONSTANTS, limits)
    assert result.status is Status.TOO_LARGE, result
    assert check_response(f"<answer>{truth}</answer>", truth, CONSTANTS).status is (
        Status.EQUIVALENT
    )
