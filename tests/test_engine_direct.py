"""Direct mode (issue 11) end to end against the local server's completion routes, over
real HTTP, with the production client settings (the SDK's retries off, aeval's own on:
aeval.engine.direct.client says why) except where a test is about one mechanism."""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import engine_helpers
import polars as pl
import pytest
from engine_helpers import (
    FAST_RETRY,
    benchmark_slice,
    expected_statuses,
    fast_config,
    observed,
    slice_path,
)

from aeval.cli import main
from aeval.config import Credentials
from aeval.display.labels import direct_lines
from aeval.engine import Run
from aeval.engine.direct.aimd import (
    DEFAULT_PROBE_WINDOWS,
    FIRST_WINDOW_PACE_S,
    FORGET_AFTER,
    REGROW_WINDOWS,
    AimdLimiter,
    Ticket,
)
from aeval.engine.direct.answer_files import AnswerFile
from aeval.engine.direct.client import DirectClient
from aeval.events import JobFinished, RetryScheduled, ShardUpdated, VerdictProduced
from aeval.local import FaultPlan, FaultRule, LocalBatchServer
from aeval.local.direct import Serving
from aeval.local.models import ModelSpec
from aeval.local.questions import QuestionIndex
from aeval.local.synthetic import Intent, default_failure_mix
from aeval.prompts import GenerationSettings
from aeval.report import summarize
from aeval.rescoring.rescore import rescore_files
from aeval.store import RunLayout, shard_stem
from aeval.store.results import concat_sorted
from aeval.store.verdict_file import read_verdict_frames
from aeval.verdicts import verdicts_frame

QUICK = Serving(latency_ms=20.0, jitter_ms=10.0)
# The engine's direct retries are counted against the expectations: a synthetic HTTP 500
# that fails every attempt (by default a retried one is a fresh draw, as a real 500 is).
SPECS = {
    m: dataclasses.replace(s, failures="deterministic") for m, s in engine_helpers.SPECS.items()
}
# For the tests of real processes, which run with the production retry settings: the
# synthetic mix without its HTTP 500s, whose retries back off for seconds.
NO_500 = {
    name: ModelSpec(
        "synthetic",
        seed=spec.seed,
        accuracy=spec.accuracy,
        failure_mix={i: w for i, w in default_failure_mix().items() if i is not Intent.HTTP_ERROR},
    )
    for name, spec in SPECS.items()
}


def _request_counts(frame: pl.DataFrame, models: tuple[str, ...], trials: int) -> dict:
    """How often the server must be asked for each (model, custom_id): once per trial,
    except a trial whose synthetic answer is an HTTP 500 (retried to its attempts)."""
    index = QuestionIndex.from_frame(frame)
    out: dict[tuple[str, str], int] = {}
    for model in models:
        responder = SPECS[model].build(index)
        for cid in frame["id"].to_list():
            n = 0
            for trial in range(1, trials + 1):
                intent = responder.intent(model, cid, trial=trial)  # type: ignore[attr-defined]
                n += FAST_RETRY.request_attempts if intent is Intent.HTTP_ERROR else 1
            out[(model, cid)] = n
    return out


def _answer_lines(run_dir: Path) -> list[tuple[str, str]]:
    """(file name, custom_id) of every answer line of the run."""
    out = []
    for path in sorted((run_dir / "outputs").glob("*-direct.jsonl")):
        for line in path.read_text().splitlines():
            out.append((path.name, json.loads(line)["custom_id"]))
    return out


def _rows(frame: pl.DataFrame) -> dict[tuple[str, int, str], tuple[object, ...]]:
    return {
        (r["model"], r["trial"], r["custom_id"]): (r["status"], r["reason"], r["correct_published"])
        for r in frame.iter_rows(named=True)
    }


@pytest.mark.anyio
async def test_three_models_two_trials_as_intended_once_each_and_as_in_batch_mode(
    benchmark_path: Path, tmp_path: Path
) -> None:
    data, frame = benchmark_slice(benchmark_path, tmp_path)
    events: list[object] = []
    async with LocalBatchServer(dataset=frame, models=dict(SPECS), serving=QUICK) as server:
        config = fast_config(data, tmp_path / "d", server.base_url, trials=2, api="direct")
        direct = await Run(config, subscribers=[events.append]).run()
        counters = server.direct_counters()
        batch = await Run(fast_config(data, tmp_path / "b", server.base_url, trials=2)).run()

    assert direct.outcome == "finished", direct.message
    want = expected_statuses(frame, SPECS, trials=2)
    assert observed(direct.verdicts) == want
    # the same data through the Batch API: the same verdict for every item, reasons included
    assert _rows(direct.verdicts) == _rows(batch.verdicts)
    # the server's counters: every request asked exactly once (an HTTP 500 to its attempts)
    assert dict(counters.requests) == _request_counts(frame, tuple(SPECS), 2)
    lines = _answer_lines(direct.run_dir)
    assert len(lines) == len(set(lines)) == len(want)
    kinds = [type(e) for e in events]
    assert kinds.count(JobFinished) == 6 and kinds.count(VerdictProduced) == len(want)
    direct_events = [e for e in events if isinstance(e, ShardUpdated)]
    assert all(e.in_flight is not None for e in direct_events)
    assert {e.phase for e in direct_events} == {"in_progress", "done"}
    # what rescore makes of the answer files is what the live run said, published included
    files = sorted((direct.run_dir / "outputs").glob("*-direct.jsonl"))
    rescored = await rescore_files(files, frame, workers=2)
    assert _rows(verdicts_frame(rescored.verdicts)) == _rows(direct.verdicts)


@pytest.mark.anyio
async def test_a_400_is_an_api_error_with_the_servers_message_published_as_rescore_says(
    benchmark_path: Path, tmp_path: Path
) -> None:
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=8)
    faults = FaultPlan(
        rules=(FaultRule("http", endpoint="POST /v1/chat/completions", status=400, times=2),),
        seed=1,
    )
    specs = {"model-a": SPECS["model-a"]}
    async with LocalBatchServer(
        dataset=frame, models=specs, serving=QUICK, faults=faults
    ) as server:
        config = fast_config(data, tmp_path, server.base_url, models=("model-a",), api="direct")
        result = await Run(config).run()
        counters = server.direct_counters()
    assert result.outcome == "finished", result.message
    errors = result.verdicts.filter(pl.col("reason").str.starts_with("http_400"))
    assert errors.height == 2
    assert set(errors["status"]) == {"api_error"}
    assert all(":" in r and len(r) > len("http_400: ") for r in errors["reason"])
    # never retried: a 400 is the server's final word (a faulted request is not counted)
    want = _request_counts(frame, ("model-a",), 1)
    for cid in errors["custom_id"]:
        want.pop(("model-a", cid))
    assert dict(counters.requests) == want
    # the published reading of an error row is what rescore gives it: incorrect, not empty
    assert errors["correct_published"].to_list() == [False, False]
    files = sorted((result.run_dir / "outputs").glob("*-direct.jsonl"))
    rescored = await rescore_files(files, frame, workers=2)
    assert _rows(verdicts_frame(rescored.verdicts)) == _rows(result.verdicts)
    live = result.verdicts["correct_published"].mean()
    assert verdicts_frame(rescored.verdicts)["correct_published"].mean() == live


@pytest.mark.anyio
async def test_429s_under_a_server_cap_lose_nothing(benchmark_path: Path, tmp_path: Path) -> None:
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=12)
    serving = Serving(latency_ms=40.0, max_concurrency=4, retry_after_s=0.05)
    async with LocalBatchServer(dataset=frame, models=dict(SPECS), serving=serving) as server:
        config = fast_config(
            data, tmp_path, server.base_url, api="direct", max_connections=16, trials=1
        )
        events: list[object] = []
        result = await Run(config, subscribers=[events.append]).run()
        counters = server.direct_counters()
    assert result.outcome == "finished", result.message
    assert observed(result.verdicts) == expected_statuses(frame, SPECS, trials=1)
    assert counters.busy_rejections > 0  # the cap was hit…
    assert counters.peak_concurrency <= 4
    assert dict(counters.requests) == _request_counts(frame, tuple(SPECS), 1)  # …none lost
    # Each retry says whose request it was: the live view counts it on that job's row.
    retries = [e for e in events if isinstance(e, RetryScheduled)]
    assert retries and all(e.model in SPECS and e.trial == 1 for e in retries)


def _chat_client(server: LocalBatchServer, limiter: AimdLimiter) -> DirectClient:
    """A direct client of the local server's chat route, holding ``limiter``'s slots."""
    credentials = Credentials("sk-test", server.base_url, aeval_server=True)
    return DirectClient(
        credentials, endpoint="chat", timeout=10.0, retry=FAST_RETRY, limiter=limiter
    )


@pytest.mark.anyio
async def test_aimd_lowers_the_limit_on_429_and_every_request_gets_through(
    benchmark_path: Path, tmp_path: Path
) -> None:
    # The mechanism itself: one client, its limiter watched directly.
    _, frame = benchmark_slice(benchmark_path, tmp_path, rows=12)
    serving = Serving(latency_ms=50.0, max_concurrency=3, retry_after_s=0.05)
    spec = {"model-a": SPECS["model-a"]}
    async with LocalBatchServer(dataset=frame, models=spec, serving=serving) as server:
        limiter = AimdLimiter(12)
        client = _chat_client(server, limiter)
        lines: list[str] = []

        async def ask(cid: str) -> None:
            body = {"model": "model-a", "messages": [{"role": "user", "content": "q"}]}
            lines.append(await client.ask(cid, 1, body))

        async with anyio.create_task_group() as tg:
            for i in range(36):
                tg.start_soon(ask, str(i % 12))
        await client.aclose()
        counters = server.direct_counters()
    # The cap is learned from the first refusals (the first window leaves one request
    # at a time and a refusal comes back at once, so about one request over the cap;
    # never more than the ceiling's 12 - 3 excess) and probed rarely after: a few more
    # 429s for 36 requests, not one per round trip.
    assert 0 < counters.busy_rejections <= 12 - 3 + 4
    assert limiter.cap is not None and 1 <= limiter.cap <= 3
    assert limiter.decreases >= 1 and limiter.lowest <= 3 and limiter.limit < 12
    assert limiter.in_use == 0
    statuses = [json.loads(line)["response"]["status_code"] for line in lines]
    assert len(statuses) == 36 and 429 not in statuses


@pytest.mark.anyio
async def test_aimd_limiter_slow_start() -> None:
    limiter = AimdLimiter(16, initial=4, growth_pace_s=0.0)  # the pace: the next test
    assert limiter.slots == 4  # the first window, until answers come back
    async with contextlib.AsyncExitStack() as held:
        epochs = [await held.enter_async_context(limiter.slot()) for _ in range(4)]
        assert limiter.in_use == 4
        for _ in range(4):  # one more slot per answer: the window doubles per round trip
            limiter.success()
        assert limiter.slots == 8 and limiter.cap is None
        epochs += [await held.enter_async_context(limiter.slot()) for _ in range(4)]
        limiter.success()
        assert limiter.slots == 9
        epochs.append(await held.enter_async_context(limiter.slot()))
        limiter.busy(epochs[-1])  # the ninth in flight refused: the server holds eight
        assert (limiter.cap, limiter.limit) == (8.0, 8.0)
    for _ in range(8):
        limiter.success()  # at the learned cap: no more slow start
    assert limiter.slots == 8
    grown = AimdLimiter(6, initial=2, growth_pace_s=0.0)
    for _ in range(20):  # no 429 ever: up to the ceiling, never above it
        grown.success()
    assert grown.slots == 6 and grown.cap is None


@pytest.mark.anyio
async def test_aimd_limiter_slow_start_adds_at_most_one_slot_per_pace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A client that reads a burst of answers at once (starved of CPU) grows by one
    # slot, not one per answer: the 429 of the first request over a server's cap is
    # read before the rest of the burst's slots are sent. The limiter reads the event
    # loop's clock; here it is a clock the test moves, so a descheduled test process
    # cannot make "the same instant" last a pace.
    now = [1000.0]
    monkeypatch.setattr(anyio, "current_time", lambda: now[0])
    limiter = AimdLimiter(32, initial=8, growth_pace_s=0.05)
    assert limiter.slots == 8
    for _ in range(6):  # six answers read in the same instant
        limiter.success()
    assert limiter.slots == 9
    now[0] += 0.049  # within the pace: still no new slot
    limiter.success()
    assert limiter.slots == 9
    now[0] += 0.001  # a pace later, the next answer adds the next slot
    limiter.success()
    limiter.success()
    assert limiter.slots == 10


@pytest.mark.anyio
async def test_aimd_limiter_first_window_is_the_ceiling_sent_one_at_a_time() -> None:
    # A server with room for the whole window gets it from the first round trip, each
    # request a pace after the previous one really went: after the loop stalls, the
    # senders whose wait ran out meanwhile still go one at a time, not as one burst.
    limiter = AimdLimiter(8)
    assert limiter.slots == 8 and limiter.cap is None
    sent: list[float] = []

    async def send(held: contextlib.AsyncExitStack) -> None:
        await held.enter_async_context(limiter.slot())
        sent.append(anyio.current_time())
        if len(sent) == 2:
            time.sleep(0.05)  # the loop stalls (blocking on purpose) with six waiting

    async with contextlib.AsyncExitStack() as held, anyio.create_task_group() as tg:
        for _ in range(8):
            tg.start_soon(send, held)
    assert len(sent) == 8 and limiter.in_use == 0
    gaps = [b - a for a, b in itertools.pairwise(sent)]
    assert min(gaps) >= FIRST_WINDOW_PACE_S * 0.99, gaps
    limiter.success()  # the first answer: the limit stays full
    assert limiter.slots == 8 and limiter.cap is None


@pytest.mark.anyio
async def test_aimd_limiter_rules() -> None:
    limiter = AimdLimiter(8, initial=8, probe_windows=1)
    assert limiter.slots == 8  # the ceiling, until the server says otherwise
    limiter.success()
    assert limiter.slots == 8
    async with contextlib.AsyncExitStack() as held:
        epochs = [await held.enter_async_context(limiter.slot()) for _ in range(6)]
        limiter.busy(epochs[-1])  # the sixth refused: the server holds the other five
        assert (limiter.cap, limiter.limit, limiter.decreases) == (5.0, 5.0, 1)
        limiter.busy(epochs[-1])  # the same congestion: measured again, one decrease
        assert limiter.decreases == 1 and limiter.busy_answers == 2
    for _ in range(5):  # a window at the cap (probe_windows=1): one slot above is tried
        limiter.success()
    assert limiter.limit == 6.0 and limiter.cap == 5.0
    async with contextlib.AsyncExitStack() as held:
        epochs = [await held.enter_async_context(limiter.slot()) for _ in range(6)]
        limiter.busy(epochs[-1])  # refused: the cap holds, the next probe waits twice as long
    assert (limiter.cap, limiter.limit) == (5.0, 5.0)
    for _ in range(9):
        limiter.success()
    assert limiter.limit == 5.0
    limiter.success()
    assert limiter.limit == 6.0  # probing again after two windows
    for _ in range(6):  # a whole window passes above the cap: the server grew
        limiter.success()
    assert limiter.cap == 6.0
    async with limiter.slot() as epoch:
        limiter.busy(epoch)  # nothing else in flight: the floor
    assert limiter.limit == 1.0 == limiter.lowest


@pytest.mark.anyio
async def test_aimd_limiter_learns_the_cap_from_the_depth_a_refused_request_was_sent_at() -> None:
    # A client starved of CPU: 20 requests went out (a slow start that read several
    # answers at once), the server (16) refused the 17th; by the time its 429 is read,
    # 10 older requests' answers were read too and 3 newer requests are in flight.
    limiter = AimdLimiter(32, initial=20, probe_windows=1)
    async with contextlib.AsyncExitStack() as held:
        tickets = []
        older = contextlib.AsyncExitStack()
        await held.enter_async_context(older)
        for _ in range(10):
            tickets.append(await older.enter_async_context(limiter.slot()))
        async with contextlib.AsyncExitStack() as rest:
            for _ in range(10):
                tickets.append(await rest.enter_async_context(limiter.slot()))
            refused = tickets[16]
            assert refused.depth == 16
            await older.aclose()  # ten answers read before the refusal
            assert limiter.in_use == 10
            limiter.busy(refused)
            # what was in flight at the read, less the refused (9), would hold a server
            # of 16 at 9; counting the newer ones too would read a burst as its size
            assert (limiter.cap, limiter.limit, limiter.slots) == (16.0, 16.0, 16)
            limiter.busy(tickets[19])  # a later refusal of the same burst, sent deeper
            assert limiter.cap == 16.0 and limiter.decreases == 1
    # at the cap: a request is sent at depth 15 at most, so the server never refuses it
    async with contextlib.AsyncExitStack() as full:
        depths = [(await full.enter_async_context(limiter.slot())).depth for _ in range(16)]
        assert max(depths) == 15 and limiter.in_use == limiter.slots == 16
    for _ in range(16):  # a window at the cap (probe_windows=1): one slot above is tried
        limiter.success()
    assert (limiter.cap, limiter.limit) == (16.0, 17.0)
    async with contextlib.AsyncExitStack() as full:
        for _ in range(15):
            await full.enter_async_context(limiter.slot())
        async with limiter.slot() as probe:
            # the probe refused, sent at depth 15 (another request reached the server
            # first): the cap the client held at for a window without refusals holds
            limiter.busy(probe)
    assert (limiter.cap, limiter.limit) == (16.0, 16.0)
    async with limiter.slot() as ticket:
        limiter.busy(ticket)  # refused with nothing else in flight: a rate limit, the floor
    assert limiter.cap == limiter.limit == 1.0


def _refused(limiter: AimdLimiter, depth: int, *, earlier: bool = False) -> None:
    """A 429 to a request sent at ``depth``, in the current congestion epoch or (earlier)
    before the last cut (the epoch is the count of cuts: both start at 0, move together)."""
    limiter.busy(Ticket(limiter.decreases - (1 if earlier else 0), depth))


def _answers(limiter: AimdLimiter, n: int) -> None:
    for _ in range(n):
        limiter.success()


@pytest.mark.anyio
async def test_aimd_limiter_follows_a_cap_halved_then_restored() -> None:
    limiter = AimdLimiter(32, growth_pace_s=0.0)
    _refused(limiter, 16)  # the first window: the 17th refused, the server holds 16
    assert (limiter.cap, limiter.limit, limiter.high) == (16.0, 16.0, 16.0)
    _answers(limiter, DEFAULT_PROBE_WINDOWS * 16 - 1)
    assert limiter.limit == 16.0  # at the largest size seen: no probe for 8 windows
    # The server halves: each request sent at the cap is refused, and the limit drops to
    # what was in flight when it was sent (one cut each), not to a fraction of it.
    for depth in range(15, 7, -1):
        _refused(limiter, depth)
        assert (limiter.cap, limiter.limit, limiter.high) == (depth, depth, 16.0)
    assert limiter.decreases == 1 + 8 and limiter.lowest == 8.0
    # Two windows at 8, then one slot above: refused, still halved (no doubling below 16).
    _answers(limiter, REGROW_WINDOWS * 8 - 1)
    assert limiter.limit == 8.0
    limiter.success()
    assert limiter.limit == 9.0
    _refused(limiter, 8)
    assert (limiter.cap, limiter.limit, limiter.high) == (8.0, 8.0, 16.0)
    # The server is restored: two windows later the limit grows one slot per answer
    # back to 16, and a whole window there without a refusal makes 16 the cap again.
    _answers(limiter, REGROW_WINDOWS * 8)
    assert limiter.limit == 9.0
    _answers(limiter, 7)
    assert (limiter.cap, limiter.limit) == (8.0, 16.0)
    _answers(limiter, 9)
    assert (limiter.cap, limiter.limit, limiter.high) == (16.0, 16.0, 16.0)
    _answers(limiter, DEFAULT_PROBE_WINDOWS * 16 - 1)
    assert limiter.limit == 16.0
    limiter.success()  # eight windows at the largest size seen: one slot above is tried
    assert limiter.limit == 17.0


def test_aimd_limiter_forgets_a_size_the_server_does_not_come_back_to() -> None:
    limiter = AimdLimiter(32, growth_pace_s=0.0)
    _refused(limiter, 16)
    _answers(limiter, 16)  # a window at 16: the server holds that
    _refused(limiter, 6)  # halved and more: one cut to the depth
    assert (limiter.cap, limiter.high) == (6.0, 16.0)
    for _ in range(FORGET_AFTER):  # growing back refused, again and again
        _answers(limiter, REGROW_WINDOWS * 6)
        assert limiter.limit == 7.0
        _refused(limiter, 6)
    assert (limiter.cap, limiter.high, limiter.limit) == (6.0, 6.0, 6.0)
    _answers(limiter, DEFAULT_PROBE_WINDOWS * 6 - 1)  # now probed rarely, as any cap
    assert limiter.limit == 6.0


@pytest.mark.anyio
async def test_aimd_limiter_regrows_past_a_depth_read_short() -> None:
    # Two requests of the first window reached the server in the other order: the 16th
    # sent is refused too, read as a server of 15. The size first seen (16) is grown back
    # to two windows later, and held there.
    limiter = AimdLimiter(32, growth_pace_s=0.0)
    _refused(limiter, 16)
    _refused(limiter, 15, earlier=True)  # the same burst: no second cut
    _refused(limiter, 20, earlier=True)  # sent deeper in the burst: bounds nothing lower
    assert (limiter.cap, limiter.high, limiter.decreases) == (15.0, 16.0, 1)
    _answers(limiter, REGROW_WINDOWS * 15)
    assert limiter.limit == 16.0
    _answers(limiter, 16)
    assert (limiter.cap, limiter.limit) == (16.0, 16.0)
    _answers(limiter, 16 * 4)
    assert limiter.limit == 16.0


def test_aimd_limiter_does_not_grow_back_to_a_first_depth_read_high() -> None:
    # A client reading answers late read the first refusal's depth as 5 at a server of 4:
    # the cut at 5 costs one more 429, and growing back to 5 one more, then never again.
    limiter = AimdLimiter(12, growth_pace_s=0.0)
    _refused(limiter, 5)
    _refused(limiter, 4)
    assert (limiter.cap, limiter.high) == (4.0, 5.0)
    _answers(limiter, REGROW_WINDOWS * 4)
    assert limiter.limit == 5.0
    _refused(limiter, 4)  # never held for a window: forgotten at once
    assert (limiter.cap, limiter.high, limiter.limit) == (4.0, 4.0, 4.0)
    _answers(limiter, DEFAULT_PROBE_WINDOWS * 4 - 1)
    assert limiter.limit == 4.0


@pytest.mark.anyio
async def test_aimd_limiter_holds_a_local_servers_cap(benchmark_path: Path, tmp_path: Path) -> None:
    # A ceiling of 12 at a server that answers 4 at a time (50 ms each), 80 requests:
    # the server is held full at its cap, refusing only the first window's excess and
    # the odd probe, and nothing is lost. (No timing: counts only.)
    _, frame = benchmark_slice(benchmark_path, tmp_path, rows=20)
    serving = Serving(latency_ms=50.0, max_concurrency=4)
    spec = {"model-a": SPECS["model-a"]}
    async with LocalBatchServer(dataset=frame, models=spec, serving=serving) as server:
        limiter = AimdLimiter(12)
        client = _chat_client(server, limiter)
        lines: list[str] = []
        in_use: list[int] = []

        async def ask(cid: str, trial: int) -> None:
            body = {"model": "model-a", "messages": [{"role": "user", "content": "q"}]}
            lines.append(await client.ask(cid, trial, body))
            in_use.append(limiter.in_use + 1)  # in flight when this answer came back

        async with anyio.create_task_group() as tg:
            for i in range(80):
                tg.start_soon(ask, str(i % 20), 1 + i // 20)
        await client.aclose()
        counters = server.direct_counters()
    assert counters.peak_concurrency == 4 and limiter.high in (4.0, 5.0)
    # at most: the first window's excess (12 - 4), one cut of a first depth read high, one
    # regrowth refused, two probes (20 windows: after 8, then 16 more)
    assert counters.busy_rejections <= (12 - 4) + 1 + 1 + 2
    assert limiter.cap == 4.0 and limiter.lowest >= 3.0
    # held at the cap: all but the last window's answers came back with the server full
    assert sum(1 for n in in_use if n >= 4) >= 80 - 4 - counters.busy_rejections
    statuses = [json.loads(line)["response"]["status_code"] for line in lines]
    assert statuses == [200] * 80 and counters.total == 80


@pytest.mark.anyio
async def test_cancel_then_resume_sends_only_the_missing_requests(
    benchmark_path: Path, tmp_path: Path
) -> None:
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=12)
    # 24 requests, 4 at a time, 0.2 s each: the run is cancelled from outside once 10
    # answers are on disk, with time to spare however slowly verification goes
    serving = Serving(latency_ms=200.0, jitter_ms=20.0)
    models = ("model-a", "model-b")
    specs = {m: SPECS[m] for m in models}
    async with LocalBatchServer(dataset=frame, models=specs, serving=serving) as server:
        config = fast_config(
            data, tmp_path, server.base_url, models=models, api="direct", max_connections=4
        )
        run = Run(config)

        async def cancel_midway() -> None:
            outputs = run.run_dir / "outputs"
            while sum(p.read_bytes().count(b"\n") for p in outputs.glob("*-direct.jsonl")) < 10:
                await anyio.sleep(0.01)
            run.cancel()  # a live direct run, stopped from outside

        async with anyio.create_task_group() as tg:
            tg.start_soon(cancel_midway)
            first = await run.run()
            tg.cancel_scope.cancel()
        assert first.outcome == "interrupted"
        assert "resume" in first.message and "remote batches" not in first.message
        file_model = {shard_stem(m, 1, 1).rsplit("-t1-", 1)[0]: m for m in models}
        answered = {
            (file_model[re.sub(r"-t\d+-direct\.jsonl$", "", name)], cid)
            for name, cid in _answer_lines(first.run_dir)
        }
        assert 10 <= len(answered) < 2 * frame.height
        creds = Credentials("sk-test", server.base_url, aeval_server=True)
        second = await Run.resume(first.run_dir, credentials=creds).run()
        after = server.direct_counters()
    assert second.outcome == "finished", second.message
    assert observed(second.verdicts) == {
        k: v for k, v in expected_statuses(frame, SPECS, 1).items() if k[0] in models
    }
    lines = _answer_lines(first.run_dir)
    assert len(lines) == len(set(lines)) == 2 * frame.height  # one answer per request
    # The server's counters, read once both runs are done (a request dropped in flight
    # at the cancel is counted whenever it reaches the server): the resume asked again
    # for no request the first run had answered, and the rest were asked as often as
    # their answers need (an HTTP 500 to its attempts), plus those dropped in flight.
    want = _request_counts(frame, models, 1)
    assert {k: after.requests_for(*k) for k in answered} == {k: want[k] for k in answered}
    dropped = sum(after.requests_for(*k) - n for k, n in want.items() if k not in answered)
    # at most the connections, and the attempts of an HTTP 500 the cancel cut short
    assert 0 <= dropped <= 4 + sum(n - 1 for n in want.values())


def test_a_torn_last_answer_line_is_cut_and_its_request_sent_again(tmp_path: Path) -> None:
    path = tmp_path / "outputs" / "m-t1-direct.jsonl"
    path.parent.mkdir()
    whole = '{"custom_id":"1","response":{"status_code":200,"body":{}},"error":null}\n'
    path.write_text(whole + '{"custom_id":"2","response":{"sta')
    answers = AnswerFile(path)
    assert [r.custom_id for r in answers.open()] == ["1"]
    assert answers.answered == {"1"}
    answers.append("2", whole.replace('"1"', '"2"'))
    answers.close()
    assert [json.loads(line)["custom_id"] for line in path.read_text().splitlines()] == ["1", "2"]


@pytest.mark.anyio
async def test_a_torn_answer_after_a_crash_is_asked_again_once(
    benchmark_path: Path, tmp_path: Path
) -> None:
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=6)
    specs = {"model-a": SPECS["model-a"]}
    async with LocalBatchServer(dataset=frame, models=specs, serving=QUICK) as server:
        config = fast_config(data, tmp_path, server.base_url, models=("model-a",), api="direct")
        first = await Run(config).run()
        # As if killed while writing the last answer: its line torn, no verdict for it.
        path = RunLayout(first.run_dir).direct_answers("model-a", 1)
        lines = path.read_text().splitlines(keepends=True)
        torn = json.loads(lines[-1])["custom_id"]
        path.write_text("".join(lines[:-1]) + lines[-1][:40])
        verdicts = first.run_dir / "verdicts.jsonl"
        kept = [v for v in verdicts.read_text().splitlines() if json.loads(v)["custom_id"] != torn]
        verdicts.write_text("\n".join(kept) + "\n")
        before = server.direct_counters()
        creds = Credentials("sk-test", server.base_url, aeval_server=True)
        second = await Run.resume(first.run_dir, credentials=creds).run()
        after = server.direct_counters()
    assert second.outcome == "finished"
    assert _rows(second.verdicts) == _rows(first.verdicts)
    assert after.total - before.total >= 1
    asked = {k: n - before.requests_for(*k) for k, n in after.requests.items()}
    assert {k for k, n in asked.items() if n} == {("model-a", torn)}
    assert len(path.read_text().splitlines()) == frame.height


@pytest.mark.anyio
async def test_completions_endpoint_with_a_prompt_template(
    benchmark_path: Path, tmp_path: Path
) -> None:
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=6)
    template = "You are a helpful assistant.\nUser:\n{question}\n{instruction}\nAssistant:\n"
    specs = {"model-a": SPECS["model-a"]}
    async with LocalBatchServer(dataset=frame, models=specs, serving=QUICK) as server:
        config = fast_config(
            data,
            tmp_path,
            server.base_url,
            models=("model-a",),
            api="direct",
            endpoint="completions",
            prompt_template=template,
            generation=GenerationSettings(seed=7),
            trials=2,
        )
        result = await Run(config).run()
        counters = server.direct_counters()
    assert result.outcome == "finished", result.message
    assert observed(result.verdicts) == expected_statuses(frame, specs, trials=2)
    assert counters.total >= 12
    requests = sorted((result.run_dir / "requests").glob("*.jsonl"))
    first = [json.loads(line) for line in requests[0].read_text().splitlines()]
    assert first[0]["url"] == "/v1/completions"
    body = first[0]["body"]
    assert body["prompt"].startswith("You are a helpful assistant.\nUser:\n")
    assert body["prompt"].endswith("\nAssistant:\n") and "{question}" not in body["prompt"]
    # trials are separate requests: --generation-seed S sends S + trial - 1
    seeds = [json.loads(p.read_text().splitlines()[0])["body"]["seed"] for p in requests]
    assert seeds == [7, 8]


# -- the command line --------------------------------------------------------------------


def _env(base_url: str | None) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    for name in ("OPENAI_API_KEY", "OPENAI_KEY", "OPENAI_BASE_URL", "AZURE_OPENAI_ENDPOINT"):
        env.pop(name, None)
    if base_url is not None:
        # aeval's own server, as 'aeval serve' tells its user to say
        env.update(
            OPENAI_API_KEY="sk-direct", OPENAI_BASE_URL=base_url, AEVAL_LOCAL_SERVER=base_url
        )
    return env


def _aeval(args: list[str], base_url: str | None, cwd: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "aeval", *args],
        cwd=cwd,
        env=_env(base_url),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--api", "streaming"], "invalid choice: 'streaming'"),
        (["--api", "direct", "--endpoint", "completions", "--prompt-template", "T"], "{question}"),
        (["--api", "direct", "--endpoint", "completions"], "--prompt-template"),
    ],
)
def test_bad_api_or_template_exits_2_before_any_request_or_run_dir(
    tmp_path: Path,
    extra: list[str],
    says: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # In this process (the command's own parser and checks; a process's exit 2 on an
    # early refusal is tests/test_cli_options.py::test_an_input_error_exits_the_process_2...)
    (tmp_path / "T").write_text("User:\n{instruction}\nAssistant:\n")
    out = tmp_path / "results"
    monkeypatch.chdir(tmp_path)
    # a base URL nobody listens on: any request would fail differently (and slowly)
    for name in ("OPENAI_KEY", "AZURE_OPENAI_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    for name, value in _env("http://127.0.0.1:9/v1").items():
        if name.startswith(("OPENAI_", "AEVAL_LOCAL")):
            monkeypatch.setenv(name, value)
    try:
        code: object = main(["run", "--out", str(out), *extra])
    except SystemExit as exit_:  # argparse's own refusal
        code = exit_.code
    err = capsys.readouterr().err
    assert code == 2, err
    assert says in err
    assert not out.exists()


def _wait_lines(run_dir: Path, n: int, proc: subprocess.Popen[bytes], deadline: float) -> bool:
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        outputs = run_dir / "outputs"
        if (
            outputs.is_dir()
            and sum(p.read_bytes().count(b"\n") for p in outputs.glob("*-direct.jsonl")) >= n
        ):
            return True
        time.sleep(0.01)
    return False


def _run_args(
    data: Path, out: Path, models: tuple[str, ...], trials: int, connections: int = 3
) -> list[str]:
    return [
        *("run", "--api", "direct", "--model", ",".join(models), "--trials", str(trials)),
        *("--dataset", str(data), "--out", str(out), "--run-id", "d", "--workers", "1"),
        *("--max-connections", str(connections), "--display", "quiet"),
    ]


def test_cancel_of_a_live_direct_run(benchmark_path: Path, tmp_path: Path) -> None:
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=20)
    out = tmp_path / "results"
    run_dir = out / "d"
    # 20 requests, 2 at a time, 2 s each. The live run is stopped (SIGSTOP) while
    # 'cancel' starts and puts it on hold, and continued after: however slowly a loaded
    # machine starts 'cancel', the hold lands with requests left to send (it used to
    # race the live run: at load 12 on 2 cores the run once finished first).
    serving = Serving(latency_ms=2000.0)
    specs = {"model-a": NO_500["model-a"]}
    with LocalBatchServer(dataset=frame, models=specs, serving=serving) as server:
        url = server.base_url
        live = _aeval(_run_args(data, out, ("model-a",), 1, connections=2), url, tmp_path)
        assert _wait_lines(run_dir, 3, live, time.monotonic() + 60)
        live.send_signal(signal.SIGSTOP)
        try:
            cancel = subprocess.run(
                [sys.executable, "-m", "aeval", "cancel", str(run_dir)],
                env=_env(url),
                capture_output=True,
                timeout=60,
            )
        finally:
            live.send_signal(signal.SIGCONT)
        assert cancel.returncode == 0, cancel.stderr.decode()
        assert b"is being run by" in cancel.stdout
        _, err = live.communicate(timeout=60)
        # the live run stops sending, records what was in flight, and says what is left
        assert live.returncode == 1, err.decode()
        assert b"not sent" in err and b"resume --submit" in err
        answered = len(_answer_lines(run_dir))
        assert 3 <= answered < frame.height
        verdicts = (run_dir / "verdicts.jsonl").read_text().splitlines()
        assert len(verdicts) == answered  # the unsent rows' api_errors are provisional
        asked = server.direct_counters().total
        # the rest at once (the server takes any number): the resume is not what is tested
        resume = ["resume", "--submit", str(run_dir), "--max-connections", "20"]
        resumed = _aeval([*resume, "--display", "quiet"], url, tmp_path)
        _, err = resumed.communicate(timeout=60)
        assert resumed.returncode == 0, err.decode()
        total = server.direct_counters().total
    assert asked - answered <= 2  # at most what was in flight when it stopped sending
    assert total - asked == frame.height - answered  # then exactly the missing ones
    final = pl.read_parquet(run_dir / "verdicts.parquet")
    assert observed(final) == expected_statuses(frame, specs, trials=1)


def _chaos(benchmark_path: Path, tmp_path: Path, *, seed: int, kills: int) -> None:
    """SIGKILL a real 'run --api direct' after a seeded number of answers, resume until
    it finishes: the verdicts of an uninterrupted run, and no request answered twice
    except those in flight at a kill."""
    rng = random.Random(seed)
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=10)
    models = ("model-a", "model-b")
    specs = {m: NO_500[m] for m in models}
    out = tmp_path / "results"
    run_dir = out / "d"
    total = len(models) * 2 * frame.height
    serving = Serving(latency_ms=60.0, jitter_ms=30.0)
    kill_points: list[int] = []
    with LocalBatchServer(dataset=frame, models=specs, serving=serving) as server:
        url = server.base_url
        for attempt in range(kills + 1):
            args = (
                ["resume", str(run_dir), "--display", "quiet"]
                if (run_dir / "manifest.json").exists()
                else _run_args(data, out, models, 2)
            )
            proc = _aeval(args, url, tmp_path)
            if attempt < kills:
                have = len(_answer_lines(run_dir)) if run_dir.exists() else 0
                target = have + rng.randint(1, max(1, (total - have) // 2))
                if _wait_lines(run_dir, target, proc, time.monotonic() + 60):
                    proc.send_signal(signal.SIGKILL)
                    proc.wait()  # what it had in flight is counted whenever it arrives
                    kill_points.append(target)
                    continue
            _, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err.decode()
            break
        counters = server.direct_counters()
        # the same run, never interrupted, on the same server
        config = fast_config(
            data, tmp_path / "whole", url, models=models, trials=2, api="direct", workers=1
        )
        whole = anyio.run(Run(config).run)
    assert kill_points, "no kill happened: the chaos test tested nothing"
    final = pl.read_parquet(run_dir / "verdicts.parquet")
    assert observed(final) == expected_statuses(frame, specs, trials=2)
    assert _rows(final) == _rows(whole.verdicts)  # item by item, reasons and published too
    lines = _answer_lines(run_dir)
    assert len(lines) == len(set(lines)) == total
    verdict_keys = [
        (r["model"], r["trial"], r["custom_id"])
        for r in map(json.loads, (run_dir / "verdicts.jsonl").read_text().splitlines())
    ]
    assert len(verdict_keys) == len(set(verdict_keys)) == total
    # every request asked once, plus at most what was in flight at each kill (3 connections)
    assert total <= counters.total <= total + 3 * len(kill_points)
    assert max(counters.requests.values()) <= 2 + len(kill_points)
    print(f"direct chaos seed {seed}: killed after {kill_points} answers")


def test_sigkill_a_direct_run_then_resume(benchmark_path: Path, tmp_path: Path) -> None:
    _chaos(benchmark_path, tmp_path, seed=11, kills=2)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(5))
def test_sigkill_a_direct_run_many_seeds(benchmark_path: Path, tmp_path: Path, seed: int) -> None:
    _chaos(benchmark_path, tmp_path, seed=200 + seed, kills=5)


def test_the_offline_demo_runs_in_direct_mode(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    proc = _aeval(
        [
            *("run", "--api", "direct", "--model", "gpt-4o-2024-11-20", "--limit", "4"),
            *("--out", str(tmp_path), "--display", "plain"),
        ],
        None,
        tmp_path,
    )
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode()
    assert b"offline demo (direct mode)" in err
    (run_dir,) = [p for p in tmp_path.iterdir() if (p / "manifest.json").exists()]
    assert len(_answer_lines(run_dir)) == 4
    assert json.loads((run_dir / "config.json").read_text())["api"] == "direct"

    # 'status' reads a direct job's counts from its answer file (there is no batch to
    # ask), also while the job is still sending: here its manifest says in progress.
    manifest = json.loads((run_dir / "manifest.json").read_text())
    for rec in manifest["shards"].values():
        rec.update(status="in_progress", completed=0, failed=0)
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    # (in this process: the command itself is what is read; the run above was the process)
    capsys.readouterr()
    assert main(["status", "--local", "--json", str(run_dir)]) == 0, capsys.readouterr().err
    (row,) = json.loads(capsys.readouterr().out)["shards"]
    assert row["direct"] and row["status"] == "in_progress (direct)"
    assert row["completed"] + row["failed"] == 4
    assert main(["status", "--local", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert "direct" in out and "in_progress (direct)" in out


# -- configuration, cost and display ---------------------------------------------------


def test_direct_settings_are_checked_saved_and_frozen_on_resume(tmp_path: Path) -> None:
    from aeval.config import RunConfig
    from aeval.engine.planning import saved_config
    from aeval.errors import ConfigError

    with pytest.raises(ConfigError, match="--api 'stream'"):
        RunConfig(models=("m",), api="stream")
    with pytest.raises(ConfigError, match="needs --api direct"):
        RunConfig(models=("m",), endpoint="completions", prompt_template="{question}")
    config = RunConfig(models=("m",), api="direct", max_connections=7, request_timeout=9.0)
    again = RunConfig.from_dict(json.loads(json.dumps(config.to_dict())))
    assert (again.api, again.max_connections, again.request_timeout) == ("direct", 7, 9.0)
    run_dir = tmp_path / "r"
    run_dir.mkdir()
    (run_dir / "config.json").write_text(json.dumps(config.to_dict()))
    with pytest.raises(ConfigError, match="cannot change"):
        saved_config(run_dir, {"api": "batch"}, None)
    # 'resume --max-connections/--request-timeout' change the pace, nothing else
    from aeval.cli import build_parser
    from aeval.commands.drive import resume_overrides

    args = build_parser("resume").parse_args(
        ["resume", str(run_dir), "--max-connections", "3", "--request-timeout", "4.5"]
    )
    overrides = resume_overrides(args)
    assert overrides == {"max_connections": 3, "request_timeout": 4.5}
    resumed, _ = saved_config(run_dir, overrides, None)
    assert (resumed.api, resumed.max_connections, resumed.request_timeout) == ("direct", 3, 4.5)
    plain = resume_overrides(build_parser("resume").parse_args(["resume", str(run_dir)]))
    assert saved_config(run_dir, plain, None)[0].max_connections == 7  # as it was started


def test_the_cost_estimate_of_a_direct_run_is_at_full_price() -> None:
    from aeval.commands.run import cost_lines
    from aeval.config import RunConfig

    questions = ["(declare-const x Int) what is x?"] * 3
    batch = cost_lines(RunConfig(models=("gpt-4o-mini",)), questions)
    direct = cost_lines(RunConfig(models=("gpt-4o-mini",), api="direct"), questions)
    assert "half" in batch[0] and "full" in direct[0]
    assert "full price (direct)" in direct[1] or "unknown" in direct[1]


def test_the_views_show_a_direct_jobs_in_flight_pace_and_eta() -> None:
    from rich.console import Console

    from aeval.display import ProgressState, render_progress

    now = [1000.0]
    state = ProgressState(clock=lambda: now[0])
    for t, done in ((1000.0, 0), (1002.0, 50), (1004.0, 100)):
        now[0] = t
        state.apply(
            ShardUpdated(
                model="m",
                trial=1,
                shard=0,
                phase="in_progress",
                completed=done,
                total=200,
                in_flight=8,
                output_tokens=done * 40,
                time=t,
            )
        )
    console = Console(width=200, record=True)
    console.print(render_progress(state))
    text = console.export_text()
    assert "8 in flight" in text and "25.0 req/s" in text and "1000 tok/s" in text
    (line,) = direct_lines(state)
    assert line.startswith("m trial 1: answered 100, failed 0 of 200, 8 in flight")
    assert "ETA" in line


@pytest.mark.anyio
async def test_a_closed_port_fails_fast_at_the_connect_deadline(
    benchmark_path: Path, tmp_path: Path
) -> None:
    import dataclasses

    from aeval.errors import UnreachableError

    data = slice_path(benchmark_path, tmp_path, rows=4)
    retry = dataclasses.replace(FAST_RETRY, connect_deadline_s=0.5)
    config = fast_config(
        data, tmp_path, "http://127.0.0.1:9/v1", models=("model-a",), api="direct", retry=retry
    )
    started = time.monotonic()
    with pytest.raises(UnreachableError, match=r"cannot reach http://127\.0\.0\.1:9/v1"):
        await Run(config).run()
    assert time.monotonic() - started < 10
    verdicts = config.out_dir.glob("*/verdicts.jsonl")
    assert all(not p.read_text() for p in verdicts)  # nothing was answered, nothing scored


@pytest.mark.anyio
async def test_a_request_that_never_got_an_answer_is_not_recorded_and_resume_asks_again(
    benchmark_path: Path, tmp_path: Path
) -> None:
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=5)
    specs = {"model-a": NO_500["model-a"]}
    # after two answers, the connection of every attempt of the three other requests is
    # cut (however their attempts interleave: a request's backoff frees its slot for another)
    drops = FaultRule(
        "drop", endpoint="POST /v1/chat/completions", skip=2, times=3 * FAST_RETRY.request_attempts
    )
    async with LocalBatchServer(
        dataset=frame, models=specs, serving=QUICK, faults=FaultPlan(rules=(drops,), seed=1)
    ) as server:
        config = fast_config(
            data, tmp_path, server.base_url, models=("model-a",), api="direct", max_connections=1
        )
        first = await Run(config).run()
        assert first.outcome == "finished_with_failures"
        assert "3 request(s) got no answer" in first.message
        cut = first.verdicts.filter(pl.col("reason").str.contains("got no answer"))
        assert cut.height == 3 and set(cut["status"].to_list()) == {"api_error"}
        cids = set(cut["custom_id"].to_list())
        assert not {("model-a", 1, cid) for cid in cids} & {  # provisional: not in the store
            (r["model"], r["trial"], r["custom_id"])
            for r in map(json.loads, (first.run_dir / "verdicts.jsonl").read_text().splitlines())
        }
        assert not cids & {c for _, c in _answer_lines(first.run_dir)}  # nor an answer line
        creds = Credentials("sk-test", server.base_url, aeval_server=True)
        second = await Run.resume(first.run_dir, credentials=creds).run()
    assert second.outcome == "finished", second.message
    assert observed(second.verdicts) == expected_statuses(frame, specs, trials=1)


def test_a_direct_runs_summary_costs_full_price() -> None:
    from aeval.report import summarize
    from aeval.verdicts import Status, Verdict

    verdict = Verdict(
        model="gpt-4o-mini",
        trial=1,
        custom_id="1",
        status=Status.EQUIVALENT,
        prompt_tokens=1_000_000,
        completion_tokens=0,
    )
    frame = verdicts_frame([verdict])
    batch = summarize(frame)["models"][0]["cost_usd"]
    direct = summarize(frame, batch_prices=False)["models"][0]["cost_usd"]
    assert batch is not None and direct == pytest.approx(2 * batch)


def test_a_direct_run_process_exits_with_its_directory_complete(
    benchmark_path: Path, tmp_path: Path
) -> None:
    """The command line's end: the summary is computed and the end files written in a
    thread while the verifier's workers stop, then the process leaves by ``os._exit``.
    Every file is there, whole, and says what the verdicts say: the parquet is the
    verdicts appended, with their classes; the summary is that parquet's."""
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=12)
    out = tmp_path / "results"
    run_dir = out / "d"
    models = ("model-a", "model-b")
    with LocalBatchServer(dataset=frame, models=NO_500, serving=QUICK) as server:
        proc = _aeval(_run_args(data, out, models, 2), server.base_url, tmp_path)
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode()
    n = frame.height * len(models) * 2
    assert len(_answer_lines(run_dir)) == n
    appended = concat_sorted(
        list(read_verdict_frames(run_dir / "verdicts.jsonl")), ["model", "trial", "custom_id"]
    )
    final = pl.read_parquet(run_dir / "verdicts.parquet")
    assert final.height == appended.height == n
    assert final["answer_class"].null_count() == 0  # every answer classed
    assert final.drop("answer_class").equals(appended.drop("answer_class"))
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["provenance"]["synthetic"]
    want = summarize(final, batch_prices=False)
    want["provenance"] = summary["provenance"]
    assert summary == json.loads(json.dumps(want, sort_keys=True, default=str))
    assert summary["overall"]["n"] == n
