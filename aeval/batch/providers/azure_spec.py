"""Azure OpenAI's Global Batch through its v1 API (``{endpoint}/openai/v1/``), where a model
is a deployment: ``azure/DEPLOYMENT``.

Request lines are OpenAI Batch-API lines whose ``body.model`` is the deployment name and
whose ``url`` is ``/chat/completions``, as Azure's batch guide writes them
(https://learn.microsoft.com/azure/ai-foundry/openai/how-to/batch, "Prepare your batch
file"). Credentials: ``AZURE_OPENAI_API_KEY`` and ``AZURE_OPENAI_ENDPOINT``
(``https://RESOURCE.openai.azure.com``), the openai SDK's own Azure variables; with the
endpoint and no key, Microsoft Entra ID through azure-identity
(``pip install 'aeval[azure]'``: ``DefaultAzureCredential``, scope
``https://cognitiveservices.azure.com/.default``). ``AZURE_OPENAI_BASE_URL`` may name
the v1 URL whole instead of the endpoint. The v1 API takes no
``api-version``; ``OPENAI_API_VERSION`` is for the older surface, which bare OpenAI
model names still reach when ``AZURE_OPENAI_ENDPOINT`` is set
(:mod:`aeval.batch.providers.openai_spec`).

What OpenAI's reasoning models refuse, Azure's deployments of them refuse too
(:func:`aeval.batch.providers.openai_spec.check_request`); which model a deployment
serves is Azure's secret, so a deployment named after its model (``gpt-5-batch``…) is
checked as that model where litellm's map knows it (``azure/NAME``), and otherwise sent
as asked, saying so.
"""

from __future__ import annotations

from collections.abc import Mapping

from aeval.api_settings import (
    AZURE_ENDPOINT_VARIABLE,
    AZURE_KEY_VARIABLE,
    Credentials,
    ShardLimits,
)
from aeval.batch.providers.azure_limits import MAX_FILE_BYTES, MAX_REQUESTS
from aeval.batch.providers.openai_spec import check_request
from aeval.batch.providers.spec import ProviderSpec
from aeval.errors import ConfigError

__all__ = ["BASE_URL_VARIABLE", "ENTRA_ID", "REQUEST_URL", "SPEC", "V1_PATH", "resolve"]

REQUEST_URL = "/chat/completions"
# Azure's v1 base URL whole (``https://RESOURCE.openai.azure.com/openai/v1``), instead of
# AZURE_OPENAI_ENDPOINT: that one also sends bare OpenAI model names to Azure's older API
# (aeval.api_settings.resolve_credentials), so a run of openai/ and azure/ models together
# names Azure here.
BASE_URL_VARIABLE = "AZURE_OPENAI_BASE_URL"
V1_PATH = "/openai/v1"
# The key of credentials that authenticate with Microsoft Entra ID (azure-identity's
# token provider, made by the adapter), not with a resource key.
ENTRA_ID = "<entra-id>"


def resolve(env: Mapping[str, str]) -> Credentials | None:
    """Azure's credentials from the environment: the resource key and endpoint, or the
    endpoint alone (Entra ID); ``None`` when neither is set (the offline demo)."""
    key = (env.get(AZURE_KEY_VARIABLE) or "").strip()
    endpoint = (env.get(BASE_URL_VARIABLE) or env.get(AZURE_ENDPOINT_VARIABLE) or "").strip()
    endpoint = endpoint.rstrip("/")
    if not endpoint:
        if key:
            raise ConfigError(
                f"{AZURE_KEY_VARIABLE} is set but {AZURE_ENDPOINT_VARIABLE} is not: set the "
                "resource endpoint (https://RESOURCE.openai.azure.com) for azure/ models "
                f"(or {BASE_URL_VARIABLE}, its v1 URL)"
            )
        return None
    base = endpoint if endpoint.endswith(V1_PATH) else endpoint + V1_PATH
    return Credentials(api_key=key or ENTRA_ID, base_url=base)


SPEC = ProviderSpec(
    name="azure",
    title="Azure OpenAI",
    key_variables=(AZURE_KEY_VARIABLE,),
    base_url_variable=AZURE_ENDPOINT_VARIABLE,
    # Under Azure's per-file limits (aeval.batch.providers.azure_limits), with a margin.
    limits=ShardLimits(max_requests=min(49_000, MAX_REQUESTS), max_bytes=190 * 1024 * 1024),
    adapter="aeval.batch.providers.azure_api:AzureBatchProvider",
    request_url=REQUEST_URL,
    check_request=check_request,
    credentials=resolve,
    root_path=V1_PATH,
)

assert SPEC.limits.max_bytes <= MAX_FILE_BYTES
