"""RunConfig: everything a run needs to know, resolved once, frozen.

The API key and base URL are *not* part of the saved configuration: they are
read from the environment when the run starts (:func:`resolve_credentials`)
and never written to disk. ``config.json`` in a run directory is
:meth:`RunConfig.to_dict`, from which :meth:`RunConfig.from_dict` rebuilds the
same run for ``resume``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypedDict, get_args

from aeval.api_settings import (
    LOCAL_SERVER_VARIABLE,
    Credentials,
    PollSettings,
    RetrySettings,
    ShardLimits,
    is_aeval_server,
    resolve_credentials,
)
from aeval.errors import ConfigError
from aeval.feedback import FEEDBACK_LEVELS, FeedbackLevel, check_template
from aeval.json_values import JsonObject
from aeval.model_names import parse_model, split_variant
from aeval.prompts import GenerationSettings, PromptSettings, Protocol
from aeval.verify import VerifyLimits

__all__ = [
    "APIS",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_REQUEST_TIMEOUT_S",
    "ENDPOINTS",
    "LOCAL_SERVER_VARIABLE",
    "MISSION_MODELS",
    "Api",
    "Credentials",
    "Endpoint",
    "PollSettings",
    "RetrySettings",
    "RunConfig",
    "ShardLimits",
    "is_aeval_server",
    "resolve_credentials",
]

# The three models the benchmark's published comparison runs by default.
MISSION_MODELS: tuple[str, ...] = (
    "gpt-4o-2024-11-20",
    "gpt-4o-mini-2024-07-18",
    "gpt-3.5-turbo-0125",
)

# How answers are obtained (RunConfig.api) and, in direct mode, which route is asked.
Api = Literal["batch", "direct"]
Endpoint = Literal["chat", "completions", "responses"]
APIS: tuple[Api, ...] = get_args(Api)
ENDPOINTS: tuple[Endpoint, ...] = get_args(Endpoint)
DEFAULT_MAX_CONNECTIONS = 32
DEFAULT_REQUEST_TIMEOUT_S = 120.0


class RowSelection(TypedDict, total=False):
    """The keyword arguments of :func:`aeval.dataset.load_dataset` that pick a run's rows
    (one left out keeps its default)."""

    revision: str | None
    limit: int | None
    sample: int | None
    seed: int
    tier: str | None
    ids: str | None


@dataclass(frozen=True, slots=True)
class RunConfig:
    """One run: which models, how many trials, which rows, how to ask and how to check.

    :param models: model names, ``provider/model`` or a bare OpenAI name
        (:mod:`aeval.model_names`; direct mode sends them as written);
        one job per model × trial.
    :param dataset: a benchmark reference understood by :func:`aeval.dataset.load_dataset`
        (``None``: the bundled demo benchmark).
    :param dataset_revision: the hub revision to load ``dataset`` at; a run pins it
        to the commit it loaded (a resume reloads the same rows).
    :param retry_failed: how many times a request that failed for a retryable
        reason (``batch_expired``, 408, 409, 429, 5xx: :mod:`aeval.batch.retry`) is
        resubmitted in a new shard.
    :param credentials: where to send requests: one :class:`Credentials` (OpenAI's,
        or direct mode's endpoint) or one per provider name (``{"anthropic": …}``);
        whatever is not given resolves from each provider's environment variables
        when the run starts. Never written to ``config.json``.
    :param protocol: the generation protocol's name (``aeval.prompts.PROTOCOLS``);
        ``"warp-2025"`` with the default prompt switches the prompt to the
        study's instruction, placed before the question.
    :param published: also give every verdict the published reading (the
        study's own evaluator; read in the verifier where that provably gives
        the ``z3`` binary's outcome, by the binary otherwise).
    :param published_binary: read every published verdict with the ``z3``
        binary, as the study did (for audits of the in-process reading).
    :param sample_seed: the seed of the rows ``sample`` draws (not the model's
        sampling seed: that is ``generation.seed``).
    :param sample_ids: only the rows with these ids (``"5,7,10-20"``,
        :func:`aeval.dataset.parse_id_spec`), before ``tier``, ``sample`` and ``limit``.
    :param api: how answers are obtained: ``"batch"`` (the Batch API: files,
        batches, polling) or ``"direct"`` (one request per answer to the
        completion route, :mod:`aeval.engine.direct`).
    :param max_connections: direct mode: most requests in flight at once, over
        all models and trials together (lowered while the server says 429/503).
    :param request_timeout: direct mode: seconds one request may take.
    :param endpoint: the route asked: ``"chat"`` (``/v1/chat/completions``),
        ``"completions"`` (``/v1/completions``, base models, direct mode only; needs
        ``prompt_template``) or ``"responses"`` (OpenAI's Responses API, ``/v1/responses``:
        in batch mode OpenAI's models only, in direct mode any server that has it).
    :param prompt_template: the text of a completions prompt, with a ``{question}``
        and optionally an ``{instruction}`` slot (kept in ``config.json``, so a
        resume sends exactly the same prompts).
    :param extra_body: fields merged into every request body of direct mode and of
        ``openai/`` models in batch mode (``--extra-body``: an open-model server's own
        fields, e.g. vLLM's and SGLang's ``chat_template_kwargs``).
    :param rounds: repair rounds (``--rounds K``): an item whose answer is wrong
        (:func:`aeval.feedback.is_repairable`) is asked again, with the conversation so
        far and one feedback message, up to ``rounds`` answers in all; 1 is a run
        without repair.
    :param feedback: what the feedback message tells (:data:`aeval.feedback.FEEDBACK_LEVELS`);
        ``None`` with ``rounds > 1`` is ``"counterexample"``.
    :param feedback_template: the feedback message's text (``--feedback-file``, kept
        byte for byte like the instruction); ``None`` is
        :data:`aeval.feedback.DEFAULT_FEEDBACK_TEMPLATE`.
    """

    models: tuple[str, ...] = MISSION_MODELS
    trials: int = 1
    dataset: str | None = None
    dataset_revision: str | None = None
    limit: int | None = None
    sample: int | None = None
    sample_seed: int = 0
    tier: str | None = None
    prompt: PromptSettings = field(default_factory=PromptSettings)
    generation: GenerationSettings = field(default_factory=GenerationSettings)
    limits: VerifyLimits = field(default_factory=VerifyLimits)
    poll: PollSettings = field(default_factory=PollSettings)
    retry: RetrySettings = field(default_factory=RetrySettings)
    shard_limits: ShardLimits = field(default_factory=ShardLimits)
    retry_failed: int = 0
    out_dir: Path = Path("results")
    run_id: str | None = None
    verify_queue: int = 256
    workers: int | None = None
    # Where the checks run (None: this machine; see aeval.verify.checker.open_checker).
    # Not what was scored, so not saved: a resume picks its own (--ray or local).
    ray_address: str | None = field(default=None, compare=False)
    credentials: Credentials | Mapping[str, Credentials] | None = field(
        default=None, compare=False, repr=False
    )
    protocol: Protocol = "default"
    published: bool = True
    published_binary: bool = False
    sample_ids: str | None = None
    api: Api = "batch"
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT_S
    endpoint: Endpoint = "chat"
    prompt_template: str | None = None
    extra_body: JsonObject | None = None
    rounds: int = 1
    feedback: FeedbackLevel | None = None
    feedback_template: str | None = None

    def __post_init__(self) -> None:
        models = tuple(m.strip() for m in self.models if m.strip())
        if not models:
            raise ConfigError("no model given: pass --model NAME (repeat or comma-separate)")
        if len(set(models)) != len(models):
            raise ConfigError(f"a model is listed twice in {list(models)}")
        object.__setattr__(self, "models", models)
        object.__setattr__(self, "out_dir", Path(self.out_dir))
        if self.trials < 1:
            raise ConfigError(f"--trials must be at least 1, got {self.trials}")
        if self.retry_failed < 0:
            raise ConfigError(f"--retry-failed must be >= 0, got {self.retry_failed}")
        if self.limit is not None and self.limit < 1:
            raise ConfigError(f"--limit must be at least 1, got {self.limit}")
        if self.sample is not None and self.sample < 1:
            raise ConfigError(f"--sample must be at least 1, got {self.sample}")
        if self.run_id is not None and (
            not self.run_id or "/" in self.run_id or self.run_id.startswith(".")
        ):
            raise ConfigError(f"run id {self.run_id!r} must be a plain directory name")
        if self.workers is not None and self.workers < 1:
            raise ConfigError(f"--workers must be at least 1, got {self.workers}")
        if self.verify_queue < 1:
            raise ConfigError(f"verify_queue must be at least 1, got {self.verify_queue}")
        self._check_direct()
        self._check_rounds()
        if self.extra_body is not None and not isinstance(self.extra_body, Mapping):
            raise ConfigError("--extra-body must be a JSON object ({...})")
        if self.api == "batch":
            self._check_models()
        else:
            self._check_direct_models()
        protocol_prompt = PromptSettings.for_protocol(self.protocol, system=self.prompt.system)
        if self.prompt == PromptSettings(system=self.prompt.system):
            # The protocol's instruction, unless the caller chose a prompt of their own.
            object.__setattr__(self, "prompt", protocol_prompt)

    def _check_direct(self) -> None:
        if self.api not in APIS:
            raise ConfigError(f"--api {self.api!r}: expected one of {', '.join(APIS)}")
        if self.endpoint not in ENDPOINTS:
            raise ConfigError(
                f"--endpoint {self.endpoint!r}: expected one of {', '.join(ENDPOINTS)}"
            )
        if self.published_binary and not self.published:
            raise ConfigError("--published-binary reads the published reading: drop --no-published")
        if self.max_connections < 1:
            raise ConfigError(f"--max-connections must be at least 1, got {self.max_connections}")
        if not self.request_timeout > 0:
            raise ConfigError(f"--request-timeout must be positive, got {self.request_timeout}")
        if self.endpoint == "completions":
            if self.api != "direct":
                raise ConfigError("--endpoint completions needs --api direct")
            if self.prompt_template is None:
                raise ConfigError(
                    "--endpoint completions needs --prompt-template FILE (a prompt with a "
                    "{question} slot, and optionally {instruction})"
                )
        if self.endpoint == "responses" and self.generation.seed is not None:
            # openai 3.57 types/responses/response_create_params.py has no seed field.
            raise ConfigError(
                "--generation-seed: the Responses API takes no seed (--endpoint responses); "
                "drop the seed or use --endpoint chat"
            )
        if self.prompt_template is not None:
            if self.endpoint != "completions":
                raise ConfigError("--prompt-template is for --endpoint completions only")
            if "{question}" not in self.prompt_template:
                raise ConfigError(
                    "the prompt template has no {question} slot: each request would ask "
                    "nothing; put {question} (and optionally {instruction}) in the template"
                )

    def _check_rounds(self) -> None:
        """``--rounds``, ``--feedback`` and ``--feedback-file``; with more than one round,
        the feedback level defaults to ``counterexample``."""
        if isinstance(self.rounds, bool) or not isinstance(self.rounds, int) or self.rounds < 1:
            raise ConfigError(f"--rounds must be an integer of at least 1, got {self.rounds!r}")
        if self.feedback is not None and self.feedback not in FEEDBACK_LEVELS:
            raise ConfigError(
                f"--feedback {self.feedback!r}: expected one of {', '.join(FEEDBACK_LEVELS)}"
            )
        if self.rounds == 1:
            if self.feedback is not None or self.feedback_template is not None:
                given = "--feedback" if self.feedback is not None else "--feedback-file"
                raise ConfigError(
                    f"{given} is for repair rounds: add --rounds K (K >= 2), or drop it"
                )
            return
        if self.endpoint == "completions":
            raise ConfigError(
                "--rounds needs a conversation: --endpoint completions sends one prompt "
                "(use --endpoint chat or responses)"
            )
        if self.feedback_template is not None:
            check_template(self.feedback_template, "--feedback-file")
        if self.feedback is None:
            object.__setattr__(self, "feedback", "counterexample")

    def _check_models(self) -> None:
        """No model is named twice (``gpt-4o`` is ``openai/gpt-4o``), and the Responses
        API's endpoint is for OpenAI models only. Whether each
        model's provider is known and would take the settings is the providers' to
        say: :func:`aeval.batch.providers.registry.check_providers`, which
        :class:`aeval.engine.Run` calls before anything is written."""
        seen: dict[tuple[str, str, object], str] = {}
        for model in self.models:
            parsed = parse_model(model)
            key = (parsed.provider, parsed.name, parsed.reasoning)
            if key in seen:
                raise ConfigError(f"models {seen[key]!r} and {model!r} are the same model")
            seen[key] = model
            if self.endpoint == "responses" and parsed.provider != "openai":
                # The Responses API is OpenAI's (a Batch API endpoint:
                # openai 3.57 types/batch_create_params.py).
                raise ConfigError(
                    f"--endpoint responses is OpenAI's Responses API: {model!r} is not OpenAI's "
                    f"(provider {parsed.provider}; use --endpoint chat for it)"
                )
            if self.extra_body is not None and parsed.provider != "openai":
                raise ConfigError(
                    f"{model}: --extra-body is for direct mode and openai/ models "
                    "(OpenAI-compatible servers) only"
                )

    def _check_direct_models(self) -> None:
        """Direct mode sends ``reasoning_effort`` (the OpenAI-compatible servers' field);
        a budget has no such field, so it is refused."""
        for model in self.models:
            _, reasoning = split_variant(model)
            if reasoning is not None and reasoning.budget is not None:
                raise ConfigError(
                    f"{model}: direct mode sends reasoning_effort, which takes a level "
                    "(@low, @high, ...); pass a budget in --extra-body as your server names it"
                )

    def row_selection(self) -> RowSelection:
        """The keyword arguments of :func:`aeval.dataset.load_dataset` that pick this
        run's rows (the dataset itself is ``dataset``)."""
        return {
            "revision": self.dataset_revision,
            "limit": self.limit,
            "sample": self.sample,
            "seed": self.sample_seed,
            "tier": self.tier,
            "ids": self.sample_ids,
        }

    def to_dict(self) -> JsonObject:
        """JSON-ready, without credentials (this is what ``config.json`` holds)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            if f.name in _NOT_SAVED:
                continue
            value = getattr(self, f.name)
            if dataclasses.is_dataclass(value) and not isinstance(value, type):
                value = _plain(dataclasses.asdict(value))
            elif isinstance(value, Path):
                value = str(value)
            elif isinstance(value, tuple):
                value = list(value)
            out[f.name] = value
        if self.rounds == 1:
            # A run without repair rounds saves the configuration it saved before they
            # existed, byte for byte (from_dict reads their defaults back).
            for name in _ROUND_SETTINGS:
                del out[name]
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, object], *, source: str = "config") -> RunConfig:
        """Rebuild a config saved by :meth:`to_dict`; unknown keys are an error."""
        nested: dict[str, type] = {
            "prompt": PromptSettings,
            "generation": GenerationSettings,
            "limits": VerifyLimits,
            "poll": PollSettings,
            "retry": RetrySettings,
            "shard_limits": ShardLimits,
        }
        names = {f.name for f in dataclasses.fields(cls)} - _NOT_SAVED
        # config.json also holds the run's provenance (aeval.store.provenance): not a setting.
        settings: dict[str, Any] = {k: v for k, v in data.items() if k != "provenance"}
        unknown = set(settings) - names
        if unknown:
            raise ConfigError(f"{source}: unknown setting(s) {sorted(unknown)}")
        kwargs: dict[str, Any] = {}
        for key, value in settings.items():
            try:
                if key in nested and isinstance(value, Mapping):
                    value = _build(nested[key], value)
                elif key == "models":
                    value = tuple(value)
                elif key == "out_dir":
                    value = Path(value)
            except (TypeError, ValueError) as err:
                raise ConfigError(f"{source}: setting {key!r} is invalid: {err}") from err
            kwargs[key] = value
        try:
            return cls(**kwargs)
        except TypeError as err:
            raise ConfigError(f"{source}: {err}") from err

    def with_credentials(
        self, credentials: Credentials | Mapping[str, Credentials] | None
    ) -> RunConfig:
        return dataclasses.replace(self, credentials=credentials)

    def given_credentials(self, provider: str = "openai") -> Credentials | None:
        """The credentials given for ``provider`` (a bare :class:`Credentials` is
        OpenAI's); ``None``: none given, the environment's apply."""
        if self.credentials is None or isinstance(self.credentials, Credentials):
            return self.credentials if provider == "openai" else None
        return self.credentials.get(provider)


# Settings of repair rounds: left out of a one-round run's config.json.
_ROUND_SETTINGS = ("rounds", "feedback", "feedback_template")

# Settings config.json never holds: secrets, and where the checks ran.
_NOT_SAVED = frozenset({"credentials", "ray_address"})


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "value") and isinstance(value.value, str | int):  # enums
        return value.value
    return value


def _build(cls: type, data: Mapping[str, Any]) -> Any:
    """Rebuild a (possibly nested) settings dataclass from its ``asdict`` form."""
    if not dataclasses.is_dataclass(cls):
        return data
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = set(data) - set(fields)
    if unknown:
        raise ValueError(f"unknown field(s) {sorted(unknown)} for {cls.__name__}")
    kwargs = {}
    for key, value in data.items():
        kwargs[key] = tuple(value) if isinstance(value, list) else value
    return cls(**kwargs)
