"""Verification core: answer extraction, SMT-LIB sanitising, Z3 equivalence, worker pool.

``check_response`` verifies one answer in this process (pure, no hard kill);
``VerifierPool`` verifies answers concurrently in killable worker processes and
is what the engine and ``rescore`` use for hostile model output.
"""

from __future__ import annotations

from aeval.verify.equivalence import Verifier, check_response, parse_declarations
from aeval.verify.extract import Extraction, Repair, extract_answer
from aeval.verify.limits import DEFAULT_LIMITS, VerifyLimits
from aeval.verify.pool import VerifierPool
from aeval.verify.sanitise import Rejection, Sanitised, sanitise

__all__ = [
    "DEFAULT_LIMITS",
    "Extraction",
    "Rejection",
    "Repair",
    "Sanitised",
    "Verifier",
    "VerifierPool",
    "VerifyLimits",
    "check_response",
    "extract_answer",
    "parse_declarations",
    "sanitise",
]
