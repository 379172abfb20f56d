"""The engine end to end against the local batch server over real HTTP."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from engine_helpers import (
    SPECS,
    benchmark_slice,
    expected_statuses,
    fast_config,
    observed,
)

from aeval.engine import Run
from aeval.events import JobFinished, RunFinished, RunStarted, ShardUpdated, VerdictProduced
from aeval.local import LocalBatchServer


@pytest.mark.anyio
async def test_three_models_two_trials_verdicts_as_the_responder_intended(
    benchmark_path: Path, tmp_path: Path
) -> None:
    data, frame = benchmark_slice(benchmark_path, tmp_path)
    events: list[object] = []
    async with LocalBatchServer(dataset=frame, models=dict(SPECS)) as server:
        config = fast_config(data, tmp_path / "results", server.base_url, trials=2)
        run = Run(config, subscribers=[events.append])
        result = await run.run()
        counters = server.counters()

    assert result.outcome == "finished", result.message
    want = expected_statuses(frame, SPECS, trials=2)
    got = observed(result.verdicts)
    assert got == want  # every (model, trial, row) once, with the intended status
    # one batch and one upload per (model, trial): nothing submitted twice
    assert counters.batches == 6 and counters.files == 6
    for model in SPECS:
        for trial in (1, 2):
            assert counters.batches_by_metadata[("aeval_shard", f"{model}|t{trial}|s0")] == 1

    run_dir = result.run_dir
    config_text = (run_dir / "config.json").read_text()
    assert "sk-test" not in config_text and "credentials" not in config_text
    manifest = json.loads((run_dir / "manifest.json").read_text())
    shards = manifest["shards"]
    assert len(shards) == 6
    for rec in shards.values():
        assert rec["status"] == "done" and rec["batch_id"] and rec["input_file_id"]
        assert rec["output_downloaded"] is True
        assert (run_dir / rec["input_path"]).stat().st_size == rec["bytes"]
    lines = (run_dir / "verdicts.jsonl").read_text().splitlines()
    assert len(lines) == len(want)
    stored = pl.read_parquet(run_dir / "verdicts.parquet")
    assert stored.height == len(want)
    # every verdict carries its row's program (by ground truth) and question facts,
    # in the parquet and in each JSONL line
    programs = dict(zip(frame["id"], frame["program"], strict=True))
    assert all(programs[r["custom_id"]] == r["program"] for r in stored.iter_rows(named=True))
    assert stored["distance"].null_count() == 0 and stored["examples"].min() >= 1
    first = json.loads(lines[0])
    assert first["program"] == programs[first["custom_id"]] and first["distance"] >= 1
    assert first["published_category"] in {
        "correct",
        "error_semantics",
        "error_syntax",
        "error_output_formatting",
        None,
    }
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["overall"]["n"] == len(want)

    kinds = [type(e) for e in events]
    assert kinds[0] is RunStarted and kinds[-1] is RunFinished
    assert kinds.count(VerdictProduced) == len(want)
    assert kinds.count(JobFinished) == 6
    phases = {e.phase for e in events if isinstance(e, ShardUpdated)}
    assert {"pending", "uploading", "downloading", "completed", "done"} <= phases
    created = [e.created_at for e in events if isinstance(e, ShardUpdated) and e.batch_id]
    assert all(c is not None for c in created)
    # a job's JobFinished comes after all of its verdicts
    for i, e in enumerate(events):
        if isinstance(e, JobFinished):
            later = [
                v
                for v in events[i:]
                if isinstance(v, VerdictProduced)
                and (v.verdict.model, v.verdict.trial) == (e.model, e.trial)
            ]
            assert later == []


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_two_runs_share_one_loop_and_events_iterate(
    benchmark_path: Path, tmp_path: Path, anyio_backend: str
) -> None:
    import anyio

    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=6)
    async with LocalBatchServer(dataset=frame, models=dict(SPECS)) as server:
        runs = [
            Run(fast_config(data, tmp_path / "results", server.base_url, models=(m,), workers=1))
            for m in ("model-a", "model-b")
        ]
        seen: list[list[object]] = [[], []]
        results: list[object] = [None, None]

        async def consume(i: int) -> None:
            async for event in runs[i].events():
                seen[i].append(event)

        async def go(i: int) -> None:
            results[i] = await runs[i].run()

        async with anyio.create_task_group() as tg:
            for i in range(2):
                tg.start_soon(consume, i)
            await anyio.sleep(0)
            for i in range(2):
                tg.start_soon(go, i)
    want = expected_statuses(frame, SPECS, trials=1)
    for i, model in enumerate(("model-a", "model-b")):
        result = results[i]
        assert result.outcome == "finished"  # type: ignore[union-attr]
        got = observed(result.verdicts)  # type: ignore[union-attr]
        assert got == {k: v for k, v in want.items() if k[0] == model}
        assert isinstance(seen[i][-1], RunFinished)
        assert sum(isinstance(e, VerdictProduced) for e in seen[i]) == 6


@pytest.mark.anyio
async def test_a_raising_subscriber_does_not_break_the_run(
    benchmark_path: Path, tmp_path: Path
) -> None:
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=3)

    def broken(event: object) -> None:
        raise RuntimeError("display bug")

    async with LocalBatchServer(dataset=frame, models=dict(SPECS)) as server:
        run = Run(
            fast_config(data, tmp_path / "r", server.base_url, models=("model-a",)),
            subscribers=[broken],
        )
        result = await run.run()
    assert result.outcome == "finished" and result.verdicts.height == 3
    assert run.subscriber_errors > 0
    late = [e async for e in run.events()]  # asked after the end: ends at once
    assert late == []


@pytest.mark.anyio
async def test_a_bad_dataset_stops_with_a_clear_error(tmp_path: Path) -> None:
    from aeval.errors import AevalError

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "q"}\n')
    events: list[object] = []
    config = fast_config(bad, tmp_path / "r", "http://127.0.0.1:9", models=("m",))
    with pytest.raises(AevalError, match=r"bad\.jsonl"):
        await Run(config, subscribers=[events.append]).run()
    assert isinstance(events[-1], RunFinished) and "stopped" in events[-1].message


@pytest.mark.anyio
async def test_the_live_views_estimate_is_fed_the_next_poll_and_the_verifier_pace(
    benchmark_path: Path, tmp_path: Path
) -> None:
    from aeval.config import PollSettings
    from aeval.events import VerifierPace
    from aeval.local import Timing

    data, frame = benchmark_slice(benchmark_path, tmp_path)
    events: list[object] = []
    timing = Timing(requests_per_second=20.0)
    async with LocalBatchServer(dataset=frame, models=dict(SPECS), timing=timing) as server:
        poll = PollSettings(initial_s=0.05, factor=1.5, max_s=0.3, jitter=0.2, grace_s=20.0)
        config = fast_config(data, tmp_path / "results", server.base_url, poll=poll)
        result = await Run(config, subscribers=[events.append]).run()
    assert result.outcome == "finished", result.message

    paces = [e for e in events if isinstance(e, VerifierPace)]
    assert len(paces) == 1 and paces[0].answers_per_s > 0
    polled = [
        e
        for e in events
        if isinstance(e, ShardUpdated) and e.phase == "in_progress" and e.next_poll_at is not None
    ]
    assert polled, "no in-progress update said when the batch is polled next"
    # The next poll is ahead of the update, by no more than the longest wait (+ jitter):
    # the wait is scheduled once the poll's answer is on disk and the update is built at
    # once after it, however slowly the manifest is written on a loaded machine.
    ahead = [e.next_poll_at - e.time for e in polled]
    assert all(0 < a <= 0.3 * 1.2 + 0.05 for a in ahead), ahead
    # Once a batch is done nobody waits for a poll of it.
    done = [e for e in events if isinstance(e, ShardUpdated) and e.phase == "done"]
    assert done and all(e.next_poll_at is None for e in done)
