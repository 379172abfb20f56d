"""Z3 equivalence of an answer and the ground truth, both directions, with counterexamples.

Both formulas are parsed with :func:`z3.parse_smt2_string` against the dataset
row's declarations *passed as declarations* (``decls=``), never by gluing the
declarations and the answer into one script, and only the sanitised
``(assert …)`` forms are ever parsed. Each check gets its own solvers; the
parser gets only that row's declarations, so no declaration, assertion or
option of one check can reach the next even when the Z3 context is reused.

Context reuse: :class:`Verifier` works in one ``z3.Context`` for its whole
life. The worker pool keeps one Verifier per worker process: 1.7× faster
than a fresh context per check and flat in memory (a
fresh context costs 8–16 MB of page faults each time); ``bench/verify.py``
measures both. :func:`check_response` builds a fresh Verifier per call, so it
is a pure function of its arguments.
"""

from __future__ import annotations

import dataclasses
import re
import time
from dataclasses import dataclass

import z3

from aeval.verdicts import CheckResult, Direction, Status
from aeval.verify.counterexample import find_counterexample
from aeval.verify.declarations import ParserDecls, parse_declarations
from aeval.verify.extract import extract_answer
from aeval.verify.limits import DEFAULT_LIMITS, VerifyLimits
from aeval.verify.sanitiser import Rejection, sanitise

__all__ = ["Directions", "Verifier", "check_response"]

# Beyond this, the response is not even searched for an answer block.
_RESPONSE_SIZE_FACTOR = 64
_TRUTH_CACHE_SIZE = 1024
# Ground truths are the dataset's own: generous size limits, same reader.
_TRUTH_MIN_BYTES = 16 * 1024 * 1024
_UNKNOWN_SYMBOL = re.compile(r"unknown (?:constant|function|sort)\s+'?([^\s'()]+)")


@dataclass(frozen=True, slots=True)
class _Truth:
    parser: ParserDecls
    formula: z3.BoolRef
    text: str  # the sanitiser's canonical re-emission of the truth's asserts
    raw: str  # the truth as the dataset gives it, stripped


@dataclass(frozen=True, slots=True)
class Directions:
    """What one check settled about an answer's two directions, for the published
    reading to reuse (:mod:`aeval.verify.published_inprocess`): the satisfiability of
    truth ∧ ¬answer and of answer ∧ ¬truth, None where the check did not decide it.

    ``text`` is exactly what Z3 parsed (the sanitised asserts, one per line) against
    the row's declarations, ``answer`` the conjunction of what it parsed to.
    """

    truth: str
    constants: str
    text: str
    answer: z3.BoolRef
    too_strong: z3.CheckSatResult | None  # truth ∧ ¬answer
    too_weak: z3.CheckSatResult | None  # answer ∧ ¬truth
    elapsed_s: float = 0.0  # the whole check's time, the solver's included
    # What each line of ``text`` parsed to, in order (empty where not parsed here):
    # Z3's own vector, kept as parsed (the check's hot path converts nothing).
    terms: z3.AstVector | tuple[z3.BoolRef, ...] = ()


def _z3_message(err: z3.Z3Exception) -> str:
    raw = err.value if isinstance(err.value, str | bytes) else str(err)
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    parts = re.findall(r'\(error "(.*?)"\)', text, flags=re.DOTALL)
    # Positions refer to the re-emitted token text, not to the answer: drop them.
    parts = [re.sub(r"^line \d+ column \d+: ", "", p.strip()) for p in parts]
    return "; ".join(parts) if parts else text.strip()


def _conjunction(forms: z3.AstVector, ctx: z3.Context) -> z3.BoolRef:
    items = list(forms)
    return items[0] if len(items) == 1 else z3.And(*items, ctx)


class Verifier:
    """Checks answers against ground truths in one Z3 context.

    Not thread-safe: one Verifier per thread or process. ``check`` never raises
    for any answer text; it always returns a :class:`CheckResult`.
    """

    def __init__(self, limits: VerifyLimits = DEFAULT_LIMITS, ctx: z3.Context | None = None):
        self.limits = limits
        self.ctx = ctx if ctx is not None else z3.Context()
        self._truths: dict[tuple[str, str], _Truth | str] = {}
        self._parsers: dict[str, ParserDecls | str] = {}
        self._truth_limits = dataclasses.replace(
            limits, max_answer_bytes=max(limits.max_answer_bytes, _TRUTH_MIN_BYTES)
        )
        # What the last check decided of its answer's directions (None: it decided
        # neither, or stopped before Z3): see Directions.
        self.last_directions: Directions | None = None

    # -- ground truth -------------------------------------------------------------

    def _truth(self, truth: str, constants: str) -> _Truth | str:
        key = (truth, constants)
        cached = self._truths.get(key)
        if cached is None:
            cached = self._parse_truth(truth, constants)
            if len(self._truths) >= _TRUTH_CACHE_SIZE:
                self._truths.clear()
            self._truths[key] = cached
        return cached

    def _parser(self, constants: str) -> ParserDecls | str:
        """The row's declarations for Z3's parser (rows often share them), or why not."""
        cached = self._parsers.get(constants)
        if cached is None:
            try:
                cached = ParserDecls(parse_declarations(constants, self.ctx), self.ctx)
            except ValueError as err:
                cached = f"dataset constants: {err}"
            if len(self._parsers) >= _TRUTH_CACHE_SIZE:
                self._parsers.clear()
            self._parsers[constants] = cached
        return cached

    def _parse_truth(self, truth: str, constants: str) -> _Truth | str:
        """The parsed ground truth, or why it is unusable."""
        parser = self._parser(constants)
        if isinstance(parser, str):
            return parser
        clean = sanitise(truth, self._truth_limits, lenient=False)
        if isinstance(clean, Rejection):
            return f"dataset answer: {clean.reason}"
        text = clean.text  # joined on each access: once here
        try:
            forms = parser.parse(text)
        except z3.Z3Exception as err:
            return f"dataset answer: Z3 says: {_z3_message(err)}"
        return _Truth(parser, _conjunction(forms, self.ctx), text, truth.strip())

    # -- one check ----------------------------------------------------------------

    def check(
        self, response_text: str | None, truth: str, constants: str, details: bool = True
    ) -> CheckResult:
        """Verify one response. ``details=False``: the same status and repairs, but a
        ``not_equivalent`` answer gets no direction or counterexample (one solver
        call instead of two, and no model evaluation: what a reward needs)."""
        start = time.perf_counter()
        self.last_directions = None
        result = self._check(response_text, truth, constants, details)
        elapsed = time.perf_counter() - start
        if self.last_directions is not None:
            self.last_directions = dataclasses.replace(self.last_directions, elapsed_s=elapsed)
        return dataclasses.replace(result, elapsed_ms=elapsed * 1000.0)

    def _check(
        self, response_text: str | None, truth: str, constants: str, details: bool = True
    ) -> CheckResult:
        parsed = self._truth(truth, constants)
        if isinstance(parsed, str):
            return CheckResult(Status.BAD_GROUND_TRUTH, parsed)
        limit = self.limits.max_answer_bytes * _RESPONSE_SIZE_FACTOR
        if response_text is not None and len(response_text) > limit:
            return CheckResult(
                Status.TOO_LARGE, f"response of {len(response_text)} characters (limit {limit})"
            )
        extraction = extract_answer(response_text)
        repaired = list(extraction.repairs)
        if extraction.text is None:
            return CheckResult(Status.NO_ANSWER, extraction.reason, _joined(repaired))
        if (
            extraction.text.strip() == parsed.raw
            and len(parsed.raw.encode("utf-8", "surrogatepass")) <= self.limits.max_answer_bytes
        ):
            # A verbatim copy of a truth that already passed the sanitiser and
            # Z3's parser (within the answer's own size limit) would pass both
            # again to the very same term.
            return CheckResult(Status.EQUIVALENT, "", _joined(repaired))
        clean = sanitise(extraction.text, self.limits, may_be_cut=extraction.may_be_cut)
        if isinstance(clean, Rejection):
            return CheckResult(clean.status, clean.reason, _joined(repaired))
        repaired.extend(clean.repairs)
        how = _joined(repaired)
        text = clean.text  # joined on each access: once here
        if text == parsed.text:
            # The same tokens parsed against the same declarations give the very
            # term the truth parsed to: equivalent without a second Z3 parse.
            self.last_directions = Directions(
                truth,
                constants,
                text,
                parsed.formula,
                z3.unsat,
                z3.unsat,
                # One line: the formula is what that line parsed to.
                terms=(parsed.formula,) if "\n" not in text else (),
            )
            return CheckResult(Status.EQUIVALENT, "", how)
        try:
            forms = parsed.parser.parse(text)
        except z3.Z3Exception as err:
            message = _z3_message(err)
            unknown = _UNKNOWN_SYMBOL.search(message)
            if unknown:
                return CheckResult(
                    Status.UNKNOWN_SYMBOL,
                    f"unknown symbol '{unknown.group(1)}' (not declared for this row)",
                    how,
                )
            return CheckResult(Status.PARSE_ERROR, f"Z3 says: {message}", how)
        except (MemoryError, RecursionError) as err:
            return CheckResult(Status.RESOURCE_LIMIT, f"parsing ran out of {err!r}", how)
        try:
            answer = _conjunction(forms, self.ctx)
            result, strong, weak = self._equivalence(parsed, answer, how, details)
            if strong is not None or weak is not None:
                self.last_directions = Directions(
                    truth, constants, text, answer, strong, weak, terms=forms
                )
            return result
        except MemoryError:
            return CheckResult(Status.RESOURCE_LIMIT, "Z3 ran out of memory", how)
        except z3.Z3Exception as err:
            message = _z3_message(err)
            status = Status.RESOURCE_LIMIT if "memory" in message else Status.UNKNOWN
            return CheckResult(status, f"Z3 failed: {message}", how)

    def _solver(self, tactic: bool) -> z3.Solver:
        solver = z3.Tactic("smt", ctx=self.ctx).solver() if tactic else z3.Solver(ctx=self.ctx)
        solver.set("timeout", self.limits.solver_timeout_ms)
        solver.set("rlimit", self.limits.rlimit)
        return solver

    def _solve(self, formula: z3.BoolRef) -> tuple[z3.CheckSatResult, z3.Solver]:
        """Is ``formula`` satisfiable? A fresh solver per call: nothing carries over.

        First the plain ``smt`` tactic (2-3x faster than the default solver on
        this benchmark, whose constraints are linear integer arithmetic); if
        that gives up for a reason other than a budget (an incomplete theory,
        e.g. nonlinear terms), the default solver with its logic-specific
        tactics gets a second try.
        """
        solver = self._solver(tactic=True)
        solver.add(formula)
        result = solver.check()
        if result == z3.unknown and not _out_of_budget(solver.reason_unknown()):
            solver = self._solver(tactic=False)
            solver.add(formula)
            result = solver.check()
        return result, solver

    def _equivalence(
        self, truth: _Truth, answer: z3.BoolRef, how: str | None, details: bool = True
    ) -> tuple[CheckResult, z3.CheckSatResult | None, z3.CheckSatResult | None]:
        """Decide both directions: truth ∧ ¬answer (too strong), answer ∧ ¬truth (too weak).

        Asked first as one query, truth xor answer, which is unsat exactly when
        both directions are (one solver call instead of two for every
        equivalent answer: ~2x faster on this benchmark). When it is sat, its
        model witnesses one direction and the other direction is then checked
        on its own, so a wrong answer still gets its exact direction. Identical
        formulas (Z3 shares equal terms, so this is a pointer comparison) need
        no solver at all.

        Also returned: what was decided of truth ∧ ¬answer and of answer ∧ ¬truth
        (sat or unsat; None where undecided or not asked).
        """
        t = truth.formula
        if answer.eq(t):
            return CheckResult(Status.EQUIVALENT, "", how), z3.unsat, z3.unsat
        either, solver = self._solve(z3.Xor(t, answer))
        if either == z3.unsat:
            # Neither direction has a model: both are unsat.
            return CheckResult(Status.EQUIVALENT, "", how), z3.unsat, z3.unsat
        if either == z3.unknown:
            return self._undecided(solver.reason_unknown(), how), None, None
        if not details:  # sat: not equivalent, whichever direction fails
            result = CheckResult(Status.NOT_EQUIVALENT, "differs from the ground truth", how)
            return result, None, None
        model = solver.model()
        strong = z3.is_true(model.eval(t, model_completion=True))
        witness: Direction = "too_strong" if strong else "too_weak"
        other_name: Direction = "too_weak" if strong else "too_strong"
        other, other_solver = self._solve(
            z3.And(answer, z3.Not(t)) if strong else z3.And(t, z3.Not(answer))
        )
        counterexample, confirmed = find_counterexample(model, t, answer, witness)
        reason = (
            "too strong: the answer rejects this input, which the ground truth admits"
            if strong
            else "too weak: the answer admits this input, which the ground truth rejects"
        )
        other_words = other_name.replace("_", " ")
        if other == z3.sat:
            reason += f" (and it is also {other_words})"
        elif other == z3.unknown:
            reason += (
                f"; whether it is also {other_words} is undecided ({other_solver.reason_unknown()})"
            )
        if not confirmed:
            reason += "; the counterexample did not evaluate as expected"
        direction: Direction = "both" if other == z3.sat else witness
        result = CheckResult(Status.NOT_EQUIVALENT, reason, how, direction, counterexample)
        # The witness's direction is sat (the model of the xor satisfies it).
        decided = other if other in (z3.sat, z3.unsat) else None
        if strong:
            return result, z3.sat, decided
        return result, decided, z3.sat

    def _undecided(self, why: str, how: str | None) -> CheckResult:
        if why == "timeout":
            return CheckResult(
                Status.TIMEOUT, f"Z3 solver timeout ({self.limits.solver_timeout_ms} ms)", how
            )
        if "memory" in why:
            return CheckResult(Status.RESOURCE_LIMIT, f"Z3 memory limit: {why}", how)
        if why == "canceled":
            why = f"rlimit {self.limits.rlimit} exhausted"
        return CheckResult(Status.UNKNOWN, f"Z3 cannot decide: {why}", how)


def _out_of_budget(reason: str) -> bool:
    # "canceled" is how Z3 reports an exhausted rlimit.
    return reason in ("timeout", "canceled") or "memory" in reason


def _joined(repairs: list[str]) -> str | None:
    return "+".join(repairs) if repairs else None


def check_response(
    response_text: str | None,
    truth: str,
    constants: str,
    limits: VerifyLimits = DEFAULT_LIMITS,
) -> CheckResult:
    """Verify one model response against a row's ground truth, in this process.

    Pure: a fresh Z3 context per call. It has no hard wall-clock kill (only
    Z3's solver timeout and rlimit) and no memory cap: use :class:`VerifierPool`
    for untrusted answers at scale.
    """
    return Verifier(limits).check(response_text, truth, constants)
