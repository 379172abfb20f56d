"""Validate a batch input file the way the Batch API does, one line at a time.

Never raises for bad input: every problem is an error record of the batch
(code, message, param, line), at most a thousand of them, as the API reports.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

__all__ = ["Validated", "nonblank_lines", "prompt_tokens", "validate_input"]

_REQUIRED = ("custom_id", "method", "url", "body")
_MAX_REPORTED_ERRORS = 1000


@dataclass(slots=True)
class Validated:
    """What validation learnt about an input file."""

    total: int = 0
    model: str | None = None
    input_tokens: int = 0
    errors: list[dict[str, Any]] = field(default_factory=list)

    def error(self, code: str, message: str, line: int | None, param: str | None = None) -> None:
        if len(self.errors) < _MAX_REPORTED_ERRORS:
            self.errors.append({"code": code, "message": message, "param": param, "line": line})


def prompt_tokens(raw: bytes) -> int:
    # From the request line's length: close enough for usage figures, and free.
    return max(1, (len(raw) - 120) // 4)


def nonblank_lines(handle: IO[bytes]) -> Iterator[tuple[int, bytes]]:
    for number, raw in enumerate(handle, start=1):
        if raw.strip():
            yield number, raw


def validate_input(path: Path, endpoint: str, max_requests: int) -> Validated:
    """Check a batch input file the way the Batch API does; never raises for bad input."""
    result = Validated()
    seen: set[str] = set()
    with path.open("rb") as handle:
        for number, raw in nonblank_lines(handle):
            result.total += 1
            try:
                request = json.loads(raw)
            except ValueError:
                result.error(
                    "invalid_json_line", "This line is not parseable as valid JSON.", number
                )
                continue
            if not isinstance(request, dict):
                result.error("invalid_json_line", "Each line must be a JSON object.", number)
                continue
            missing = [key for key in _REQUIRED if key not in request]
            if missing:
                result.error(
                    "missing_required_parameter",
                    f"Missing required parameter: '{missing[0]}'.",
                    number,
                    missing[0],
                )
                continue
            custom_id, body = request["custom_id"], request["body"]
            if not isinstance(custom_id, str):
                result.error(
                    "invalid_custom_id", "The custom_id must be a string.", number, "custom_id"
                )
            elif custom_id in seen:
                result.error(
                    "duplicate_custom_id",
                    f"The custom_id '{custom_id}' is a duplicate of another request.",
                    number,
                    "custom_id",
                )
            seen.add(str(custom_id))
            if request["method"] != "POST":
                result.error(
                    "invalid_method", "Only the POST method is supported.", number, "method"
                )
            if request["url"] != endpoint:
                result.error(
                    "invalid_url",
                    f"The URL provided for this request does not match the batch endpoint "
                    f"'{endpoint}'.",
                    number,
                    "url",
                )
            model = body.get("model") if isinstance(body, dict) else None
            if not isinstance(model, str) or not model:
                result.error(
                    "missing_required_parameter",
                    "Missing required parameter: 'body.model'.",
                    number,
                    "body.model",
                )
            elif result.model is None:
                result.model = model
            elif model != result.model:
                result.error(
                    "model_mismatch",
                    f"The model '{model}' does not match the model '{result.model}' of the "
                    "other requests: a batch must use a single model.",
                    number,
                    "body.model",
                )
            result.input_tokens += prompt_tokens(raw)
    if result.total == 0:
        result.error("empty_file", "The input file contains no requests.", None)
    if result.total > max_requests:
        result.error(
            "too_many_requests",
            f"The input file contains {result.total} requests; a batch may contain at most "
            f"{max_requests}.",
            None,
        )
    return result
