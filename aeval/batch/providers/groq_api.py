"""Groq's Batch API through the ``groq`` SDK (OpenAI's wire format under ``/openai/v1``).

Groq keeps OpenAI's metadata on a batch, so a lost create is found by it, as
on OpenAI. The ``groq`` SDK rather than ``openai`` with a base URL: it is
Groq's own client, reads Groq's own variables (``GROQ_API_KEY``,
``GROQ_BASE_URL``) and knows Groq's paths and types (completion windows of
24 h to 7 d); the wire format is the same either way.
"""

from __future__ import annotations

import groq

from aeval.batch.providers.base import BatchTag, RemoteBatch
from aeval.batch.providers.sdk_errors import failing_as, stainless_failure
from aeval.batch.providers.stainless import OpenAIShapedBatchProvider

__all__ = ["COMPLETION_WINDOW", "GroqBatchProvider"]

DEFAULT_ENDPOINT = "https://api.groq.com"
COMPLETION_WINDOW = "24h"  # Groq's shortest; its longest is 7d
_CHECK = "GROQ_API_KEY and GROQ_BASE_URL"


class GroqBatchProvider(OpenAIShapedBatchProvider[groq.AsyncGroq]):
    """Batch calls through ``groq.AsyncGroq``; one per run, closed at the end."""

    name = "groq"
    title = "Groq"
    serial_creates = False
    sdk = groq
    client_class = groq.AsyncGroq
    default_endpoint = DEFAULT_ENDPOINT
    completion_window = COMPLETION_WINDOW

    def _fail(self, err: Exception, what: str) -> Exception:
        return stainless_failure(err, what, groq, _CHECK)

    async def find_files(self, filename: str) -> list[str]:
        with failing_as(self._fail, f"listing files named {filename}"):
            listed = await self._client.files.list()
        return [f.id for f in listed.data if f.filename == filename and f.id]

    async def find(self, tag: BatchTag) -> RemoteBatch | None:
        with failing_as(self._fail, "listing batches"):
            listed = await self._client.batches.list()
        return tag.newest_labelled(self._to_remote(batch) for batch in listed.data or [])
