"""What aeval knows about one provider before talking to it (:class:`ProviderSpec`).

A leaf: each provider's ``<module>_spec.py`` builds its ``SPEC`` from this, and
:mod:`aeval.batch.providers.registry` finds the specs by name; neither imports
the other.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast

from aeval.api_settings import Credentials, RetrySettings, ShardLimits
from aeval.batch.providers.base import BatchProvider
from aeval.batch.providers.env_credentials import key_credentials
from aeval.batch.shard import URL
from aeval.errors import ConfigError
from aeval.feedback import Turn
from aeval.model_names import ModelName
from aeval.prompts import GenerationSettings, PromptSettings, continue_chat, request_body
from aeval.reasoning import EFFORTS

__all__ = [
    "CheckRequest",
    "ContinueBody",
    "ProviderSpec",
    "RequestBody",
    "ResolveCredentials",
    "check_reasoning",
]


class RequestBody(Protocol):
    """(model's own name, question, prompt, generation, earlier turns) -> the request
    body in the provider's shape. ``turns`` are a repair round's earlier answers and
    feedback (:class:`aeval.feedback.Turn`), carried in the provider's own message
    format after the question; none in a first round."""

    def __call__(
        self,
        model: str,
        question: str,
        prompt: PromptSettings,
        gen: GenerationSettings,
        turns: Sequence[Turn] = (),
    ) -> dict[str, Any]: ...


# (a request body, more turns) -> the body with them appended in the provider's shape
ContinueBody = Callable[[dict[str, Any], Sequence[Turn]], dict[str, Any]]
# (model, generation, prompt) -> None, or ConfigError naming what the provider would reject
CheckRequest = Callable[[ModelName, GenerationSettings, PromptSettings], None]
# (environment) -> credentials, or None when the provider's key is not set
ResolveCredentials = Callable[[Mapping[str, str]], Credentials | None]


def check_reasoning(
    model: ModelName,
    gen: GenerationSettings,
    title: str,
    efforts: tuple[str, ...] = EFFORTS,
    *,
    budgets: bool = False,
) -> None:
    """Refuse, in one line naming what ``title`` takes, a level outside ``efforts`` and
    (unless the provider ``budgets``) a thinking budget."""
    if gen.thinking_budget is not None and not budgets:
        raise ConfigError(
            f"{model.qualified}: {title} takes no thinking budget, only an effort level "
            f"({', '.join('@' + e for e in efforts)})"
        )
    if gen.reasoning_effort is not None and gen.reasoning_effort not in efforts:
        raise ConfigError(
            f"{model.qualified}: {title} has no effort level {gen.reasoning_effort!r}; "
            f"it takes {', '.join(efforts)}" + (", or a budget @N" if budgets else "")
        )


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
    :param adapter: the adapter class, ``module:Class``, imported when the provider is
        opened (it imports the SDK); called with the credentials and retry settings.
    :param request_url: the ``url`` of every request line (the provider's route;
        by default OpenAI's chat completions).
    :param request_body: the generation-setting mapping hook: one request's body in
        the provider's own shape (by default an OpenAI chat body).
    :param continue_body: a request body with a repair round's turns appended, in the
        provider's shape: ``request_body`` with the earlier turns then these, exactly
        (by default a chat body's ``messages``).
    :param check_request: settings the provider would reject, said before anything
        is created (also called by :class:`~aeval.config.RunConfig`).
    :param credentials: credentials from the environment (``None``: no key set); by
        default the first key set among ``key_variables``, with ``base_url_variable``.
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
    adapter: str
    request_url: str = URL
    request_body: RequestBody = request_body
    continue_body: ContinueBody = continue_chat
    check_request: CheckRequest = _no_check
    credentials: ResolveCredentials | None = None
    extra: str | None = None
    root_path: str = ""

    @property
    def key_variable(self) -> str:
        return self.key_variables[0]

    def resolve(self, env: Mapping[str, str]) -> Credentials | None:
        """The provider's credentials in ``env``, or ``None`` when no key is set."""
        if self.credentials is not None:
            return self.credentials(env)
        return key_credentials(env, self.key_variables, self.base_url_variable)

    def open(self, credentials: Credentials, retry: RetrySettings) -> BatchProvider:
        """The provider's adapter over its SDK (opening it sends nothing).

        :raises ConfigError: the SDK is not installed (naming the extra that brings it).
        """
        module, _, name = self.adapter.partition(":")
        try:
            adapter = getattr(importlib.import_module(module), name)
        except ModuleNotFoundError as err:
            if not err.name or err.name.startswith("aeval") or self.extra is None:
                raise
            raise ConfigError(
                f"{self.name}/ models need the {err.name.partition('.')[0]} SDK: "
                f"pip install 'aeval[{self.extra}]'"
            ) from None
        return cast(BatchProvider, adapter(credentials, retry))
