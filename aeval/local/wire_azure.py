"""Azure OpenAI's v1 API on the local server: ``/openai/v1/files`` and ``/openai/v1/batches``,
as the openai SDK calls them at ``{endpoint}/openai/v1/`` (Azure's batch guide,
https://learn.microsoft.com/azure/ai-foundry/openai/how-to/batch).

OpenAI's objects and listings (openai 3.63 ``types.Batch``, ``types.FileObject``), with
what Azure's guide adds: request lines and the batch's ``endpoint`` are
``/chat/completions`` (``/v1/chat/completions`` too); an upload may carry
``expires_after`` and a batch ``output_expires_after``, ``{seconds, anchor:
"created_at"}`` with seconds from 1,209,600 (14 days) to 2,592,000 (30 days), shown on
the batch; a batch over the deployment's enqueued-token quota fails with
``token_limit_exceeded`` (the runner's, as OpenAI's). Groq's OpenAI-compatible API uses
the same paths: the gateway tells them apart by the SDK's ``User-Agent``
(:func:`aeval.local.layers.wire_of`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field
from starlette.requests import Request

from aeval.local import batch_api
from aeval.local.batch_api import ApiError, NewBatch
from aeval.local.context import ServerContext
from aeval.local.state import BatchRecord
from aeval.local.wire_openai import OpenAICodec, openai_batch

__all__ = ["AZURE_V1_PREFIX", "AzureV1Codec"]

AZURE_V1_PREFIX = "/openai/v1"


class _Expiry(BaseModel):
    seconds: Annotated[int, Field(ge=1_209_600, le=2_592_000)]
    anchor: Literal["created_at"]


class _Create(BaseModel):
    input_file_id: Annotated[str, Field(min_length=1)]
    endpoint: Literal["/chat/completions", "/v1/chat/completions"]
    completion_window: Literal["24h"]
    metadata: Annotated[dict[str, str], Field(max_length=16)] | None = None
    output_expires_after: _Expiry | None = None


class AzureV1Codec(OpenAICodec):
    api = "azure"
    prefix = AZURE_V1_PREFIX

    def batch(self, batch: BatchRecord, base: str) -> dict[str, Any]:
        shown = openai_batch(batch)
        expiry = batch.extra.get("output_expires_after")
        return shown if expiry is None else {**shown, "output_expires_after": expiry}

    async def new_batch(self, ctx: ServerContext, request: Request) -> NewBatch:
        spec = batch_api.validated(_Create, await batch_api.json_body(request))
        record = self.own_file(ctx, spec.input_file_id)
        if record.purpose != "batch":
            raise ApiError(400, f"The input file {record.id} must have purpose 'batch', not "
                           f"'{record.purpose}'.", param="input_file_id")  # fmt: skip
        extra = {}
        if spec.output_expires_after is not None:
            extra["output_expires_after"] = spec.output_expires_after.model_dump()
        return NewBatch(input_file_id=record.id, metadata=spec.metadata, window="24h",
                        endpoint=spec.endpoint, extra=extra)  # fmt: skip
