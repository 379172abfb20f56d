"""A repair round's conversation in every wire the local server speaks (issue #44, item 6).

Each provider's SDK sends the conversation (the question, the model's earlier answer, a
feedback message) in its own message types; the fixtures are typed with them:

- openai 3.57 ``types/chat/chat_completion_user_message_param.py`` and
  ``chat_completion_assistant_message_param.py`` (direct chat, and the lines of an OpenAI,
  Groq, Together or Mistral batch, which carry a chat body);
- openai ``types/responses/response_input_param.py``: ``EasyInputMessageParam`` for the
  question and feedback, ``ResponseOutputMessageParam`` (an ``output_text`` part) for the
  earlier answer, and a ``reasoning`` item, which has no role;
- anthropic ``types/user_message_param.py`` / ``assistant_message_param.py`` (content as a
  string, or text and thinking blocks: ``types/text_block_param.py``,
  ``thinking_block_param.py``);
- google-genai ``types.ContentDict`` (``role`` "user" or "model") and ``PartDict``
  (``thought`` marks a thought summary);
- groq ``types/chat/chat_completion_assistant_message_param.py``, together
  ``types/chat/chat_completion_assistant_message_param.py``, mistralai
  ``client/models/assistantmessage.py``: the same role/content messages.

A model with ``repair=1`` must answer the truth in round 2 (the row found from the first
user message, the turn seen), one with ``repair=0`` a wrong answer other than the last.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anthropic
import anyio
import openai
import polars as pl
import pytest
from google import genai
from mistralai.client import Mistral

from aeval.feedback import render_feedback
from aeval.local import LocalBatchServer, ModelSpec
from aeval.verdicts import Status
from aeval.verify import check_response

if TYPE_CHECKING:  # the SDKs' param types (annotations only: the floors' SDKs run too)
    from anthropic.types import AssistantMessageParam, UserMessageParam
    from anthropic.types.messages.batch_create_params import Request as AnthropicRequest
    from google.genai import types as genai_types
    from groq.types.chat import ChatCompletionAssistantMessageParam as GroqAssistant
    from openai.types.chat import (
        ChatCompletionAssistantMessageParam,
        ChatCompletionMessageParam,
        ChatCompletionUserMessageParam,
    )
    from openai.types.responses import (
        EasyInputMessageParam,
        ResponseInputParam,
        ResponseOutputMessageParam,
    )
    from together.types.chat import ChatCompletionAssistantMessageParam as TogetherAssistant

pytestmark = pytest.mark.anyio

WRONG = "<think>I copy the largest example.</think><answer>(assert (> in0 9999))</answer>"
FEEDBACK = render_feedback(
    "counterexample",
    status=Status.NOT_EQUIVALENT,
    reason="too strong: …",
    direction="too_strong",
    counterexample={"in0": "1"},
)
EAGER = ModelSpec("synthetic", seed=1, accuracy=0.0, fenced_share=0.0, repair=(1.0,))
STUBBORN = ModelSpec("synthetic", seed=1, accuracy=0.0, repair=(0.0,))
MODELS = {"eager*": EAGER, "stubborn*": STUBBORN, "models/eager*": EAGER,
          "models/stubborn*": STUBBORN}  # fmt: skip


@pytest.fixture
def rows(dataset: pl.DataFrame) -> pl.DataFrame:
    """Three rows, with the ids the server gives them (their index)."""
    return dataset.head(3).with_row_index("id").with_columns(pl.col("id").cast(pl.String))


def _root(server: LocalBatchServer) -> str:
    return server.base_url.removesuffix("/v1")


def chat_conversation(question: str) -> list[ChatCompletionMessageParam]:
    user: ChatCompletionUserMessageParam = {"role": "user", "content": question}
    answer: ChatCompletionAssistantMessageParam = {"role": "assistant", "content": WRONG}
    again: ChatCompletionUserMessageParam = {"role": "user", "content": FEEDBACK}
    return [{"role": "system", "content": "Be precise."}, user, answer, again]


def judged(answer: str, row: dict[str, Any], repaired: bool) -> None:
    """``answer`` is the truth (``repaired``) or a wrong answer other than :data:`WRONG`."""
    status = check_response(answer, row["answer"], row["constants"]).status
    assert (status is Status.EQUIVALENT) == repaired, (answer, status)
    assert answer != WRONG


@pytest.mark.parametrize("model", ["eager-1", "stubborn-1"])
async def test_openai_direct_chat_and_responses_read_the_conversation(
    rows: pl.DataFrame, model: str
) -> None:
    row = rows.row(1, named=True)
    question: EasyInputMessageParam = {"role": "user", "content": row["question"]}
    earlier: ResponseOutputMessageParam = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": WRONG, "annotations": []}],
    }
    feedback: EasyInputMessageParam = {"role": "user", "content": FEEDBACK, "type": "message"}
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": []}  # no role: not a turn
    responses_input: ResponseInputParam = [question, reasoning, earlier, feedback]  # type: ignore[list-item]
    async with LocalBatchServer(dataset=rows, models=MODELS) as server:
        client = openai.AsyncOpenAI(api_key="k", base_url=server.base_url)
        chat = await client.chat.completions.create(
            model=model, messages=chat_conversation(row["question"])
        )
        judged(chat.choices[0].message.content or "", row, model.startswith("eager"))
        response = await client.responses.create(model=model, input=responses_input)
        think = "".join(s.text for o in response.output if o.type == "reasoning"
                        for s in o.summary)  # fmt: skip
        judged(f"<think>{think}</think>{response.output_text}", row, model.startswith("eager"))
        await client.close()


async def _openai_style_batch(client: Any, path: Path) -> list[dict[str, Any]]:
    uploaded = await client.files.create(file=path, purpose="batch")
    batch = await client.batches.create(
        input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    with anyio.fail_after(30):
        while batch.status not in ("completed", "failed"):
            await anyio.sleep(0.02)
            batch = await client.batches.retrieve(batch.id)
    assert batch.status == "completed"
    content = await client.files.content(batch.output_file_id)
    # openai's content is HttpxBinaryResponseContent (.text a property), groq's an
    # AsyncBinaryAPIResponse (``async def text()``; groq _response.py)
    text = content.text if isinstance(content.text, str) else await content.text()
    return [json.loads(line) for line in text.splitlines()]


async def test_openai_and_groq_batch_lines_carry_the_conversation(
    rows: pl.DataFrame, tmp_path: Path
) -> None:
    import groq

    answer: GroqAssistant = {"role": "assistant", "content": WRONG}
    path = tmp_path / "in.jsonl"
    lines = []
    for model in ("eager-1", "stubborn-1"):
        for row in rows.iter_rows(named=True):
            messages = [*chat_conversation(row["question"])[:2], answer,
                        {"role": "user", "content": FEEDBACK}]  # fmt: skip
            lines.append({"custom_id": f"{row['id']}_r2", "method": "POST",
                          "url": "/v1/chat/completions",
                          "body": {"model": model, "messages": messages}})  # fmt: skip
    async with LocalBatchServer(dataset=rows, models=MODELS) as server:
        for model in ("eager-1", "stubborn-1"):
            own = [line for line in lines if line["body"]["model"] == model]
            path.write_text("".join(json.dumps(line) + "\n" for line in own))
            openai_client = openai.AsyncOpenAI(api_key="k", base_url=server.base_url)
            groq_client = groq.AsyncGroq(api_key="k", base_url=_root(server))
            for client in (openai_client, groq_client):
                out = await _openai_style_batch(client, path)
                assert len(out) == len(rows)
                by_id = {f"{row['id']}_r2": row for row in rows.iter_rows(named=True)}
                for line in out:
                    text = line["response"]["body"]["choices"][0]["message"]["content"]
                    judged(text, by_id[line["custom_id"]], model == "eager-1")
                await client.close()


async def test_anthropic_message_batch_carries_the_conversation(rows: pl.DataFrame) -> None:
    requests: list[AnthropicRequest] = []
    for model in ("eager-1", "stubborn-1"):
        for row in rows.iter_rows(named=True):
            user: UserMessageParam = {"role": "user", "content": row["question"]}
            answer: AssistantMessageParam = {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "I copy it.", "signature": "sig"},
                {"type": "text", "text": WRONG}]}  # fmt: skip
            again: UserMessageParam = {"role": "user", "content": [
                {"type": "text", "text": FEEDBACK}]}  # fmt: skip
            requests.append({"custom_id": f"{model}-{row['id']}_r2", "params": {
                "model": model, "max_tokens": 1000, "system": "Be precise.",
                "messages": [user, answer, again]}})  # fmt: skip
    async with LocalBatchServer(dataset=rows, models=MODELS) as server:
        client = anthropic.AsyncAnthropic(api_key="k", base_url=_root(server))
        for model in ("eager-1", "stubborn-1"):
            own = [r for r in requests if r["params"]["model"] == model]
            batch = await client.messages.batches.create(requests=own)
            with anyio.fail_after(30):
                while batch.processing_status != "ended":
                    await anyio.sleep(0.02)
                    batch = await client.messages.batches.retrieve(batch.id)
            by_id = {row["id"]: row for row in rows.iter_rows(named=True)}
            seen = 0
            async for result in await client.messages.batches.results(batch.id):
                assert result.result.type == "succeeded"
                text = "".join(b.text for b in result.result.message.content if b.type == "text")
                row_id = result.custom_id.removeprefix(f"{model}-").removesuffix("_r2")
                judged(text, by_id[row_id], model == "eager-1")
                seen += 1
            assert seen == len(rows)
        await client.close()


async def test_gemini_batch_contents_with_model_turns_carry_the_conversation(
    rows: pl.DataFrame,
) -> None:
    def contents(question: str) -> list[genai_types.ContentDict]:
        answer: genai_types.ContentDict = {"role": "model", "parts": [
            {"text": "I copy the largest example.", "thought": True}, {"text": WRONG}]}  # fmt: skip
        return [{"role": "user", "parts": [{"text": question}]}, answer,
                {"role": "user", "parts": [{"text": FEEDBACK}]}]  # fmt: skip

    # One request a batch: inline results come in any order and carry no key (the
    # server shuffles them, as the service is reported to: python-genai #2008, #1909).
    rows = rows.head(1)
    async with LocalBatchServer(dataset=rows, models=MODELS) as server:
        client = genai.Client(api_key="k", http_options={"base_url": _root(server)})
        for model in ("eager-1", "stubborn-1"):
            src = [{"contents": contents(q)} for q in rows["question"].to_list()]
            job = await client.aio.batches.create(
                model=model,
                src=src,
                config={"display_name": "repair"},  # type: ignore[arg-type]
            )
            with anyio.fail_after(30):
                while not job.done:
                    await anyio.sleep(0.02)
                    job = await client.aio.batches.get(name=job.name or "")
            assert job.dest is not None and job.dest.inlined_responses is not None
            for inlined, row in zip(job.dest.inlined_responses, rows.iter_rows(named=True),
                                    strict=True):  # fmt: skip
                assert inlined.response is not None
                parts = inlined.response.candidates[0].content.parts  # type: ignore[index,union-attr]
                text = "".join(p.text or "" for p in parts or () if not p.thought)
                judged(text, row, model == "eager-1")
        await client.aio.aclose()


async def test_together_and_mistral_lines_carry_the_conversation(
    rows: pl.DataFrame, tmp_path: Path
) -> None:
    """Their batch lines are ``{"custom_id", "body"}`` with a chat body (together
    ``types/batch_create_params.py``; mistralai ``client/models/batchrequest.py``)."""
    from mistralai.client.models import AssistantMessage

    answer: TogetherAssistant = {"role": "assistant", "content": WRONG}
    mistral = AssistantMessage(content=WRONG).model_dump(by_alias=True, exclude_none=True)
    assert {k: mistral[k] for k in ("role", "content")} == answer
    async with LocalBatchServer(dataset=rows, models=MODELS) as server:
        client = Mistral(api_key="k", server_url=_root(server))
        for model in ("eager-1", "stubborn-1"):
            requests = [
                {
                    "custom_id": f"{row['id']}_r2",
                    "body": {
                        "messages": [
                            {"role": "user", "content": row["question"]},
                            answer,
                            {"role": "user", "content": FEEDBACK},
                        ]
                    },
                }
                for row in rows.iter_rows(named=True)
            ]
            job = await client.batch.jobs.create_async(
                requests=requests, model=model, endpoint="/v1/chat/completions"
            )
            with anyio.fail_after(30):
                while job.status not in ("SUCCESS", "FAILED"):
                    await anyio.sleep(0.02)
                    job = await client.batch.jobs.get_async(job_id=job.id)
            assert job.status == "SUCCESS" and job.outputs is not None
            by_id = {f"{row['id']}_r2": row for row in rows.iter_rows(named=True)}
            assert len(job.outputs) == len(rows)
            for output in job.outputs:
                text = output["response"]["body"]["choices"][0]["message"]["content"]
                judged(text, by_id[output["custom_id"]], model == "eager-1")
        await client.__aexit__(None, None, None)
