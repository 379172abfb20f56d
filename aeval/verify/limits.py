"""The budgets that bound one check: size, nesting, numerals, solver, wall clock, memory."""

from __future__ import annotations

from dataclasses import dataclass

from aeval.errors import ConfigError

__all__ = ["DEFAULT_LIMITS", "VerifyLimits"]


_SOLVER_TIMEOUT_MS = 4_000


@dataclass(frozen=True, slots=True)
class VerifyLimits:
    """Limits for one answer check; every field bounds a different way to hang or crash.

    Defaults are set from what real data needs, with wide headroom: the longest
    real answer seen is ~66 KB, the longest real numeral 5 digits, the deepest
    ground truth of the benchmark nests 651 levels, and a ground-truth identity
    check costs ~2,200 rlimit units (the worst ~25,000).

    :param timeout_s: hard wall-clock budget per check in the worker pool; the
        worker is killed when it runs out (status ``timeout``).
    :param solver_timeout_ms: Z3's own soft timeout, per solver call (there are
        two calls, one per direction, so keep ``2 * solver_timeout_ms`` under
        ``timeout_s`` to let Z3 answer ``timeout`` itself before the kill).
    :param rlimit: Z3's deterministic resource budget per solver call.
    :param max_answer_bytes: larger answers are ``too_large`` before any parsing.
    :param max_depth: deeper S-expression nesting is ``too_large`` (Z3's parser
        and simplifier recurse on the native stack).
    :param max_numeral_digits: longer numerals are ``too_large`` (Z3 takes ~8 s to
        *parse* a 300,000-digit numeral, and no solver timeout covers parsing).
    :param memory_mb: address-space cap (``RLIMIT_AS``) of each worker process.
    """

    timeout_s: float = 10.0
    solver_timeout_ms: int = _SOLVER_TIMEOUT_MS
    rlimit: int = 50_000_000
    max_answer_bytes: int = 256 * 1024
    max_depth: int = 4_000
    max_numeral_digits: int = 1_000
    memory_mb: int = 1_536

    def __post_init__(self) -> None:
        for name in ("timeout_s", "solver_timeout_ms", "rlimit", "max_answer_bytes", "max_depth"):
            if getattr(self, name) <= 0:
                raise ConfigError(
                    f"VerifyLimits.{name} must be positive, got {getattr(self, name)!r}"
                )
        if self.max_numeral_digits <= 0 or self.memory_mb < 256:
            raise ConfigError(
                "VerifyLimits needs max_numeral_digits > 0 and memory_mb >= 256, got "
                f"{self.max_numeral_digits!r} and {self.memory_mb!r}"
            )

    @classmethod
    def with_budget(cls, timeout_s: float, **others: int) -> VerifyLimits:
        """Limits for a hard budget of ``timeout_s``, Z3's own timeout fitted inside it.

        Both solver calls (one per direction) get at most 40 % of the budget
        each, so Z3 can still report ``timeout`` itself before the kill; never
        more than the default solver timeout.
        """
        solver_ms = max(1, min(_SOLVER_TIMEOUT_MS, int(timeout_s * 1000 * 0.4)))
        return cls(timeout_s=timeout_s, solver_timeout_ms=solver_ms, **others)


# Frozen, so one shared default is safe (and keeps B008 quiet in signatures).
DEFAULT_LIMITS = VerifyLimits()
