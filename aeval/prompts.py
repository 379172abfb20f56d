"""The instruction text, question formatting and the OpenAI request bodies (chat
completions, and the Responses API's).

A prompt is the benchmark question, a newline, then the instruction (the
``default`` protocol); under the ``warp-2025`` protocol it is the WARP study's
instruction, a newline, then the question. The local batch server matches a
request back to its dataset row by exactly that text, so :func:`format_prompt`
is the one place it is built.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

from aeval.errors import ConfigError, InputFileError
from aeval.feedback import Turn
from aeval.json_values import JsonObject
from aeval.reasoning import EFFORTS, Effort, Reasoning, check_effort

__all__ = [
    "DEFAULT_INSTRUCTION",
    "PROTOCOLS",
    "REASONING_EFFORTS",
    "WARP_2025_INSTRUCTION",
    "GenerationSettings",
    "PromptSettings",
    "Protocol",
    "ReasoningEffort",
    "continue_chat",
    "continue_responses",
    "conversation_turns",
    "format_prompt",
    "messages",
    "read_text_file",
    "request_body",
    "responses_body",
    "responses_reasoning",
]

# Byte-exact from the benchmark's reference notebook: two lines, no trailing newline.
DEFAULT_INSTRUCTION = (
    "Structure your response by placing your thought process between <think></think> tags "
    "and your final answer between <answer></answer> tags like this:\n"
    "<think>[REASONING]</think><answer>(assert (and (not ( = cell_0_0 0)) "
    "(not ( = cell_0_0 1))))</answer>"
)

# The WARP study's generation instruction (dannkoh/WARP-evaluation,
# src/gpt-evaluator.ipynb), byte-exact: four lines, no trailing newline, the
# double spaces of its example included. It went BEFORE the question.
WARP_2025_INSTRUCTION = (
    "All per-variable constraints must be combined using a top-level (assert (and ...)) clause.\n"
    "The output must be in exact, canonical SMT-LIB format without extra commentary in the "
    "constraint string.\n"
    "Show your work in <think> </think> tags. And return the final SMT-LIB constraint string "
    "in <answer> </answer> tags.\n"
    "For example: <answer>(assert (and  ( >=  in0 97)  ( <=  in0 122)))</answer>."
)

# Generation protocols ``run --protocol`` accepts: "default" (the seed
# instruction after the question) and "warp-2025" (the study's, before it).
Protocol = Literal["default", "warp-2025"]
PROTOCOLS: tuple[Protocol, ...] = get_args(Protocol)

# How hard a reasoning model thinks: openai 3.57 types/shared/reasoning_effort.py
# (ReasoningEffort), the values the chat field and the Responses API's reasoning.effort take.
ReasoningEffort = Effort  # aeval.reasoning's, the one vocabulary
REASONING_EFFORTS: tuple[ReasoningEffort, ...] = EFFORTS


def read_text_file(path: str | os.PathLike[str], what: str) -> str:
    """Read a UTF-8 text file given by the user exactly as written (a prompt template:
    its last line break, after ``Assistant:``, is part of what a base model sees).

    :raises InputFileError: missing, unreadable, not UTF-8 or empty.
    """
    return _read_text(path, what, keep_newline=True)


def _read_text(path: str | os.PathLike[str], what: str, *, keep_newline: bool = False) -> str:
    """Read a UTF-8 text file given by the user; one trailing line break is dropped.

    Editors end files with a newline that nobody means as part of the prompt;
    anything else (inner newlines, leading spaces) is kept byte for byte.
    """
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as err:
        raise InputFileError(f"cannot read {what} file {p}: {err.strerror or err}") from err
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise InputFileError(
            f"{what} file {p} is not UTF-8 text (byte {err.start} cannot be decoded)"
        ) from err
    text = text.removeprefix("\ufeff")
    if keep_newline:
        pass
    elif text.endswith("\r\n"):
        text = text[:-2]
    elif text.endswith("\n"):
        text = text[:-1]
    if not text.strip():
        raise InputFileError(f"{what} file {p} is empty")
    return text


@dataclass(frozen=True)
class PromptSettings:
    """What is sent around each question: the instruction, an optional system message.

    :param instruction_first: put the instruction before the question (the
        ``warp-2025`` protocol) instead of after it.
    """

    instruction: str = DEFAULT_INSTRUCTION
    system: str | None = None
    instruction_first: bool = False

    @classmethod
    def for_protocol(cls, protocol: str, system: str | None = None) -> PromptSettings:
        """The prompt of a named generation protocol (one of :data:`PROTOCOLS`).

        :raises ConfigError: the protocol is unknown.
        """
        if protocol == "default":
            return cls(system=system)
        if protocol == "warp-2025":
            return cls(instruction=WARP_2025_INSTRUCTION, system=system, instruction_first=True)
        raise ConfigError(f"unknown protocol {protocol!r}: expected one of {', '.join(PROTOCOLS)}")

    def __post_init__(self) -> None:
        if not isinstance(self.instruction, str) or not self.instruction.strip():
            raise ConfigError("the prompt instruction must be a non-empty string")
        if self.system is not None and (not isinstance(self.system, str) or not self.system):
            raise ConfigError("the system message must be a non-empty string or None")

    @classmethod
    def from_files(
        cls,
        instruction_file: str | os.PathLike[str] | None = None,
        system_file: str | os.PathLike[str] | None = None,
        *,
        system: str | None = None,
    ) -> PromptSettings:
        """Settings with the instruction and/or system message read from UTF-8 files.

        A file's single trailing newline is dropped. ``system`` is used when no
        ``system_file`` is given.

        :raises InputFileError: a file is missing, unreadable, not UTF-8 or empty.
        """
        instruction = (
            DEFAULT_INSTRUCTION
            if instruction_file is None
            else _read_text(instruction_file, "instruction")
        )
        if system_file is not None:
            system = _read_text(system_file, "system message")
        return cls(instruction=instruction, system=system)


def _check_number(
    name: str, value: float | None, low: float, high: float, *, low_open: bool = False
) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(f"{name} must be a number, got {value!r}")
    if value > high or value < low or (low_open and value == low):
        bracket = "(" if low_open else "["
        raise ConfigError(f"{name} must be in {bracket}{low}, {high}], got {value!r}")


def _check_int(name: str, value: int | None, low: int) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name} must be an integer, got {value!r}")
    if value < low:
        raise ConfigError(f"{name} must be at least {low}, got {value}")


@dataclass(frozen=True)
class GenerationSettings:
    """Sampling settings for a model. ``None`` means "not sent": the API default applies.

    Reasoning models reject ``max_tokens``; give them ``max_completion_tokens``.
    Nothing is converted automatically: a body carries exactly what was set.
    """

    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    # OpenAI's vocabulary (aeval.reasoning), sent in each route's and provider's own
    # field: the chat body's reasoning_effort (as_body_fields), the Responses API's
    # reasoning.effort (responses_reasoning), each provider spec module's own; a
    # variant's thinking budget likewise.
    reasoning_effort: ReasoningEffort | None = None
    thinking_budget: int | None = None

    def __post_init__(self) -> None:
        _check_number("temperature", self.temperature, 0.0, 2.0)
        _check_number("top_p", self.top_p, 0.0, 1.0, low_open=True)
        _check_int("seed", self.seed, -(2**63))
        _check_int("max_tokens", self.max_tokens, 1)
        _check_int("max_completion_tokens", self.max_completion_tokens, 1)
        _check_int("thinking_budget", self.thinking_budget, 1)
        if self.reasoning_effort is not None:
            check_effort(self.reasoning_effort, "--reasoning-effort")
        if self.max_tokens is not None and self.max_completion_tokens is not None:
            raise ConfigError(
                "set either max_tokens or max_completion_tokens, not both "
                "(reasoning models only accept max_completion_tokens)"
            )

    def as_body_fields(self) -> JsonObject:
        """The settings that were set, as request-body fields, in a stable order."""
        fields = {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "seed": self.seed,
            "max_tokens": self.max_tokens,
            "max_completion_tokens": self.max_completion_tokens,
            "reasoning_effort": self.reasoning_effort,
        }
        return {k: v for k, v in fields.items() if v is not None}

    @property
    def max_output(self) -> int | None:
        """The bound on output tokens, whichever field set it."""
        return self.max_tokens if self.max_tokens is not None else self.max_completion_tokens

    def with_reasoning(self, reasoning: Reasoning | None) -> GenerationSettings:
        """These settings for a variant: its level or budget replaces the run's level."""
        if reasoning is None:
            return self
        return dataclasses.replace(
            self, reasoning_effort=reasoning.effort, thinking_budget=reasoning.budget
        )


_DEFAULT_PROMPT = PromptSettings()
_DEFAULT_GENERATION = GenerationSettings()


def format_prompt(question: str, settings: PromptSettings = _DEFAULT_PROMPT) -> str:
    """The user message for one question: question, newline, instruction (or the reverse)."""
    if settings.instruction_first:
        return f"{settings.instruction}\n{question}"
    return f"{question}\n{settings.instruction}"


def messages(
    question: str, settings: PromptSettings = _DEFAULT_PROMPT, turns: Sequence[Turn] = ()
) -> list[dict[str, str]]:
    """Chat messages for one question: the optional system message, the user prompt,
    then each earlier repair round's answer (``assistant``) and feedback (``user``)."""
    out: list[dict[str, str]] = []
    if settings.system is not None:
        out.append({"role": "system", "content": settings.system})
    out.append({"role": "user", "content": format_prompt(question, settings)})
    out += conversation_turns(turns)
    return out


def conversation_turns(turns: Sequence[Turn], assistant: str = "assistant") -> list[dict[str, str]]:
    """The earlier rounds of a conversation as chat messages (``role``, ``content``):
    each answer as the ``assistant`` turn, exactly as received, then its feedback as
    the next ``user`` turn. The shape OpenAI's chat messages, the Responses API's
    easy input messages, Anthropic's messages and the OpenAI-compatible providers'
    chat messages share; Gemini names the model's role differently (its own spec)."""
    out: list[dict[str, str]] = []
    for turn in turns:
        out.append({"role": assistant, "content": turn.answer})
        out.append({"role": "user", "content": turn.feedback})
    return out


def continue_chat(body: dict[str, Any], turns: Sequence[Turn]) -> dict[str, Any]:
    """A chat body (OpenAI's, Anthropic's, Together's, Groq's, Mistral's: ``messages``)
    with ``turns`` appended: what :func:`request_body` (or the provider's own) gives with
    the earlier turns followed by these, byte for byte once serialised (``messages``
    keeps its place among the keys)."""
    return {**body, "messages": [*body["messages"], *conversation_turns(turns)]}


def continue_responses(body: dict[str, Any], turns: Sequence[Turn]) -> dict[str, Any]:
    """A ``/v1/responses`` body with ``turns`` appended (a first round's string
    ``input`` becomes its first message), as :func:`responses_body` gives them."""
    given = body["input"]
    start = [{"role": "user", "content": given}] if isinstance(given, str) else list(given)
    return {**body, "input": [*start, *conversation_turns(turns)]}


def request_body(
    model: str,
    question: str,
    prompt: PromptSettings = _DEFAULT_PROMPT,
    gen: GenerationSettings = _DEFAULT_GENERATION,
    turns: Sequence[Turn] = (),
) -> dict[str, Any]:
    """The ``/v1/chat/completions`` body for one question (the ``body`` of a batch line).

    Holds ``model`` and ``messages`` plus only the generation settings that were set.
    A repair round's body also holds the earlier ``turns`` (:func:`messages`).

    :raises ConfigError: ``model`` is empty.
    """
    return {
        "model": _named(model),
        "messages": messages(question, prompt, turns),
        **gen.as_body_fields(),
    }


def _named(model: str) -> str:
    """``model``, checked to be a name (a body for no model would be refused by every API)."""
    if not isinstance(model, str) or not model.strip():
        raise ConfigError(f"model name must be a non-empty string, got {model!r}")
    return model


def responses_reasoning(gen: GenerationSettings) -> dict[str, Any] | None:
    """The Responses API's ``reasoning`` of ``gen`` (openai 3.57 types/shared_params/
    reasoning.py: ``Reasoning.effort``), or ``None`` when no effort was set."""
    if gen.reasoning_effort is None:
        return None
    return {"effort": gen.reasoning_effort}


def responses_body(
    model: str,
    question: str,
    prompt: PromptSettings = _DEFAULT_PROMPT,
    gen: GenerationSettings = _DEFAULT_GENERATION,
    turns: Sequence[Turn] = (),
) -> dict[str, Any]:
    """The ``/v1/responses`` body for one question (openai 3.57
    types/responses/response_create_params.py, ``ResponseCreateParams``): the prompt as
    ``input`` (a string is one user message), the system message as ``instructions``,
    the output bound as ``max_output_tokens`` (the Responses API's one bound, reasoning
    included), ``reasoning``, and temperature and top_p when set. The Responses API has no
    ``seed``: :class:`~aeval.config.RunConfig` refuses one before any body is built.

    A repair round's ``input`` is a list of messages instead (openai 3.57
    types/responses/response_input_param.py, ``EasyInputMessageParam``: ``role``
    ``user`` or ``assistant`` and a string ``content``): the prompt, then each earlier
    answer and its feedback.

    :raises ConfigError: ``model`` is empty.
    """
    prompt_text = format_prompt(question, prompt)
    conversation: str | list[dict[str, str]] = prompt_text
    if turns:
        conversation = [{"role": "user", "content": prompt_text}, *conversation_turns(turns)]
    body: dict[str, Any] = {"model": _named(model), "input": conversation}
    if prompt.system is not None:
        body["instructions"] = prompt.system
    optional = {
        "max_output_tokens": gen.max_output,
        "temperature": gen.temperature,
        "top_p": gen.top_p,
        "reasoning": responses_reasoning(gen),
    }
    return body | {k: v for k, v in optional.items() if v is not None}
