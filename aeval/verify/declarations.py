"""A dataset row's declarations, read into Z3 declarations and the C arrays Z3's parser takes.

The declarations are the dataset's own (trusted), read with the same
non-recursive reader as answers, under a small depth limit.
"""

from __future__ import annotations

import z3

from aeval.verify.limits import VerifyLimits
from aeval.verify.sexpr import SExpr, read_forms

__all__ = ["ParserDecls", "parse_declarations"]

_DECL_LIMITS = VerifyLimits(max_depth=16)


class _BadTruth(Exception):
    pass


class ParserDecls:
    """A row's declarations as the C arrays Z3's parser takes, built once per row.

    ``z3.parse_smt2_string`` rebuilds these arrays in Python on every call,
    which cost more than the parse itself on this benchmark.
    """

    def __init__(self, decls: dict[str, z3.AstRef], ctx: z3.Context) -> None:
        self.ctx = ctx
        self.size = len(decls)
        self.names = (z3.Symbol * self.size)()
        self.decls = (z3.FuncDecl * self.size)()
        # The arrays hold raw pointers: keep the Python objects (and so Z3's
        # reference counts) alive as long as the arrays.
        self._alive = [d.decl() if isinstance(d, z3.ExprRef) else d for d in decls.values()]
        for i, (name, fdecl) in enumerate(zip(decls, self._alive, strict=True)):
            self.names[i] = z3.to_symbol(name, ctx)
            self.decls[i] = fdecl.ast

    def parse(self, text: str) -> z3.AstVector:
        """Parse sanitised ``(assert …)`` text against exactly these declarations."""
        vector = z3.Z3_parse_smtlib2_string(
            self.ctx.ref(), text, 0, None, None, self.size, self.names, self.decls
        )
        return z3.AstVector(vector, self.ctx)


def _sort(spec: SExpr, ctx: z3.Context) -> z3.SortRef:
    # Depth is bounded by _DECL_LIMITS.max_depth, so recursion here is safe.
    if isinstance(spec, str):
        base = {
            "Int": z3.IntSort,
            "Real": z3.RealSort,
            "Bool": z3.BoolSort,
            "String": z3.StringSort,
        }.get(spec)
        if base is not None:
            return base(ctx)
    elif len(spec) == 3 and spec[:2] == ("_", "BitVec") and isinstance(spec[2], str):
        return z3.BitVecSort(int(spec[2]), ctx)
    elif len(spec) == 3 and spec[0] == "Array":
        return z3.ArraySort(_sort(spec[1], ctx), _sort(spec[2], ctx))
    raise _BadTruth(f"unsupported sort {spec!r} in the declarations")


def _name(sym: SExpr) -> str:
    if not isinstance(sym, str) or sym.startswith((":", '"')) or sym[:1].isdigit():
        raise _BadTruth(f"bad declared name {sym!r}")
    return sym[1:-1] if sym.startswith("|") else sym


def parse_declarations(constants: str, ctx: z3.Context) -> dict[str, z3.AstRef]:
    """Turn a row's ``(declare-const …)``/``(declare-fun …)`` text into Z3 declarations.

    :raises ValueError: naming the form that is not a supported declaration.
    """
    try:
        forms = read_forms(constants, _DECL_LIMITS)
    except ValueError as err:
        raise ValueError(f"declarations do not parse: {err}") from None
    decls: dict[str, z3.AstRef] = {}
    try:
        for form in forms:
            if isinstance(form, tuple) and len(form) == 3 and form[0] == "declare-const":
                name = _name(form[1])
                decls[name] = z3.Const(name, _sort(form[2], ctx))
            elif (
                isinstance(form, tuple)
                and len(form) == 4
                and form[0] == "declare-fun"
                and isinstance(form[2], tuple)
            ):
                name = _name(form[1])
                rng = _sort(form[3], ctx)
                if form[2]:
                    decls[name] = z3.Function(name, *[_sort(a, ctx) for a in form[2]], rng)
                else:
                    decls[name] = z3.Const(name, rng)
            else:
                raise _BadTruth(f"not a supported declaration: {str(form)[:80]}")
    except _BadTruth as err:
        raise ValueError(str(err)) from None
    return decls
