"""Every terminal status and injected fault of the local server, end to end.

Each test checks the verdicts (nothing lost, nothing duplicated, the right
status for what the server did) and how many batches were created.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import anyio
import openai
import polars as pl
import pytest
from engine_helpers import (
    SPECS,
    benchmark_slice,
    expected_statuses,
    fast_config,
    observed,
    slice_path,
)

from aeval.config import Credentials, PollSettings
from aeval.dataset import load_dataset
from aeval.engine import Run, RunResult
from aeval.events import JobFinished, RetryScheduled, ShardUpdated
from aeval.local import FaultPlan, FaultRule, Intent, LocalBatchServer, ModelSpec, Timing


async def _run(
    benchmark_path: Path,
    tmp_path: Path,
    *,
    faults: tuple[FaultRule, ...] = (),
    timing: Timing | None = None,
    rows: int = 10,
    server_key: str | None = None,
    specs: dict[str, ModelSpec] = SPECS,
    **changes: object,
) -> tuple[RunResult, pl.DataFrame, object, list[object]]:
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=rows)
    events: list[object] = []
    async with LocalBatchServer(
        dataset=frame,
        models=dict(specs),
        faults=FaultPlan(rules=faults, seed=7),
        timing=timing,
        api_key=server_key,
    ) as server:
        config = fast_config(data, tmp_path / "results", server.base_url, **changes)
        with anyio.fail_after(120):
            result = await Run(config, subscribers=[events.append]).run()
        counters = server.counters()
    return result, frame, counters, events


def _jobs(counters: object) -> dict[str, int]:
    return {
        value: n
        for (key, value), n in counters.batches_by_metadata.items()  # type: ignore[attr-defined]
        if key == "aeval_shard"
    }


def _assert_complete(result: RunResult, frame: pl.DataFrame, models: tuple[str, ...]) -> None:
    keys = [(r["model"], r["custom_id"]) for r in result.verdicts.iter_rows(named=True)]
    assert len(keys) == len(set(keys)) == len(models) * frame.height


@pytest.mark.anyio
async def test_expired_batch_keeps_finished_rows_and_reports_the_rest(
    benchmark_path: Path, tmp_path: Path
) -> None:
    fault = FaultRule("expire", fraction=0.5, model="model-a")
    result, frame, counters, _ = await _run(
        benchmark_path, tmp_path, faults=(fault,), models=("model-a", "model-b")
    )
    _assert_complete(result, frame, ("model-a", "model-b"))
    want = expected_statuses(frame, SPECS, trials=1)
    got = observed(result.verdicts)
    expired = [k for k in got if k[0] == "model-a" and got[k] != want[k]]
    kept = [k for k in got if k[0] == "model-a" and got[k] == want[k]]
    assert expired and kept  # half-way: some rows done, some not
    for key in expired:
        assert got[key] == "api_error"
    reasons = result.verdicts.filter(pl.col("status") == "api_error")["reason"].to_list()
    assert any("batch_expired" in r for r in reasons)
    assert all(got[k] == want[k] for k in got if k[0] == "model-b")
    assert result.outcome == "finished"  # expired is a terminal status, not a failed job
    assert _jobs(counters) == {"model-a|t1|s0": 1, "model-b|t1|s0": 1}


@pytest.mark.anyio
async def test_retry_failed_resubmits_expired_rows_in_a_new_shard(
    benchmark_path: Path, tmp_path: Path
) -> None:
    fault = FaultRule("expire", fraction=0.5, model="model-a", times=1)
    # its synthetic 500s fail when resubmitted too, as the expectations say
    fixed = {"model-a": replace(SPECS["model-a"], failures="deterministic")}
    result, frame, counters, _ = await _run(
        benchmark_path, tmp_path, faults=(fault,), models=("model-a",), retry_failed=1, specs=fixed
    )
    _assert_complete(result, frame, ("model-a",))
    want = expected_statuses(frame, SPECS, trials=1)
    assert observed(result.verdicts) == {k: v for k, v in want.items() if k[0] == "model-a"}
    assert _jobs(counters) == {"model-a|t1|s0": 1, "model-a|t1|s1": 1}


async def _retried_run(
    data: Path, out: Path, spec: ModelSpec, retry_failed: int, faults: tuple[FaultRule, ...] = ()
) -> tuple[RunResult, object]:
    async with LocalBatchServer(
        dataset=load_dataset(str(data)), models={"model-a": spec}, faults=FaultPlan(faults)
    ) as server:
        root = server.base_url.removesuffix("/v1")
        config = fast_config(data, out, server.base_url, models=("model-a",),
                             retry_failed=retry_failed)  # fmt: skip
        if faults:  # through Gemini's Batch API and its per-request google.rpc.Code
            config = fast_config(data, out, root, models=("google/model-a",),
                                 retry_failed=retry_failed,
                                 credentials={"google": Credentials("k", root)})  # fmt: skip
        with anyio.fail_after(120):
            result = await Run(config).run()
        return result, server.counters()


def _api_errors(result: RunResult) -> set[str]:
    return set(result.verdicts.filter(pl.col("status") == "api_error")["custom_id"])


@pytest.mark.anyio
async def test_retry_failed_gets_transient_http_errors_answered_offline(
    benchmark_path: Path, tmp_path: Path
) -> None:
    # Half the synthetic answers are HTTP 500s, transient as a real service's: a request
    # sent again in the next shard is a fresh draw. "deterministic" fails it every time.
    data = slice_path(benchmark_path, tmp_path, rows=12)
    flaky = ModelSpec("synthetic", seed=1, accuracy=0.5, failure_mix={Intent.HTTP_ERROR: 1.0})
    once, _ = await _retried_run(data, tmp_path / "once", flaky, retry_failed=0)
    retried, counters = await _retried_run(data, tmp_path / "retried", flaky, retry_failed=2)
    fixed = replace(flaky, failures="deterministic")
    stuck, stuck_counters = await _retried_run(data, tmp_path / "fixed", fixed, retry_failed=2)

    failed_once = _api_errors(once)
    assert len(failed_once) >= 3
    assert _api_errors(retried) < failed_once  # fewer, and only rows that failed before
    statuses = dict(zip(retried.verdicts["custom_id"], retried.verdicts["status"], strict=True))
    first = dict(zip(once.verdicts["custom_id"], once.verdicts["status"], strict=True))
    assert {cid: s for cid, s in statuses.items() if cid not in failed_once} == {
        cid: s for cid, s in first.items() if cid not in failed_once
    }
    assert _jobs(counters)["model-a|t1|s1"] == 1  # the failed rows, sent in a new batch
    assert _api_errors(stuck) == failed_once  # sent three times, failed three times
    assert sorted(_jobs(stuck_counters).values()) == [1, 1, 1]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("status", "code", "rpc", "sends"),
    [(403, None, "permission_denied", 1), (400, "FAILED_PRECONDITION", "failed_precondition", 1),
     (401, None, "unauthenticated", 1), (500, None, "server_error", 3)],
)  # fmt: skip
async def test_gemini_errors_a_retry_cannot_mend_are_sent_once(
    benchmark_path: Path, tmp_path: Path, status: int, code: str | None, rpc: str, sends: int
) -> None:
    # google.rpc.Code 7, 9 and 16 in Gemini's batch results (the local server writes the
    # code of the injected status, or the one named: JobError.code) want the account
    # fixed first: --retry-failed 2 does not send them again. INTERNAL (13) is sent 3 times.
    data = slice_path(benchmark_path, tmp_path, rows=4)
    fault = FaultRule("request_error", status=status, code=code)
    result, counters = await _retried_run(data, tmp_path / "r", SPECS["model-a"], 2, (fault,))
    assert set(result.verdicts["status"]) == {"api_error"}
    assert all(reason.startswith(rpc) for reason in result.verdicts["reason"])
    assert counters.faults_injected == {"request_error": 4 * sends}  # type: ignore[attr-defined]
    assert counters.batches == sends  # type: ignore[attr-defined]


@pytest.mark.anyio
async def test_token_limit_waits_and_resubmits(benchmark_path: Path, tmp_path: Path) -> None:
    fault = FaultRule("token_limit", model="model-b", times=2)
    result, frame, counters, events = await _run(
        benchmark_path, tmp_path, faults=(fault,), models=("model-a", "model-b")
    )
    want = expected_statuses(frame, SPECS, trials=1)
    assert observed(result.verdicts) == {k: v for k, v in want.items() if k[0] != "model-c"}
    assert result.outcome == "finished"
    # the refused batches count as creations: attempt 0 and 1 refused, 2 went through
    assert _jobs(counters) == {"model-a|t1|s0": 1, "model-b|t1|s0": 3}
    resubmits = [e for e in events if isinstance(e, RetryScheduled) and e.operation == "resubmit"]
    assert [e.attempt for e in resubmits] == [1, 2]


@pytest.mark.anyio
async def test_validation_failure_fails_that_job_only(benchmark_path: Path, tmp_path: Path) -> None:
    fault = FaultRule("fail", model="model-c")
    result, frame, _, events = await _run(benchmark_path, tmp_path, faults=(fault,))
    _assert_complete(result, frame, tuple(SPECS))
    assert result.outcome == "finished_with_failures"
    assert result.failed_jobs == ("model-c trial 1",)
    c_rows = result.verdicts.filter(pl.col("model") == "model-c")
    assert set(c_rows["status"]) == {"api_error"}
    assert all("failed" in r for r in c_rows["reason"])
    want = expected_statuses(frame, SPECS, trials=1)
    got = observed(result.verdicts)
    assert all(got[k] == want[k] for k in got if k[0] != "model-c")
    finished = {(e.model, e.ok) for e in events if isinstance(e, JobFinished)}
    assert ("model-c", False) in finished and ("model-a", True) in finished


@pytest.mark.anyio
async def test_resuming_a_run_with_a_failed_batch_adds_nothing(
    benchmark_path: Path, tmp_path: Path
) -> None:
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=4)
    plan = FaultPlan(rules=(FaultRule("fail", model="model-c"),))
    async with LocalBatchServer(dataset=frame, models=dict(SPECS), faults=plan) as server:
        config = fast_config(data, tmp_path / "r", server.base_url, models=("model-a", "model-c"))
        first = await Run(config).run()
        again = await Run.resume(first.run_dir, credentials=config.credentials).run()
        counters = server.counters()
    assert again.outcome == "finished_with_failures"
    assert observed(again.verdicts) == observed(first.verdicts)
    lines = (first.run_dir / "verdicts.jsonl").read_text().splitlines()
    assert len(lines) == 8
    assert counters.batches == 2  # the failed batch was reattached, not created again


@pytest.mark.anyio
async def test_transient_http_errors_are_retried_without_paying_twice(
    benchmark_path: Path, tmp_path: Path
) -> None:
    # The SDK's own 2 quick retries absorb reads' faults first (production
    # settings): three failed polls in a row (of 3 shards) reach our retry policy.
    faults = (
        FaultRule("http", endpoint="POST /v1/files", status=503, retry_after=0.05, times=2),
        FaultRule("http", endpoint="POST /v1/batches", status=429, retry_after=0.05, times=2),
        FaultRule("http", endpoint="GET /v1/batches/*", status=500, retry_after=0.05, times=12),
        FaultRule("drop", endpoint="POST /v1/batches", times=1, skip=2),
        FaultRule("drop", endpoint="GET /v1/files/*/content", times=2),
    )
    result, frame, counters, events = await _run(benchmark_path, tmp_path, faults=faults)
    want = expected_statuses(frame, SPECS, trials=1)
    assert observed(result.verdicts) == want
    assert result.outcome == "finished"
    assert set(_jobs(counters).values()) == {1}  # a dropped create was found, not repeated
    retries = {e.operation for e in events if isinstance(e, RetryScheduled)}
    assert {"upload", "create", "poll"} <= retries
    assert any(op.startswith("download") for op in retries)


@pytest.mark.anyio
async def test_stuck_finalizing_batch_is_waited_for(benchmark_path: Path, tmp_path: Path) -> None:
    fault = FaultRule("stuck_finalizing", delay=0.6, model="model-a")
    result, frame, _, events = await _run(
        benchmark_path, tmp_path, faults=(fault,), models=("model-a",), rows=4
    )
    want = expected_statuses(frame, SPECS, trials=1)
    assert observed(result.verdicts) == {k: v for k, v in want.items() if k[0] == "model-a"}
    assert any(isinstance(e, ShardUpdated) and e.phase == "finalizing" for e in events)


@pytest.mark.anyio
async def test_batch_cancelled_from_outside_collects_partial_results(
    benchmark_path: Path, tmp_path: Path
) -> None:
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=12)
    async with LocalBatchServer(
        dataset=frame, models=dict(SPECS), timing=Timing(requests_per_second=8.0)
    ) as server:
        config = fast_config(data, tmp_path / "results", server.base_url, models=("model-a",))
        cancelled: list[str] = []
        client = openai.AsyncOpenAI(api_key="k", base_url=server.base_url)

        def on_event(event: object) -> None:
            if (
                isinstance(event, ShardUpdated)
                and event.phase == "in_progress"
                and event.completed >= 2
                and not cancelled
            ):
                cancelled.append(event.batch_id or "")

        async def canceller() -> None:
            while not cancelled:
                await anyio.sleep(0.01)
            await client.batches.cancel(cancelled[0])

        async with anyio.create_task_group() as tg:
            tg.start_soon(canceller)
            with anyio.fail_after(60):
                result = await Run(config, subscribers=[on_event]).run()
        await client.close()
    _assert_complete(result, frame, ("model-a",))
    want = expected_statuses(frame, SPECS, trials=1)
    got = observed(result.verdicts)
    done = [k for k in got if got[k] == want[k]]
    assert 2 <= len(done) < frame.height
    assert {got[k] for k in got if got[k] != want[k]} <= {"api_error", "missing"}
    manifest_status = (
        {r.status for r in [*Run.resume(result.run_dir).config.models]} if False else None
    )
    assert manifest_status is None


@pytest.mark.anyio
async def test_bad_key_stops_the_job_with_a_clear_message(
    benchmark_path: Path, tmp_path: Path
) -> None:
    result, _, counters, _ = await _run(
        benchmark_path,
        tmp_path,
        server_key="right-key",
        models=("model-a",),
        rows=3,
    )
    assert result.outcome == "finished_with_failures"
    assert "401" in result.message and "OPENAI_API_KEY" in result.message
    assert set(result.verdicts["status"]) == {"api_error"}
    assert counters.batches == 0  # type: ignore[attr-defined]


# Every poll of a batch answered 503, and polls that give up after half a second.
POLLS_FAIL = FaultPlan(
    rules=(FaultRule("http", endpoint="GET /v1/batches/*", status=503, retry_after=None),)
)
SHORT_GRACE = PollSettings(initial_s=0.02, max_s=0.05, grace_s=0.5)


@pytest.mark.anyio
async def test_polls_failing_past_the_grace_fail_the_shard(
    benchmark_path: Path, tmp_path: Path
) -> None:
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=3)
    async with LocalBatchServer(
        dataset=frame, models=dict(SPECS), faults=POLLS_FAIL, timing=Timing(validating_s=0.3)
    ) as server:
        config = fast_config(
            data,
            tmp_path / "results",
            server.base_url,
            models=("model-a",),
            poll=SHORT_GRACE,
            credentials=Credentials("k", server.base_url),
        )
        with anyio.fail_after(60):
            result = await Run(config).run()
    assert result.outcome == "finished_with_failures"
    assert "kept failing" in result.message
    assert result.verdicts.height == 3


@pytest.mark.anyio
async def test_the_run_deadline_bounds_retrying(benchmark_path: Path, tmp_path: Path) -> None:
    from aeval.config import RetrySettings

    fault = FaultRule("http", endpoint="POST /v1/files", status=503, retry_after=None)
    retry = RetrySettings(initial_s=0.02, max_s=0.1, run_deadline_s=3.0)
    result, _, counters, events = await _run(
        benchmark_path, tmp_path, faults=(fault,), models=("model-a",), rows=2, retry=retry
    )
    assert result.outcome == "finished_with_failures"
    assert "503" in result.message
    assert counters.batches == 0  # type: ignore[attr-defined]
    assert any(isinstance(e, RetryScheduled) and e.operation == "upload" for e in events)


@pytest.mark.anyio
async def test_a_shard_whose_polls_gave_up_is_collected_on_resume(
    benchmark_path: Path, tmp_path: Path
) -> None:
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=3)
    state = tmp_path / "server-state"
    async with LocalBatchServer(
        dataset=frame, models=dict(SPECS), faults=POLLS_FAIL, state_dir=state
    ) as server:
        config = fast_config(
            data, tmp_path / "r", server.base_url, models=("model-a",), poll=SHORT_GRACE
        )
        first = await Run(config).run()
    assert first.outcome == "finished_with_failures"
    assert (first.run_dir / "verdicts.jsonl").read_text() == ""  # provisional only
    # The API is back (same batches, no faults): resume collects the batch.
    async with LocalBatchServer(dataset=frame, models=dict(SPECS), state_dir=state) as server:
        creds = Credentials("k", server.base_url)
        with anyio.fail_after(60):
            second = await Run.resume(first.run_dir, credentials=creds).run()
        counters = server.counters()
        client = openai.AsyncOpenAI(api_key="k", base_url=server.base_url)
        batches = [b async for b in client.batches.list(limit=2)]
        await client.close()
    assert second.outcome == "finished"
    want = expected_statuses(frame, SPECS, trials=1)
    assert observed(second.verdicts) == {k: v for k, v in want.items() if k[0] == "model-a"}
    # The failed shard kept its batch id: resume reattached, it did not pay again
    # (this counted 1 while the failure overwrote the id and resume created a second).
    assert counters.batches == 0  # created by the restarted server
    assert len(batches) == 1  # all the server holds, the first server's included


@pytest.mark.anyio
async def test_a_lost_create_response_does_not_pay_twice(
    benchmark_path: Path, tmp_path: Path
) -> None:
    # The server creates the batch, then the response is lost: the SDK's own
    # retry would POST again; the create must be looked up by metadata instead.
    fault = FaultRule("drop", endpoint="POST /v1/batches", after=True, times=1)
    result, frame, counters, _ = await _run(
        benchmark_path, tmp_path, faults=(fault,), models=("model-a",), rows=5
    )
    want = expected_statuses(frame, SPECS, trials=1)
    assert observed(result.verdicts) == {k: v for k, v in want.items() if k[0] == "model-a"}
    assert counters.faults_injected == {"drop": 1}  # type: ignore[attr-defined]
    assert _jobs(counters) == {"model-a|t1|s0": 1}


@pytest.mark.anyio
async def test_a_lost_upload_response_leaves_no_stray_file(
    benchmark_path: Path, tmp_path: Path
) -> None:
    # The server stores the upload, then the response is lost: the file exists
    # remotely but its id was never seen. It is deleted once the shard has its batch.
    fault = FaultRule("drop", endpoint="POST /v1/files", after=True, times=1)
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=4)
    async with LocalBatchServer(
        dataset=frame, models=dict(SPECS), faults=FaultPlan(rules=(fault,))
    ) as server:
        config = fast_config(data, tmp_path / "r", server.base_url, models=("model-a",))
        with anyio.fail_after(60):
            result = await Run(config).run()
        counters = server.counters()
        client = openai.AsyncOpenAI(api_key="k", base_url=server.base_url)
        left = [f async for f in client.files.list(purpose="batch")]
        await client.close()
    assert result.outcome == "finished"
    assert counters.faults_injected == {"drop": 1}
    (name, uploads), *others = counters.files_by_filename.items()
    assert uploads == 2 and not others  # the lost upload and the one that became the batch
    manifest = json.loads((result.run_dir / "manifest.json").read_text())
    (rec,) = manifest["shards"].values()
    assert (rec["upload_name"], rec["upload_attempts"]) == (name, 2)
    assert rec["stray_uploads_cleared"] is True
    assert [f.id for f in left] == [rec["input_file_id"]]
    assert _jobs(counters) == {"model-a|t1|s0": 1}


@pytest.mark.anyio
async def test_model_names_that_sanitise_alike_keep_their_own_requests(
    benchmark_path: Path, tmp_path: Path
) -> None:
    # "openai/m/x" and "openai_m_x" (a server's "m/x" and "openai_m_x") once shared one
    # request file, and so each other's answers.
    served = {"m/x": SPECS["model-a"], "openai_m_x": SPECS["model-c"]}
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=8)
    async with LocalBatchServer(dataset=frame, models=served) as server:
        config = fast_config(
            data, tmp_path / "r", server.base_url, models=("openai/m/x", "openai_m_x")
        )
        with anyio.fail_after(60):
            result = await Run(config).run()
    assert result.outcome == "finished"
    # The server answers by the names it was sent; the verdicts carry the run's names.
    run_name = {"m/x": "openai/m/x", "openai_m_x": "openai_m_x"}
    expected = {
        (run_name[m], t, cid): status
        for (m, t, cid), status in expected_statuses(frame, served, trials=1).items()
    }
    assert observed(result.verdicts) == expected
    requests = sorted(p.name for p in (result.run_dir / "requests").iterdir())
    assert len(requests) == 2


@pytest.mark.anyio
async def test_a_request_file_changed_before_upload_stops_the_run(
    benchmark_path: Path, tmp_path: Path
) -> None:
    from aeval.errors import RunDirError
    from aeval.events import RunStarted

    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=4)
    async with LocalBatchServer(dataset=frame, models=dict(SPECS)) as server:
        config = fast_config(data, tmp_path / "r", server.base_url, models=("model-a",))
        run = Run(config)
        run.subscribe(lambda e: run.cancel() if isinstance(e, RunStarted) else None)
        first = await run.run()
        assert first.outcome == "interrupted"
        (path,) = (first.run_dir / "requests").iterdir()
        path.write_text(path.read_text().replace("assert", "assert ", 1))
        with anyio.fail_after(60), pytest.raises(RunDirError, match=r"sha256.*manifest"):
            await Run.resume(first.run_dir, credentials=config.credentials).run()
        counters = server.counters()
    assert counters.files == 0 and counters.batches == 0


def test_cancel_delete_files_also_deletes_uploads_whose_response_was_lost(
    benchmark_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from aeval.cli import main

    faults = (
        FaultRule("drop", endpoint="POST /v1/files", after=True, times=1),
        FaultRule("http", endpoint="POST /v1/batches", status=400),  # never gets a batch
    )
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=3)
    with LocalBatchServer(
        dataset=frame, models=dict(SPECS), faults=FaultPlan(rules=faults)
    ) as server:
        config = fast_config(data, tmp_path / "r", server.base_url, models=("model-a",))
        first = anyio.run(Run(config).run)
        assert first.outcome == "finished_with_failures"
        client = openai.OpenAI(api_key="k", base_url=server.base_url)
        assert len(client.files.list(purpose="batch").data) == 2  # the lost one and the kept one
        monkeypatch.delenv("OPENAI_KEY", raising=False)
        monkeypatch.setenv("OPENAI_API_KEY", "k")
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        code = main(["cancel", str(first.run_dir), "--quiet", "--no-collect", "--delete-files"])
        left = client.files.list(purpose="batch").data
        client.close()
    assert code == 0
    assert left == []
