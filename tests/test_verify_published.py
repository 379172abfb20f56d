"""The published reading: the WARP study's evaluator, step by step, on constructed answers.

Every expected outcome below is derived by hand from the study's procedure
(first <answer> block, newlines removed, C(s) from lines starting "(assert",
the z3 binary's first two result lines), not from running this code.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from aeval.study_reasons import EQUIVALENT, NO_ANSWER, NOT_IMPLIED, NOT_IMPLYING, UNPARSED
from aeval.verdicts import Status
from aeval.verify import VerifierPool, VerifyLimits, check_response
from aeval.verify.published import (
    check_published,
    conjunction,
    extract_published,
    forbidden_command,
    published_script,
    read_published_output,
    z3_binary,
)

DECLS = "(declare-const x Int)\n(declare-const y Int)"
TRUTH = "(assert (and (> x 0) (< x 5)))"


def strict_correct(content: str) -> bool:
    result = check_response(content, TRUTH, DECLS)
    return result.status is Status.EQUIVALENT and result.repaired is None


# -- 1. extraction ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("<answer> (assert (> x 0)) </answer>", "(assert (> x 0))"),
        ("<answer>\n(assert\n(> x 0))\n</answer>", "(assert(> x 0))"),  # every \n goes
        ("<answer>a</answer> then <answer>b</answer>", "a"),  # the FIRST block
        ("<answer>a<answer>b</answer>", "a"),  # a second opening tag ends it too
        ("<answer>(assert (> x 0))", "(assert (> x 0))"),  # no closing tag: to the end
        ("<think><answer>t</answer></think><answer>o</answer>", "t"),  # think is not special
        ("<answer>a\r\nb</answer>", "a\rb"),  # only "\n" is removed
        ("<answer>   </answer>", None),
        ("<ANSWER>a</ANSWER>", None),  # tags are case-sensitive
        ("no tags at all", None),
        ("", None),
        (None, None),
    ],
)
def test_extraction_is_the_studys(content: str | None, expected: str | None) -> None:
    assert extract_published(content) == expected


# -- 2. the script --------------------------------------------------------------------------


def test_conjunction_unwraps_each_assert_line() -> None:
    assert conjunction("(assert (> x 0))\n(assert (< x 5))") == "(and (> x 0) (< x 5))"
    # Only lines that start with "(assert" count (a leading space hides one).
    assert conjunction("(assert a)\n  (assert b)\n(check-sat)") == "(and a)"
    # After newline removal two asserts are ONE line: only the first is unwrapped,
    # the study's quirk, kept on purpose.
    assert conjunction("(assert (> x 0))(assert (< x 5))") == "(and (> x 0))(assert (< x 5))"
    # Surplus parentheses are carried through: [8:-1] drops exactly one.
    assert conjunction("(assert (> x 0))))") == "(and (> x 0))))"
    assert conjunction("no asserts") == "(and )"


def test_script_layout() -> None:
    answer = "(assert (>= x 1))"
    assert published_script("(declare-const x Int)", "(assert (> x 0))", answer) == (
        "(declare-const x Int)\n"
        "(push)\n(assert (> x 0))\n(pop)\n"
        "(push)\n(assert (>= x 1))\n(pop)\n"
        "(push)\n(assert (> x 0))\n(assert (not\n(and (>= x 1))\n))\n(check-sat)\n(pop)\n"
        "(push)\n(assert (>= x 1))\n(assert (not\n(and (> x 0))\n))\n(check-sat)\n(pop)\n"
    )


@pytest.mark.parametrize(
    ("stdout", "correct", "reason"),
    [
        ("unsat\nunsat\n", True, EQUIVALENT),
        ('(error "line 7 column 2: bad")\nunsat\n(error "x")\nunsat\n', True, EQUIVALENT),
        ("sat\nunsat\n", False, NOT_IMPLIED),
        ("unsat\nsat\n", False, NOT_IMPLYING),
        ("unsat\nunknown\n", False, NOT_IMPLYING),
        ("unsat\n", False, UNPARSED),
        ("timeout\n", False, UNPARSED),
        (" unsat\nunsat \n", True, EQUIVALENT),  # the whole output is stripped first
        ("x\n unsat \nunsat\n", False, UNPARSED),  # then lines must be exactly the word
        ("unsat\r\nunsat\r\n", True, EQUIVALENT),
    ],
)
def test_reading_the_output(stdout: str, correct: bool, reason: str) -> None:
    result = read_published_output(stdout)
    assert (result.correct, result.reason) == (correct, reason)


def test_the_binary_comes_from_the_z3_solver_wheel() -> None:
    import importlib.metadata

    path = z3_binary()
    assert path.name == "z3" and path.is_file()
    dist = importlib.metadata.distribution("z3-solver")
    shipped = next(f for f in dist.files or [] if f.name == "z3")
    assert path == Path(str(dist.locate_file(shipped))).resolve()


# -- 3. refusal of commands other than assert ----------------------------------------------


@pytest.mark.parametrize(
    ("answer", "command"),
    [
        ('(assert false)) (echo "unsat") (echo "unsat")', "echo"),  # would forge the result
        ("(assert (> x 0))) (exit)", "exit"),
        ('(assert (> x 0)) (include "/etc/passwd")', "include"),
        ("(set-option :timeout 1) (assert true)", "set-option"),
        ("(assert true) (check-sat)", "check-sat"),
        ("(push) (assert true)", "push"),
        ("(assert (pop))", "pop"),  # nested or not: unbalanced parens can free any
        ("(reset) (assert true)", "reset"),
        ("(assert (get-model))", "get-model"),
        ("(declare-const z Int) (assert (> z 0))", "declare-const"),
        ("(define-fun f () Int 1) (assert (> f 0))", "define-fun"),
        ("(eval x)", "eval"),
        ("(simplify (+ x 0))", "simplify"),
        ('(|echo| "unsat")', "|echo|"),  # Z3 runs a quoted command name too
        ('( \t echo "unsat")', "echo"),
        ('(;note\recho "unsat")', "echo"),  # a comment ended by a line break
        ('(assert (= s "(exit)"))', "exit"),  # even inside a string: refused, safely
        ("(assert x) ; (echo in a comment", "echo"),  # and in a comment: over-cautious
        ("(get-info :version)", "get-info"),
    ],
)
def test_commands_other_than_assert_are_refused(answer: str, command: str) -> None:
    assert forbidden_command(answer) == command
    result = check_published(f"<answer>{answer}</answer>", TRUTH, DECLS)
    assert not result.correct
    assert result.reason.startswith("refused:") and f"'{command}'" in result.reason


@pytest.mark.parametrize(
    "answer",
    [
        "(assert (and (> x 0) (< x 5)))",
        "(assert (! (> x 0) :named a1))",
        "(assert (and (>= in0 97) (<= in0 122)))",
        "(assert (> x 0)) ()",
        "(" + "; " * 5000 + ")",  # no backtracking blow-up
    ],
)
def test_assert_only_answers_pass(answer: str) -> None:
    assert forbidden_command(answer) is None


# -- 4. the whole reading with the real z3 binary, against strict --------------------------


def test_equivalent_answer_in_another_form() -> None:
    content = "<think>…</think><answer>(assert (and (>= x 1) (<= x 4)))</answer>"
    assert check_published(content, TRUTH, DECLS).correct
    assert strict_correct(content)


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ("(assert (and (> x 0) (< x 6)))", NOT_IMPLYING),  # too weak: truth ⇒ answer holds
        ("(assert (and (> x 1) (< x 5)))", NOT_IMPLIED),  # too strong
    ],
)
def test_wrong_answers_name_the_failing_direction(answer: str, reason: str) -> None:
    result = check_published(f"<answer>{answer}</answer>", TRUTH, DECLS)
    assert (result.correct, result.reason) == (False, reason)


def test_published_correct_where_strict_is_not() -> None:
    # Surplus ")": Z3's command line runs the complete assert, reports the rest as
    # an error and carries on; C(answer) keeps the surplus after its own
    # "(assert (not …))" closes, so both checks run and both are unsat.
    surplus = "<answer>(assert (and (> x 0) (< x 5))))))</answer>"
    assert check_published(surplus, TRUTH, DECLS).correct
    assert not strict_correct(surplus)
    # No closing tag (cut off after the formula): the study read to the end.
    unclosed = "<answer>(assert (and (> x 0) (< x 5)))"
    assert check_published(unclosed, TRUTH, DECLS).correct
    assert not strict_correct(unclosed)
    # The only answer block sits inside <think>: strict finds no answer outside it.
    in_think = "<think>so <answer>(assert (and (> x 0) (< x 5)))</answer></think>done"
    assert check_published(in_think, TRUTH, DECLS).correct
    assert not strict_correct(in_think)


def test_strict_correct_where_published_is_not() -> None:
    # Two asserts on two lines: strict reads their conjunction, equivalent. The
    # study removed the newline first, so C(answer) is "(and (> x 0))(assert (< x
    # 5))": the first check's assert is malformed, Z3 skips it, and the check
    # runs on the truth alone, which is sat.
    content = "<answer>\n(assert (> x 0))\n(assert (< x 5))\n</answer>"
    assert strict_correct(content)
    result = check_published(content, TRUTH, DECLS)
    assert (result.correct, result.reason) == (False, NOT_IMPLIED)
    # The first of several blocks counts, not the last.
    revised = "<answer>(assert (> x 0))</answer> wait: <answer>" + TRUTH + "</answer>"
    assert check_response(revised, TRUTH, DECLS).status is Status.EQUIVALENT  # (lenient: last)
    assert check_published(revised, TRUTH, DECLS).reason == NOT_IMPLYING


def test_no_answer_and_malformed_answers() -> None:
    assert check_published("I cannot do this", TRUTH, DECLS).reason == NO_ANSWER
    assert check_published(None, TRUTH, DECLS).reason == NO_ANSWER
    # Unknown symbol: Z3 reports errors for both asserts of the answer; check 1
    # runs on the truth alone (sat), so the answer fails as "does not imply".
    result = check_published("<answer>(assert (> z 0))</answer>", TRUTH, DECLS)
    assert (result.correct, result.reason) == (False, NOT_IMPLIED)


def test_z3_runs_in_an_empty_directory_with_nothing_from_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A fake "z3" first on PATH that would say "unsat" twice is never used.
    fake = tmp_path / "z3"
    fake.write_text("#!/bin/sh\necho unsat\necho unsat\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    monkeypatch.chdir(tmp_path)
    result = check_published("<answer>(assert false)</answer>", TRUTH, DECLS)
    assert (result.correct, result.reason) == (False, NOT_IMPLIED)


# -- 5. hostile answers in the pool ---------------------------------------------------------

HARD = (
    "<answer>(assert (and (> x 1) (> y 1) "
    "(= (+ (* x x x x x x x) (* y y y y y y y)) (+ (* x x x y y y y) 1234567891))))</answer>"
)


@pytest.mark.anyio
async def test_a_hostile_answer_hits_the_time_limit_cleanly() -> None:
    limits = VerifyLimits.with_budget(1.0)
    async with VerifierPool(limits, workers=1, published=True) as pool:
        start = time.monotonic()
        result = await pool.check_published(HARD, TRUTH, DECLS)
        elapsed = time.monotonic() - start
        assert not result.correct
        # Z3's own -T:1 ("timeout", no result lines) or the wall-clock kill.
        assert result.reason in (UNPARSED,) or "z3 killed after" in result.reason
        assert elapsed < limits.timeout_s * 1.5 + 1.0
        # The pool is intact: the next answer is read normally.
        ok = await pool.check_published(f"<answer>{TRUTH}</answer>", TRUTH, DECLS)
        assert (ok.correct, ok.reason) == (True, EQUIVALENT)
        assert pool.replaced == 0


@pytest.mark.anyio
async def test_the_pool_gives_both_readings() -> None:
    async with VerifierPool(workers=1, published=True) as pool:
        content = "<answer>(assert (and (> x 0) (< x 5))))))</answer>"
        check = await pool.check(content, TRUTH, DECLS)
        published = await pool.check_published(content, TRUTH, DECLS)
    assert published.correct and published.elapsed_ms > 0
    assert not (check.status is Status.EQUIVALENT and check.repaired is None)


@pytest.mark.anyio
async def test_a_repeated_answer_is_read_once_and_a_timeout_never_remembered() -> None:
    async with VerifierPool(VerifyLimits.with_budget(1.0), workers=1, published=True) as pool:
        first = await pool.check_published(f"<answer>{TRUTH}</answer>", TRUTH, DECLS)
        # Another trial's identical answer (other surrounding text): the same result object.
        again = await pool.check_published(
            f"<think>x</think><answer>{TRUTH}</answer>", TRUTH, DECLS
        )
        assert again is first and first.correct
        # The same answer for another row is read again.
        other = await pool.check_published(
            f"<answer>{TRUTH}</answer>", TRUTH, "(declare-const x Real)"
        )
        assert other is not first
        slow = await pool.check_published(HARD, TRUTH, DECLS)
        assert await pool.check_published(HARD, TRUTH, DECLS) is not slow
        assert (await pool.check_published("no tags", TRUTH, DECLS)).reason == NO_ANSWER
