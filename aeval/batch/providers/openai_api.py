"""The OpenAI Files + Batches API as a :class:`~aeval.batch.providers.base.BatchProvider`.

Uses the official SDK's async client (which runs under asyncio and trio), with
its retries on for the calls that are safe to repeat and off for the two that
create something, ``files.create`` and ``batches.create``
(:mod:`aeval.batch.providers.stainless` says why, and holds the calls OpenAI's
API shares with the other Stainless SDKs'). A lost create is found by its
metadata (the shard's ``aeval_run``/``aeval_shard``/``aeval_attempt``). Any
OpenAI-compatible server works: the base URL is just configuration; Azure OpenAI
goes through the SDK's Azure client.
"""

from __future__ import annotations

from typing import Final, Literal

import openai

from aeval.api_settings import Credentials
from aeval.batch.providers.base import BatchTag, RemoteBatch
from aeval.batch.providers.sdk_errors import failing_as, stainless_failure
from aeval.batch.providers.stainless import OpenAIShapedBatchProvider
from aeval.batch.shard import URL

__all__ = ["ENDPOINT", "OpenAIBatchProvider", "translate_error"]

# The endpoint every request line of the batch input names.
ENDPOINT: Final[Literal["/v1/chat/completions"]] = "/v1/chat/completions"
assert ENDPOINT == URL
LIST_PAGE = 100
_CHECK = (
    "OPENAI_API_KEY (or OPENAI_KEY) and OPENAI_BASE_URL "
    "(Azure: AZURE_OPENAI_API_KEY and AZURE_OPENAI_ENDPOINT)"
)


def translate_error(err: Exception, what: str) -> Exception:
    """Map an SDK exception to TransientApiError (retry) or ApiError (stop)."""
    return stainless_failure(err, what, openai, _CHECK, hint_404=_missing_batch_route)


def _missing_batch_route(err: openai.APIStatusError) -> str | None:
    """What to say when a 404 answers a Files/Batches collection route (``…/files``,
    ``…/batches``): the route itself is missing (vLLM, SGLang, Ollama, llama.cpp),
    unlike a 404 on ``…/batches/{id}``, an id the server does not know."""
    try:
        path = err.response.request.url.path.rstrip("/")
    except RuntimeError:  # a response built without its request
        return None
    if not path.endswith(("/files", "/batches")):
        return None
    return (
        f"this server has no Batch API (404 on {path}): use a server "
        "that has one, or direct mode ('run --api direct'); docs/providers.md "
        "says which servers have it"
    )


def sdk_client(credentials: Credentials, *, max_retries: int, timeout: float) -> openai.AsyncOpenAI:
    """The openai SDK's async client for ``credentials``: Azure's when they name an
    Azure endpoint (the SDK builds its URLs, ``{endpoint}/openai/files?api-version=…``,
    and sends the key as the ``api-key`` header), else OpenAI's at ``base_url``."""
    if credentials.azure_endpoint is not None:
        return openai.AsyncAzureOpenAI(
            api_key=credentials.api_key,
            azure_endpoint=credentials.azure_endpoint,
            api_version=credentials.api_version,
            max_retries=max_retries,
            timeout=timeout,
        )
    return openai.AsyncOpenAI(
        api_key=credentials.api_key,
        base_url=credentials.base_url,
        max_retries=max_retries,
        timeout=timeout,
    )


class OpenAIBatchProvider(OpenAIShapedBatchProvider[openai.AsyncOpenAI]):
    """Batch calls through ``openai.AsyncOpenAI``; create one per run, close it at the end."""

    name = "openai"
    title = "OpenAI"
    serial_creates = False  # a lost create is found by its metadata, whatever ran meanwhile
    sdk = openai

    def _connect(
        self, credentials: Credentials, *, max_retries: int, timeout: float
    ) -> openai.AsyncOpenAI:
        return sdk_client(credentials, max_retries=max_retries, timeout=timeout)

    def _fail(self, err: Exception, what: str) -> Exception:
        return translate_error(err, what)

    @property
    def base_url(self) -> str:
        return str(self._client.base_url).rstrip("/")

    async def find_files(self, filename: str) -> list[str]:
        with failing_as(self._fail, f"listing files named {filename}"):
            listed = self._client.files.list(purpose="batch")
            return [f.id async for f in listed if f.filename == filename]

    async def find(self, tag: BatchTag) -> RemoteBatch | None:
        with failing_as(self._fail, "listing batches"):
            listed = [self._to_remote(b) async for b in self._client.batches.list(limit=LIST_PAGE)]
        return tag.newest_labelled(listed)
