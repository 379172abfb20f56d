"""The JSON shapes of the OpenAI API that the local server writes.

The official SDK parses these into its own types (``ChatCompletion``,
``Batch``, ``FileObject``), so they follow the SDK's models field for field.
"""

from __future__ import annotations

import random
import time
from typing import Any

from aeval.local.chat import Completion, HttpFailure

__all__ = [
    "batch_line",
    "chat_completion",
    "error_body",
    "estimate_tokens",
    "failure_body",
    "random_hex",
    "text_completion",
]

_FINGERPRINT = "fp_aeval_local"


def random_hex(digits: int) -> str:
    # Ids need to be unique, not secret: getrandbits costs no system call per id,
    # which matters at tens of thousands of output lines a second.
    return f"{random.getrandbits(4 * digits):0{digits}x}"


def estimate_tokens(text: str) -> int:
    """About four characters a token, as OpenAI's rule of thumb has it."""
    return len(text) // 4 + 1


def chat_completion(model: str, reply: Completion, prompt_tokens: int) -> dict[str, Any]:
    completion_tokens = estimate_tokens(reply.content)
    return {
        "id": f"chatcmpl-{random_hex(24)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": reply.content,
                    "refusal": None,
                    "annotations": [],
                },
                "logprobs": None,
                "finish_reason": reply.finish_reason,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": 0,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        },
        "service_tier": "default",
        "system_fingerprint": _FINGERPRINT,
    }


def text_completion(model: str, replies: list[Completion], prompt_tokens: int) -> dict[str, Any]:
    """A ``/v1/completions`` answer (a base model's), one choice per prompt."""
    completion_tokens = sum(estimate_tokens(r.content) for r in replies)
    return {
        "id": f"cmpl-{random_hex(24)}",
        "object": "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": i, "text": r.content, "logprobs": None, "finish_reason": r.finish_reason}
            for i, r in enumerate(replies)
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
        "system_fingerprint": _FINGERPRINT,
    }


def error_body(
    message: str,
    type: str = "invalid_request_error",
    param: str | None = None,
    code: str | None = None,
) -> dict[str, Any]:
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def failure_body(failure: HttpFailure) -> dict[str, Any]:
    return error_body(failure.message, failure.type, None, failure.code)


def batch_line(
    custom_id: str | None,
    *,
    status_code: int | None = None,
    body: dict[str, Any] | None = None,
    error: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One line of a batch output or error file."""
    response = (
        None
        if status_code is None
        else {
            "status_code": status_code,
            "request_id": random_hex(32),
            "body": body,
        }
    )
    return {
        "id": f"batch_req_{random_hex(24)}",
        "custom_id": custom_id,
        "response": response,
        "error": error,
    }
