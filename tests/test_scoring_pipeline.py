"""The scoring pipeline on its own: answers in, stored verdicts out, no batch anywhere.

This is the seam a direct-request driver plugs into: it calls ``Scoring.submit``
exactly as the batch driver does.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from aeval.dataset import TruthTable
from aeval.events import Event, VerdictProduced
from aeval.scoring.pipeline import Scoring
from aeval.scoring.responses import Response
from aeval.store import RunStore
from aeval.verdicts import Status
from aeval.verify import VerifierPool, VerifyLimits

TRUTH = TruthTable(
    pl.DataFrame(
        {
            "id": ["a", "b", "c"],
            "answer": ["(assert (> x 0))", "(assert (> x 1))", "(assert (> x 2))"],
            "constants": ["(declare-const x Int)"] * 3,
            "tier": ["small", "small", None],
        }
    )
)


@pytest.mark.anyio
async def test_submitted_answers_become_stored_verdicts_once(tmp_path: Path) -> None:
    events: list[Event] = []
    store = RunStore.create(tmp_path, "run", {"models": ["m"]})
    scoring = Scoring(store, TRUTH, emit=events.append, published=False, queue=4)

    async def drive() -> None:
        await scoring.submit(Response("a", content="<answer>(assert (> x 0))</answer>"), "m", 1, 0)
        await scoring.submit(Response("b", error_code="http_503", status_code=503), "m", 1, 0)
        await scoring.submit(Response("nope", content="<answer>x</answer>"), "m", 1, 0)  # no row
        for verdict in scoring.unanswered("m", 1, frozenset({"c"}), Status.MISSING, "no line"):
            await scoring.record(verdict, 0)
        await scoring.drained("m", 1)
        assert store.verdict_count == 3  # drained: every verdict of the job is written

    try:
        async with VerifierPool(VerifyLimits(timeout_s=20.0), 1, published=False) as pool:
            await scoring.run(pool, drive)
            # An answer to a row that has its verdict is ignored, not scored again.
            await scoring.run(
                pool, lambda: scoring.submit(Response("a", content="<answer>y</answer>"), "m", 1, 0)
            )
        statuses = {r["custom_id"]: r["status"] for r in store.iter_verdict_records()}
    finally:
        store.close()
    assert statuses == {"a": "equivalent", "b": "api_error", "c": "missing"}
    produced = [e.verdict.custom_id for e in events if isinstance(e, VerdictProduced)]
    assert sorted(produced) == ["a", "b", "c"]  # each produced verdict is a stored one
