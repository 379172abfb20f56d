"""The engine's decisions, driven by an in-memory batch API (tests/fake_provider.py).

Fast unit tests beside the HTTP ones: each states what every row gets from the
"API" and checks the verdicts, the manifest and what was paid for. The
production retry settings stay on; only polling is quick.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import warnings
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import polars as pl
import pytest
from fake_provider import Answer, Failure, FakeBatchProvider

from aeval import cost
from aeval.batch.retry import TOKEN_LIMIT_CODE
from aeval.config import PollSettings, RunConfig
from aeval.engine import Run
from aeval.store import RunStore
from aeval.verify import VerifyLimits

POLL = PollSettings(initial_s=0.01, factor=1.0, max_s=0.01, jitter=0.0, grace_s=5.0)
ROWS = 6


def _dataset(tmp_path: Path) -> Path:
    path = tmp_path / "bench.jsonl"
    with path.open("w") as fh:
        for i in range(ROWS):
            row = {
                "id": f"r{i}",
                "question": f"Constrain x for N={i}?",
                "answer": f"(assert (> x {i}))",
                "constants": "(declare-const x Int)",
            }
            fh.write(json.dumps(row) + "\n")
    return path


def _config(tmp_path: Path, **changes: Any) -> RunConfig:
    base: dict[str, Any] = {
        "models": ("m",),
        "dataset": str(_dataset(tmp_path)),
        "poll": POLL,
        "limits": VerifyLimits(timeout_s=20.0),
        "out_dir": tmp_path / "runs",
        "workers": 1,
    }
    base.update(changes)
    return RunConfig(**base)


def _right(cid: str) -> Answer:
    return Answer(f"<answer>(assert (> x {cid[1:]}))</answer>")


def _statuses(frame: pl.DataFrame) -> dict[str, str]:
    return dict(zip(frame["custom_id"].to_list(), frame["status"].to_list(), strict=True))


@pytest.mark.anyio
async def test_every_row_gets_one_verdict_and_one_batch_is_paid_for(tmp_path: Path) -> None:
    def reply(cid: str, body: Mapping[str, Any], asked: int) -> Answer | Failure | None:
        if cid == "r1":
            return Answer("<answer>(assert (> x 100))</answer>")  # too strong
        if cid == "r2":
            return None  # no line at all
        return _right(cid)

    provider = FakeBatchProvider(reply)
    result = await Run(_config(tmp_path), provider=provider).run()
    assert result.outcome == "finished"
    statuses = _statuses(result.verdicts)
    assert statuses == {
        "r0": "equivalent",
        "r1": "not_equivalent",
        "r2": "missing",
        "r3": "equivalent",
        "r4": "equivalent",
        "r5": "equivalent",
    }
    assert provider.calls["upload"] == 1 and provider.calls["create"] == 1
    with RunStore.open(result.run_dir, read_only=True) as store:
        assert [r.status for r in store.shards.values()] == ["done"]
        assert store.verdict_count == ROWS


@pytest.mark.anyio
async def test_retry_failed_resubmits_exactly_the_retryable_failures(tmp_path: Path) -> None:
    # 503 and 408 are retryable (batch/retry.py); 400 is not: it stays an api_error.
    first_fate = {"r0": Failure(503), "r1": Failure(408), "r2": Failure(400, "invalid")}

    def reply(cid: str, body: Mapping[str, Any], asked: int) -> Answer | Failure | None:
        if asked == 0 and cid in first_fate:
            return first_fate[cid]
        return _right(cid)

    provider = FakeBatchProvider(reply)
    result = await Run(_config(tmp_path, retry_failed=1), provider=provider).run()
    statuses = _statuses(result.verdicts)
    assert statuses["r0"] == statuses["r1"] == "equivalent"  # answered by the retry shard
    assert statuses["r2"] == "api_error"
    assert provider.calls["create"] == 2
    with RunStore.open(result.run_dir, read_only=True) as store:
        child = next(r for r in store.shards.values() if r.parent is not None)
        assert child.requests == 2 and child.round == 1


@pytest.mark.anyio
async def test_without_retry_failed_a_retryable_failure_is_final(tmp_path: Path) -> None:
    def reply(cid: str, body: Mapping[str, Any], asked: int) -> Answer | Failure | None:
        return Failure(503) if cid == "r0" else _right(cid)

    provider = FakeBatchProvider(reply)
    result = await Run(_config(tmp_path), provider=provider).run()
    assert _statuses(result.verdicts)["r0"] == "api_error"
    assert provider.calls["create"] == 1


@pytest.mark.anyio
async def test_a_token_limit_refusal_is_resubmitted_as_the_next_attempt(tmp_path: Path) -> None:
    provider = FakeBatchProvider(lambda cid, body, asked: _right(cid), refuse={1: TOKEN_LIMIT_CODE})
    config = _config(tmp_path)
    config = replace(config, retry=replace(config.retry, token_limit_wait_s=0.01))
    result = await Run(config, provider=provider).run()
    assert result.outcome == "finished"
    assert set(_statuses(result.verdicts).values()) == {"equivalent"}
    with RunStore.open(result.run_dir, read_only=True) as store:
        (shard,) = store.shards.values()
    assert shard.attempt == 1 and len(shard.previous_batch_ids) == 1
    assert provider.calls["create"] == 2


@pytest.mark.anyio
async def test_a_result_file_that_cannot_be_downloaded_fails_the_shard_provisionally(
    tmp_path: Path,
) -> None:
    class Lost(FakeBatchProvider):
        def _finish(self, batch: Any) -> Any:  # the output file is gone when asked for
            remote = super()._finish(batch)
            self.lost_files.add(remote.output_file_id)
            return remote

    provider = Lost(lambda cid, body, asked: _right(cid))
    result = await Run(_config(tmp_path), provider=provider).run()
    assert result.outcome == "finished_with_failures"
    assert set(_statuses(result.verdicts).values()) == {"api_error"}
    assert "no such file" in result.message
    with RunStore.open(result.run_dir, read_only=True) as store:
        assert store.verdict_count == 0  # provisional: a resume collects them for real
        (shard,) = store.shards.values()
    assert shard.status == "failed" and shard.batch_id is not None


@pytest.mark.anyio
async def test_serial_creates_wait_for_each_other_only_from_intent_to_id(tmp_path: Path) -> None:
    # A provider whose lost-create rule needs this run's creates one at a time must not
    # serialise the uploads too (Together's are up to 200 MB): the second shard creates
    # its batch while the first shard's upload is still going.
    created = anyio.Event()
    overlapped: list[bool] = []

    class SlowUpload(FakeBatchProvider):
        async def upload(self, path: Path, *, filename: str | None = None) -> str:
            first = self.calls["upload"] == 0
            file_id = await super().upload(path, filename=filename)
            if first:
                with anyio.move_on_after(10):
                    await created.wait()
                overlapped.append(created.is_set())
            return file_id

        async def create(self, source: Any, tag: Any) -> Any:
            remote = await super().create(source, tag)
            created.set()
            return remote

    provider = SlowUpload(lambda cid, body, asked: _right(cid), serial_creates=True)
    result = await Run(_config(tmp_path, trials=2), provider=provider).run()
    assert result.outcome == "finished"
    assert overlapped == [True]  # the other shard's create did not wait for this upload
    assert provider.calls["create"] == 2 and provider.calls["upload"] == 2


@pytest.mark.anyio
async def test_a_finished_run_leaves_no_file_of_its_run_directory_open(tmp_path: Path) -> None:
    # A notebook or any long-lived process runs many runs: each one's verdict cache and
    # verdict file are closed by their owners when it ends.
    def open_files() -> set[str]:
        found = set()
        for fd in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError):
                found.add(os.readlink(f"/proc/self/fd/{fd}"))
        return found

    before = open_files()
    with warnings.catch_warnings(record=True) as caught:
        # A file left to the garbage collector says so: "unclosed file <... name=...>".
        warnings.simplefilter("always", ResourceWarning)
        for n in range(2):
            provider = FakeBatchProvider(lambda cid, body, asked: _right(cid))
            config = _config(tmp_path, out_dir=tmp_path / f"runs{n}")
            result = await Run(config, provider=provider).run()
            assert result.outcome == "finished"
            left = {f for f in open_files() - before if f.startswith(str(tmp_path))}
            assert left == set()
        gc.collect()
    unclosed = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert not [m for m in unclosed if str(tmp_path) in m], unclosed


@pytest.mark.anyio
async def test_the_price_data_is_loaded_while_the_run_waits_not_at_its_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The summary's first price lookup loads genai-prices' data (0.1-0.2 s): the run
    # starts loading it at its first verdict, so the summary finds it loaded (or, when
    # the last answer came at once after the first, half-way: the import lock waits).
    from aeval.engine import run as run_module
    from aeval.summary.aggregate import summarize, summarize_file

    order: list[str] = []

    def warm() -> None:
        order.append("warm")
        cost.warm_prices()

    def summary(path: Path, **kwargs: Any) -> Any:
        order.append("summarize")
        return summarize_file(path, **kwargs)

    monkeypatch.setattr(run_module, "warm_prices", warm)
    monkeypatch.setattr(run_module, "summarize_file", summary)
    result = await Run(_config(tmp_path), provider=FakeBatchProvider(lambda *_: None)).run()
    assert result.outcome == "finished"
    assert order == ["warm", "summarize"]
    written = json.loads((result.run_dir / "summary.json").read_text())
    written.pop("provenance")
    frame = pl.read_parquet(result.run_dir / "verdicts.parquet")
    assert written == json.loads(json.dumps(summarize(frame)))
