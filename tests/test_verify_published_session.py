"""The published reading's z3 kept across answers reads every answer as one fresh process
per answer does; the default (in-process, unclosed answers without Z3, the kept z3, a
fresh z3 for the rest) equals the audit (a fresh z3 for every answer) on every shape.

The corpora: every answer kind of ``tests/answer_corpus.py`` (each repair kind, verdict
category and hostile input), the shapes real answers take that fall back
(``fallback_shapes``: unclosed, strings, quoted symbols, non-ASCII, comments, surplus
parentheses, one-argument divisions), on constructed rows (an unsatisfiable and a valid
truth among them) and, in the slow test, on WARP rows with their mutants.
"""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anyio
import polars as pl
import pytest
import z3
from answer_corpus import answers_for, fallback_shapes, hostile, truth_conjuncts

from aeval.study_reasons import EQUIVALENT, NOT_IMPLIED, UNPARSED
from aeval.verify import VerifierPool
from aeval.verify.equivalence import Verifier
from aeval.verify.limits import DEFAULT_LIMITS
from aeval.verify.published import (
    PublishedResult,
    check_published,
    extract_published,
    published_script,
    z3_binary,
)
from aeval.verify.published_inprocess import (
    PublishedInProcess,
    _one_argument_division,
    _tokens,
)
from aeval.verify.published_session import (
    Z3Session,
    _depths,
    answer_left_open,
    open_to_the_end,
    probed_script,
    row_commands_only,
    session_script,
)

INTS = "(declare-const x Int)\n(declare-const y Int)"
ROWS = [
    ("(assert (and (> x 0) (< x 5) (distinct x y)))", INTS),
    ("(assert (and (> x 0) (< x 0)))", INTS),  # unsatisfiable truth
    ("(assert (or (> x 0) (<= x 0)))", INTS),  # valid truth
    ("(assert (and (> (* 2 r) 1) (< r 3)))", "(declare-const r Real)"),
    # Two asserts on two lines: C(truth) unwraps both.
    ("(assert (> x 0))\n(assert (< x 5))", INTS),
]
Item = tuple[str, str, str, str]  # kind, response, truth, constants


# Of the other rows, a kind of each outcome and path (every kind in the slow test).
FEW = {
    "verbatim",
    "several_asserts",
    "too_strong",
    "true",
    "bare_term",
    "nonlinear",
    "unclosed_deep",
    "unclosed_string",
    "surplus_middle_then_more",
    "division_one_argument",
}


def corpus(rows: list[tuple[str, str]], few: set[str] | None = None) -> list[Item]:
    """Every kind and shape for the first row; for the others, ``few`` (None: every one)."""
    items = []
    for i, (t, c) in enumerate(rows):
        first = t.split("\n")[0]
        kinds = answers_for(first, c) + fallback_shapes(first, c)
        items += [(k, r, t, c) for k, r in kinds if i == 0 or few is None or k in few]
    items += [(k, r, ROWS[0][0], INTS) for k, r in hostile()]
    return items


def outcome(result: PublishedResult) -> tuple[bool, str]:
    return result.correct, result.reason


def fresh(items: list[Item]) -> list[PublishedResult]:
    """One z3 process per answer, as the study ran it (the audit)."""
    with ThreadPoolExecutor(2) as pool:
        return list(pool.map(lambda item: check_published(*item[1:]), items))


def test_a_kept_z3_reads_every_answer_as_a_fresh_process_does() -> None:
    items = corpus(ROWS, FEW)
    session = Z3Session(z3_binary, DEFAULT_LIMITS.timeout_s, DEFAULT_LIMITS.memory_mb)
    read_by_session: set[str] = set()
    left_to_fresh: set[str] = set()
    try:
        kept = []
        for kind, r, t, c in items:
            answer = extract_published(r)
            reads = answer is not None and session.reads(published_script(c, t, answer), t, c)
            left = session.left
            kept.append(check_published(r, t, c, session=session))
            if reads:
                (read_by_session if session.left == left else left_to_fresh).add(kind)
        started = session.started
    finally:
        session.close()
    mismatches = [
        (kind, r[:80], a, b)
        for (kind, r, _, _), a, b in zip(items, kept, fresh(items), strict=True)
        if outcome(a) != outcome(b)
    ]
    assert mismatches == []
    # The kept process read most kinds itself (so this is not fresh against fresh):
    # plain scripts on their text, the rest with the probe, in one process but for
    # the answer that stops Z3's parser (which a fresh process then reads).
    assert {
        "verbatim",
        "several_asserts",
        "bare_term",
        "atom_before",
        "nonlinear",
    } <= read_by_session
    assert {"surplus_then_text", "comment", "surplus_middle", "keyword"} <= read_by_session
    probed = {"unclosed", "non_ascii", "fenced", "fenced_then_unclosed", "unclosed_fenced"}
    probed |= {"prose_non_ascii", "head_then_literal", "carriage_return", "unclosed_hash"}
    assert probed <= read_by_session
    lexical = {"string", "quoted_symbol", "unclosed_string", "unclosed_quoted"}
    assert not read_by_session & (lexical | {"block_comment_open", "string_hides_parens"})
    assert left_to_fresh == {"prose_stops_z3", "surrogate"}  # and a fresh z3 says why
    assert started == 2


def test_the_probe_finds_the_output_of_any_script_without_strings() -> None:
    """Random answers over the characters that move Z3's parenthesis count (rejected
    characters, ``#``, comments, parentheses either way, keywords), in a real row:
    the kept z3's probe always comes back (no answer waits for the budget) and reads
    each as a fresh z3 does."""
    rng = random.Random(48)
    pieces = ["(", ")", "(assert", "(and", " (> x 0)", "`", "[", "é", "#", "#x", " ; c", ":k"]
    pieces += [" ", "\r", "(push#x1)", "\u2026", "(not", "x", "))", "((", "\t"]
    truth, constants = ROWS[0]
    answers = ["".join(rng.choices(pieces, k=rng.randint(1, 30))) for _ in range(120)]
    items: list[Item] = [("random", f"<answer>{a}</answer>", truth, constants) for a in answers]
    session = Z3Session(z3_binary, DEFAULT_LIMITS.timeout_s, DEFAULT_LIMITS.memory_mb)
    try:
        kept = [check_published(*item[1:], session=session) for item in items]
        started, left = session.started, session.left
    finally:
        session.close()
    binary = fresh(items)
    assert [outcome(k) for k in kept] == [outcome(b) for b in binary]
    assert started == 1 and left == 0
    # Both ways of ending a script occur: a result line each way, and none at all.
    assert {b.reason for b in binary} >= {UNPARSED, NOT_IMPLIED}


@pytest.mark.anyio
async def test_the_default_equals_the_audit_on_every_shape_that_falls_back() -> None:
    items = corpus(ROWS, FEW)
    async with (
        VerifierPool(workers=2, published=True) as pool,
        VerifierPool(workers=2, published=True, published_binary=True) as audit,
    ):
        default: list[PublishedResult] = [None] * len(items)  # type: ignore[list-item]
        binary: list[PublishedResult] = [None] * len(items)  # type: ignore[list-item]

        async def one(i: int) -> None:
            _, response, truth, constants = items[i]
            _check, default[i] = await pool.check_both(response, truth, constants)
            binary[i] = await audit.check_published(response, truth, constants)

        async with anyio.create_task_group() as tg:
            for i in range(len(items)):
                tg.start_soon(one, i)
    mismatches = [
        (kind, r[:80], a, b)
        for (kind, r, _, _), a, b in zip(items, default, binary, strict=True)
        if outcome(a) != outcome(b)
    ]
    assert mismatches == []
    assert not any(b.in_process for b in binary)
    # Unclosed answers are read without Z3.
    unclosed = [d for (k, *_), d in zip(items, default, strict=True) if k == "unclosed_deep"]
    assert unclosed and all(d.in_process and d.reason == UNPARSED for d in unclosed)


# Depth shapes a model's answer takes: unclosed, surplus first, comments hiding either.
PARENTHESES = [
    ("unclosed", "(assert (and (> x 0)"),
    ("closed then unclosed", "(assert (> x 0))) (assert (and (> x 0)"),
    ("comment hides a close", "(assert (> x 0) ; )"),
    ("comment hides an open", "(assert (> x 0)) ; ("),
    ("surplus first", ")) (assert (> x 0)"),
    ("surplus only", "(assert (> x 0)))"),
    ("balanced", "(assert (> x 0))"),
]


def test_unclosed_scripts_and_scripts_that_close() -> None:
    truth, constants = ROWS[0]

    def script(answer: str) -> tuple[str, int]:
        text = published_script(constants, truth, answer)
        return text, len(f"{constants}\n(push)\n{truth}\n(pop)\n(push)\n{answer}")

    assert open_to_the_end(*script("(assert (and (> x 0)"))
    assert open_to_the_end(*script("(assert (> x 0))) (assert (and (> x 0)"))
    assert open_to_the_end(*script("(assert (> x 0) ; )"))  # the comment hides its ")"
    assert not open_to_the_end(*script("(assert (> x 0))"))
    assert not open_to_the_end(*script("(assert (> x 0)))"))
    assert not open_to_the_end(*script('(assert (and (> x 0) "x'))  # a string: the binary
    assert session_script(script("(assert (> x 0))))) (assert y)")[0])
    assert not session_script(script("(assert (and (> x 0)")[0])
    assert not session_script(script("(assert (> x |a|))")[0])


def test_an_answer_not_left_open_never_leaves_its_script_open() -> None:
    """``answer_left_open`` is the cheap necessary condition ``_unclosed`` asks first:
    after the row's balanced forms the script is at depth 0 where the answer starts, so
    a script open to its end after the answer needs an answer left open on its own."""
    shapes = corpus(ROWS)
    shapes += [(k, f"<answer>{a}</answer>", *ROWS[0]) for k, a in PARENTHESES]
    opened = 0
    for _kind, content, truth, constants in shapes:
        answer = extract_published(content)
        if answer is None or not row_commands_only(truth, constants):
            continue
        text = published_script(constants, truth, answer)
        end = len(f"{constants}\n(push)\n{truth}\n(pop)\n(push)\n{answer}")
        if open_to_the_end(text, end):
            opened += 1
            assert answer_left_open(answer), answer
    assert opened >= 4


def test_a_script_over_budget_is_killed_with_a_fresh_process_reason() -> None:
    # x³ + y³ + z³ = 33 has a solution only in 17-digit integers (Booker, 2019): Z3's
    # nonlinear integer arithmetic searches far over 1 s for one with x <= 0.
    ints = INTS + "\n(declare-const z Int)"
    cubes = "(= (+ (* x x x) (* y y y) (* z z z)) 33)"
    truth = f"(assert {cubes})"
    content = f"<answer>(assert (and {cubes} (> x 0)))</answer>"
    session = Z3Session(z3_binary, 1.0, DEFAULT_LIMITS.memory_mb)
    try:
        kept = check_published(content, truth, ints, timeout_s=1.0, session=session)
        # The next answer gets a new process, and its reading.
        after = check_published(
            "<answer>(assert false)</answer>", *ROWS[0], timeout_s=1.0, session=session
        )
        started = session.started
    finally:
        session.close()
    alone = check_published(content, truth, ints, timeout_s=1.0)
    assert (
        outcome(kept)
        == outcome(alone)
        == (
            False,
            "z3 killed after 1 s (the study had no time limit)",
        )
    )
    assert outcome(after) == (False, NOT_IMPLIED)
    assert started == 2


def test_a_probed_script_past_its_budget_goes_to_a_fresh_process() -> None:
    """A fenced answer (read with the probe) that outlives the budget: the kept z3 is
    killed, and the reading is a fresh z3's (here also killed), never the session's
    own guess at why the probe did not come back."""
    ints = INTS + "\n(declare-const z Int)"
    cubes = "(= (+ (* x x x) (* y y y) (* z z z)) 33)"
    truth = f"(assert {cubes})"
    content = f"<answer>```smt2\n(assert (and {cubes} (> x 0)))\n```</answer>"
    script = published_script(ints, truth, extract_published(content) or "")
    assert not session_script(script) and probed_script(script)
    session = Z3Session(z3_binary, 1.0, DEFAULT_LIMITS.memory_mb)
    try:
        assert session.read(script) is None
        assert session.left == 1
        kept = check_published(content, truth, ints, timeout_s=1.0, session=session)
    finally:
        session.close()
    assert outcome(kept) == (False, "z3 killed after 1 s (the study had no time limit)")


def test_a_process_that_ends_by_itself_leaves_the_answer_to_a_fresh_one() -> None:
    # A "z3" that exits at once: no nonce ever comes back, as when Z3 runs out of
    # memory mid-script; the reading is then a fresh z3's.
    session = Z3Session(lambda: Path("/bin/true"), 5.0, DEFAULT_LIMITS.memory_mb)
    truth, constants = ROWS[0]
    content = "<answer>(assert (> x 0))</answer>"
    try:
        assert session.read(published_script(constants, truth, "(assert (> x 0))")) is None
        result = check_published(content, truth, constants, session=session)
    finally:
        session.close()
    assert outcome(result) == outcome(check_published(content, truth, constants))


def _z3_one_argument_division(text: str, constants: str) -> bool | None:
    """Whether Z3 parses ``text`` with a div or / of fewer than two arguments (None: no parse)."""
    try:
        formulas = z3.parse_smt2_string(constants + text)
    except z3.Z3Exception:
        return None
    stack: list[z3.ExprRef] = list(formulas)
    while stack:
        term = stack.pop()
        if z3.is_app(term):
            kind = term.decl().kind()
            if kind in (z3.Z3_OP_DIV, z3.Z3_OP_IDIV) and term.num_args() < 2:
                return True
            stack.extend(term.children())
    return False


def test_the_division_check_finds_what_z3_parses_as_a_one_argument_division() -> None:
    rng = random.Random(48)
    atoms = ["x", "2", "(+ x 1)", "(div x 2)", "(div x)", "(/ r)", "(/ r 2)", "(div x 2 3)"]
    constants = "(declare-const x Int)(declare-const r Real)"
    seen = set()
    for _ in range(400):
        head = rng.choice(["div", "/", "+", "-"])
        args = " ".join(rng.choice(atoms) for _ in range(rng.randint(0, 3)))
        text = f"(assert (= ({head} {args}) 1))"
        parsed = _z3_one_argument_division(text, constants)
        if parsed is None:
            continue
        tokens = _tokens(text)
        assert tokens is not None
        assert _one_argument_division(tokens) == parsed, text
        seen.add(parsed)
    assert seen == {True, False}


def test_a_one_argument_division_is_left_to_the_binary_not_to_the_probe() -> None:
    # Z3's linear-arithmetic probe reads the missing second argument of "(div x)":
    # a SIGSEGV of the whole worker (gpt-4.1-mini, trial 3, WARP item 69).
    reader = PublishedInProcess(Verifier(DEFAULT_LIMITS), DEFAULT_LIMITS.timeout_s)
    truth, constants = ROWS[0]
    answer = "(assert (and (> x 0) (< x 5) (distinct x y) (>= (div (div x 2)) 0)))"
    assert reader.reading(answer, truth, constants) is None
    content = f"<answer>{answer}</answer>"
    result = check_published(content, truth, constants, in_process=reader.reading)
    # Z3 reads "(div t)" as t itself: the answer is the truth, and the binary says so.
    assert outcome(result) == outcome(check_published(content, truth, constants))
    assert outcome(result) == (True, EQUIVALENT)


@pytest.mark.anyio
async def test_a_one_argument_division_keeps_its_verdict_and_the_binarys_reason() -> None:
    truth, constants = ROWS[0]
    content = "<answer>(assert (and (> x 0) (< x 5) (distinct x y) (>= (div x) 0)))</answer>"
    async with VerifierPool(workers=1, published=True) as pool:
        both = await pool.check_both(content, truth, constants)
        alone = await pool.check(content, truth, constants)
        replaced = pool.replaced
    assert both[0].status == alone.status
    assert outcome(both[1]) == outcome(check_published(content, truth, constants))
    assert replaced == 0


@pytest.mark.slow
def test_a_kept_z3_and_the_default_read_the_benchmark_as_fresh_processes_do(
    benchmark_path: Path,
) -> None:
    rows = pl.read_parquet(benchmark_path).select("answer", "constants").rows()
    chosen = rows[:: len(rows) // 40]
    items = corpus(chosen) + corpus(ROWS)
    ctx = z3.Context()
    for truth, constants in chosen:
        # A mutant: the truth with its middle conjunct negated.
        parts = [p.sexpr() for p in truth_conjuncts(truth, constants, ctx)]
        j = len(parts) // 2
        parts[j] = f"(not {parts[j]})"
        items.append(
            ("mutant", f"<answer>(assert (and {' '.join(parts)}))</answer>", truth, constants)
        )
    reader = PublishedInProcess(Verifier(DEFAULT_LIMITS), DEFAULT_LIMITS.timeout_s)
    session = Z3Session(z3_binary, DEFAULT_LIMITS.timeout_s, DEFAULT_LIMITS.memory_mb)
    try:
        kept = [check_published(r, t, c, session=session) for _, r, t, c in items]
        default = [
            check_published(r, t, c, in_process=reader.reading, session=session)
            for _, r, t, c in items
        ]
    finally:
        session.close()
    alone = fresh(items)
    assert [outcome(k) for k in kept] == [outcome(a) for a in alone]
    assert [outcome(d) for d in default] == [outcome(a) for a in alone]


def test_the_depth_walk_is_a_character_by_character_count() -> None:
    """``_depths`` (parentheses kept by bytes.translate, comments cut by a regex) against
    a walk that reads each character as Z3's scanner does: ``;`` to the line feed is a
    comment, every other ``(`` and ``)`` counts."""

    def by_hand(text: str) -> list[int]:
        depths, depth, comment = [], 0, False
        for ch in text:
            if comment:
                comment = ch != "\n"
            elif ch == ";":
                comment = True
            elif ch in "()":
                depth += 1 if ch == "(" else -1
                depths.append(depth)
        return depths

    rng = random.Random(97)
    for _ in range(5_000):
        text = "".join(rng.choice("(()) ab;\n\t") for _ in range(rng.randint(0, 60)))
        assert _depths(text) == by_hand(text), text
