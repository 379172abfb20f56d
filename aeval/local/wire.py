"""The JSON shapes of the OpenAI API that the local server writes.

The official SDK parses these into its own types (``ChatCompletion``,
``Batch``, ``FileObject``), so they follow the SDK's models field for field.
"""

from __future__ import annotations

import random
import time
from typing import Any

from aeval.local.chat import Completion, HttpFailure

__all__ = ["batch_line", "chat_completion", "chat_completion_chunks", "error_body",
           "estimate_tokens", "failure_body", "random_hex", "response_object",
           "text_completion"]  # fmt: skip

_FINGERPRINT = "fp_aeval_local"


def random_hex(digits: int) -> str:
    # Ids need to be unique, not secret: getrandbits costs no system call per id,
    # which matters at tens of thousands of output lines a second.
    return f"{random.getrandbits(4 * digits):0{digits}x}"


def estimate_tokens(text: str) -> int:
    """About four characters a token, as OpenAI's rule of thumb has it."""
    return len(text) // 4 + 1


def _completion(kind: str, model: str, choices: list[dict[str, Any]], prompt: int,
                answered: int) -> dict[str, Any]:  # fmt: skip
    """The envelope ``openai.types.ChatCompletion`` and ``Completion`` share."""
    usage = {"prompt_tokens": prompt, "completion_tokens": answered,
             "total_tokens": prompt + answered}  # fmt: skip
    prefix = "chatcmpl" if kind == "chat.completion" else "cmpl"
    return {"id": f"{prefix}-{random_hex(24)}", "object": kind, "created": int(time.time()),
            "model": model, "choices": choices, "usage": usage,
            "system_fingerprint": _FINGERPRINT}  # fmt: skip


def chat_completion(model: str, reply: Completion, prompt_tokens: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content, "refusal": None,
                               "annotations": []}  # fmt: skip
    choice = {"index": 0, "message": message, "logprobs": None,
              "finish_reason": reply.finish_reason}  # fmt: skip
    body = _completion("chat.completion", model, [choice], prompt_tokens,
                       estimate_tokens(reply.content) + reply.reasoning_tokens)  # fmt: skip
    body["usage"]["prompt_tokens_details"] = {"cached_tokens": 0, "audio_tokens": 0}
    body["usage"]["completion_tokens_details"] = {
        "reasoning_tokens": reply.reasoning_tokens, "audio_tokens": 0,
        "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0,
    }  # fmt: skip
    return {**body, "service_tier": "default"}


def chat_completion_chunks(
    model: str, reply: Completion, prompt_tokens: int, include_usage: bool
) -> list[dict[str, Any]]:
    """A chat completion as ``stream: true`` sends it: ``openai.types.chat.ChatCompletionChunk``
    objects (openai 3.63 types/chat/chat_completion_chunk.py), one id and timestamp for
    all. The assistant role and the whole content in one delta, then an empty delta with
    the finish reason; with ``stream_options.include_usage`` a last chunk with no choices
    and the usage (chat_completion_stream_options_param.py: the other chunks then carry
    ``usage: null``)."""
    whole = chat_completion(model, reply, prompt_tokens)
    head = {k: whole[k] for k in ("id", "created", "model", "system_fingerprint",
                                  "service_tier")}  # fmt: skip

    def chunk(choices: list[dict[str, Any]], usage: object = None) -> dict[str, Any]:
        out = {**head, "object": "chat.completion.chunk", "choices": choices}
        return out | {"usage": usage} if include_usage else out

    delta = {"role": "assistant", "content": reply.content, "refusal": None}
    last = {"index": 0, "delta": {}, "logprobs": None, "finish_reason": reply.finish_reason}
    chunks = [
        chunk([{"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}]),
        chunk([last]),
    ]
    return [*chunks, chunk([], whole["usage"])] if include_usage else chunks


def text_completion(model: str, replies: list[Completion], prompt_tokens: int) -> dict[str, Any]:
    """A ``/v1/completions`` answer (a base model's), one choice per prompt."""
    choices = [{"index": i, "text": r.content, "logprobs": None, "finish_reason": r.finish_reason}
               for i, r in enumerate(replies)]  # fmt: skip
    answered = sum(estimate_tokens(r.content) for r in replies)
    return _completion("text_completion", model, choices, prompt_tokens, answered)


def response_object(model: str, reply: Completion, input_tokens: int) -> dict[str, Any]:
    """A ``/v1/responses`` answer as ``openai.types.responses.Response`` (openai 3.57): the
    reply's ``<think>`` part as a reasoning item (its summary; counted as reasoning tokens,
    inside ``output_tokens``), the rest as the message's ``output_text``."""
    think, _, text = reply.content.partition("</think>")  # cut inside it: all reasoning
    if not think.startswith("<think>"):
        think, text = "", reply.content
    think = think.removeprefix("<think>")
    cut = reply.finish_reason == "length"
    reasoning = (estimate_tokens(think) if think else 0) + reply.reasoning_tokens
    summary = [{"type": "summary_text", "text": think}] if think else []
    output = [{"id": f"rs_{random_hex(24)}", "type": "reasoning", "summary": summary},
              {"id": f"msg_{random_hex(24)}", "type": "message", "role": "assistant",
               "status": "incomplete" if cut else "completed", "content": [
                   {"type": "output_text", "text": text, "annotations": []}]}]  # fmt: skip
    answered = estimate_tokens(text) + reasoning
    usage = {"input_tokens": input_tokens, "input_tokens_details": {"cached_tokens": 0,
             "cache_write_tokens": 0}, "output_tokens": answered,
             "output_tokens_details": {"reasoning_tokens": reasoning},
             "total_tokens": input_tokens + answered}  # fmt: skip
    return {"id": f"resp_{random_hex(24)}", "object": "response", "created_at": int(time.time()),
            "model": model, "status": "incomplete" if cut else "completed",
            "incomplete_details": {"reason": "max_output_tokens"} if cut else None,
            "output": output, "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
            "usage": usage}  # fmt: skip


def error_body(message: str, type: str = "invalid_request_error", param: str | None = None,
               code: str | None = None, **extra: Any) -> dict[str, Any]:  # fmt: skip
    """OpenAI's error body (``extra``: fields another wire's shape adds inside it)."""
    return {"error": {"message": message, "type": type, "param": param, "code": code, **extra}}


def failure_body(failure: HttpFailure) -> dict[str, Any]:
    return error_body(failure.message, failure.type, None, failure.code)


def batch_line(custom_id: str | None, *, status_code: int | None = None,
               body: dict[str, Any] | None = None, error: dict[str, Any] | None = None
               ) -> dict[str, Any]:  # fmt: skip
    """One line of a batch output or error file."""
    response = None if status_code is None else {
        "status_code": status_code, "request_id": random_hex(32), "body": body}  # fmt: skip
    return {"id": f"batch_req_{random_hex(24)}", "custom_id": custom_id, "response": response,
            "error": error}  # fmt: skip
