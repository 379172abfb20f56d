"""Azure OpenAI's Global Batch through the openai SDK at Azure's v1 API
(``{endpoint}/openai/v1/``: the same Files and Batches resources as OpenAI's, no
``api-version``), a deployment named in each request line's ``body.model``.

What Azure adds, from its batch guide
(https://learn.microsoft.com/azure/ai-foundry/openai/how-to/batch):

- uploads and outputs expire: ``expires_after`` on the upload and
  ``output_expires_after`` on the batch, ``{"seconds", "anchor": "created_at"}``
  (:data:`~aeval.batch.providers.azure_limits.EXPIRES_AFTER_S`), so a resource's
  500-file quota frees itself;
- the enqueued-token quota: a batch over it fails with ``token_limit_exceeded``, which
  the lifecycle waits out and resubmits, as on OpenAI;
- content filtering: an answer Azure filtered is a ``content_filter`` finish with its
  ``content_filter_results`` (kept as Azure wrote them), and a prompt it filtered comes
  back as a 400 whose error code is ``content_filter``: that line is turned into an
  answer with no text and finish ``content_filter`` (:func:`filtered_line`), keeping
  the filter's results under ``prompt_filter_results``, so it reads as the model's
  refusal, not as a failed request to retry.

Credentials: the resource key, or Microsoft Entra ID through azure-identity
(``aeval[azure]``), whose token provider the SDK calls before each request.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, ClassVar

import openai

from aeval.api_settings import Credentials
from aeval.batch.providers.azure_limits import EXPIRES_AFTER_S
from aeval.batch.providers.azure_spec import ENTRA_ID
from aeval.batch.providers.base import BatchTag
from aeval.batch.providers.lines import answer_line
from aeval.batch.providers.openai_api import OpenAIBatchProvider
from aeval.batch.providers.sdk_errors import stainless_failure
from aeval.errors import ConfigError

__all__ = ["ENTRA_SCOPE", "AzureBatchProvider", "entra_token_provider", "filtered_line"]

_CHECK = "AZURE_OPENAI_API_KEY and AZURE_OPENAI_ENDPOINT (or Entra ID: az login)"
ENTRA_SCOPE = "https://cognitiveservices.azure.com/.default"
_EXPIRES = {"seconds": EXPIRES_AFTER_S, "anchor": "created_at"}


def entra_token_provider() -> Callable[[], Awaitable[str]]:
    """azure-identity's bearer-token provider for Azure OpenAI (``DefaultAzureCredential``:
    environment, workload or managed identity, ``az login``…).

    :raises ConfigError: azure-identity is not installed.
    """
    try:
        from azure.identity.aio import DefaultAzureCredential, get_bearer_token_provider
    except ModuleNotFoundError:
        raise ConfigError(
            "azure/ models with AZURE_OPENAI_ENDPOINT and no AZURE_OPENAI_API_KEY use "
            "Microsoft Entra ID, which needs azure-identity: pip install 'aeval[azure]' "
            "(or set AZURE_OPENAI_API_KEY)"
        ) from None
    return get_bearer_token_provider(DefaultAzureCredential(), ENTRA_SCOPE)


def filtered_line(raw: str) -> str:
    """An output line as aeval reads it: a prompt Azure's content filter refused (a 400
    whose error code is ``content_filter``) as an answer with no text and finish
    ``content_filter``, the filter's results kept; any other line as it came."""
    try:
        line = json.loads(raw)
        response = line.get("response") or {}
        error = ((response.get("body") or {}).get("error")) or {}
    except (ValueError, AttributeError):
        return raw  # not ours to judge: the one parser says what is wrong with it
    if not isinstance(error, dict) or error.get("code") != "content_filter":
        return raw
    filtered = json.loads(
        answer_line(str(line.get("custom_id")), text=None, finish_reason="content_filter")
    )
    raw_inner = error.get("innererror")
    inner: dict[str, Any] = raw_inner if isinstance(raw_inner, dict) else {}
    body = filtered["response"]["body"]
    body["prompt_filter_results"] = [
        {"prompt_index": 0, "content_filter_results": inner.get("content_filter_result", {})}
    ]
    body["azure_filter_message"] = error.get("message")
    return json.dumps(filtered, ensure_ascii=False, separators=(",", ":"))


async def _filtered(lines: AsyncIterator[str]) -> AsyncIterator[str]:
    async for line in lines:
        yield filtered_line(line)


class AzureBatchProvider(OpenAIBatchProvider):
    """Batch calls through ``openai.AsyncOpenAI`` at ``{endpoint}/openai/v1``; one per run."""

    name = "azure"
    title = "Azure OpenAI"
    # In extra_body, as Azure's guide sends them: the SDK's own parameters are newer than
    # the openai floor aeval supports.
    upload_extra_body: ClassVar[dict[str, Any] | None] = {"expires_after": _EXPIRES}
    create_extra_body: ClassVar[dict[str, Any] | None] = {"output_expires_after": _EXPIRES}

    def _connect(
        self, credentials: Credentials, *, max_retries: int, timeout: float
    ) -> openai.AsyncOpenAI:
        if not credentials.base_url:
            raise ConfigError("azure/ models need AZURE_OPENAI_ENDPOINT (the resource endpoint)")
        key: str | Callable[[], Awaitable[str]] = credentials.api_key
        if key == ENTRA_ID:
            if not hasattr(openai.AsyncOpenAI, "_refresh_api_key"):
                raise ConfigError(
                    f"Microsoft Entra ID for azure/ models needs an openai SDK that takes a "
                    f"token provider (openai {openai.__version__} does not): upgrade openai, "
                    "or set AZURE_OPENAI_API_KEY"
                )
            key = entra_token_provider()
        return openai.AsyncOpenAI(
            api_key=key, base_url=credentials.base_url, max_retries=max_retries, timeout=timeout
        )

    def _fail(self, err: Exception, what: str) -> Exception:
        return stainless_failure(err, what, openai, _CHECK)

    @asynccontextmanager
    async def open_lines(
        self, file_id: str, tag: BatchTag | None = None
    ) -> AsyncIterator[AsyncIterator[str]]:
        async with super().open_lines(file_id, tag) as lines:
            yield _filtered(lines)
