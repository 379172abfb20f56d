"""Which providers aeval knows, what each needs before a batch is paid for, and opening them.

Each provider has a light *spec* module (``<module>_spec.py``: its environment
variables, batch limits, request mapping and checks; no SDK import) and an
*adapter* module (``<module>_api.py``: the :class:`~aeval.batch.providers.base.BatchProvider`
over the provider's official SDK, imported only when a run opens it). The
registry maps a provider name to its spec; the spec opens the adapter.

A run opens every provider its models name (:func:`open_providers`) before
anything is created, so a missing key fails the run at once, naming the
provider's environment variable.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from aeval.api_settings import Credentials, RetrySettings, ShardLimits
from aeval.batch.providers.base import BatchProvider
from aeval.batch.providers.model_reasoning import check_model_reasoning
from aeval.batch.providers.spec import ProviderSpec
from aeval.errors import ConfigError
from aeval.model_names import KNOWN_PROVIDERS, parse_model

if TYPE_CHECKING:
    from aeval.config import RunConfig

__all__ = [
    "ProviderSet",
    "ProviderSpec",
    "check_providers",
    "env_credentials",
    "missing_key_error",
    "open_providers",
    "provider_spec",
    "providers_of",
    "run_credentials",
    "server_credentials",
    "shard_limits_for",
]

# The spec module of each provider (aeval.batch.providers.<module>_spec).
_SPEC_MODULES: dict[str, str] = {
    "openai": "openai",
    "anthropic": "anthropic",
    "google": "gemini",
    "together": "together",
    "groq": "groq",
    "mistral": "mistral",
    "xai": "xai",
    "azure": "azure",
    "bedrock": "bedrock",
    "vertex": "vertex",
}


# Providers whose offline stand-in is not the local server but a control plane of its
# own over a storage emulator (aeval.cloud_standins.offline): no ``aeval serve`` route.
CLOUD_STAND_INS = frozenset({"bedrock", "vertex"})


def check_providers(config: RunConfig) -> list[str]:
    """Refuse a batch run whose models' providers are unknown, have no adapter, or
    would reject its settings (the provider's, then the model's own reasoning levels:
    :mod:`aeval.batch.providers.model_reasoning`): one line each, before anything is
    sent or written.

    :returns: one line for each model whose reasoning setting no source could check
        (it is sent as asked), for the caller to say.
    :raises ConfigError: the first such model, named.
    """
    if config.api != "batch":
        return []
    notes = []
    for model in config.models:
        parsed = parse_model(model)
        # A variant's level or budget replaces the run's (aeval.reasoning).
        gen = config.generation.with_reasoning(parsed.reasoning)
        provider_spec(parsed.provider).check_request(parsed, gen, config.prompt)
        note = check_model_reasoning(parsed, gen)
        if note is not None:
            notes.append(note)
    return notes


def provider_spec(name: str) -> ProviderSpec:
    """The spec of provider ``name``.

    :raises ConfigError: an unknown provider, or one this version has no adapter for.
    """
    module = _SPEC_MODULES.get(name)
    if module is None:
        raise ConfigError(f"unknown provider {name!r}; known: {', '.join(KNOWN_PROVIDERS)}")
    try:
        spec = importlib.import_module(f"aeval.batch.providers.{module}_spec").SPEC
    except ModuleNotFoundError as err:
        if err.name != f"aeval.batch.providers.{module}_spec":
            raise
        raise ConfigError(
            f"provider {name!r} has no batch adapter in this version of aeval "
            f"(available: {', '.join(available_providers())})"
        ) from None
    assert isinstance(spec, ProviderSpec)
    return spec


def available_providers() -> list[str]:
    """The known providers whose adapter this version has."""
    out = []
    for name, module in _SPEC_MODULES.items():
        try:
            importlib.import_module(f"aeval.batch.providers.{module}_spec")
        except ModuleNotFoundError:
            continue
        out.append(name)
    return out


def providers_of(models: Iterable[str]) -> list[str]:
    """The providers a run's models name, each once, in the models' order."""
    seen: dict[str, None] = {}
    for model in models:
        seen.setdefault(parse_model(model).provider, None)
    return list(seen)


def shard_limits_for(provider: str, configured: ShardLimits) -> ShardLimits:
    """One shard's limits on ``provider``: its own limits, or the configured ones where
    those were changed from the default and are lower."""
    own = provider_spec(provider).limits
    if configured == ShardLimits():
        return own
    return ShardLimits(
        max_requests=min(own.max_requests, configured.max_requests),
        max_bytes=min(own.max_bytes, configured.max_bytes),
    )


def env_credentials(provider: str, env: Mapping[str, str] | None = None) -> Credentials | None:
    """``provider``'s credentials from its SDK's environment variables (``None``: no key)."""
    return provider_spec(provider).resolve(os.environ if env is None else env)


def missing_key_error(
    providers: str | Sequence[str] = "openai", why: str = "", hint: str = ""
) -> ConfigError:
    """The one line for a command that needs the key of ``providers`` and has none:
    every "no API key" message aeval prints is written here.

    :param why: what the key is for (``"to reach the API the run was sent to"``).
    :param hint: what else the user can do (the offline demo), after a ``;``.
    """
    specs = [provider_spec(p) for p in ([providers] if isinstance(providers, str) else providers)]
    if len(specs) == 1:
        spec = specs[0]
        keys = " (or ".join(spec.key_variables) + ")" * (len(spec.key_variables) - 1)
        base = spec.base_url_variable
        where = f", and {base} for another endpoint" if base else ""
        where += f" (pip install 'aeval[{spec.extra}]' for its SDK)" if spec.extra else ""
    else:
        keys = ", ".join(s.key_variable for s in specs)
        where = " (each provider's base URL variable for another endpoint)"
    return ConfigError(f"no API key: set {keys}{why and ' ' + why}{where}{hint and '; ' + hint}")


def run_credentials(
    models: Iterable[str],
    given: Credentials | Mapping[str, Credentials] | None = None,
    env: Mapping[str, str] | None = None,
) -> dict[str, Credentials]:
    """The credentials of every provider ``models`` name that has some: ``given`` first
    (a bare :class:`Credentials` is OpenAI's), then the environment. Providers with no
    key are left out; the caller decides whether that is an error."""
    given_map: Mapping[str, Credentials]
    if given is None:
        given_map = {}
    elif isinstance(given, Credentials):
        given_map = {"openai": given}
    else:
        given_map = given
    out: dict[str, Credentials] = {}
    for provider in providers_of(models):
        creds = given_map.get(provider) or env_credentials(provider, env)
        if creds is not None:
            out[provider] = creds
    return out


class ProviderSet:
    """The open batch providers of one run, by provider name; closed together.

    :param default: answers for every provider not in ``providers`` (a test's, or a
        library user's single provider).
    """

    def __init__(
        self, providers: Mapping[str, BatchProvider], *, default: BatchProvider | None = None
    ) -> None:
        self._providers = dict(providers)
        self._default = default

    def get(self, provider: str) -> BatchProvider:
        """The open adapter of ``provider``.

        :raises ConfigError: the run did not open it (no key for it).
        """
        found = self._providers.get(provider, self._default)
        if found is None:
            raise missing_key_error(provider)
        return found

    def for_model(self, model: str) -> BatchProvider:
        return self.get(parse_model(model).provider)

    def __contains__(self, provider: object) -> bool:
        return provider in self._providers or self._default is not None

    def __iter__(self) -> Iterator[BatchProvider]:
        seen: list[BatchProvider] = []
        for p in (*self._providers.values(), self._default):
            if p is not None and not any(p is s for s in seen):
                seen.append(p)
        return iter(seen)

    async def aclose(self) -> None:
        for provider in self:
            await provider.aclose()


def open_providers(
    models: Iterable[str],
    given: Credentials | Mapping[str, Credentials] | None,
    retry: RetrySettings,
    *,
    env: Mapping[str, str] | None = None,
    required: bool = True,
) -> ProviderSet:
    """Open the adapter of every provider ``models`` name.

    :param required: a provider with no key is an error (else it is left closed:
        ``status`` then shows the manifest's state for its shards).
    :raises ConfigError: a provider's key is missing (naming its variable), or its SDK
        is not installed.
    """
    models = list(models)
    creds = run_credentials(models, given, env)
    if required:
        for provider in providers_of(models):  # every missing key before any client opens
            if provider not in creds:
                raise missing_key_error(provider)
    # Opening a client sends nothing: one that a later failure leaves unused holds
    # no connection.
    return ProviderSet({p: provider_spec(p).open(c, retry) for p, c in creds.items()})


def server_credentials(base_url: str, api_key: str) -> dict[str, Credentials]:
    """Credentials reaching a server that speaks every provider's wire format at the real
    paths (``aeval serve``, whose OpenAI base URL is ``base_url``), for every provider
    with an adapter, each at its SDK's base URL."""
    root = base_url.rstrip("/").removesuffix("/v1")
    return {
        name: Credentials(
            api_key=api_key, base_url=root + provider_spec(name).root_path, aeval_server=True
        )
        for name in available_providers()
        if name not in CLOUD_STAND_INS
    }
