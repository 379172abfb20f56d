"""The direct routes: ``/v1/chat/completions`` and ``/v1/completions``, as an inference
server (vLLM, SGLang, Ollama…) answers them.

Each request is answered by the model's responder (the batch path's
synthetic, reference or replay responders), after a per-request latency
(:class:`Serving`: a uniform draw in ``mean ± jitter`` plus the output tokens
at ``output_tokens_per_second``). With ``max_concurrency`` set, a request that
arrives while that many are being answered gets 429 with ``Retry-After``, as a
server with a small queue says it is full. HTTP faults (``--faults
http@POST /v1/chat/completions:…``) strike before a request reaches these
routes (aeval.local.app's fault layer), so a faulted request is not counted.

Which request of a run this is, the client says in two headers (the request
body stays exactly what a real server gets, so strict servers never see an
unknown field): ``X-Aeval-Custom-Id`` (the dataset row id, as ``custom_id`` in
a batch line) and ``X-Aeval-Trial`` (1-based; synthetic answers differ between
trials as in the batch path, where the trial comes from ``aeval_shard``). The
server counts accepted requests per (model, custom_id) at ``GET
/aeval/counters`` under ``"direct"``: the proof that a client never asked twice.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from aeval.errors import ConfigError
from aeval.local.chat import ChatRequest, Completion, HttpFailure, Reply
from aeval.local.models import ModelRouter
from aeval.local.wire import (
    chat_completion,
    error_body,
    estimate_tokens,
    failure_body,
    text_completion,
)

__all__ = [
    "CUSTOM_ID_HEADER",
    "TRIAL_HEADER",
    "DirectCounters",
    "DirectState",
    "Serving",
    "direct_routes",
    "parse_latency",
]

CUSTOM_ID_HEADER = "X-Aeval-Custom-Id"
TRIAL_HEADER = "X-Aeval-Trial"


@dataclass(frozen=True, slots=True)
class Serving:
    """How the direct routes pace and limit requests (the default: instant, unbounded).

    ``retry_after_s`` is the ``Retry-After`` of a 429 over ``max_concurrency``
    (``None``: the mean latency, at least 0.05 s: about when a slot frees).
    """

    latency_ms: float = 0.0
    jitter_ms: float = 0.0
    output_tokens_per_second: float | None = None
    max_concurrency: int | None = None
    retry_after_s: float | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if self.latency_ms < 0 or not 0 <= self.jitter_ms <= self.latency_ms:
            raise ConfigError("latency: need MEAN >= 0 and 0 <= JITTER <= MEAN (milliseconds)")
        if self.output_tokens_per_second is not None and self.output_tokens_per_second <= 0:
            raise ConfigError("output tokens per second must be > 0")
        if self.max_concurrency is not None and self.max_concurrency < 1:
            raise ConfigError("max concurrency must be >= 1")

    def delay_s(self, completion_tokens: int, rng: random.Random) -> float:
        """Seconds one request takes: latency drawn in ``mean ± jitter`` plus generation."""
        latency = self.latency_ms
        if self.jitter_ms:
            latency += rng.uniform(-self.jitter_ms, self.jitter_ms)
        generation = (
            completion_tokens / self.output_tokens_per_second
            if self.output_tokens_per_second
            else 0.0
        )
        return latency / 1000 + generation

    @property
    def retry_after(self) -> float:
        if self.retry_after_s is not None:
            return self.retry_after_s
        return max(self.latency_ms / 1000, 0.05)


def parse_latency(value: str) -> tuple[float, float]:
    """``MEAN[,JITTER]`` in milliseconds; JITTER may be a share of MEAN (``500,20%``)."""
    mean_raw, _, jitter_raw = value.partition(",")
    try:
        mean = float(mean_raw)
        jitter_raw = jitter_raw.strip()
        if jitter_raw.endswith("%"):
            jitter = mean * float(jitter_raw[:-1]) / 100
        else:
            jitter = float(jitter_raw) if jitter_raw else 0.0
    except ValueError:
        raise ConfigError(
            f"--latency-ms {value!r}: expected MEAN[,JITTER] in milliseconds, e.g. 500,100 "
            "or 500,20%"
        ) from None
    return mean, jitter


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
        return {
            "requests": [[m, c, n] for (m, c), n in self.requests.items()],
            "busy_rejections": self.busy_rejections,
            "peak_concurrency": self.peak_concurrency,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DirectCounters:
        return cls(
            requests={(m, c): int(n) for m, c, n in data["requests"]},
            busy_rejections=int(data["busy_rejections"]),
            peak_concurrency=int(data["peak_concurrency"]),
        )


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

    def admit(self, model: str, custom_id: str | None) -> bool:
        """Take a slot and count the request; False (and a rejection counted) when full."""
        cap = self.serving.max_concurrency
        with self._lock:
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


def _error(
    status: int,
    message: str,
    *,
    param: str | None = None,
    code: str | None = None,
    type: str = "invalid_request_error",
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    return JSONResponse(error_body(message, type, param, code), status_code=status, headers=headers)


class _Invalid(Exception):
    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


async def _body(request: Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except ValueError as err:
        raise _Invalid(f"The request body is not valid JSON: {err}") from err
    if not isinstance(body, dict):
        raise _Invalid("The request body must be a JSON object.")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise _Invalid("Missing required parameter: 'model'.", "model")
    return body


def _identity(request: Request) -> tuple[str | None, int | None]:
    custom_id = request.headers.get(CUSTOM_ID_HEADER) or None
    raw_trial = request.headers.get(TRIAL_HEADER)
    if raw_trial is None:
        return custom_id, None
    try:
        trial = int(raw_trial)
    except ValueError:
        trial = 0
    if trial < 1:
        raise _Invalid(f"Invalid header {TRIAL_HEADER}: {raw_trial!r} (a trial number >= 1).")
    return custom_id, trial


def _prompts(body: Mapping[str, Any]) -> list[str]:
    prompt = body.get("prompt")
    if isinstance(prompt, str):
        return [prompt]
    if isinstance(prompt, list) and prompt and all(isinstance(p, str) for p in prompt):
        return list(prompt)
    raise _Invalid(
        "Missing required parameter: 'prompt' (a string or a list of strings).", "prompt"
    )


def direct_routes(router: ModelRouter, state: DirectState) -> list[Route]:
    """The two completion routes of one server."""

    async def answer(request: Request, chat: bool) -> Response:
        try:
            body = await _body(request)
            if chat and not isinstance(body.get("messages"), list):
                raise _Invalid("Missing required parameter: 'messages'.", "messages")
            prompts = [] if chat else _prompts(body)
            custom_id, trial = _identity(request)
        except _Invalid as err:
            return _error(400, str(err), param=err.param)
        model: str = body["model"]
        responder = router.responder_for(model)
        if responder is None:
            return _error(
                404,
                f"The model `{model}` does not exist or you do not have access to it.",
                code="model_not_found",
            )
        if not state.admit(model, custom_id):
            wait = state.serving.retry_after
            return _error(
                429,
                "The server is busy: too many concurrent requests. Please retry later.",
                type="requests",
                code="rate_limit_exceeded",
                headers={"Retry-After": f"{wait:g}", "Retry-After-Ms": f"{wait * 1000:.0f}"},
            )
        try:
            if chat:
                replies: list[Reply] = [
                    responder.respond(ChatRequest(model, body, custom_id, trial))
                ]
            else:
                replies = [
                    responder.respond(
                        ChatRequest(model, _as_chat(router, p, custom_id), custom_id, trial)
                    )
                    for p in prompts
                ]
            completions = [r for r in replies if isinstance(r, Completion)]
            tokens = max((estimate_tokens(c.content) for c in completions), default=0)
            await anyio.sleep(state.delay_s(tokens))
            failure = next((r for r in replies if isinstance(r, HttpFailure)), None)
            if failure is not None:
                return JSONResponse(failure_body(failure), status_code=failure.status_code)
            if chat:
                prompt_tokens = estimate_tokens(str(body["messages"]))
                return JSONResponse(chat_completion(model, completions[0], prompt_tokens))
            prompt_tokens = sum(estimate_tokens(p) for p in prompts)
            return JSONResponse(text_completion(model, completions, prompt_tokens))
        finally:
            state.release()

    async def chat_completions(request: Request) -> Response:
        return await answer(request, chat=True)

    async def completions(request: Request) -> Response:
        return await answer(request, chat=False)

    return [
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
        Route("/v1/completions", completions, methods=["POST"]),
    ]


def _as_chat(router: ModelRouter, prompt: str, custom_id: str | None) -> dict[str, Any]:
    """A base model's prompt as the chat body the responders read.

    The prompt wraps the question in a template (``User:\\n{question}…Assistant:``),
    so the question is looked for inside it; a prompt holding no known question
    is passed whole (the responder then writes a plausible wrong answer).
    """
    row = router.index.match_inside(prompt, custom_id)
    text = row.question if row is not None else prompt
    return {"messages": [{"role": "user", "content": text}]}
