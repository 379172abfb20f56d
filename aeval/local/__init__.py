"""A local OpenAI-compatible Files + Batches API server, for offline runs, demos,
tests and fault drills (``python -m aeval serve``).

Start one in the background with :class:`LocalBatchServer` and point the
official ``openai`` SDK at its :attr:`~LocalBatchServer.base_url`.
"""

from __future__ import annotations

from aeval.local.direct import CUSTOM_ID_HEADER, TRIAL_HEADER, Serving
from aeval.local.faults import FaultPlan, FaultRule, parse_faults
from aeval.local.models import ModelSpec, demo_models, parse_models
from aeval.local.server import (
    LocalBatchServer,
    fetch_counters,
    fetch_direct_counters,
    serve_process,
)
from aeval.local.synthetic import EXPECTED_VERDICTS, Intent, SyntheticResponder
from aeval.local.timing import Limits, Timing, demo_timing

__all__ = ["CUSTOM_ID_HEADER", "EXPECTED_VERDICTS", "TRIAL_HEADER", "FaultPlan", "FaultRule",
           "Intent", "Limits", "LocalBatchServer", "ModelSpec", "Serving", "SyntheticResponder",
           "Timing", "demo_models", "demo_timing", "fetch_counters", "fetch_direct_counters",
           "parse_faults", "parse_models", "serve_process"]  # fmt: skip
