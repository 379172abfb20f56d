"""The one answer format: every provider's result, written as an OpenAI Batch-API output line.

An adapter whose API answers in another shape (Anthropic's results, Gemini's
responses…) builds its lines with :func:`answer_line` and :func:`error_line`;
what :func:`aeval.scoring.responses.parse_batch_line` reads from them is the same for
every provider, so verification, the store, resume, ``rescore``, reports and the
viewer never learn which provider answered.

Token usage is the provider's own: ``prompt_tokens`` is what it billed as input,
``completion_tokens`` every output token it billed, thinking included (kept apart
in ``completion_tokens_details.reasoning_tokens`` where the API says how many), so
the cost in ``summary.json`` is the provider's figure.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["answer_line", "error_line"]


def _dump(obj: dict[str, Any]) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def answer_line(
    custom_id: str,
    *,
    text: str | None,
    model: str | None = None,
    finish_reason: str | None = None,
    prompt_tokens: int | None = None,
    completion_tokens: int | None = None,
    reasoning_tokens: int | None = None,
    response_id: str | None = None,
) -> str:
    """The output line of a request the model answered (``text`` is what it wrote)."""
    usage: dict[str, Any] = {}
    if prompt_tokens is not None:
        usage["prompt_tokens"] = prompt_tokens
    if completion_tokens is not None:
        usage["completion_tokens"] = completion_tokens
    if prompt_tokens is not None and completion_tokens is not None:
        usage["total_tokens"] = prompt_tokens + completion_tokens
    if reasoning_tokens is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning_tokens}
    body: dict[str, Any] = {
        "object": "chat.completion",
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": finish_reason,
            }
        ],
        "usage": usage,
    }
    if response_id is not None:
        body["id"] = response_id
    return _dump(
        {
            "id": f"resp-{custom_id}",
            "custom_id": custom_id,
            "response": {"status_code": 200, "body": body},
            "error": None,
        }
    )


def error_line(
    custom_id: str, *, code: str, message: str | None = None, status_code: int | None = None
) -> str:
    """The output line of a request that got no answer (``code``: e.g. ``batch_expired``,
    ``batch_cancelled``, ``server_error``, ``invalid_request``)."""
    response = None if status_code is None else {"status_code": status_code, "body": None}
    return _dump(
        {
            "id": f"resp-{custom_id}",
            "custom_id": custom_id,
            "response": response,
            "error": {"code": code, "message": message},
        }
    )
