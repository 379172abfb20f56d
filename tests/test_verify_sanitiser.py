from __future__ import annotations

import importlib
import sys

import pytest
from conftest import LoadedBy
from hypothesis import given, settings
from hypothesis import strategies as st

from aeval.verdicts import Status
from aeval.verify.limits import DEFAULT_LIMITS, VerifyLimits
from aeval.verify.sanitiser import Rejection, Sanitised, _sanitise, _sanitise_fast, sanitise
from aeval.verify.sexpr import _tokens_slow, read_forms, read_tokens


def ok(text: str, **kw: object) -> Sanitised:
    got = sanitise(text, **kw)  # type: ignore[arg-type]
    assert isinstance(got, Sanitised), got
    return got


def rejected(text: str, status: Status, limits: VerifyLimits | None = None) -> Rejection:
    got = sanitise(text, limits) if limits else sanitise(text)
    assert isinstance(got, Rejection), got
    assert got.status is status, got
    return got


def test_asserts_are_reemitted_from_tokens_without_comments() -> None:
    got = ok('(assert (> x 1)) ; (check-sat)\n(assert\n   (< x |a b|))\n(assert (= s "a""b"))')
    assert got.asserts == (
        "( assert ( > x 1 ) )",
        "( assert ( < x |a b| ) )",
        '( assert ( = s "a""b" ) )',
    )
    assert got.repairs == ()


@pytest.mark.parametrize(
    "command",
    [
        "check-sat",
        "push 1",
        "pop 1",
        "reset",
        "exit",
        "set-option :timeout 1",
        "set-info :status unsat",
        "declare-const y Int",
        "define-fun y () Int 3",
        'echo "unsat"',
        "get-model",
        'include "x.smt2"',
        "check-sat-assuming (a)",
        "declare-datatypes () ()",
        "get-value (x)",
    ],
)
def test_every_other_command_is_forbidden_and_named(command: str) -> None:
    got = rejected(f"(assert (> x 1))\n({command})", Status.FORBIDDEN_COMMAND)
    assert repr(command.split()[0]) in got.reason


def test_command_inside_a_string_or_comment_is_inert() -> None:
    got = ok('(assert (= s ")(check-sat)(echo ""unsat"")")) ; (reset)')
    assert len(got.asserts) == 1


@pytest.mark.parametrize(
    ("text", "repair"),
    [
        ("(assert (> x 1)", "closed_parens"),
        ("(assert (and (> x 1)", "closed_parens"),
        ("(assert (> x 1)))", "dropped_extra_parens"),
        ("(assert (> x 1)))))", "dropped_extra_parens"),
        ("(assert (> x 1))" + ")" * 5000, "dropped_extra_parens"),
        ("(assert (> x 1)) ) (assert true)", "dropped_extra_parens"),
        ("(assert (((> x 1)", "closed_parens"),
        ("(assert " + "(and true " * 50 + "(> x 1)", "closed_parens"),
        ("(and (> x 1) (< x 3))", "wrapped_bare_term"),
        ("(assert (> x 1) (< x 3))", "split_assert"),
        ("(assert x y)", "split_assert"),
    ],
)
def test_lenient_repairs_are_named(text: str, repair: str) -> None:
    got = ok(text)
    assert got.repairs == (repair,)
    assert sanitise(text, lenient=False).status is Status.PARSE_ERROR  # type: ignore[union-attr]


def test_surplus_parens_are_dropped_at_any_count_but_never_lift_the_size_limit() -> None:
    for k in (3, 50, 100_000):
        got = ok("(assert (> x 1))" + ")" * k)
        assert (got.asserts, got.repairs) == (("( assert ( > x 1 ) )",), ("dropped_extra_parens",))
    rejected("(assert (> x 1))" + ")" * 300_000, Status.TOO_LARGE)


def test_open_parens_are_closed_at_any_count_but_never_past_the_depth_limit() -> None:
    got = ok("(assert " + "(and true " * 3000 + "(> x 1)")
    assert got.repairs == ("closed_parens",)
    assert got.asserts[0].endswith("( > x 1 )" + " )" * 3001)
    got = rejected("(assert " + "(and true " * 5000 + "(> x 1)", Status.TOO_LARGE)
    assert "nesting deeper than 4000" in got.reason


def test_an_answer_that_may_be_cut_off_gets_at_most_two_parens_closed() -> None:
    assert ok("(assert (and (> x 1)", may_be_cut=True).repairs == ("closed_parens",)
    got = sanitise("(assert (and (and (> x 1)", may_be_cut=True)
    assert isinstance(got, Rejection) and got.status is Status.PARSE_ERROR
    assert "3 '(' not closed" in got.reason and "cut off" in got.reason
    # Surplus cannot come from a cut: dropped at any count all the same.
    assert ok("(assert (> x 1))))))", may_be_cut=True).repairs == ("dropped_extra_parens",)


MISCOUNT = "(assert (and (> x 1) (< x 5)"  # intended: ... (> y 2)))


@pytest.mark.parametrize("premature", [1, 2, 3, 4, 10])
def test_a_premature_close_of_the_and_gets_one_reading_however_many_parens(
    premature: int,
) -> None:
    # The model closes the conjunction `premature` parentheses too early, goes on
    # with the last conjunct and ends as it meant to: as many surplus ')' as
    # premature ones. 1: (assert X Y)); 2: (assert X)) Y); 3+: a ')' between forms.
    got = ok(MISCOUNT + ")" * premature + " (> y 2)))")
    assert got.asserts == ("( assert ( and ( > x 1 ) ( < x 5 ) ) )", "( assert ( > y 2 ) )")
    assert got.repairs[0] == "dropped_extra_parens"
    assert set(got.repairs[1:]) == {"split_assert" if premature == 1 else "wrapped_bare_term"}
    assert sanitise(MISCOUNT + ")" * premature + " (> y 2)))", lenient=False).status is (  # type: ignore[union-attr]
        Status.PARSE_ERROR
    )


def test_an_assert_with_several_terms_asserts_each() -> None:
    got = ok("(assert (> x 1) (< y 2)\n  (= z 3))")
    assert got.asserts == ("( assert ( > x 1 ) )", "( assert ( < y 2 ) )", "( assert ( = z 3 ) )")
    assert got.repairs == ("split_assert",)
    assert rejected("(assert)", Status.PARSE_ERROR).reason.endswith("got 0")


def test_stray_text_after_surplus_parens_is_still_an_error() -> None:
    got = rejected("(assert (> x 1))) and then x", Status.PARSE_ERROR)
    assert "text outside any command" in got.reason
    rejected("(assert (> x 1)))) (check-sat)", Status.FORBIDDEN_COMMAND)


@pytest.mark.parametrize(
    "text",
    [
        "The answer: (assert x)",
        "(assert (> x 1))) x",
        "(assert)",
        '(assert "abc',
        "(assert |abc)",
        "(assert 12abc)",
        "(assert (> x 1)) \x00",
        "(assert (> x \u00e9))",
        '(assert (= s "\u00e9"))',
        "(assert (> x 1)) `",
    ],
)
def test_parse_errors_say_where(text: str) -> None:
    got = rejected(text, Status.PARSE_ERROR)
    assert "line" in got.reason or "assert" in got.reason or "parenthes" in got.reason


def test_200000_levels_of_nesting_do_not_crash() -> None:
    deep = "(assert " + "(not " * 200_000 + "(> x 1)" + ")" * 200_000 + ")"
    rejected(deep, Status.TOO_LARGE)
    # With the limits lifted the reader still walks it without recursion.
    lifted = VerifyLimits(max_depth=10**6, max_answer_bytes=10**7)
    got = sanitise(deep, lifted)
    assert isinstance(got, Sanitised) and got.asserts[0].count("(") == 200_002
    assert len(read_forms(deep, lifted)) == 1
    with pytest.raises(ValueError, match="nesting deeper"):
        read_forms(deep)


def test_size_and_numeral_limits() -> None:
    rejected("(assert (> x 1))" + " " * 300_000, Status.TOO_LARGE)
    got = rejected("(assert (> x " + "9" * 5000 + "))", Status.TOO_LARGE)
    assert "5000 digits" in got.reason
    ok("(assert (> x " + "9" * 999 + "))")


def test_nothing_but_comments_is_no_answer() -> None:
    rejected("; nothing\n", Status.NO_ANSWER)


SMT_ALPHABET = "()\"|;: \n\tabcxyz019#.-+<=>!\\\x00é`'"


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=SMT_ALPHABET, max_size=60))
def test_fast_and_slow_tokenisers_agree(text: str) -> None:
    def run(tokens):  # type: ignore[no-untyped-def]
        try:
            return list(tokens(text, DEFAULT_LIMITS))
        except Exception as err:  # the same error, with the same message
            return repr(err)

    assert run(read_tokens) == run(_tokens_slow)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_sanitise_never_raises(text: str) -> None:
    assert isinstance(sanitise(text), Sanitised | Rejection)


TERMS = st.recursive(
    st.sampled_from(["x", "1", "|a b|", '"s"', '"q""q"', "and", ">", ":k", "#x1F"]),
    lambda inner: st.lists(inner, min_size=1, max_size=4).map(lambda ts: "(" + " ".join(ts) + ")"),
    max_leaves=12,
)
GAPS = st.sampled_from([" ", "\n", "\t ", " ; note (check-sat)\n", "\n\n"])
FORMS = st.lists(st.tuples(TERMS, GAPS), min_size=1, max_size=3).map(
    lambda parts: "".join(f"(assert {term}){gap}" for term, gap in parts)
)


@settings(max_examples=300, deadline=None)
@given(FORMS)
def test_fast_path_takes_well_formed_asserts(text: str) -> None:
    fast = _sanitise_fast(text, DEFAULT_LIMITS)
    assert fast is not None
    assert _sanitise(text, DEFAULT_LIMITS, True) == fast


@settings(max_examples=500, deadline=None)
@given(FORMS, st.integers(min_value=0), st.sampled_from(["", "(", ")", "x", '"', "|", ";"]))
def test_fast_path_decides_exactly_like_the_token_by_token_path(
    text: str, where: int, insert: str
) -> None:
    # One character replaced: often still fine, often not; when the fast path
    # accepts, the careful path must produce the very same result.
    i = where % len(text)
    mutated = text[:i] + insert + text[i + 1 :]
    fast = _sanitise_fast(mutated, DEFAULT_LIMITS)
    if fast is not None:
        assert _sanitise(mutated, DEFAULT_LIMITS, True) == fast
    else:
        assert isinstance(sanitise(mutated), Sanitised | Rejection)


@settings(max_examples=200, deadline=None)
@given(FORMS, st.integers(min_value=0), st.sampled_from(["(", ")", "))", "((", "x", "(x"]))
def test_strict_never_repairs_and_lenient_agrees_with_it_where_nothing_is_repaired(
    text: str, where: int, insert: str
) -> None:
    i = where % len(text)
    mutated = text[:i] + insert + text[i:]
    strict = sanitise(mutated, lenient=False)
    lenient = sanitise(mutated)
    if isinstance(strict, Sanitised):
        assert strict.repairs == ()
        assert lenient == strict
    elif isinstance(lenient, Sanitised):
        assert lenient.repairs, (mutated, strict)


def test_light_verify_modules_do_not_import_z3_or_anyio(loaded_by: LoadedBy) -> None:
    # The CLI reads its defaults from aeval.verify.limits, and the worker caps
    # its memory before it imports Z3: neither may pay for Z3 or anyio on import.
    code = (
        "import aeval.verify.limits, aeval.verify.worker, aeval.verify.sanitiser; "
        "from aeval.verify import sanitise, DEFAULT_LIMITS; "
        "assert callable(sanitise)"
    )
    assert loaded_by(code, ("z3", "anyio")) == []


def test_package_exports_resolve_to_their_definitions() -> None:
    import aeval.verify as verify

    homes = [
        importlib.import_module(f"aeval.verify.{m}")
        for m in (
            "declarations",
            "equivalence",
            "extract",
            "limits",
            "pool",
            "published",
            "sanitiser",
        )
    ]
    for name in verify.__all__:
        value = getattr(verify, name)
        assert any(getattr(m, name, None) is value for m in homes), name
    assert verify.sanitise is sys.modules["aeval.verify.sanitiser"].sanitise
