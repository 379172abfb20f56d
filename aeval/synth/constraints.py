"""One synthetic problem at one size: its assertion, its declarations, its tier, its Z3 check."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from aeval.synth.families import Problem, problems

__all__ = [
    "MEDIUM_MAX_CHARS",
    "SMALL_MAX_CHARS",
    "Constraint",
    "Tier",
    "constraint",
    "render_constraint",
    "tier_of",
    "verify_constraints",
]

# Tier by the size of the ground truth, in characters.
SMALL_MAX_CHARS = 1_000
MEDIUM_MAX_CHARS = 4_000
# Per-constraint Z3 budget: these are easy linear problems (milliseconds each);
# hitting it means a family is broken, not that the machine is slow.
Z3_TIMEOUT_MS = 60_000


Tier = Literal["small", "medium", "large"]


def render_constraint(atoms: Sequence[str]) -> str:
    """``(assert (and (and a b) c))``: the left-nested conjunction of ``atoms``."""
    if not atoms:
        raise ValueError("a constraint needs at least one atom")
    # Linear-time form of acc = f"(and {acc} {atom})" repeated.
    body = "(and " * (len(atoms) - 1) + atoms[0] + "".join(f" {a})" for a in atoms[1:])
    return f"(assert {body})"


@dataclass(frozen=True)
class Constraint:
    """One problem at one size: the assertion and the declarations it needs."""

    problem: str
    n: int
    assertion: str
    constants: str


_OPERATORS = frozenset({"and", "not", "mod", "div"})


def _declarations(atoms: Sequence[str]) -> str:
    # Declared in order of first use, one ``(declare-const x Int)`` per line, like the real data.
    names: dict[str, None] = {}
    for atom in atoms:
        for token in atom.replace("(", " ").replace(")", " ").split():
            if token[0].isalpha() and token not in _OPERATORS:
                names.setdefault(token)
    return "\n".join(f"(declare-const {name} Int)" for name in names)


def constraint(problem: Problem, n: int) -> Constraint:
    """Render ``problem`` at size ``n``."""
    atoms = problem.family.build(n, problem.params)
    return Constraint(problem.name, n, render_constraint(atoms), _declarations(atoms))


def verify_constraints(constraints: Sequence[Constraint]) -> None:
    """Check every constraint with Z3 against its declarations and its family's meaning.

    Each must parse, be satisfiable, and Z3's model must take the family's path
    according to the family's plain-Python ``holds`` (so the SMT-LIB says what
    the family says, not merely something satisfiable).

    :raises RuntimeError: one fails (a bug in a family, never the user's input).
    """
    import z3  # deferred: Z3 costs ~0.2 s to import, paid only when synthesising

    by_name = {p.name: p for p in problems()}
    ctx = z3.Context()
    for c in constraints:
        solver = z3.Solver(ctx=ctx)
        solver.set("timeout", Z3_TIMEOUT_MS)
        try:
            solver.from_string(f"{c.constants}\n{c.assertion}")
        except z3.Z3Exception as err:
            raise RuntimeError(f"synthetic {c.problem} N={c.n} does not parse: {err}") from err
        result = solver.check()
        if result != z3.sat:
            raise RuntimeError(f"synthetic {c.problem} N={c.n} is {result}, not satisfiable")
        model = solver.model()
        values = {
            name: model.eval(z3.Int(name, ctx), model_completion=True).as_long()
            for name in _declared_names(c.constants)
        }
        problem = by_name[c.problem]
        if not problem.family.holds(c.n, problem.params, values):
            raise RuntimeError(
                f"synthetic {c.problem} N={c.n}: Z3's model {values} does not take the "
                f"{problem.family.name} path"
            )


def _declared_names(constants: str) -> list[str]:
    return [line.split()[1] for line in constants.splitlines()]


def tier_of(answer_chars: int) -> Tier:
    """The tier of a ground truth by its length in characters."""
    if answer_chars <= SMALL_MAX_CHARS:
        return "small"
    if answer_chars <= MEDIUM_MAX_CHARS:
        return "medium"
    return "large"
