"""How aeval talks to an API: where (:class:`Credentials`), how often it polls, how it
retries, how large a batch may be. Value types only, a leaf below :mod:`aeval.config`
(which re-exports them) and the batch providers, which read them and nothing else
of a run's configuration.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from aeval.errors import ConfigError

__all__ = [
    "API_VERSION_VARIABLE",
    "BASE_URL_VARIABLE",
    "KEY_VARIABLES",
    "LOCAL_SERVER_VARIABLE",
    "Credentials",
    "PollSettings",
    "RetrySettings",
    "ShardLimits",
    "is_aeval_server",
    "resolve_credentials",
    "server_root",
]

# Azure OpenAI's API version, named as the openai SDK's AzureOpenAI client reads it.
API_VERSION_VARIABLE = "OPENAI_API_VERSION"
# Environment variables, in order of preference. OPENAI_KEY is what the
# benchmark's reference notebook used.
KEY_VARIABLES: tuple[str, ...] = ("OPENAI_API_KEY", "OPENAI_KEY")
BASE_URL_VARIABLE = "OPENAI_BASE_URL"
# Azure OpenAI, named as the openai SDK's AzureOpenAI client reads them.
AZURE_KEY_VARIABLE = "AZURE_OPENAI_API_KEY"
AZURE_ENDPOINT_VARIABLE = "AZURE_OPENAI_ENDPOINT"


@dataclass(frozen=True, slots=True)
class PollSettings:
    """How often to ask the API about a batch.

    The interval starts at ``initial_s`` and grows by ``factor`` per poll up to
    ``max_s`` (long waits are cheap: a 10-minute batch costs a few dozen calls),
    each wait multiplied by a random factor in ``[1 - jitter, 1 + jitter]`` so
    that many batches created together do not poll in lock-step. A poll that
    keeps failing fails the shard only after ``grace_s`` seconds of failures.
    """

    initial_s: float = 2.0
    factor: float = 1.5
    max_s: float = 60.0
    jitter: float = 0.2
    grace_s: float = 3600.0

    def __post_init__(self) -> None:
        if self.initial_s <= 0 or self.max_s < self.initial_s:
            raise ConfigError(
                f"poll interval: need 0 < initial ({self.initial_s}) <= max ({self.max_s})"
            )
        if self.factor < 1:
            raise ConfigError(f"poll backoff factor must be >= 1, got {self.factor}")
        if not 0 <= self.jitter < 1:
            raise ConfigError(f"poll jitter must be in [0, 1), got {self.jitter}")


@dataclass(frozen=True, slots=True)
class RetrySettings:
    """Transient API failures (connection errors, timeouts, 408, 409, 429, 5xx).

    Retried with exponential backoff and jitter (honouring ``Retry-After``) on
    top of the SDK's own ``sdk_max_retries``, for at most ``deadline_s`` per
    operation and never past ``run_deadline_s`` after the run (or resume)
    started; then the shard fails with the last error. Before the run has created
    anything remote, connection failures (no HTTP answer at all) lasting longer
    than ``connect_deadline_s`` end the run instead: a wrong base URL or a closed
    port should not be retried for half an hour. ``token_limit_wait_s``
    is the first wait before resubmitting a batch the API refused for the
    model's enqueued-token limit.
    """

    initial_s: float = 1.0
    max_s: float = 60.0
    deadline_s: float = 1800.0
    connect_deadline_s: float = 60.0
    sdk_max_retries: int = 2
    request_timeout_s: float = 120.0
    run_deadline_s: float = 48 * 3600.0
    token_limit_wait_s: float = 60.0
    token_limit_max_resubmits: int = 20
    # Direct mode: attempts of one request that fails (5xx, connection errors),
    # 429/503 not counting (those are waited out, lowering the concurrency).
    request_attempts: int = 4


@dataclass(frozen=True, slots=True)
class ShardLimits:
    """The Batch API's per-file limits, with a safety margin (50,000 requests, 200 MB)."""

    max_requests: int = 49_000
    max_bytes: int = 190 * 1024 * 1024

    def __post_init__(self) -> None:
        if self.max_requests < 1 or self.max_bytes < 1024:
            raise ConfigError(
                f"shard limits too small: {self.max_requests} requests, {self.max_bytes} bytes"
            )


@dataclass(frozen=True, slots=True)
class Credentials:
    """Where to send requests. Never serialised.

    With ``azure_endpoint`` (``https://RESOURCE.openai.azure.com``) the requests
    go to Azure OpenAI through the SDK's ``AsyncAzureOpenAI`` client
    (``{azure_endpoint}/openai/files``, ``…/batches``, ``?api-version=``
    ``api_version``; model names are deployment names) and ``base_url`` is unused.
    """

    api_key: str
    base_url: str | None = None
    azure_endpoint: str | None = None
    api_version: str | None = None
    # The endpoint is aeval's own local server (the offline demo's, a test's): only then
    # does aeval send anything of its own on the wire (see is_aeval_server).
    aeval_server: bool = False
    # Settings a cloud provider's adapter needs besides a key and an endpoint, as
    # (name, value) pairs: Bedrock's S3 prefix and role ARN, Vertex's project, location
    # and gs:// prefix, an emulator's storage endpoint (aeval.batch.providers.cloud_settings).
    options: tuple[tuple[str, str], ...] = ()

    def option(self, name: str) -> str | None:
        """The value of option ``name``, or ``None`` when it was not given."""
        return next((value for key, value in self.options if key == name), None)

    def __post_init__(self) -> None:
        if self.azure_endpoint is not None and not self.api_version:
            raise ConfigError(
                f"Azure OpenAI needs an API version: set {API_VERSION_VARIABLE} "
                "(e.g. 2024-10-21) or Credentials(api_version=...)"
            )

    def __repr__(self) -> str:  # never leak the key into logs or tracebacks
        if self.azure_endpoint is not None:
            return (
                f"Credentials(api_key='***', azure_endpoint={self.azure_endpoint!r}, "
                f"api_version={self.api_version!r})"
            )
        return f"Credentials(api_key='***', base_url={self.base_url!r})"


def resolve_credentials(env: Mapping[str, str] | None = None) -> Credentials | None:
    """The API key and base URL from ``OPENAI_API_KEY`` (or ``OPENAI_KEY``) and
    ``OPENAI_BASE_URL``; ``None`` when no key is set (the offline default).

    When ``AZURE_OPENAI_ENDPOINT`` is set, Azure OpenAI instead: the key from
    ``AZURE_OPENAI_API_KEY`` and the version from ``OPENAI_API_VERSION``, as the
    SDK's Azure client reads them (a missing one is a :class:`ConfigError`, not
    a silent fall-back to the offline demo).
    """
    env = os.environ if env is None else env
    azure_endpoint = env.get(AZURE_ENDPOINT_VARIABLE, "").strip()
    if azure_endpoint:
        azure_key = env.get(AZURE_KEY_VARIABLE, "").strip()
        if not azure_key:
            raise ConfigError(
                f"{AZURE_ENDPOINT_VARIABLE} is set but {AZURE_KEY_VARIABLE} is not: "
                "set the Azure OpenAI key (or unset the endpoint to use OpenAI)"
            )
        return Credentials(
            api_key=azure_key,
            azure_endpoint=azure_endpoint,
            api_version=env.get(API_VERSION_VARIABLE, "").strip() or None,
        )
    key = next((env[v].strip() for v in KEY_VARIABLES if env.get(v, "").strip()), None)
    if key is None:
        return None
    base_url = env.get(BASE_URL_VARIABLE, "").strip() or None
    return Credentials(api_key=key, base_url=base_url)


LOCAL_SERVER_VARIABLE = "AEVAL_LOCAL_SERVER"


def is_aeval_server(credentials: Credentials | None, env: Mapping[str, str] | None = None) -> bool:
    """Whether ``credentials`` reach aeval's own local server, which alone is sent
    anything aeval-specific (a request's identity headers in direct mode, the
    ``/aeval/responders`` question): the server aeval started (``aeval_server``), or
    the base URL that ``AEVAL_LOCAL_SERVER`` names (what ``aeval serve`` prints)."""
    if credentials is None:
        return False
    if credentials.aeval_server:
        return True
    named = (os.environ if env is None else env).get(LOCAL_SERVER_VARIABLE, "")
    if not named or not credentials.base_url:
        return False

    return server_root(named) == server_root(credentials.base_url)


def server_root(url: str) -> str:
    """A base URL without what an SDK adds to an ``aeval serve`` root: OpenAI's ``/v1``,
    and where that server answers xAI (``/xai/v1``) and Azure's v1 API (``/openai/v1``)."""
    trimmed = url.rstrip("/").removesuffix("/v1")
    return trimmed.removesuffix("/xai").removesuffix("/openai").rstrip("/")
