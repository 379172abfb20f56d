"""The Gemini Developer API's JSON shapes, and their translation to and from chat bodies.

A ``GenerateContentRequest`` (camelCase on the wire; snake_case is accepted
too, as the API's JSON parser does) becomes the chat body the responders
read; a chat completion becomes a ``GenerateContentResponse``; an OpenAI error
becomes a ``google.rpc.Status``. The batch and file resources follow the
fields google-genai reads from them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aeval.local.provider_batches import iso_time
from aeval.local.state import BatchRecord, FileRecord

__all__ = [
    "GEMINI_STATES",
    "batch_resource",
    "chat_body",
    "display_metadata",
    "error_body",
    "file_resource",
    "generate_content_response",
    "line_status",
]

GEMINI_STATES = {
    "validating": "BATCH_STATE_PENDING",
    "in_progress": "BATCH_STATE_RUNNING",
    "finalizing": "BATCH_STATE_RUNNING",
    "cancelling": "BATCH_STATE_RUNNING",
    "completed": "BATCH_STATE_SUCCEEDED",
    "failed": "BATCH_STATE_FAILED",
    "expired": "BATCH_STATE_EXPIRED",
    "cancelled": "BATCH_STATE_CANCELLED",
}
_BATCH_TYPE = "type.googleapis.com/google.ai.generativelanguage.v1beta.GenerateContentBatch"
_STATUS_NAMES = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
                 404: "NOT_FOUND", 409: "ALREADY_EXISTS", 413: "INVALID_ARGUMENT",
                 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}  # fmt: skip
# HTTP status -> the google.rpc.Code a per-request error carries.
_RPC_CODES = {400: 3, 401: 16, 403: 7, 404: 5, 409: 6, 429: 8, 500: 13, 503: 14, 504: 4}
_LINE_CODES = {"batch_expired": 4, "batch_cancelled": 1}


def error_body(status: int, message: str) -> dict[str, Any]:
    """The body of an HTTP error, as the Gemini API writes it."""
    return {
        "error": {
            "code": status,
            "message": message,
            "status": _STATUS_NAMES.get(status, "UNKNOWN"),
        }
    }


def _get(mapping: Mapping[str, Any], camel: str, snake: str) -> Any:
    value = mapping.get(camel)
    return mapping.get(snake) if value is None else value


def _parts_text(content: object) -> str | None:
    if not isinstance(content, Mapping):
        return None
    parts = content.get("parts")
    if not isinstance(parts, list):
        return None
    texts = [p.get("text") for p in parts if isinstance(p, Mapping)]
    return "".join(t for t in texts if isinstance(t, str))


def chat_body(model: str, request: object) -> dict[str, Any] | None:
    """The chat body for one ``GenerateContentRequest``; ``None`` when it is not one
    (no ``contents`` list of text parts)."""
    if not isinstance(request, Mapping):
        return None
    contents = request.get("contents")
    if not isinstance(contents, list) or not contents:
        return None
    messages: list[dict[str, Any]] = []
    system = _parts_text(_get(request, "systemInstruction", "system_instruction"))
    if system:
        messages.append({"role": "system", "content": system})
    for content in contents:
        text = _parts_text(content)
        if text is None:
            return None
        role = "assistant" if content.get("role") == "model" else "user"
        messages.append({"role": role, "content": text})
    body: dict[str, Any] = {"model": model, "messages": messages}
    config = _get(request, "generationConfig", "generation_config")
    if isinstance(config, Mapping):
        for camel, snake, name in (
            ("temperature", "temperature", "temperature"),
            ("topP", "top_p", "top_p"),
            ("maxOutputTokens", "max_output_tokens", "max_tokens"),
            ("seed", "seed", "seed"),
            ("stopSequences", "stop_sequences", "stop"),
        ):
            value = _get(config, camel, snake)
            if value is not None:
                body[name] = value
    return body


def wants_thoughts(request: object) -> bool:
    """Whether a request asks for thought summaries (``thinkingConfig.includeThoughts``)."""
    if not isinstance(request, Mapping):
        return False
    config = _get(request, "generationConfig", "generation_config")
    if not isinstance(config, Mapping):
        return False
    thinking = _get(config, "thinkingConfig", "thinking_config")
    return isinstance(thinking, Mapping) and bool(
        _get(thinking, "includeThoughts", "include_thoughts")
    )


def _thinks(model: str) -> bool:
    # The 2.5 and later models think by default, and bill their thoughts as output.
    name = model.removeprefix("models/")
    return not name.startswith(("gemini-1", "gemini-2.0"))


def generate_content_response(
    completion: Mapping[str, Any], model: str, *, thoughts: bool
) -> dict[str, Any]:
    """A ``GenerateContentResponse`` for a chat completion (the local model's answer).

    A thinking model reports thought tokens in ``usageMetadata``; with
    ``thoughts`` (the request asked for them) the answer is preceded by a
    thought-summary part marked ``"thought": true``, as the API sends it.
    """
    choice = (completion.get("choices") or [{}])[0]
    text = (choice.get("message") or {}).get("content") or ""
    usage = completion.get("usage") or {}
    prompt = int(usage.get("prompt_tokens", 0))
    answer = int(usage.get("completion_tokens", 0))
    thought_tokens = max(1, answer // 3) if _thinks(model) else 0
    parts: list[dict[str, Any]] = []
    if thoughts and thought_tokens:
        parts.append({"text": "**Weighing the loop bounds**\n\nI look for the worst case.",
                      "thought": True})  # fmt: skip
    parts.append({"text": text})
    usage_metadata: dict[str, Any] = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": answer,
        "totalTokenCount": prompt + answer + thought_tokens,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": prompt}],
    }
    if thought_tokens:
        usage_metadata["thoughtsTokenCount"] = thought_tokens
    finish = "MAX_TOKENS" if choice.get("finish_reason") == "length" else "STOP"
    return {
        "candidates": [
            {"content": {"parts": parts, "role": "model"}, "finishReason": finish, "index": 0}
        ],
        "usageMetadata": usage_metadata,
        "modelVersion": model.removeprefix("models/"),
        "responseId": str(completion.get("id", "")),
    }


def line_status(line: Mapping[str, Any]) -> dict[str, Any]:
    """The ``google.rpc.Status`` of one failed request (an OpenAI error-file line)."""
    response = line.get("response") or {}
    error = line.get("error")
    if response:
        status = int(response.get("status_code", 500))
        body = response.get("body") or {}
        message = str(((body.get("error") or {}) if isinstance(body, Mapping) else {}).get(
            "message", "The request failed."
        ))  # fmt: skip
        return {"code": _RPC_CODES.get(status, 13), "message": message}
    error = error if isinstance(error, Mapping) else {}
    return {
        "code": _LINE_CODES.get(str(error.get("code")), 13),
        "message": str(error.get("message", "The request was not run.")),
    }


def display_metadata(display_name: str | None) -> dict[str, str]:
    """``key=value`` pairs a display name carries (``a=1;b=2``), as batch metadata.

    The local server reads them to learn an aeval batch's trial (the
    synthetic responders sample each trial afresh) and to match faults and
    count batches per job, as it does with OpenAI's metadata.
    """
    pairs: dict[str, str] = {}
    for item in (display_name or "").split(";"):
        key, sep, value = item.partition("=")
        if sep and key.strip():
            pairs[key.strip()] = value
    return pairs


def batch_resource(batch: BatchRecord, output: dict[str, Any] | None) -> dict[str, Any]:
    """A batch as ``batches.get`` returns it (a long-running operation)."""
    name = f"batches/{batch.id}"
    state = GEMINI_STATES.get(batch.status, "BATCH_STATE_UNSPECIFIED")
    end = batch.completed_at or batch.failed_at or batch.expired_at or batch.cancelled_at
    pending = max(0, batch.total - batch.completed - batch.failed)
    metadata: dict[str, Any] = {
        "@type": _BATCH_TYPE,
        "name": name,
        "model": f"models/{batch.extra.get('model', batch.model or '')}",
        "displayName": batch.extra.get("display_name", ""),
        "inputConfig": batch.extra.get("input_config", {}),
        "createTime": iso_time(batch.created_at),
        "updateTime": iso_time(end or batch.in_progress_at or batch.created_at),
        "batchStats": {
            "requestCount": str(batch.total),
            "successfulRequestCount": str(batch.completed),
            "failedRequestCount": str(batch.failed),
            "pendingRequestCount": str(pending),
        },
        "state": state,
    }
    if end is not None:
        metadata["endTime"] = iso_time(end)
    operation: dict[str, Any] = {"name": name, "metadata": metadata, "done": batch.terminal}
    if output is not None:
        metadata["output"] = output
        operation["response"] = {"@type": _BATCH_TYPE + "Output", **output}
    if batch.status == "failed" and batch.errors:
        operation["error"] = {"code": 3, "message": str(batch.errors[0].get("message", ""))}
    return operation


def file_resource(record: FileRecord, base: str, *, generated: bool = False) -> dict[str, Any]:
    """A file as the Files API describes it (``base``: the server's ``…/v1beta``)."""
    name = f"files/{record.id.removeprefix('file-')}"
    body: dict[str, Any] = {
        "name": name,
        "displayName": record.filename,
        "mimeType": "application/jsonl",
        "sizeBytes": str(record.bytes),
        "createTime": iso_time(record.created_at),
        "updateTime": iso_time(record.created_at),
        "expirationTime": iso_time(record.created_at + 48 * 3600),
        "uri": f"{base}/{name}",
        "state": "ACTIVE",
        "source": "GENERATED" if generated else "UPLOADED",
    }
    if generated:
        body["downloadUri"] = f"{base}/{name}:download?alt=media"
    return body
