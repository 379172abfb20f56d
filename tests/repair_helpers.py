"""Checks the repair-round tests share: a feedback message's counterexample, confirmed by
Z3 here, apart from the code that produced it."""

from __future__ import annotations

import z3

from aeval.verify import parse_declarations
from aeval.verify.extract import extract_answer


def confirm_counterexample(
    point: dict[str, str], direction: str | None, answer: str, truth: str, constants: str
) -> None:
    """At ``point`` the truth holds and the answer does not (``too_strong``), or the other
    way round (``too_weak``), as the feedback says: both formulas simplified to constants."""
    ctx = z3.Context()
    decls = parse_declarations(constants, ctx)
    pairs = [(decls[k], z3.IntVal(int(v), ctx)) for k, v in point.items()]
    text = extract_answer(answer).text or ""
    t, a = (
        z3.simplify(z3.substitute(z3.And(*z3.parse_smt2_string(f, decls=decls, ctx=ctx)), *pairs))
        for f in (truth, text)
    )
    holds = (True, False) if direction == "too_strong" else (False, True)
    assert (z3.is_true(t), z3.is_true(a)) == holds, (point, t, a)
