"""The direct routes: ``/v1/chat/completions``, ``/v1/completions`` and OpenAI's
``/v1/responses``, as an inference server (vLLM, SGLang, Ollama…) or OpenAI answers them,
with the batch path's responders, a per-request latency and, optionally, a concurrency cap
(429 with ``Retry-After`` beyond it).

Which request of a run this is comes in two headers, sent only to aeval's own server
(:func:`aeval.config.is_aeval_server`): ``X-Aeval-Custom-Id`` (the row id, a batch line's
``custom_id``) and ``X-Aeval-Trial`` (1-based). The body cannot say it: it is the request
as any server gets it, and a row's trial is nowhere in it. Accepted requests are counted
per (model, custom_id): the proof that a client never asked twice.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from aeval.errors import ConfigError
from aeval.http_guard import header_int, loads
from aeval.local.chat import ChatRequest, Completion, HttpFailure
from aeval.local.models import ModelRouter
from aeval.local.questions import QuestionIndex
from aeval.local.wire import (
    chat_completion,
    chat_completion_chunks,
    error_body,
    estimate_tokens,
    failure_body,
    response_object,
    text_completion,
)

__all__ = ["CUSTOM_ID_HEADER", "TRIAL_HEADER", "DirectCounters", "DirectState", "Serving",
           "direct_routes"]  # fmt: skip

CUSTOM_ID_HEADER = "X-Aeval-Custom-Id"
TRIAL_HEADER = "X-Aeval-Trial"


@dataclass(frozen=True, slots=True)
class Serving:
    """How the direct routes pace and limit requests (the default: instant, unbounded).

    ``retry_after_s`` is the ``Retry-After`` of a 429 over ``max_concurrency``
    (``None``: the mean latency, at least 0.05 s: about when a slot frees);
    ``cap_changes``: (seconds after the first completion request, new cap), in order.
    """

    latency_ms: float = 0.0
    jitter_ms: float = 0.0
    output_tokens_per_second: float | None = None
    max_concurrency: int | None = None
    retry_after_s: float | None = None
    seed: int = 0
    cap_changes: tuple[tuple[float, int], ...] = ()

    def __post_init__(self) -> None:
        if self.latency_ms < 0 or not 0 <= self.jitter_ms <= self.latency_ms:
            raise ConfigError("latency: need MEAN >= 0 and 0 <= JITTER <= MEAN (milliseconds)")
        if self.output_tokens_per_second is not None and self.output_tokens_per_second <= 0:
            raise ConfigError("output tokens per second must be > 0")
        if min([self.max_concurrency or 1, *(n for _, n in self.cap_changes)]) < 1:
            raise ConfigError("max concurrency must be >= 1")

    def delay_s(self, completion_tokens: int, rng: random.Random) -> float:
        """Seconds one request takes: latency drawn in ``mean ± jitter`` plus generation."""
        latency = self.latency_ms
        if self.jitter_ms:
            latency += rng.uniform(-self.jitter_ms, self.jitter_ms)
        rate = self.output_tokens_per_second
        return latency / 1000 + (completion_tokens / rate if rate else 0.0)

    @property
    def retry_after(self) -> float:
        if self.retry_after_s is not None:
            return self.retry_after_s
        return max(self.latency_ms / 1000, 0.05)


@dataclass(frozen=True, slots=True)
class DirectCounters:
    """What the direct routes accepted: requests per (model, custom_id), and the rest."""

    requests: Mapping[tuple[str, str | None], int] = field(default_factory=dict)
    busy_rejections: int = 0  # 429s over max_concurrency
    peak_concurrency: int = 0

    def requests_for(self, model: str, custom_id: str | None) -> int:
        return self.requests.get((model, custom_id), 0)

    @property
    def total(self) -> int:
        return sum(self.requests.values())

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form (the requests become ``[model, custom_id, count]`` triples)."""
        requests = [[m, c, n] for (m, c), n in self.requests.items()]
        return {"requests": requests, "busy_rejections": self.busy_rejections,
                "peak_concurrency": self.peak_concurrency}  # fmt: skip

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DirectCounters:
        requests = {(m, c): int(n) for m, c, n in data["requests"]}
        return cls(requests, int(data["busy_rejections"]), int(data["peak_concurrency"]))


class DirectState:
    """The direct routes' pacing, in-flight count and counters (read from other threads)."""

    def __init__(self, serving: Serving | None = None) -> None:
        self.serving = serving or Serving()
        self._rng = random.Random(self.serving.seed)
        self._lock = threading.Lock()
        self._requests: Counter[tuple[str, str | None]] = Counter()
        self._in_flight = 0
        self._peak = 0
        self._busy = 0
        self._start: float | None = None  # the first completion request's arrival

    def admit(self, model: str, custom_id: str | None) -> bool:
        """Take a slot and count the request; False (and a rejection counted) when full."""
        cap, now = self.serving.max_concurrency, time.monotonic()
        with self._lock:
            self._start = now if self._start is None else self._start
            for at, changed in self.serving.cap_changes:  # in order of time
                cap = changed if now - self._start >= at else cap
            if cap is not None and self._in_flight >= cap:
                self._busy += 1
                return False
            self._in_flight += 1
            self._peak = max(self._peak, self._in_flight)
            self._requests[(model, custom_id)] += 1
            return True

    def release(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def delay_s(self, completion_tokens: int) -> float:
        with self._lock:  # random.Random is not safe to share between threads
            return self.serving.delay_s(completion_tokens, self._rng)

    def counters(self) -> DirectCounters:
        with self._lock:
            return DirectCounters(dict(self._requests), self._busy, self._peak)


def _error(status: int, message: str, **fields: Any) -> JSONResponse:
    headers = fields.pop("headers", None)
    return JSONResponse(error_body(message, **fields), status_code=status, headers=headers)


class _Invalid(Exception):
    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


async def _asked(request: Request, kind: str) -> tuple[dict[str, Any], list[str] | None]:
    """A request's body, checked, and a base model's prompts (``None`` for a chat or
    Responses API request)."""
    try:
        body = loads(await request.body())
    except ValueError as err:
        raise _Invalid(f"The request body is not valid JSON: {err}") from err
    if not isinstance(body, dict):
        raise _Invalid("The request body must be a JSON object.")
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise _Invalid("Missing required parameter: 'model'.", "model")
    needs: dict[str, tuple[str, tuple[type, ...]]] = {
        "chat": ("messages", (list,)), "responses": ("input", (str, list))}  # fmt: skip
    if kind in needs:
        field_name, kinds = needs[kind]
        if not isinstance(body.get(field_name), kinds):
            raise _Invalid(f"Missing required parameter: '{field_name}'.", field_name)
        return body, None
    prompt = body.get("prompt")
    prompts = [prompt] if isinstance(prompt, str) else prompt
    if not isinstance(prompts, list) or not prompts or not all(isinstance(p, str) for p in prompts):
        message = "Missing required parameter: 'prompt' (a string or a list of strings)."
        raise _Invalid(message, "prompt")
    return body, prompts


def _identity(request: Request) -> tuple[str | None, int | None]:
    """Which row and trial a request asks for (see the module docstring)."""
    custom_id = request.headers.get(CUSTOM_ID_HEADER) or None
    try:
        return custom_id, header_int(request.headers.get(TRIAL_HEADER), TRIAL_HEADER, least=1)
    except ValueError as err:
        raise _Invalid(f"Invalid {err} (a trial number).") from None


def _as_chat(index: QuestionIndex, prompt: str, custom_id: str | None) -> dict[str, Any]:
    """A base model's prompt as the chat body the responders read: the question inside its
    template (``User:\\n{question}…Assistant:``), or the whole prompt when none is known."""
    row = index.match_inside(prompt, custom_id)
    return {"messages": [{"role": "user", "content": prompt if row is None else row.question}]}


def _event_stream(model: str, reply: Completion, body: dict[str, Any]) -> StreamingResponse:
    """A chat completion with ``stream: true``, as server-sent events: each chunk a
    ``data:`` line, then ``data: [DONE]`` (what the openai SDK's ``Stream`` reads,
    _streaming.py). The reply is whole before the first byte: the synthetic models do
    not generate token by token, and a client reads one chunk as it reads many."""
    options = body.get("stream_options")
    usage = isinstance(options, dict) and options.get("include_usage") is True
    chunks = chat_completion_chunks(model, reply, estimate_tokens(str(body["messages"])), usage)
    events = [f"data: {json.dumps(c)}\n\n".encode() for c in chunks] + [b"data: [DONE]\n\n"]

    async def send() -> Any:
        for event in events:
            yield event

    return StreamingResponse(send(), media_type="text/event-stream")


def direct_routes(router: ModelRouter, state: DirectState) -> list[Route]:
    """The completion routes of one server."""

    async def answer(request: Request, kind: str) -> Response:
        try:
            (body, prompts), (custom_id, trial) = await _asked(request, kind), _identity(request)
        except _Invalid as err:
            return _error(400, str(err), param=err.param)
        model: str = body["model"]
        responder = router.responder_for(model)
        if responder is None:
            message = f"The model `{model}` does not exist or you do not have access to it."
            return _error(404, message, code="model_not_found")
        if not state.admit(model, custom_id):
            wait = state.serving.retry_after
            headers = {"Retry-After": f"{wait:g}", "Retry-After-Ms": f"{wait * 1000:.0f}"}
            message = "The server is busy: too many concurrent requests. Please retry later."
            return _error(429, message, type="requests", code="rate_limit_exceeded",
                          headers=headers)  # fmt: skip
        try:
            chats = [body] if prompts is None else [
                _as_chat(router.index, p, custom_id) for p in prompts]  # fmt: skip
            replies = [responder.respond(ChatRequest(model, c, custom_id, trial)) for c in chats]
            done = [r for r in replies if isinstance(r, Completion)]
            await anyio.sleep(state.delay_s(max((estimate_tokens(c.content) for c in done),
                                                default=0)))  # fmt: skip
            failure = next((r for r in replies if isinstance(r, HttpFailure)), None)
            if failure is not None:
                return JSONResponse(failure_body(failure), status_code=failure.status_code)
            if prompts is not None:
                asked = sum(estimate_tokens(p) for p in prompts)
                return JSONResponse(text_completion(model, done, asked))
            if kind == "chat" and body.get("stream") is True:
                return _event_stream(model, done[0], body)
            shape, given = ((response_object, body["input"]) if kind == "responses"
                            else (chat_completion, body["messages"]))  # fmt: skip
            return JSONResponse(shape(model, done[0], estimate_tokens(str(given))))
        finally:
            state.release()

    def route(path: str, kind: str) -> Route:
        async def endpoint(request: Request) -> Response:
            return await answer(request, kind)

        return Route(path, endpoint, methods=["POST"])

    return [route("/v1/chat/completions", "chat"), route("/v1/completions", "completions"),
            route("/v1/responses", "responses")]  # fmt: skip
