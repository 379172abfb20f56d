"""One chat request and its reply, as a local model (a responder) sees them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

__all__ = ["ChatRequest", "Completion", "HttpFailure", "Reply", "Responder", "Row",
           "content_text"]  # fmt: skip


@dataclass(frozen=True, slots=True)
class Row:
    """The parts of a benchmark row a responder needs."""

    id: str
    question: str
    answer: str
    constants: str


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """One chat completion request, as a responder sees it."""

    model: str
    body: Mapping[str, Any]
    custom_id: str | None = None
    # Which trial of a run asked (from the batch's aeval_shard metadata); None when
    # unknown (a direct chat request). Sampled answers differ between trials.
    trial: int | None = None

    @property
    def text(self) -> str:
        """The text of the first user message ("" if there is none): a chat body's, or a
        Responses API body's ``input`` (a string: one user message; a list: messages,
        openai 3.57 types/responses/response_create_params.py). The first user message
        is the question: a repair round's later user messages are feedback
        (aeval.feedback)."""
        messages = self.body.get("messages", self.body.get("input"))
        if isinstance(messages, str):
            return messages
        if not isinstance(messages, list):
            return ""
        users = [m for m in messages if isinstance(m, Mapping) and m.get("role") == "user"]
        return content_text(users[0].get("content")) if users else ""


@dataclass(frozen=True, slots=True)
class Completion:
    """A successful reply: the assistant message and why it stopped."""

    content: str
    finish_reason: Literal["stop", "length"] = "stop"
    reasoning_tokens: int = 0  # thought before answering; billed as output


@dataclass(frozen=True, slots=True)
class HttpFailure:
    """A reply that is an HTTP error (in a batch: a line of the error file)."""

    status_code: int
    message: str
    type: str = "server_error"
    code: str | None = None


Reply = Completion | HttpFailure


class Responder(Protocol):
    def respond(self, request: ChatRequest) -> Reply: ...


def content_text(content: object) -> str:
    """A message's content: a string, or the text of its ``text`` parts (OpenAI's content
    parts, Anthropic's content blocks)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [  # the Responses API's input parts are "input_text"
            p.get("text")
            for p in content
            if isinstance(p, Mapping) and p.get("type") in ("text", "input_text")
        ]
        return "".join(text for text in texts if isinstance(text, str))
    return ""
