"""The Gemini, Together, Groq, Mistral, xAI and Azure OpenAI adapters, end to end over real
HTTP.

Each provider's official SDK, with its production retry settings, drives a
whole run against the local server's routes for that provider: the lifecycle
(upload or inline, create, poll, download, verify), a create whose response is
lost after the server created the batch (``drop`` after the create), and, in
the slow tests, a SIGKILL between the recorded intent and the recorded id,
then ``resume``. Every check of "paid once" counts the batches by listing them
through the provider's SDK.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import engine_helpers
import polars as pl
import pytest
from engine_helpers import (
    FAST_POLL,
    FAST_RETRY,
    aeval_process,
    assert_exits_ok,
    benchmark_slice,
    fast_config,
    slice_path,
)

from aeval.config import Credentials, RunConfig
from aeval.dataset import load_dataset
from aeval.engine import Run
from aeval.local import EXPECTED_VERDICTS, FaultPlan, FaultRule, LocalBatchServer, Timing
from aeval.local.responders import QuestionIndex
from aeval.verify import VerifyLimits

# provider -> (the create call's method and path glob, the key and base-URL variables)
CREATES: dict[str, tuple[str, str, str]] = {
    "openai": ("POST /v1/batches", "OPENAI_API_KEY", "OPENAI_BASE_URL"),
    "anthropic": ("POST /v1/messages/batches", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"),
    "google": (
        "POST /v1/models/*:batchGenerateContent",
        "GEMINI_API_KEY",
        "GOOGLE_GEMINI_BASE_URL",
    ),
    "together": ("POST /v1/batches", "TOGETHER_API_KEY", "TOGETHER_BASE_URL"),
    "groq": ("POST /openai/v1/batches", "GROQ_API_KEY", "GROQ_BASE_URL"),
    "mistral": ("POST /v1/batch/jobs", "MISTRAL_API_KEY", "MISTRAL_BASE_URL"),
    "xai": ("POST /xai/v1/batches", "XAI_API_KEY", "XAI_BASE_URL"),
    # Azure's v1 URL whole: AZURE_OPENAI_ENDPOINT would send openai/ models to Azure too
    "azure": ("POST /openai/v1/batches", "AZURE_OPENAI_API_KEY", "AZURE_OPENAI_BASE_URL"),
}
PROVIDERS = ("google", "together", "groq", "mistral", "xai", "azure")  # this file's adapters
# Gemini, Together, xAI and Anthropic batches carry nothing the local server can read a
# trial from (a digest display name; no metadata), so their synthetic answers are the
# items' usual ones; Groq, Mistral and Azure keep aeval's metadata, so each trial samples
# afresh.
TRIAL_BLIND = {"google", "together", "anthropic", "xai"}
# What each SDK's base URL adds to the server's root (aeval serve answers xAI under /xai;
# Azure's endpoint variable names the resource, to which the adapter adds /openai/v1).
BASE_PATHS = {"openai": "/v1", "xai": "/xai/v1", "azure": "/openai/v1"}
ENV_PATHS = BASE_PATHS


def creds(provider: str, root: str) -> Credentials:
    return Credentials("k", root + BASE_PATHS.get(provider, ""))


# To a trial-blind provider's server a row's two trials are one request sent twice, which a
# transient synthetic 500 would answer the second time: these tests' 500s fail every time.
SPECS = {
    m: dataclasses.replace(s, failures="deterministic") for m, s in engine_helpers.SPECS.items()
}


def lost_create(provider: str, *, only: bool = False) -> FaultRule:
    """The first create's response lost after the server created the batch (``only``:
    the rule matches that provider's requests only, for paths providers share)."""
    wire = {"groq": "openai"}.get(provider, provider) if only else "*"
    return FaultRule("drop", endpoint=CREATES[provider][0], after=True, times=1, provider=wire)


def expected(frame: pl.DataFrame, provider: str, model: str, trials: int) -> dict[tuple, str]:
    responder = SPECS[model].build(QuestionIndex.from_frame(frame))
    out = {}
    for cid in frame["id"].to_list():
        for trial in range(1, trials + 1):
            seen = None if provider in TRIAL_BLIND else trial
            intent = responder.intent(model, cid, trial=seen)  # type: ignore[attr-defined]
            out[(f"{provider}/{model}", trial, cid)] = EXPECTED_VERDICTS[intent].status.value
    return out


async def listed_batches(provider: str, root: str) -> list[str]:
    """Every batch the provider's SDK lists (ids), following every page."""
    if provider == "google":
        from google import genai

        gemini = genai.Client(api_key="k", http_options={"base_url": root})
        try:
            return [b.name async for b in await gemini.aio.batches.list(config={"page_size": 2})]
        finally:
            await gemini.aio.aclose()
    if provider == "together":
        import together

        async with together.AsyncTogether(api_key="k", base_url=root) as client:
            return [b.id for b in await client.batches.list()]
    if provider == "anthropic":
        import anthropic

        async with anthropic.AsyncAnthropic(api_key="k", base_url=root) as claude:
            return [b.id async for b in claude.messages.batches.list(limit=2)]
    if provider in ("openai", "azure"):
        import openai

        base = root + BASE_PATHS[provider]
        async with openai.AsyncOpenAI(api_key="k", base_url=base) as oa:
            return [b.id async for b in oa.batches.list(limit=2)]
    if provider == "xai":  # xAI's own listing, through the openai SDK's low-level get
        import openai

        ids: list[str] = []
        async with openai.AsyncOpenAI(api_key="k", base_url=root + "/xai/v1") as xai:
            token = None
            while True:
                params = {"limit": 2} | ({"pagination_token": token} if token else {})
                page: Any = await xai.get("/batches", cast_to=object, options={"params": params})
                ids += [b["batch_id"] for b in page["batches"]]
                token = page.get("pagination_token")
                if not token:
                    return ids
    if provider == "groq":
        import groq

        async with groq.AsyncGroq(api_key="k", base_url=root) as client:
            return [b.id for b in (await client.batches.list()).data]
    from mistralai.client import Mistral

    async with Mistral(api_key="k", server_url=root) as mistral:
        ids: list[str] = []
        page = 0
        while True:
            listed = await mistral.batch.jobs.list_async(page=page, page_size=2)
            ids += [j.id for j in listed.data or []]
            if len(listed.data or []) < 2:
                return ids
            page += 1


@pytest.mark.anyio
async def test_one_run_on_six_providers_pays_once_each_though_every_first_create_is_lost(
    benchmark_path: Path, tmp_path: Path
) -> None:
    # All six adapters at once, each provider's first create response lost: the
    # default suite's one run (each provider alone: the slow test below).
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=6)
    names = ("model-a", "model-b", "model-c", "model-a", "model-b", "model-c")
    models = dict(zip(PROVIDERS, names, strict=True))
    plan = FaultPlan(rules=tuple(lost_create(p, only=True) for p in PROVIDERS), seed=1)
    async with LocalBatchServer(dataset=frame, models=dict(SPECS), faults=plan) as server:
        root = server.base_url.removesuffix("/v1")
        config = RunConfig(
            models=tuple(f"{p}/{m}" for p, m in models.items()), trials=2, dataset=str(data),
            poll=FAST_POLL, retry=FAST_RETRY, limits=VerifyLimits(timeout_s=20.0),
            out_dir=tmp_path / "results", workers=2,
            credentials={p: creds(p, root) for p in PROVIDERS},
        )  # fmt: skip
        with anyio.fail_after(120):
            result = await Run(config).run()
        listed = {p: await listed_batches(p, root) for p in PROVIDERS}
        injected = server.counters().faults_injected
    assert injected == {"drop": len(PROVIDERS)}, "not every provider's create response was lost"
    got = {
        (r["model"], r["trial"], r["custom_id"]): r["status"]
        for r in result.verdicts.iter_rows(named=True)
    }
    want: dict[tuple, str] = {}
    for provider, model in models.items():
        want.update(expected(frame, provider, model, trials=2))
    assert got == want
    assert {p: len(ids) for p, ids in listed.items()} == dict.fromkeys(PROVIDERS, 2)
    assert result.outcome == "finished"


@pytest.mark.anyio
@pytest.mark.slow
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_run_through_the_adapter_pays_once_though_its_create_response_is_lost(
    provider: str, benchmark_path: Path, tmp_path: Path
) -> None:
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=6)
    model = f"{provider}/model-a"
    plan = FaultPlan(rules=(lost_create(provider),), seed=1)
    async with LocalBatchServer(dataset=frame, models=dict(SPECS), faults=plan) as server:
        root = server.base_url.removesuffix("/v1")
        config = RunConfig(
            models=(model,), trials=2, dataset=str(data), poll=FAST_POLL, retry=FAST_RETRY,
            limits=VerifyLimits(timeout_s=20.0), out_dir=tmp_path / "results", workers=2,
            credentials={provider: creds(provider, root)},
        )  # fmt: skip
        with anyio.fail_after(120):
            result = await Run(config).run()
        listed = await listed_batches(provider, root)
        injected = server.counters().faults_injected
    assert injected == {"drop": 1}, "the create's response was not lost"
    got = {
        (r["model"], r["trial"], r["custom_id"]): r["status"]
        for r in result.verdicts.iter_rows(named=True)
    }
    assert got == expected(frame, provider, "model-a", trials=2)
    assert len(listed) == 2, f"{provider}: one batch per shard, not {listed}"
    assert result.outcome == "finished"


def _cli(
    args: list[str], providers: str | tuple[str, ...], root: str, cwd: Path
) -> subprocess.Popen[bytes]:
    env = dict(os.environ, AEVAL_LOCAL_SERVER=root)  # aeval's own server, as 'serve' says
    for provider in (providers,) if isinstance(providers, str) else providers:
        _, key, base = CREATES[provider]
        env[key], env[base] = "k", root + ENV_PATHS.get(provider, "")
    return aeval_process(args, env, cwd)


def _wait(check: Callable[[], bool], proc: subprocess.Popen[bytes], timeout: float = 90) -> bool:
    start = time.monotonic()
    while proc.poll() is None and time.monotonic() - start < timeout:
        if check():
            return True
        time.sleep(0.005)
    return False


def _intent_without_id(manifest: Path) -> bool:
    try:
        shards = json.loads(manifest.read_text())["shards"]
    except (OSError, ValueError, KeyError):
        return False
    return any(r.get("intent_attempt") is not None and not r["batch_id"] for r in shards.values())


@pytest.mark.slow
@pytest.mark.parametrize("provider", PROVIDERS)
def test_sigkill_between_intent_and_id_then_resume_pays_once(
    provider: str, benchmark_path: Path, tmp_path: Path
) -> None:
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=6)
    out = tmp_path / "results"
    run_dir = out / "killed"
    plan = FaultPlan(rules=(lost_create(provider),), seed=2)
    slow = Timing(validating_s=0.3, requests_per_second=20.0, finalizing_s=0.2)
    with LocalBatchServer(dataset=frame, models=dict(SPECS), faults=plan, timing=slow) as server:
        root = server.base_url.removesuffix("/v1")
        proc = _cli(
            ["run", "--model", f"{provider}/model-a", "--trials", "2", "--dataset", str(data),
             "--out", str(out), "--run-id", "killed", "--workers", "1", "--display", "quiet",
             "--poll-initial", "0.05", "--poll-max", "0.2"],
            provider, root, tmp_path,
        )  # fmt: skip
        # The lost create leaves the intent recorded and no id while the client waits
        # to look the batch up: the kill lands there.
        assert _wait(lambda: _intent_without_id(run_dir / "manifest.json"), proc)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        resumed = _cli(["resume", str(run_dir), "--poll-initial", "0.05", "--poll-max", "0.2"],
                       provider, root, tmp_path)  # fmt: skip
        assert_exits_ok(resumed, 120)
        listed = anyio.run(listed_batches, provider, root)
        injected = server.counters().faults_injected
    assert injected == {"drop": 1}
    assert len(listed) == 2, f"{provider}: one batch per shard, not {listed}"
    verdicts = pl.read_parquet(run_dir / "verdicts.parquet")
    assert verdicts.height == 2 * frame.height
    got = {
        (r["model"], r["trial"], r["custom_id"]): r["status"]
        for r in verdicts.iter_rows(named=True)
    }
    assert got == expected(frame, provider, "model-a", trials=2)


@pytest.mark.slow
def test_a_mixed_run_killed_and_resumed_pays_once_on_every_provider(
    benchmark_path: Path, tmp_path: Path
) -> None:
    # All eight providers in one run (openai, anthropic, google, together, groq, mistral,
    # xai, azure),
    # each provider's first create response lost after the
    # server created the batch; the run SIGKILLed with a create's intent recorded and
    # its id not, then at a moment of the polling, then resumed until it ends.
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=6)
    out = tmp_path / "results"
    run_dir = out / "mixed"
    providers = ("openai", "anthropic", *PROVIDERS)
    names = ("model-a", "model-c", "model-b", "model-c", "model-a", "model-b", "model-c",
             "model-a")  # fmt: skip
    models = dict(zip(providers, names, strict=True))
    plan = FaultPlan(rules=tuple(lost_create(p, only=True) for p in providers), seed=3)
    slow = Timing(validating_s=0.3, requests_per_second=15.0, finalizing_s=0.2)
    run_args = ["run", "--model", ",".join(f"{p}/{m}" for p, m in models.items()),
                "--trials", "2", "--dataset", str(data), "--out", str(out), "--run-id", "mixed",
                "--workers", "1", "--display", "quiet", "--poll-initial", "0.05",
                "--poll-max", "0.2"]  # fmt: skip
    resume_args = ["resume", str(run_dir), "--poll-initial", "0.05", "--poll-max", "0.2"]
    with LocalBatchServer(dataset=frame, models=dict(SPECS), faults=plan, timing=slow) as server:
        root = server.base_url.removesuffix("/v1")
        first = _cli(run_args, providers, root, tmp_path)
        assert _wait(lambda: _intent_without_id(run_dir / "manifest.json"), first)
        first.send_signal(signal.SIGKILL)
        first.wait()
        second = _cli(resume_args, providers, root, tmp_path)
        polling = _wait(lambda: _status_seen(run_dir / "manifest.json", "in_progress"), second)
        if polling:
            second.send_signal(signal.SIGKILL)
        second.wait()
        last = _cli(resume_args, providers, root, tmp_path)
        assert_exits_ok(last, 180)
        listed = {p: anyio.run(listed_batches, p, root) for p in providers}
        injected = server.counters().faults_injected
    assert injected == {"drop": len(providers)}, "not every provider's first create was lost"
    assert {p: len(ids) for p, ids in listed.items()} == dict.fromkeys(providers, 2)
    verdicts = pl.read_parquet(run_dir / "verdicts.parquet")
    keys = [(r["model"], r["trial"], r["custom_id"]) for r in verdicts.iter_rows(named=True)]
    assert len(keys) == len(set(keys)) == len(providers) * 2 * frame.height
    want: dict[tuple, str] = {}
    for provider, model in models.items():
        want.update(expected(frame, provider, model, trials=2))
    got = {k: r["status"] for k, r in zip(keys, verdicts.iter_rows(named=True), strict=True)}
    assert got == want


def _status_seen(manifest: Path, status: str) -> bool:
    try:
        shards = json.loads(manifest.read_text())["shards"]
    except (OSError, ValueError, KeyError):
        return False
    return any(r["status"] == status for r in shards.values())


@pytest.mark.anyio
async def test_a_gemini_shard_goes_through_the_files_api_and_a_responses_file(
    benchmark_path: Path, tmp_path: Path
) -> None:
    # Every shard, even a small one: uploaded (resumable upload, its name the shard's),
    # created from the file, answered in a responses file, read back as output lines.
    from aeval.batch.providers.base import BatchInput, BatchTag
    from aeval.batch.providers.registry import provider_spec
    from aeval.config import RetrySettings
    from aeval.prompts import GenerationSettings, PromptSettings

    frame = load_dataset(str(slice_path(benchmark_path, tmp_path, rows=5)))
    spec = provider_spec("google")
    path = tmp_path / "shard.jsonl"
    with path.open("w") as out:
        for cid, question in zip(frame["id"], frame["question"], strict=True):
            body = spec.request_body("model-a", question, PromptSettings(), GenerationSettings())
            out.write(json.dumps({"custom_id": cid, "method": "POST", "url": "x", "body": body}))
            out.write("\n")
    async with LocalBatchServer(dataset=frame, models=dict(SPECS)) as server:
        root = server.base_url.removesuffix("/v1")
        adapter = spec.open(Credentials("k", root), RetrySettings())
        try:
            size = path.stat().st_size
            assert adapter.wants_upload(size)
            file_id = await adapter.upload(path, filename="run-1-shard.jsonl")
            assert await adapter.find_files("run-1-shard.jsonl") == [file_id]
            tag = BatchTag(run_id="run-1", shard="google/model-a|t1|s0", attempt=0, requests=5)
            remote = await adapter.create(BatchInput(path, file_id, 5, size), tag)
            with anyio.fail_after(30):
                while not remote.terminal:
                    await anyio.sleep(0.02)
                    remote = await adapter.retrieve(remote.id)
            assert remote.status == "completed" and remote.output_file_id is not None
            assert (await adapter.find(tag)) is not None  # by its display name
            async with adapter.open_lines(remote.output_file_id, tag) as lines:
                records = [json.loads(line) async for line in lines]
        finally:
            await adapter.aclose()
    assert sorted(r["custom_id"] for r in records) == sorted(frame["id"].to_list())
    answered = [r for r in records if r["response"] and r["response"]["status_code"] == 200]
    assert answered and all(r["response"]["body"]["usage"]["prompt_tokens"] > 0 for r in answered)


@pytest.mark.anyio
@pytest.mark.parametrize("provider", ["openai", "groq", "mistral", "google", "xai", "azure"])
async def test_a_labelled_batch_created_long_before_the_intent_is_not_found_for_it(
    provider: str, benchmark_path: Path, tmp_path: Path
) -> None:
    # Metadata (OpenAI, Groq, Mistral) and a display name (Gemini) name (run id, shard,
    # attempt): another run under the same --run-id (another output directory, or the
    # directory deleted and run again) labels its batches alike. A lost create's lookup
    # takes only a batch created since its intent (less the 120 s of clock skew).
    from dataclasses import replace

    from aeval.batch.providers.base import CLOCK_SKEW_S, BatchInput, BatchTag
    from aeval.batch.providers.registry import provider_spec, server_credentials
    from aeval.config import RetrySettings
    from aeval.engine import plan_run

    data = slice_path(benchmark_path, tmp_path, rows=3)
    async with LocalBatchServer(dataset=load_dataset(str(data)), models=dict(SPECS)) as server:
        creds = server_credentials(server.base_url, "k")
        config = fast_config(
            data, tmp_path / "r", server.base_url, models=(f"{provider}/model-a",),
            credentials=creds, run_id="nightly",
        )  # fmt: skip
        plan = plan_run(config)
        (rec,) = plan.shards
        path = plan.run_dir / rec.input_path
        adapter = provider_spec(provider).open(creds[provider], RetrySettings())
        try:
            upload = adapter.wants_upload(rec.bytes)
            file_id = await adapter.upload(path, filename="nightly-s0.jsonl") if upload else None
            first = BatchTag("nightly", rec.key, 0, requests=rec.requests, intent_at=time.time())
            made = await adapter.create(BatchInput(path, file_id, rec.requests, rec.bytes), first)
            found = await adapter.find(first)
            assert found is not None and found.id == made.id  # its own run's lookup finds it
            # The next run's intent, three minutes on: the earlier run's batch is not its.
            assert await adapter.find(replace(first, intent_at=time.time() + 180.0)) is None
            assert CLOCK_SKEW_S < 180.0
        finally:
            await adapter.aclose()


@pytest.mark.anyio
async def test_gemini_answers_land_on_their_own_rows_though_results_are_shuffled_and_unlabelled(
    benchmark_path: Path, tmp_path: Path
) -> None:
    # The local server answers as the service is reported to (python-genai #2008, #1909,
    # js-genai #1191): inline results with no metadata, every result in an order of its
    # own. Through the responses file, whose lines carry their keys, every answer still
    # lands on its own row.
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=12)
    async with LocalBatchServer(dataset=frame, models=dict(SPECS)) as server:
        root = server.base_url.removesuffix("/v1")
        config = RunConfig(
            models=("google/model-a",), trials=1, dataset=str(data), poll=FAST_POLL,
            retry=FAST_RETRY, limits=VerifyLimits(timeout_s=20.0), out_dir=tmp_path / "r",
            workers=2, credentials={"google": Credentials("k", root)},
        )  # fmt: skip
        with anyio.fail_after(120):
            result = await Run(config).run()
    got = {
        (r["model"], r["trial"], r["custom_id"]): r["status"]
        for r in result.verdicts.iter_rows(named=True)
    }
    assert got == expected(frame, "google", "model-a", trials=1)
    assert "missing" not in got.values()
    outputs = list((result.run_dir / "outputs").glob("*output*.jsonl"))
    assert len(outputs) == 1
    order = [json.loads(line)["custom_id"] for line in outputs[0].read_text().splitlines()]
    assert sorted(order) == sorted(frame["id"].to_list())
    assert order != frame["id"].to_list(), "the server kept the requests' order"


@pytest.mark.anyio
async def test_together_rerun_after_a_transient_create_error_never_adopts_the_earlier_runs_batch(
    benchmark_path: Path, tmp_path: Path
) -> None:
    # Together keeps one file per checksum (the SDK takes the 409's file_id) and lists
    # every batch of the account. A second run of the same model, data and settings
    # whose first create fails (503, nothing created) looks its batch up before it
    # creates again: it must find nothing of the first run's.
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=6)
    refused = FaultRule("http", endpoint="POST /v1/batches", status=503, retry_after=None,
                        times=1, skip=1, provider="together")  # fmt: skip
    async with LocalBatchServer(
        dataset=frame, models=dict(SPECS), faults=FaultPlan(rules=(refused,), seed=1)
    ) as server:
        root = server.base_url.removesuffix("/v1")
        runs = []
        for run_id in ("first", "second"):
            config = RunConfig(
                models=("together/model-a",), trials=1, dataset=str(data), poll=FAST_POLL,
                retry=FAST_RETRY, limits=VerifyLimits(timeout_s=20.0), out_dir=tmp_path / "r",
                run_id=run_id, workers=2, credentials={"together": Credentials("k", root)},
            )  # fmt: skip
            with anyio.fail_after(120):
                runs.append(await Run(config).run())
        listed = await listed_batches("together", root)
        injected = server.counters().faults_injected
    assert injected == {"http:503": 1}, "the second run's create was not refused"
    (first,), (second,) = (
        json.loads((r.run_dir / "manifest.json").read_text())["shards"].values() for r in runs
    )
    assert second["batch_id"] != first["batch_id"], "the second run adopted the first's batch"
    assert second["input_file_id"] != first["input_file_id"]
    assert sorted(listed) == sorted([first["batch_id"], second["batch_id"]])
    assert all(r.outcome == "finished" for r in runs)
