"""What aeval knows about one provider before talking to it (:class:`ProviderSpec`).

A leaf: each provider's ``<module>_spec.py`` builds its ``SPEC`` from this, and
:mod:`aeval.batch.providers.registry` finds the specs by name; neither imports
the other.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aeval.api_settings import Credentials, RetrySettings, ShardLimits
from aeval.batch.providers.base import BatchProvider
from aeval.model_names import ModelName
from aeval.prompts import GenerationSettings, PromptSettings

__all__ = ["CheckRequest", "OpenProvider", "ProviderSpec", "RequestBody", "ResolveCredentials"]

# (model's own name, question, prompt, generation) -> the request body in the provider's shape
RequestBody = Callable[[str, str, PromptSettings, GenerationSettings], dict[str, Any]]
# (model, generation, prompt) -> None, or ConfigError naming what the provider would reject
CheckRequest = Callable[[ModelName, GenerationSettings, PromptSettings], None]
# (environment) -> credentials, or None when the provider's key is not set
ResolveCredentials = Callable[[Mapping[str, str]], Credentials | None]
# (credentials, retry settings) -> an open adapter
OpenProvider = Callable[[Credentials, RetrySettings], BatchProvider]


def _no_check(model: ModelName, gen: GenerationSettings, prompt: PromptSettings) -> None:
    return None


@dataclass(frozen=True, slots=True)
class ProviderSpec:
    """What aeval knows about one provider's batch API before talking to it.

    :param key_variables: the SDK's own key variables, in order of preference
        (the first is the one error messages name).
    :param base_url_variable: the SDK's own base-URL variable (``aeval serve``
        is reached through it).
    :param limits: one batch's request and byte limits, with a safety margin.
    :param request_url: the ``url`` of every request line (the provider's route).
    :param request_body: the generation-setting mapping hook: one request's body in
        the provider's own shape.
    :param check_request: settings the provider would reject, said before anything
        is created (also called by :class:`~aeval.config.RunConfig`).
    :param resolve: credentials from the environment (``None``: no key set).
    :param open: the adapter (imports the SDK).
    :param extra: the ``pip install 'aeval[EXTRA]'`` that brings the SDK.
    :param root_path: what the SDK's base URL adds to a server's root (OpenAI's
        ``/v1``; Anthropic's SDK adds ``/v1`` itself: ``""``), so one ``aeval serve``
        is reached by every provider's SDK.
    """

    name: str
    title: str
    key_variables: tuple[str, ...]
    base_url_variable: str | None
    limits: ShardLimits
    request_url: str
    request_body: RequestBody
    resolve: ResolveCredentials
    open: OpenProvider
    check_request: CheckRequest = _no_check
    extra: str | None = None
    root_path: str = ""

    @property
    def key_variable(self) -> str:
        return self.key_variables[0]
