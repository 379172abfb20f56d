"""One chat request and its reply, as a local model (a responder) sees them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from aeval.feedback import Turn

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

    def said(self) -> list[tuple[str, str]]:
        """Each user and assistant message's role and text, in order: a chat body's
        ``messages`` (every wire's codec converts to them), or a Responses API body's
        ``input``, a string (one user message) or a list of items (openai 3.57
        types/responses/response_input_param.py: ``EasyInputMessageParam`` and an
        earlier answer's ``ResponseOutputMessageParam``; reasoning items have no role)."""
        messages = self.body.get("messages", self.body.get("input"))
        if isinstance(messages, str):
            return [("user", messages)]
        if not isinstance(messages, list):
            return []
        return [(m["role"], content_text(m.get("content"))) for m in messages
                if isinstance(m, Mapping) and m.get("role") in ("user", "assistant")]  # fmt: skip

    @property
    def text(self) -> str:
        """The text of the first user message, the question ("" if there is none); later
        user messages are a repair round's feedback (:attr:`turns`)."""
        return next((text for role, text in self.said() if role == "user"), "")

    @property
    def turns(self) -> list[Turn]:
        """The earlier rounds of a repair conversation (aeval.feedback): each assistant
        message after the question, with the user message that followed it."""
        said = self.said()
        start = next((i + 1 for i, (role, _) in enumerate(said) if role == "user"), len(said))
        turns: list[Turn] = []
        for role, text in said[start:]:
            if role == "assistant":
                turns.append(Turn(text, ""))
            elif turns:
                turns[-1] = Turn(turns[-1].answer, turns[-1].feedback + text)
        return turns


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
    parts, Anthropic's content blocks, the Responses API's input and output text)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [
            p.get("text")
            for p in content
            if isinstance(p, Mapping) and p.get("type") in ("text", "input_text", "output_text")
        ]
        return "".join(text for text in texts if isinstance(text, str))
    return ""
