"""The counterexample of a ``not_equivalent`` answer: an input the two formulas disagree on."""

from __future__ import annotations

import z3

__all__ = ["find_counterexample"]


def _variables(*formulas: z3.ExprRef) -> dict[str, z3.ExprRef]:
    """The uninterpreted constants occurring in ``formulas`` (iterative walk, shared nodes once)."""
    found: dict[str, z3.ExprRef] = {}
    seen: set[int] = set()
    stack: list[z3.ExprRef] = list(formulas)
    while stack:
        expr = stack.pop()
        key = expr.get_id()
        if key in seen:
            continue
        seen.add(key)
        if z3.is_const(expr) and expr.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            found[expr.decl().name()] = expr
        elif z3.is_app(expr) or z3.is_quantifier(expr):
            stack.extend(expr.children())
    return found


def find_counterexample(
    model: z3.ModelRef, truth: z3.BoolRef, answer: z3.BoolRef, witness: str
) -> tuple[dict[str, str], bool]:
    """A value for every variable of either formula, and whether both formulas confirm it.

    Confirmation substitutes the values into both formulas and lets Z3 simplify
    them to constants: ``truth`` true and ``answer`` false for ``too_strong``,
    the other way round for ``too_weak``.
    """
    variables = _variables(truth, answer)
    values = {name: model.eval(var, model_completion=True) for name, var in variables.items()}
    pairs = [(variables[name], value) for name, value in values.items()]
    t = z3.simplify(z3.substitute(truth, *pairs)) if pairs else z3.simplify(truth)
    a = z3.simplify(z3.substitute(answer, *pairs)) if pairs else z3.simplify(answer)
    if witness == "too_strong":
        confirmed = z3.is_true(t) and z3.is_false(a)
    else:
        confirmed = z3.is_true(a) and z3.is_false(t)
    return {name: str(values[name]) for name in sorted(values)}, confirmed
