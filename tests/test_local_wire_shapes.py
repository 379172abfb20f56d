"""Every codec's objects, in every batch status, validate against the provider SDK's own models.

The SDKs build their objects without validation when they parse a response, so a
missing required field or a value outside a ``Literal`` would pass every test that
drives the local server through them. Here each shape goes through the SDK model's
``model_validate`` (openai ``types.Batch``/``FileObject``, anthropic
``types.messages.MessageBatch``, together ``types.BatchJob``/``FileResponse``,
mistralai ``client.models.BatchJob``/``FileSchema``, google-genai ``types.File``,
``GenerateContentResponse`` and the ``BatchJob`` its own converter makes of an
operation), at the versions installed from pyproject's ranges.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import anthropic.types.messages as anthropic_types
import openai.types as openai_types
import pytest
import together.types as together_types
from google.genai import batches as genai_batches
from google.genai import types as genai_types
from mistralai.client.models import batchjob, fileschema

from aeval.local.state import BatchRecord, FileRecord
from aeval.local.wire_anthropic import AnthropicCodec
from aeval.local.wire_gemini import GeminiCodec, generate_content_response
from aeval.local.wire_mistral import MistralCodec
from aeval.local.wire_openai import OpenAICodec
from aeval.local.wire_together import TogetherCodec

STATUSES = ("validating", "in_progress", "finalizing", "cancelling", "completed", "failed",
            "expired", "cancelled")  # fmt: skip
NOW = int(time.time())


def batch_in(status: str) -> BatchRecord:
    batch = BatchRecord(
        id="b1", input_file_id="f1", endpoint="/v1/chat/completions", completion_window="24h",
        created_at=NOW, created_exact=NOW + 0.25, status=status, total=3, model="m",
        extra={"model": "m", "display_name": "aeval_shard=m|t1|s0"},
    )  # fmt: skip
    if status not in ("validating",):
        batch.in_progress_at, batch.completed, batch.failed = NOW, 2, 1
    if status in ("completed", "expired", "cancelled"):
        setattr(batch, f"{status}_at", NOW)
        batch.output_file_id, batch.error_file_id = "out", "err"
    if status == "failed":
        batch.failed_at = NOW
        batch.errors = [{"code": "model_not_found", "message": "no", "param": None, "line": 1}]
    return batch


@pytest.mark.parametrize("status", STATUSES)
def test_every_codecs_batch_is_its_sdks_batch(status: str) -> None:
    batch = batch_in(status)
    assert openai_types.Batch.model_validate(OpenAICodec().batch(batch, "")).status == status
    shown = AnthropicCodec().batch(batch, "http://127.0.0.1:1")
    message_batch = anthropic_types.MessageBatch.model_validate(shown)
    assert (message_batch.processing_status == "ended") == batch.terminal
    assert together_types.BatchJob.model_validate(TogetherCodec().batch(batch, "")).status
    assert batchjob.BatchJob.model_validate(MistralCodec().batch(batch, "")).status
    output: Any = {"responsesFile": "files/r"} if status == "completed" else None
    operation = GeminiCodec().batch(batch, "", output)
    job = genai_types.BatchJob.model_validate(genai_batches._BatchJob_from_mldev(operation))
    assert job.state is not None and job.state.name != "JOB_STATE_UNSPECIFIED"


@pytest.mark.parametrize("purpose", ["batch", "batch_output", "batch-api", "fine-tune"])
def test_every_codecs_file_is_its_sdks_file(purpose: str) -> None:
    record = FileRecord(id="file-1", bytes=10, created_at=NOW, filename="a.jsonl", purpose=purpose)
    if purpose != "batch-api":
        assert openai_types.FileObject.model_validate(OpenAICodec().file(record, ""))
        assert fileschema.FileSchema.model_validate(MistralCodec().file(record, ""))
    if purpose != "batch":  # Together's own batch purpose is "batch-api"
        assert together_types.FileResponse.model_validate(TogetherCodec().file(record, ""))
    gemini = dataclasses.replace(record, purpose="batch" if purpose == "batch" else "batch_output")
    assert genai_types.File.model_validate(GeminiCodec().file(gemini, "http://h/v1beta")).name


def test_a_gemini_answer_is_a_generate_content_response_with_thoughts() -> None:
    choice = {"message": {"content": "<answer>x</answer>"}, "finish_reason": "length"}
    usage = {"prompt_tokens": 3, "completion_tokens": 9}
    completion = {"id": "c", "choices": [choice], "usage": usage}
    body = generate_content_response(completion, "gemini-2.5-flash", thoughts=True)
    response = genai_types.GenerateContentResponse.model_validate(body)
    candidate = (response.candidates or [])[0]
    assert candidate.finish_reason == genai_types.FinishReason.MAX_TOKENS
    assert candidate.content is not None and (candidate.content.parts or [])[0].thought
    assert response.usage_metadata is not None and response.usage_metadata.thoughts_token_count
