"""Synthetic benchmark families: parametric worst-case paths and their problems.

A *family* is a parametric program path (a sorted array, pairwise-distinct
values, a loop counter…) whose path constraint is written out for each input
size N; a *problem* is one family with fixed parameters. Each family says the
same thing twice, independently: its SMT-LIB atoms (``build``) and, in plain
Python, whether an input takes the path (``holds``), so one can check the other
(:func:`aeval.synth.constraints.verify_constraints`).
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from aeval.errors import ConfigError

__all__ = ["FAMILIES", "Family", "Problem", "problems"]

# --------------------------------------------------------------------------- atoms
# The real benchmark was printed by a symbolic executor with its own spacing:
# comparisons carry a leading space and two spaces after the operator, a
# negated equality has none, and conjunctions nest to the left. Copying it
# keeps synthetic questions looking like the real ones.


def _cmp(op: str, a: object, b: object) -> str:
    return f" ( {op}  {a} {b})"


def _ne(a: object, b: object) -> str:
    return f"(not ( = {a} {b}))"


def _arith(op: str, a: object, b: object) -> str:
    return f"( {op}  {a} {b})"


# --------------------------------------------------------------------------- families

Params = tuple[tuple[str, int | str], ...]
Build = Callable[[int, dict[str, int | str]], list[str]]
# holds(n, params, values): does this assignment take the family's path? Plain
# Python, written apart from the SMT-LIB rendering so the two can check each other.
Holds = Callable[[int, dict[str, int | str], dict[str, int]], bool]


@dataclass(frozen=True)
class Family:
    """A parametric worst-case path.

    ``build(n, params)`` gives the path's atoms for size n; ``holds(n, params,
    values)`` says, independently, whether an input assignment takes that path.
    """

    name: str
    summary: str
    n_min: int
    variants: tuple[Params, ...]
    build: Build
    holds: Holds


def _sorted(n: int, p: dict[str, int | str]) -> list[str]:
    return [_cmp(str(p["op"]), f"in{i}", f"in{i + 1}") for i in range(n - 1)]


def _distinct(n: int, p: dict[str, int | str]) -> list[str]:
    lo = int(p["lo"])
    hi = lo + n + int(p["slack"])  # values in [lo, hi): room for n distinct ones
    atoms: list[str] = []
    for i in range(n):
        atoms += [_cmp(">=", f"in{i}", lo), _cmp("<", f"in{i}", hi)]
    atoms += [_ne(f"in{j}", f"in{i}") for i in range(n) for j in range(i + 1, n)]
    return atoms


def _bounded(n: int, p: dict[str, int | str]) -> list[str]:
    var = p["var"]
    atoms: list[str] = []
    for i in range(n):
        atoms += [_cmp(">=", f"{var}{i}", p["lo"]), _cmp("<=", f"{var}{i}", p["hi"])]
    return atoms


def _prefix_sum(n: int, p: dict[str, int | str]) -> list[str]:
    atoms: list[str] = []
    for i in range(n):
        atoms += [_cmp(">=", f"in{i}", p["lo"]), _cmp("<=", f"in{i}", p["hi"])]
    atoms += [_cmp(">=", "t", p["tlo"]), _cmp("<=", "t", p["thi"])]
    total = "in0"
    for i in range(n):
        if i:
            total = _arith("+", f"in{i}", total)
        atoms.append(_ne(total, "t"))
    return atoms


def _loop_counter(n: int, p: dict[str, int | str]) -> list[str]:
    # for (c = start; c < b; c += step): exactly n iterations, then the exit.
    atoms = [_cmp("=", "c0", p["start"])]
    for k in range(n):
        atoms += [_cmp("<", f"c{k}", "b"), _cmp("=", f"c{k + 1}", _arith("+", f"c{k}", p["step"]))]
    atoms.append(_cmp(">=", f"c{n}", "b"))
    return atoms


def _mod_filter(n: int, p: dict[str, int | str]) -> list[str]:
    atoms: list[str] = []
    for i in range(n):
        atoms += [_cmp(">", f"in{i}", 0), _ne(_arith("mod", f"in{i}", p["m"]), p["r"])]
    return atoms


def _running_max(n: int, p: dict[str, int | str]) -> list[str]:
    atoms: list[str] = []
    for k in range(1, n):
        for j in range(k):
            if p["both"]:
                atoms.append(_cmp(">=", f"in{k}", f"in{j}"))
            atoms.append(_cmp(">", f"in{k}", f"in{j}"))
    return atoms


def _fixed_guard(n: int, p: dict[str, int | str]) -> list[str]:
    # The path does not depend on N at all: a model must notice that.
    return [_cmp(">=", "n", p["lo"]), _cmp("<=", "n", p["hi"]), _cmp("=", "n", p["v"])]


_COMPARE: Mapping[str, Callable[[int, int], bool]] = MappingProxyType(
    {"<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt}
)


def _inputs(values: dict[str, int], n: int, var: object = "in") -> list[int]:
    return [values[f"{var}{i}"] for i in range(n)]


def _sorted_holds(n: int, p: dict[str, int | str], values: dict[str, int]) -> bool:
    xs = _inputs(values, n)
    return all(_COMPARE[str(p["op"])](a, b) for a, b in itertools.pairwise(xs))


def _distinct_holds(n: int, p: dict[str, int | str], values: dict[str, int]) -> bool:
    xs, lo = _inputs(values, n), int(p["lo"])
    return len(set(xs)) == n and all(lo <= x < lo + n + int(p["slack"]) for x in xs)


def _bounded_holds(n: int, p: dict[str, int | str], values: dict[str, int]) -> bool:
    return all(int(p["lo"]) <= x <= int(p["hi"]) for x in _inputs(values, n, p["var"]))


def _prefix_sum_holds(n: int, p: dict[str, int | str], values: dict[str, int]) -> bool:
    xs, t = _inputs(values, n), values["t"]
    if not (int(p["tlo"]) <= t <= int(p["thi"])):
        return False
    if not all(int(p["lo"]) <= x <= int(p["hi"]) for x in xs):
        return False
    total = 0
    for x in xs:
        total += x
        if total == t:
            return False
    return True


def _loop_counter_holds(n: int, p: dict[str, int | str], values: dict[str, int]) -> bool:
    # Run the loop: it must iterate exactly n times, through the recorded counter values.
    c, bound, step, iterations = int(p["start"]), values["b"], int(p["step"]), 0
    while c < bound:
        if iterations > n or values.get(f"c{iterations}") != c:
            return False
        c += step
        iterations += 1
    return iterations == n and values[f"c{n}"] == c


def _mod_filter_holds(n: int, p: dict[str, int | str], values: dict[str, int]) -> bool:
    # Python's % and SMT-LIB's mod agree for a positive divisor (result in [0, m)).
    return all(x > 0 and x % int(p["m"]) != int(p["r"]) for x in _inputs(values, n))


def _running_max_holds(n: int, p: dict[str, int | str], values: dict[str, int]) -> bool:
    xs = _inputs(values, n)
    return all(xs[k] > max(xs[:k]) for k in range(1, n))


def _fixed_guard_holds(n: int, p: dict[str, int | str], values: dict[str, int]) -> bool:
    return int(p["lo"]) <= values["n"] <= int(p["hi"]) and values["n"] == int(p["v"])


def _v(**params: int | str) -> Params:
    return tuple(params.items())


FAMILIES: tuple[Family, ...] = (
    Family(
        "sorted",
        "an array of N integers that passes an is-sorted check (every step takes the in-order "
        "branch)",
        2,
        (_v(op="<="), _v(op="<"), _v(op=">="), _v(op=">")),
        _sorted,
        _sorted_holds,
    ),
    Family(
        "distinct",
        "N pairwise-distinct integers in a window just wide enough for them",
        2,
        (_v(lo=0, slack=0), _v(lo=1, slack=0), _v(lo=0, slack=3), _v(lo=-5, slack=10)),
        _distinct,
        _distinct_holds,
    ),
    Family(
        "bounded",
        "every one of N inputs inside a fixed range (characters, digits, bytes, small ints)",
        1,
        (
            _v(var="ch", lo=65, hi=90),
            _v(var="ch", lo=97, hi=122),
            _v(var="d", lo=48, hi=57),
            _v(var="in", lo=-10, hi=10),
            _v(var="b", lo=0, hi=255),
        ),
        _bounded,
        _bounded_holds,
    ),
    Family(
        "prefix_sum",
        "bounded inputs whose running sum never hits a target t",
        1,
        (
            _v(lo=-10, hi=10, tlo=-100, thi=100),
            _v(lo=0, hi=9, tlo=1, thi=50),
            _v(lo=1, hi=5, tlo=0, thi=20),
        ),
        _prefix_sum,
        _prefix_sum_holds,
    ),
    Family(
        "loop_counter",
        "a counter that stays below a bound b for exactly N iterations, then exits",
        1,
        (_v(start=0, step=1), _v(start=0, step=2), _v(start=1, step=3), _v(start=5, step=4)),
        _loop_counter,
        _loop_counter_holds,
    ),
    Family(
        "mod_filter",
        "N positive inputs that all pass a modulus filter",
        1,
        (_v(m=2, r=0), _v(m=3, r=0), _v(m=5, r=1), _v(m=7, r=3)),
        _mod_filter,
        _mod_filter_holds,
    ),
    Family(
        "running_max",
        "every input is a new maximum (the worst case of a linear max scan)",
        2,
        (_v(both=0), _v(both=1)),
        _running_max,
        _running_max_holds,
    ),
    Family(
        "fixed_guard",
        "a guard on a single variable that does not change with N",
        1,
        (_v(lo=1, hi=5, v=1), _v(lo=0, hi=10, v=3), _v(lo=2, hi=8, v=8)),
        _fixed_guard,
        _fixed_guard_holds,
    ),
)


@dataclass(frozen=True)
class Problem:
    """One family with fixed parameters; ``name`` is ``family:k`` (k-th variant)."""

    family: Family
    variant: int

    @property
    def name(self) -> str:
        return f"{self.family.name}:{self.variant}"

    @property
    def params(self) -> dict[str, int | str]:
        return dict(self.family.variants[self.variant])


def problems(selection: Iterable[str] | None = None) -> tuple[Problem, ...]:
    """The problems named by ``selection`` (family names or ``family:k``); all when ``None``.

    :raises ConfigError: a name matches no family or variant.
    """
    by_name = {f.name: f for f in FAMILIES}
    everything = [Problem(f, k) for f in FAMILIES for k in range(len(f.variants))]
    if selection is None:
        return tuple(everything)
    chosen: dict[str, Problem] = {}
    for raw in selection:
        name = raw.strip()
        if not name:
            continue
        family_name, _, variant = name.partition(":")
        family = by_name.get(family_name)
        if family is None:
            raise ConfigError(
                f"unknown synthetic problem {name!r}; families are {', '.join(by_name)}"
            )
        if not variant:
            for k in range(len(family.variants)):
                chosen.setdefault(f"{family.name}:{k}", Problem(family, k))
            continue
        if not variant.isdigit() or int(variant) >= len(family.variants):
            raise ConfigError(
                f"unknown variant in {name!r}; {family.name} has variants "
                f"0..{len(family.variants) - 1}"
            )
        chosen.setdefault(name, Problem(family, int(variant)))
    if not chosen:
        raise ConfigError("no synthetic problems selected")
    return tuple(chosen.values())
