"""Claude's Messages API on the clouds (Amazon Bedrock, Vertex AI), without the anthropic SDK:
the body a request carries, and the response read back as an OpenAI output line.

The body is Anthropic's (:func:`aeval.batch.providers.anthropic_spec.request_body`) with
no ``model`` (the job names it) and the cloud's ``anthropic_version`` first: "Anthropic
Claude Messages API" on Bedrock
(https://docs.aws.amazon.com/bedrock/latest/userguide/model-parameters-anthropic-claude-messages.html),
"Batch predictions with Anthropic Claude models" on Vertex AI
(https://cloud.google.com/vertex-ai/generative-ai/docs/partner-models/claude-batch).
Its settings are checked by the Messages API's own rules; an effort level is refused
(neither cloud's body has ``output_config`` outside a beta header).

The response's fields are the Messages API's (anthropic 2.14 ``types/message.py``:
``content`` blocks, ``stop_reason``, ``usage.input_tokens`` / ``output_tokens``);
thinking blocks are not the answer and are left out, their tokens being inside
``output_tokens`` already.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aeval.batch.providers import anthropic_spec
from aeval.batch.providers.lines import answer_line
from aeval.errors import ConfigError
from aeval.model_names import ModelName
from aeval.prompts import GenerationSettings

__all__ = [
    "FINISH",
    "check_cloud_settings",
    "claude_answer_line",
    "cloud_body",
    "is_claude_message",
]


def cloud_body(params: dict[str, Any], anthropic_version: str) -> dict[str, Any]:
    """Anthropic's Messages ``params`` (:func:`~aeval.batch.providers.anthropic_spec.request_body`)
    as a cloud's Claude body: no ``model`` (the job names it), no ``output_config``
    (refused by :func:`check_cloud_settings`, never sent), the cloud's
    ``anthropic_version`` first."""
    body = {k: v for k, v in params.items() if k not in ("model", "output_config")}
    return {"anthropic_version": anthropic_version, **body}


def check_cloud_settings(model: ModelName, gen: GenerationSettings, where: str) -> None:
    """The Messages body's own rules on the cloud ``where`` (the installed anthropic
    SDK's version is not asked: a cloud's body is not the SDK's)."""
    if gen.reasoning_effort is not None:
        raise ConfigError(
            f"{model.qualified}: Claude on {where} takes a thinking budget (@N, at least "
            f"{anthropic_spec.MIN_THINKING_BUDGET}), not an effort level"
        )
    anthropic_spec.check_sampling(model, gen, "Claude")
    anthropic_spec.check_thinking_budget(model, gen, "Claude")


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
