"""Anthropic's Message Batches through the official SDK, over HTTP against the local server.

Production SDK retries and timeouts; only polling and aeval's own backoff are quick.
Every batch count is taken by listing through the anthropic SDK, as a user would.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anthropic
import anyio
import openai
import polars as pl
import pytest
from engine_helpers import (
    EXPECTED_VERDICTS,
    SPECS,
    benchmark_slice,
    fast_config,
    observed,
    slice_path,
)

from aeval.batch.lifecycle import ShardFailed, ShardLifecycle
from aeval.batch.providers.anthropic_api import result_line, wire_custom_id
from aeval.batch.providers.anthropic_spec import (
    DEFAULT_MAX_TOKENS,
    request_body,
    sdk_sampling_params,
)
from aeval.batch.providers.base import BatchTag, ForeignBatchError
from aeval.batch.providers.registry import check_providers, open_providers, server_credentials
from aeval.config import RetrySettings, RunConfig
from aeval.dataset import load_dataset
from aeval.engine import Run, RunResult, plan_run
from aeval.errors import ConfigError
from aeval.events import ShardUpdated
from aeval.local import FaultPlan, FaultRule, LocalBatchServer, Timing
from aeval.local.questions import QuestionIndex
from aeval.prompts import GenerationSettings, PromptSettings
from aeval.scoring.responses import parse_batch_line
from aeval.store import RunStore, ShardRecord

KEY = "sk-test"


def expected(frame: pl.DataFrame, run_model: str, served: str) -> dict[tuple[str, int, str], str]:
    """What the synthetic responder answers ``served`` with. A Message Batch carries no
    metadata, so the server answers every trial of an Anthropic model alike (trial None);
    an OpenAI batch's trial comes from its metadata."""
    responder = SPECS[served].build(QuestionIndex.from_frame(frame))
    trial = None if run_model.startswith("anthropic/") else 1
    return {
        (run_model, 1, cid): EXPECTED_VERDICTS[
            responder.intent(served, cid, trial=trial)  # type: ignore[attr-defined]
        ].status.value
        for cid in frame["id"].to_list()
    }


async def anthropic_batches(base_url: str) -> list[Any]:
    """Every Message Batch the server holds, listed through the SDK (small pages)."""
    client = anthropic.AsyncAnthropic(api_key=KEY, base_url=base_url.removesuffix("/v1"))
    try:
        return [b async for b in client.messages.batches.list(limit=2)]
    finally:
        await client.close()


async def openai_batches(base_url: str) -> list[Any]:
    client = openai.AsyncOpenAI(api_key=KEY, base_url=base_url)
    try:
        return [b async for b in client.batches.list(limit=2)]
    finally:
        await client.close()


async def _run(
    benchmark_path: Path,
    tmp_path: Path,
    models: tuple[str, ...],
    *,
    faults: tuple[FaultRule, ...] = (),
    rows: int = 6,
) -> tuple[RunResult, pl.DataFrame, list[Any], list[Any]]:
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=rows)
    plan = FaultPlan(rules=faults)
    async with LocalBatchServer(dataset=frame, models=dict(SPECS), faults=plan) as server:
        creds = server_credentials(server.base_url, KEY)
        config = fast_config(
            data, tmp_path / "r", server.base_url, models=models, credentials=creds
        )
        with anyio.fail_after(90):
            result = await Run(config).run()
        listed = await anthropic_batches(server.base_url), await openai_batches(server.base_url)
    return result, frame, *listed


@pytest.mark.anyio
async def test_a_mixed_run_answers_every_row_through_each_providers_own_api(
    benchmark_path: Path, tmp_path: Path
) -> None:
    models = ("model-a", "anthropic/model-b")
    result, frame, on_anthropic, on_openai = await _run(benchmark_path, tmp_path, models)
    assert result.outcome == "finished", result.message
    want = {**expected(frame, "model-a", "model-a"), **expected(frame, models[1], "model-b")}
    assert observed(result.verdicts) == want
    # one batch per shard on each provider, each through its own API
    assert len(on_anthropic) == 1 and len(on_openai) == 1
    assert on_anthropic[0].processing_status == "ended"
    assert on_anthropic[0].request_counts.succeeded + on_anthropic[0].request_counts.errored == 6
    # the provider's token usage is kept, for the cost
    claude = result.verdicts.filter(pl.col("model") == models[1], pl.col("status") != "api_error")
    assert claude["completion_tokens"].min() > 0  # type: ignore[operator]
    summary = json.loads((result.run_dir / "summary.json").read_text())
    assert {m["model"] for m in summary["models"]} == set(models)


@pytest.mark.anyio
async def test_a_lost_create_response_is_found_not_paid_twice(
    benchmark_path: Path, tmp_path: Path
) -> None:
    # The server creates the Message Batch, then the response is lost. With no
    # metadata to look it up by, the batch is recognised by the intent's time and the
    # shard's size, then confirmed by the results' tagged custom ids.
    fault = FaultRule("drop", endpoint="POST /v1/messages/batches", after=True, times=1)
    models = ("anthropic/model-a",)
    result, frame, on_anthropic, _ = await _run(benchmark_path, tmp_path, models, faults=(fault,))
    assert result.outcome == "finished", result.message
    assert observed(result.verdicts) == expected(frame, models[0], "model-a")
    assert len(on_anthropic) == 1  # found, not created again
    manifest = json.loads((result.run_dir / "manifest.json").read_text())
    (rec,) = manifest["shards"].values()
    assert rec["batch_id"] == on_anthropic[0].id and rec["intent_at"] is not None


class _Killed(Exception):
    """Where a SIGKILL would have stopped the process: nothing after it is recorded."""


def _lifecycle(store: RunStore, config: RunConfig) -> ShardLifecycle:
    """One process's lifecycle over ``store``, its creates' first retry a kill."""

    def killed(rec: ShardRecord, notice: object) -> None:
        raise _Killed(rec.key)

    providers = open_providers(config.models, config.credentials, config.retry)
    return ShardLifecycle(
        providers=providers, store=store, poll=config.poll, retry=config.retry,
        rng=random.Random(0), on_change=lambda rec: None, on_retry=killed,
    )  # fmt: skip


@pytest.mark.anyio
async def test_an_intent_left_by_a_kill_never_takes_the_batch_a_resume_made_for_another_shard(
    benchmark_path: Path, tmp_path: Path
) -> None:
    # The interleaving the mixed six-provider chaos test met (issue 28), step by step:
    # 1. a process records trial 1's intent and is killed before its create is sent;
    # 2. the resume creates trial 2's batch (trial 1 waiting for the serial-create lock),
    #    the response is lost, and it is killed before recording the id;
    # 3. the next resume looks trial 1's batch up first. Trial 2's batch, the only one of
    #    the shards' size, lies in both intents' windows: it must stay trial 2's, and
    #    trial 1 must get a batch of its own (its results carry its tag). Trial 2's batch
    #    is still validating then, so its results cannot tell the search it is not trial 1's.
    data = slice_path(benchmark_path, tmp_path, rows=4)
    lost = FaultRule("drop", endpoint="POST /v1/messages/batches", after=True, times=1)
    async with LocalBatchServer(
        dataset=load_dataset(str(data)), models=dict(SPECS), faults=FaultPlan(rules=(lost,)),
        timing=Timing(validating_s=1.0),
    ) as server:  # fmt: skip
        config = fast_config(
            data, tmp_path / "r", server.base_url, models=("anthropic/model-a",), trials=2,
            credentials=server_credentials(server.base_url, KEY), retry=RetrySettings(),
        )  # fmt: skip
        t1, t2 = sorted(plan_run(config).shards, key=lambda r: r.trial)
        run_dir = config.out_dir / next(p.name for p in config.out_dir.iterdir())
        with RunStore.open(run_dir) as store:  # 1.
            await store.save_shards([t1.evolve(intent_attempt=0, intent_at=time.time())])
        with RunStore.open(run_dir) as store:  # 2.
            second = _lifecycle(store, config)
            try:
                with pytest.raises(_Killed):
                    await second.ensure_batch(store.shards[t2.key])
            finally:
                await second.providers.aclose()
            assert store.shards[t2.key].batch_id is None
        assert len(await anthropic_batches(server.base_url)) == 1
        results: dict[str, list[str]] = {}
        with RunStore.open(run_dir) as store, anyio.fail_after(60):  # 3.
            third = _lifecycle(store, config)
            try:
                for key in (t1.key, t2.key):
                    rec, remote = await third.ensure_batch(store.shards[key])
                    rec, remote = await third.poll_until_terminal(rec, remote)
                    lines = results.setdefault(key, [])

                    async def sink(line: str, n: int, kind: str, lines: list[str] = lines) -> None:
                        lines.append(line)

                    try:
                        await third.download(rec, "output", sink)
                    except ShardFailed as err:
                        pytest.fail(f"{key} took another shard's batch: {err}")
            finally:
                await third.providers.aclose()
            ids = {key: store.shards[key].batch_id for key in (t1.key, t2.key)}
        listed = await anthropic_batches(server.base_url)
    assert len(listed) == 2 and set(ids.values()) == {b.id for b in listed}
    assert {k: len(v) for k, v in results.items()} == {t1.key: 4, t2.key: 4}


async def _foreign_batch(root: str, size: int) -> str:
    """Another client's Message Batch of ``size`` requests (ids without aeval's tag)."""
    other = anthropic.AsyncAnthropic(api_key=KEY, base_url=root)
    params = request_body("model-a", "q", PromptSettings(), GenerationSettings())
    try:
        requests = [{"custom_id": f"x{i}", "params": params} for i in range(size)]
        batch = await other.messages.batches.create(requests=requests)  # type: ignore[arg-type]
    finally:
        await other.close()
    return batch.id


@asynccontextmanager
async def _beside_a_foreign_batch(
    benchmark_path: Path, tmp_path: Path, *faults: FaultRule
) -> AsyncIterator[tuple[LocalBatchServer, pl.DataFrame, str, RunConfig]]:
    """A server with ``faults`` holding another client's Message Batch of the shard's size,
    the batch's id, and the config of a run of ``anthropic/model-a`` on the server."""
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=4)
    async with LocalBatchServer(
        dataset=frame, models=dict(SPECS), faults=FaultPlan(rules=faults)
    ) as server:
        foreign = await _foreign_batch(server.base_url.removesuffix("/v1"), 4)
        creds = server_credentials(server.base_url, KEY)
        config = fast_config(
            data, tmp_path / "r", server.base_url, models=("anthropic/model-a",), credentials=creds
        )
        yield server, frame, foreign, config


# The shard's create never reaches the API: a 500 for the second create (the first is
# the look-alike's).
NEVER_SENT = FaultRule("http", endpoint="POST /v1/messages/batches", status=500, skip=1, times=1)
# The look-alike (the first batch to finish its requests) held running until its owner
# cancels it, which :func:`_run_ending_the_look_alike_once_taken` does once the run has
# taken it: however slowly the run gets to its search, the look-alike is still running
# then (a fixed 3 s of validating once was not enough at a load of 7 on 2 cores).
HELD = FaultRule("stuck_finalizing", delay=600.0, times=1)


async def _run_ending_the_look_alike_once_taken(
    server: LocalBatchServer, config: RunConfig, foreign: str
) -> RunResult:
    """The run, with the look-alike (held by :data:`HELD`) cancelled by its owner as soon
    as the run says the shard has taken it: it ends with its own results readable."""
    taken = anyio.Event()

    def watch(event: object) -> None:
        if isinstance(event, ShardUpdated) and event.batch_id == foreign:
            taken.set()

    async def end_it() -> None:
        await taken.wait()
        owner = anthropic.AsyncAnthropic(api_key=KEY, base_url=server.base_url.removesuffix("/v1"))
        try:
            await owner.messages.batches.cancel(foreign)
        finally:
            await owner.close()

    async with anyio.create_task_group() as tg:
        tg.start_soon(end_it)
        result = await Run(config, subscribers=[watch]).run()
        tg.cancel_scope.cancel()
    return result


def _own_batch_taken(
    result: RunResult, frame: pl.DataFrame, listed: list[Any], foreign: str
) -> dict[str, Any]:
    """The run finished on the shard's own batch, beside the look-alike: its verdicts are
    the responder's, two batches exist and the recorded one is not the look-alike.
    Returns the shard's manifest record."""
    assert result.outcome == "finished", result.message
    assert observed(result.verdicts) == expected(frame, "anthropic/model-a", "model-a")
    manifest = json.loads((result.run_dir / "manifest.json").read_text())
    (rec,) = manifest["shards"].values()
    assert len(listed) == 2 and rec["batch_id"] in {b.id for b in listed} - {foreign}
    return dict(rec)


async def _run_beside_a_foreign_batch(
    benchmark_path: Path,
    tmp_path: Path,
    *faults: FaultRule,
    within_s: float = 90,
    once_it_ended: bool = False,
) -> tuple[dict[str, Any], str]:
    """A run beside the look-alike (started once the look-alike has ended, with
    ``once_it_ended``; ended by its owner once the run has taken it, with :data:`HELD`
    among ``faults``), checked by :func:`_own_batch_taken`: the shard's manifest record
    and the look-alike's id."""
    async with _beside_a_foreign_batch(benchmark_path, tmp_path, *faults) as (
        server,
        frame,
        foreign,
        config,
    ):
        with anyio.fail_after(within_s):
            while (
                once_it_ended
                and (await anthropic_batches(server.base_url))[0].processing_status != "ended"
            ):
                await anyio.sleep(0.02)
            if HELD in faults:
                result = await _run_ending_the_look_alike_once_taken(server, config, foreign)
            else:
                result = await Run(config).run()
        listed = await anthropic_batches(server.base_url)
    return _own_batch_taken(result, frame, listed, foreign), foreign


@pytest.mark.anyio
async def test_an_ended_look_alike_batch_is_passed_over_by_its_first_result(
    benchmark_path: Path, tmp_path: Path
) -> None:
    # The shard's create never reached the API (a 500 before it), and another client's
    # batch of the same size, already ended, sits in the intent's window: its results can
    # be read (results_url "specified only once processing ends", anthropic SDK 2.x
    # types/messages/message_batch.py), their custom ids carry no tag of this shard, so
    # the search passes it over and the shard's own batch is created.
    rec, _ = await _run_beside_a_foreign_batch(
        benchmark_path, tmp_path, NEVER_SENT, within_s=30, once_it_ended=True
    )
    assert rec["previous_batch_ids"] == []


@pytest.mark.slow
@pytest.mark.anyio
async def test_of_two_look_alike_batches_the_one_created_at_the_intent_is_taken(
    benchmark_path: Path, tmp_path: Path
) -> None:
    # Another client's batch of the shard's size, a moment before the run: with the
    # create's response lost, both are in the intent's window; the rule takes the one
    # created closest to the intent (the shard's own).
    fault = FaultRule("drop", endpoint="POST /v1/messages/batches", after=True, skip=1, times=1)
    await _run_beside_a_foreign_batch(benchmark_path, tmp_path, fault)


@pytest.mark.anyio
async def test_a_running_look_alike_batch_is_set_aside_by_its_results_and_the_shards_own_created(
    benchmark_path: Path, tmp_path: Path
) -> None:
    # The shard's create never reached the API (a 500 before it), and another client's
    # batch of the same size, still running (its results not readable yet), sits in the
    # intent's window: the rule takes it. Its results carry no tag of this shard, so not
    # one of its answers is scored: the batch is set aside (claimed, never taken again),
    # the search finds nothing else, and the same run creates the shard's own batch.
    rec, foreign = await _run_beside_a_foreign_batch(benchmark_path, tmp_path, NEVER_SENT, HELD)
    assert rec["previous_batch_ids"] == [foreign]


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_shard_stops_after_its_set_aside_batches_and_resume_creates_its_own(
    benchmark_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As above, with the run allowed one look only (FOREIGN_LOOKS): the shard fails with
    # the batch set aside and its intent settled (nothing else found: withdrawn), not one
    # answer of the look-alike scored, and a resume creates the shard's own batch.
    from aeval.engine import batch_driver

    monkeypatch.setattr(batch_driver, "FOREIGN_LOOKS", 1)
    async with _beside_a_foreign_batch(benchmark_path, tmp_path, NEVER_SENT, HELD) as (
        server,
        frame,
        foreign,
        config,
    ):
        with anyio.fail_after(90):
            first = await _run_ending_the_look_alike_once_taken(server, config, foreign)
        assert first.outcome == "finished_with_failures"
        assert "not this shard's" in first.message and "'resume' looks again" in first.message
        assert first.verdicts.filter(pl.col("status") != "api_error").height == 0
        manifest = json.loads((first.run_dir / "manifest.json").read_text())
        (rec,) = manifest["shards"].values()
        assert rec["batch_id"] is None and rec["previous_batch_ids"] == [foreign]
        assert rec["intent_attempt"] is None
        with anyio.fail_after(90):
            second = await Run.resume(first.run_dir, credentials=config.credentials).run()
        listed = await anthropic_batches(server.base_url)
    assert second.outcome == "finished", second.message
    assert observed(second.verdicts) == expected(frame, "anthropic/model-a", "model-a")
    assert len(listed) == 2  # the foreign one and the shard's own, created once


def test_results_become_batch_api_lines_keeping_the_text_and_every_billed_token() -> None:
    tag = BatchTag("run-1", "anthropic/m|t1|s0", 0)
    sent = wire_custom_id(tag, "17")
    message = {
        "id": "msg_1",
        "model": "claude-x",
        "content": [
            {"type": "thinking", "thinking": "(assert (> x 0)) maybe?", "signature": "s"},
            {"type": "text", "text": "<answer>(assert (> x 1))</answer>"},
            {"type": "redacted_thinking", "data": "..."},
            {"type": "text", "text": " done"},
        ],
        "stop_reason": "max_tokens",
        "usage": {"input_tokens": 10, "cache_read_input_tokens": 5, "output_tokens": 900},
    }
    line = json.dumps({"custom_id": sent, "result": {"type": "succeeded", "message": message}})
    parsed = parse_batch_line(result_line(line, tag, "msgbatch_1"))
    assert parsed.custom_id == "17"
    # the text the model wrote, thinking left out; its tokens billed as output
    assert parsed.content == "<answer>(assert (> x 1))</answer> done"
    assert (parsed.prompt_tokens, parsed.completion_tokens) == (15, 900)
    assert parsed.finish_reason == "length"

    def kind(result: dict[str, Any]) -> tuple[str | None, int | None]:
        raw = json.dumps({"custom_id": sent, "result": result})
        got = parse_batch_line(result_line(raw, tag, "msgbatch_1"))
        return got.error_code, got.status_code

    assert kind({"type": "expired"}) == ("batch_expired", None)
    assert kind({"type": "canceled"}) == ("batch_cancelled", None)
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}
    assert kind({"type": "errored", "error": overloaded}) == ("server_error", 529)
    bad = {"type": "error", "error": {"type": "invalid_request_error", "message": "no"}}
    assert kind({"type": "errored", "error": bad}) == ("invalid_request", 400)
    # hostile lines: passed on for the parser to reject, or refused as another shard's
    assert result_line("not json", tag, "b") == "not json"
    other = json.dumps({"custom_id": "0123456789ab_17", "result": {"type": "expired"}})
    with pytest.raises(ForeignBatchError):
        result_line(other, tag, "msgbatch_1")


def test_settings_anthropic_would_refuse_are_said_before_anything_is_created() -> None:
    body = request_body(
        "claude-x", "Q?", PromptSettings(system="be brief"), GenerationSettings(max_tokens=300)
    )
    assert body["max_tokens"] == 300 and body["system"] == "be brief"
    assert body["messages"][0]["role"] == "user" and "Q?" in body["messages"][0]["content"]
    assert "seed" not in body and "temperature" not in body
    default = request_body("claude-x", "Q?", PromptSettings(), GenerationSettings())
    assert default["max_tokens"] == DEFAULT_MAX_TOKENS and "system" not in default
    gen_seed = GenerationSettings(seed=3)
    with pytest.raises(ConfigError, match="no seed"):
        check_providers(RunConfig(models=("gpt-4o", "anthropic/claude-x"), generation=gen_seed))
    sampling = sdk_sampling_params()
    hot = GenerationSettings(temperature=1.5)
    both = GenerationSettings(temperature=0.5, top_p=0.9)
    if "temperature" not in sampling:  # the installed SDK (2.x) has no sampling settings
        with pytest.raises(ConfigError, match="SDK's Messages API has no temperature or top_p"):
            check_providers(RunConfig(models=("anthropic/claude-x",), generation=both))
    else:
        with pytest.raises(ConfigError, match=r"maximum of 1\.0"):
            check_providers(RunConfig(models=("anthropic/claude-x",), generation=hot))
        with pytest.raises(ConfigError, match="not both"):
            check_providers(RunConfig(models=("anthropic/claude-x",), generation=both))
    # an OpenAI model of the same run keeps its settings
    check_providers(RunConfig(models=("gpt-4o",), generation=both))
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        env = {"OPENAI_API_KEY": "sk-test"}
        open_providers(["gpt-4o", "anthropic/claude-x"], None, RetrySettings(), env=env)


def test_a_mixed_run_with_one_providers_key_missing_exits_2_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from aeval.cli import main

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    out = tmp_path / "results"
    argv = ["run", "--model", "gpt-4o,anthropic/claude-haiku-4-5", "--out", str(out), "-q"]
    assert main(argv) == 2
    assert "ANTHROPIC_API_KEY" in capsys.readouterr().err
    assert not out.exists()


def _provider_env(monkeypatch: pytest.MonkeyPatch, base_url: str) -> None:
    """Both providers' SDK variables, pointed at one local server."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", base_url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", base_url.removesuffix("/v1"))
    monkeypatch.delenv("AZURE_OPENAI_ENDPOINT", raising=False)


def test_status_and_cancel_reach_every_provider_of_a_mixed_run(
    benchmark_path: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from aeval.cli import main
    from aeval.local import Timing

    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=6)
    slow = Timing(validating_s=0.1, requests_per_second=0.5, finalizing_s=0.1)
    models = ("model-a", "anthropic/model-b")
    with LocalBatchServer(dataset=frame, models=dict(SPECS), timing=slow) as server:
        _provider_env(monkeypatch, server.base_url)
        config = fast_config(data, tmp_path / "r", server.base_url, models=models, credentials=None)
        run = Run(config)
        running: set[str] = set()

        def stop_when_both_run(event: object) -> None:
            if isinstance(event, ShardUpdated) and event.phase == "in_progress":
                running.add(event.model)
                if running == set(models):
                    run.cancel()

        run.subscribe(stop_when_both_run)
        first = anyio.run(run.run)
        assert first.outcome == "interrupted"
        capsys.readouterr()
        assert main(["status", str(first.run_dir), "--json"]) == 0
        shards = {s["model"]: s for s in json.loads(capsys.readouterr().out)["shards"]}
        assert {m: (s["status"], s.get("live")) for m, s in shards.items()} == {
            m: ("in_progress", True) for m in models
        }
        assert main(["cancel", "--no-collect", str(first.run_dir)]) == 0
        said = capsys.readouterr().out
        for model in models:
            assert f"{model}|t1|s0: batch {shards[model]['batch_id']} cancell" in said
        listed = anyio.run(anthropic_batches, server.base_url)
        assert [b.processing_status for b in listed] in (["canceling"], ["ended"])
        assert listed[0].cancel_initiated_at is not None
        (openai_batch,) = anyio.run(openai_batches, server.base_url)
        assert openai_batch.status in ("cancelling", "cancelled")
