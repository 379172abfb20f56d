"""A Claude Messages response (the JSON a cloud returns for Claude: Bedrock's ``modelOutput``,
Vertex AI's ``response``) as an OpenAI output line, without the anthropic SDK.

The response's fields are the Messages API's (anthropic 2.14 ``types/message.py``:
``content`` blocks, ``stop_reason``, ``usage.input_tokens`` / ``output_tokens``);
thinking blocks are not the answer and are left out, their tokens being inside
``output_tokens`` already.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aeval.batch.providers.lines import answer_line

__all__ = ["FINISH", "claude_answer_line", "is_claude_message"]

# stop_reason -> OpenAI's finish_reason (anthropic 2.14 types/stop_reason.py); Nova's
# stopReason values (Bedrock) share the table.
FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
    "content_filtered": "content_filter",
    "guardrail_intervened": "content_filter",
    "tool_use": "tool_calls",
}


def is_claude_message(output: Mapping[str, Any]) -> bool:
    return output.get("type") == "message" or "stop_reason" in output


def claude_answer_line(custom_id: str, message: Mapping[str, Any], model: str | None) -> str:
    """One Claude message as the output line of request ``custom_id``."""
    raw = message.get("usage")
    usage: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    blocks = message.get("content")
    texts = [
        b.get("text")
        for b in (blocks if isinstance(blocks, list) else ())
        if isinstance(b, Mapping) and b.get("type") == "text"
    ]
    text = "".join(t for t in texts if isinstance(t, str))
    response_id = message.get("id")
    return answer_line(
        custom_id,
        text=text or None,
        model=str(message.get("model") or model or ""),
        finish_reason=FINISH.get(str(message.get("stop_reason")), "stop"),
        prompt_tokens=int(usage.get("input_tokens") or 0),
        completion_tokens=int(usage.get("output_tokens") or 0),
        response_id=response_id if isinstance(response_id, str) else None,
    )
