"""Verification core: answer extraction, SMT-LIB sanitising, Z3 equivalence, worker pool.

``check_response`` verifies one answer in this process (pure, no hard kill);
``check_published`` is the published reading (the WARP study's evaluator);
``VerifierPool`` verifies answers concurrently in killable worker processes and
is what the engine and ``rescore`` use for hostile model output.

The names that need Z3 or anyio load on first use (PEP 562), like the
top-level package's: importing a light submodule (``aeval.verify.limits`` for
the CLI's defaults, or the worker before it caps its memory) must not import
them. The light modules are imported eagerly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aeval._lazy import lazy_exports
from aeval.verify.extract import Extraction, Repair, extract_answer
from aeval.verify.limits import DEFAULT_LIMITS, VerifyLimits
from aeval.verify.sanitiser import Rejection, Sanitised, sanitise

# heavy public name -> submodule that defines it
_LAZY: dict[str, str] = {
    "Verifier": "aeval.verify.equivalence",
    "VerifierPool": "aeval.verify.pool",
    "check_response": "aeval.verify.equivalence",
    "check_published": "aeval.verify.published",
    "PublishedResult": "aeval.verify.published",
    "parse_declarations": "aeval.verify.declarations",
}

__all__ = [
    "DEFAULT_LIMITS",
    "Extraction",
    "PublishedResult",
    "Rejection",
    "Repair",
    "Sanitised",
    "Verifier",
    "VerifierPool",
    "VerifyLimits",
    "check_published",
    "check_response",
    "extract_answer",
    "parse_declarations",
    "sanitise",
]


if not TYPE_CHECKING:  # the checker reads the typed imports below, never `Any`
    __getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY)


if TYPE_CHECKING:  # static checkers and IDEs see the real names
    from aeval.verify.declarations import parse_declarations
    from aeval.verify.equivalence import Verifier, check_response
    from aeval.verify.pool import VerifierPool
    from aeval.verify.published import PublishedResult, check_published
