"""The local server's direct path through the official SDK (AsyncOpenAI) over real HTTP:
latency, the concurrency cap, counters, faults, trials and base-model completions."""

from __future__ import annotations

import json
import random
import statistics
import time
from pathlib import Path
from typing import Any

import anyio
import openai
import polars as pl
import pytest
from openai.types.chat import ChatCompletion
from test_local_server import INSTRUCTION

from aeval.commands.serve import parse_latency, parse_max_concurrency
from aeval.errors import ConfigError
from aeval.local import (
    CUSTOM_ID_HEADER,
    TRIAL_HEADER,
    LocalBatchServer,
    ModelSpec,
    Serving,
    SyntheticResponder,
    fetch_direct_counters,
    parse_faults,
)
from aeval.local.chat import ChatRequest, Completion
from aeval.local.direct import DirectState
from aeval.local.questions import QuestionIndex

pytestmark = pytest.mark.anyio


def ask(question: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": question + "\n" + INSTRUCTION}]


def ids(custom_id: str, trial: int | None = None) -> dict[str, str]:
    headers = {CUSTOM_ID_HEADER: custom_id}
    if trial is not None:
        headers[TRIAL_HEADER] = str(trial)
    return headers


async def asked(
    client: openai.AsyncOpenAI,
    model: str,
    question: str,
    custom_id: str,
    trial: int | None = None,
) -> ChatCompletion:
    """``question`` asked of ``model`` as the direct request of ``custom_id`` (and ``trial``)."""
    return await client.chat.completions.create(
        model=model, messages=ask(question), extra_headers=ids(custom_id, trial)
    )  # type: ignore[arg-type]


def test_latency_draws_stay_in_mean_plus_or_minus_jitter() -> None:
    serving = Serving(latency_ms=500, jitter_ms=100, output_tokens_per_second=50)
    rng = random.Random(0)
    draws = [serving.delay_s(0, rng) for _ in range(4000)]
    assert min(draws) >= 0.4 and max(draws) <= 0.6
    assert statistics.mean(draws) == pytest.approx(0.5, abs=0.005)
    # uniform on ±100 ms: standard deviation 100/√3 ms
    assert statistics.stdev(draws) == pytest.approx(0.1 / 3**0.5, rel=0.05)
    assert serving.delay_s(100, random.Random(0)) - serving.delay_s(0, random.Random(0)) == (
        pytest.approx(2.0)
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [("500", (500.0, 0.0)), ("500,100", (500.0, 100.0)), ("500,20%", (500.0, 100.0))],
)
def test_parse_latency(value: str, expected: tuple[float, float]) -> None:
    assert parse_latency(value) == expected


@pytest.mark.parametrize("value", ["fast", "500,x", "500,600"])
def test_bad_latency_is_a_config_error(value: str) -> None:
    with pytest.raises(ConfigError):
        mean, jitter = parse_latency(value)
        Serving(latency_ms=mean, jitter_ms=jitter)


async def test_latency_is_honoured(dataset: pl.DataFrame) -> None:
    serving = Serving(latency_ms=300, jitter_ms=60, output_tokens_per_second=2000, seed=1)
    questions = dataset["question"].to_list()[:12]
    elapsed: list[float] = []
    tokens: list[int] = []
    async with LocalBatchServer(dataset=dataset, serving=serving) as server:
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="local")

        async def one(i: int) -> None:
            start = time.perf_counter()
            done = await asked(client, "m", questions[i], str(i))
            elapsed.append(time.perf_counter() - start)
            assert done.usage is not None
            tokens.append(done.usage.completion_tokens)

        async with anyio.create_task_group() as tg:
            for i in range(len(questions)):
                tg.start_soon(one, i)
        await client.close()
    # Never faster than the least the model allows: a sleep never ends early, so this
    # holds on any machine. How long a request takes on average is the drawn delay's
    # business (below), not a wall-clock bound a loaded machine could break.
    floor = 0.24 + min(tokens) / 2000
    assert min(elapsed) >= floor


def test_the_drawn_delay_is_mean_plus_minus_jitter_plus_generation() -> None:
    serving = Serving(latency_ms=300, jitter_ms=60, output_tokens_per_second=2000, seed=1)
    rng = random.Random(serving.seed)
    draws = [serving.delay_s(100, rng) for _ in range(2000)]
    generation = 100 / 2000
    assert all(0.24 + generation <= d <= 0.36 + generation for d in draws)
    assert abs(statistics.mean(draws) - (0.3 + generation)) < 0.005
    assert max(draws) - min(draws) > 0.1  # jitter really spreads them
    assert Serving(latency_ms=300).delay_s(100, rng) == 0.3  # no rate: latency only


async def test_over_the_concurrency_cap_is_429_with_retry_after(dataset: pl.DataFrame) -> None:
    serving = Serving(latency_ms=1500, max_concurrency=2)
    question = dataset["question"][0]
    async with LocalBatchServer(dataset=dataset, serving=serving) as server:
        # The test of the cap itself: retries off, so each 429 is seen.
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="local", max_retries=0)
        ok: list[str] = []
        busy: list[openai.RateLimitError] = []

        async def one(i: int) -> None:
            try:
                await asked(client, "m", question, f"r{i}")
                ok.append(f"r{i}")
            except openai.RateLimitError as err:
                busy.append(err)

        async with anyio.create_task_group() as tg:
            for i in range(6):
                tg.start_soon(one, i)
        await client.close()
        counters = server.direct_counters()
    assert len(ok) == 2 and len(busy) == 4
    for err in busy:
        assert err.response.headers["retry-after"] == "1.5"
        assert err.code == "rate_limit_exceeded"
    assert counters.busy_rejections == 4 and counters.peak_concurrency == 2
    assert counters.total == 2  # a rejected request was not answered


def test_the_cap_changes_at_its_times_after_the_first_request() -> None:
    # 2 at first, 1 from the first request on, 3 only after 1000 s (never, here). The server's
    # own admission is what changes, so it is asked directly: the 429 it becomes on the wire
    # is the test above's, and no client (with retries to switch off) stands in between.
    state = DirectState(Serving(max_concurrency=2, cap_changes=((0.0, 1), (1000.0, 3))))
    assert [state.admit("m", f"r{i}") for i in range(4)] == [True, False, False, False]
    state.release()
    assert state.admit("m", "r4")  # the one slot again, once freed
    counters = state.counters()
    assert counters.peak_concurrency == 1 and counters.busy_rejections == 3
    assert counters.total == 2  # refused requests are not counted as accepted


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, (None, ())),
        ("16", (16, ())),
        ("16,8@2,16@4.5", (16, ((2.0, 8), (4.5, 16)))),
    ],
)
def test_parse_max_concurrency(
    value: str | None, expected: tuple[int | None, tuple[tuple[float, int], ...]]
) -> None:
    assert parse_max_concurrency(value) == expected


@pytest.mark.parametrize("value", ["0", "x", "16,8", "16,0@2", "16,8@4,16@2", "16,8@2,4@2"])
def test_a_bad_max_concurrency_is_a_config_error(value: str) -> None:
    with pytest.raises(ConfigError, match="--max-concurrency"):
        parse_max_concurrency(value)


async def test_counters_count_per_model_and_custom_id(dataset: pl.DataFrame) -> None:
    question = dataset["question"][0]
    async with LocalBatchServer(dataset=dataset) as server:
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="local")
        for model, custom_id in [("a", "0"), ("a", "0"), ("a", "1"), ("b", "0")]:
            await asked(client, model, question, custom_id)
        await client.chat.completions.create(model="a", messages=ask(question))  # type: ignore[arg-type]
        await client.close()
        remote = await anyio.to_thread.run_sync(fetch_direct_counters, server.base_url)
    assert remote == server.direct_counters()
    assert remote.requests == {("a", "0"): 2, ("a", "1"): 1, ("b", "0"): 1, ("a", None): 1}


async def test_faults_apply_and_faulted_requests_are_not_counted(dataset: pl.DataFrame) -> None:
    faults = parse_faults(["http@POST /v1/chat/completions:status=503,retry_after=0.01,times=2"])
    question = dataset["question"][0]
    async with LocalBatchServer(dataset=dataset, faults=faults) as server:
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="local")
        # The SDK's default two retries ride out the two injected 503s.
        done = await asked(client, "m", question, "7")
        await client.close()
        assert done.choices[0].message.content
        assert server.counters().faults_injected == {"http:503": 2}
        assert server.direct_counters().requests == {("m", "7"): 1}


async def test_synthetic_answers_follow_the_trial_header(dataset: pl.DataFrame) -> None:
    spec = ModelSpec("synthetic", seed=5, accuracy=0.5)
    models = {"syn": spec}
    mirror = SyntheticResponder(QuestionIndex.from_frame(dataset), seed=5, accuracy=0.5)
    rows = dataset.head(10)
    contents: dict[tuple[str, int], str | None] = {}
    async with LocalBatchServer(dataset=dataset, models=models) as server:
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="local")
        # The benchmark has no id column: a row's id is its index.
        for row_id, question in enumerate(rows["question"].to_list()):
            for trial in (1, 2, 3):
                try:
                    done = await asked(client, "syn", question, str(row_id), trial)
                    contents[(str(row_id), trial)] = done.choices[0].message.content
                except openai.InternalServerError:
                    contents[(str(row_id), trial)] = None  # the http_error intent
        await client.close()
    for (row_id, trial), content in contents.items():
        question = rows["question"][int(row_id)]
        body = {"messages": ask(question)}
        expected = mirror.respond(ChatRequest("syn", body, row_id, trial))
        assert content == (expected.content if isinstance(expected, Completion) else None)
    # the header reaches the responder: some item's answer changes between trials
    assert any(len({contents[(str(i), t)] for t in (1, 2, 3)}) > 1 for i in range(10))


async def test_base_model_completions_find_the_question_in_the_template(
    dataset: pl.DataFrame,
) -> None:
    row = dataset.row(3, named=True)
    prompt = f"You are a helpful assistant.\nUser:\n{row['question']}\n{INSTRUCTION}\nAssistant:\n"
    async with LocalBatchServer(dataset=dataset) as server:  # the reference responder
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="local")
        done = await client.completions.create(model="base", prompt=prompt, extra_headers=ids("3"))
        unknown = await client.completions.create(model="base", prompt="User:\nhello\nAssistant:")
        await client.close()
        counted = server.direct_counters().requests
    assert done.object == "text_completion"
    assert f"<answer>{row['answer']}</answer>" in done.choices[0].text
    assert "<answer>" in unknown.choices[0].text and row["answer"] not in unknown.choices[0].text
    assert counted == {("base", "3"): 1, ("base", None): 1}


async def test_bad_completion_requests_are_400(dataset: pl.DataFrame) -> None:
    async with LocalBatchServer(dataset=dataset) as server:
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="local")
        with pytest.raises(openai.BadRequestError, match="prompt"):
            await client.completions.create(model="base", prompt=[1, 2])  # type: ignore[list-item]
        with pytest.raises(openai.BadRequestError, match=TRIAL_HEADER):
            await client.completions.create(
                model="base", prompt="x", extra_headers={TRIAL_HEADER: "zero"}
            )
        await client.close()


def test_serve_rejects_a_bad_latency_before_listening(capsys: pytest.CaptureFixture[str]) -> None:
    from aeval.cli import main

    assert main(["serve", "--port", "0", "--latency-ms", "fast"]) == 2
    assert "--latency-ms 'fast'" in capsys.readouterr().err


def test_match_inside_wants_whole_lines_and_the_longest_question() -> None:
    from aeval.local.chat import Row

    short = Row("s", "Q?\nN=3?", "(assert true)", "")
    long = Row("l", "Q?\nN=3?\nmore", "(assert false)", "")
    index = QuestionIndex([short, long])
    assert index.match_inside("Sys\nUser:\nQ?\nN=3?\nmore\nAssistant:") is long
    assert index.match_inside("User:\nQ?\nN=3?\nAssistant:") is short
    assert index.match_inside("User: Q?\nN=3?") is None  # not on a line of its own
    assert index.match_inside("") is None


async def test_the_replay_responder_answers_by_the_custom_id_header(
    dataset: pl.DataFrame, tmp_path: Path
) -> None:
    from aeval.local.wire import batch_line, chat_completion, error_body

    recorded = tmp_path / "out.jsonl"
    ok = chat_completion("m", Completion("<answer>(assert true)</answer>"), 10)
    failed = error_body("context too long", code="context_length_exceeded")
    recorded.write_text(
        json.dumps(batch_line("r1", status_code=200, body=ok))
        + "\n"
        + json.dumps(batch_line("r2", status_code=400, body=failed))
        + "\n"
    )
    models = {"*": ModelSpec("replay", replay=(recorded,))}
    question = dataset["question"][0]
    async with LocalBatchServer(dataset=dataset, models=models) as server:
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="local")
        done = await asked(client, "m", question, "r1")
        with pytest.raises(openai.BadRequestError, match="context too long"):
            await asked(client, "m", question, "r2")
        await client.close()
    assert done.choices[0].message.content == "<answer>(assert true)</answer>"


def test_serve_flags_reach_a_server_in_another_process() -> None:
    import concurrent.futures

    import httpx

    from aeval.local import serve_process

    # "a" is held 0.4 s (the latency, which Retry-After tells) plus its answer's ~64
    # tokens at 20 a second: ~3.6 s for "b" to reach the server while "a" is answered,
    # where the 0.4 s alone once ran out at load 10 on 2 cores (the test's wait for "a"
    # and its start of "b" both go through the loaded machine; nothing in another
    # process's server can be held but by its flags).
    flags = ["--latency-ms", "400", "--max-concurrency", "1", "--output-tokens-per-second", "20"]
    with serve_process(flags) as base_url:
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}

        def post(custom_id: str) -> httpx.Response:
            return httpx.post(
                f"{base_url}/chat/completions",
                json=body,
                headers={CUSTOM_ID_HEADER: custom_id},
                timeout=10,
            )

        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            first = pool.submit(post, "a")
            # once "a" is being answered, "b" finds the server full
            while not fetch_direct_counters(base_url).requests:
                time.sleep(0.01)
            second = pool.submit(post, "b")
            answers = [first.result(), second.result()]
        counters = fetch_direct_counters(base_url)
    assert [r.status_code for r in answers] == [200, 429]
    assert answers[1].headers["retry-after"] == "0.4"
    assert counters.requests == {("m", "a"): 1} and counters.busy_rejections == 1


async def test_the_responses_route_answers_the_sdks_responses_create(
    dataset: pl.DataFrame,
) -> None:
    """``client.responses.create`` (openai 3.57) gets a ``Response``: the answer in the
    message's output_text, the thinking in a reasoning item, its tokens in
    ``usage.output_tokens_details.reasoning_tokens`` and inside ``output_tokens``."""
    row = dataset.row(2, named=True)
    async with LocalBatchServer(dataset=dataset) as server:  # the reference responder
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="local")
        done = await client.responses.create(
            model="gpt-5", input=f"{row['question']}\n{INSTRUCTION}", instructions="Be exact.",
            reasoning={"effort": "low"}, max_output_tokens=5000, extra_headers=ids("2"),
        )  # fmt: skip
        with pytest.raises(openai.BadRequestError, match="input"):  # not a string or list
            await client.responses.create(model="gpt-5", input=None)  # type: ignore[arg-type]
        await client.close()
        counted = server.direct_counters().requests
    assert done.status == "completed" and done.output_text == f"<answer>{row['answer']}</answer>"
    kinds = [item.type for item in done.output]
    assert kinds == ["reasoning", "message"]
    assert done.usage is not None and done.usage.output_tokens_details.reasoning_tokens > 0
    assert done.usage.output_tokens > done.usage.output_tokens_details.reasoning_tokens
    assert counted == {("gpt-5", "2"): 1}


async def test_a_streamed_chat_completion_is_the_same_answer_in_chunks(
    dataset: pl.DataFrame,
) -> None:
    """``stream: true`` (verifiers 0.4's chat harness always streams) answers server-sent
    events the SDK parses as ``ChatCompletionChunk``s (openai types/chat/
    chat_completion_chunk.py): the same answer as unstreamed, the finish reason last and,
    with ``stream_options.include_usage``, a usage chunk with no choices."""
    question = dataset["question"][0]
    async with LocalBatchServer(dataset=dataset) as server:
        client = openai.AsyncOpenAI(api_key="k", base_url=server.base_url)
        whole = await asked(client, "synthetic-a", question, "1")
        stream = await client.chat.completions.create(
            model="synthetic-a",
            messages=ask(question),  # type: ignore[arg-type]
            extra_headers=ids("1"),
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [chunk async for chunk in stream]
        # The SDK's stream helper: client.chat.completions.stream in newer openai (3.63 here),
        # client.beta.chat.completions in 1.67, the floor (resources/beta/chat/completions.py).
        completions: Any = client.chat.completions
        if not hasattr(completions, "stream"):
            completions = client.beta.chat.completions  # type: ignore[attr-defined]
        async with completions.stream(
            model="synthetic-a",
            messages=ask(question),  # type: ignore[arg-type]
            extra_headers=ids("1"),
        ) as helper:
            final = await helper.get_final_completion()
        await client.close()
    assert {c.object for c in chunks} == {"chat.completion.chunk"}
    assert len({c.id for c in chunks}) == 1
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content == final.choices[0].message.content
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].finish_reason for c in chunks if c.choices] == [None, "stop"]
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == whole.usage.completion_tokens  # type: ignore[union-attr]
    assert final.usage is None  # not asked for: no usage chunk


async def test_odd_stream_fields_never_make_a_server_error(dataset: pl.DataFrame) -> None:
    """Request bodies are hostile input: a ``stream`` that is not ``true`` is answered
    unstreamed, a ``stream_options`` that is not an object is read as no options (usage
    left out), and neither is ever a 500."""
    import httpx

    question = dataset["question"][0]
    odd = [({"stream": "yes"}, "application/json"), ({"stream": 1}, "application/json"),
           ({"stream": True, "stream_options": 5}, "text/event-stream"),
           ({"stream": True, "stream_options": {"include_usage": "yes"}}, "text/event-stream"),
           ({"stream": True, "stream_options": [[[]]]}, "text/event-stream")]  # fmt: skip
    async with (
        LocalBatchServer(dataset=dataset) as server,
        httpx.AsyncClient(base_url=server.base_url, timeout=30) as client,
    ):
        for n, (fields, kind) in enumerate(odd):
            body = {"model": "synthetic-a", "messages": ask(question), **fields}
            answer = await client.post("/chat/completions", json=body, headers=ids(f"o{n}"))
            assert answer.status_code == 200, (fields, answer.text)
            assert answer.headers["content-type"].startswith(kind), fields
            if kind == "text/event-stream":
                assert answer.text.endswith("data: [DONE]\n\n")
                assert '"usage": {' not in answer.text  # no usage chunk unless asked
