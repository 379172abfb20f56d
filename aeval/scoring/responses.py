"""OpenAI Batch API output and error file lines → :class:`Response` → :class:`Verdict`.

A line's body is a chat completion (``/v1/chat/completions``, the shape every
provider adapter writes, :mod:`aeval.batch.providers.lines`), a text completion
(``/v1/completions``) or a Responses API ``Response`` (``/v1/responses``,
``--endpoint responses``); each is read into the same fields (:func:`_responses_body`
says how a ``Response`` maps).

The same parser reads ``vllm run-batch`` output (one file, successes and errors
in input order; an error line has ``response.status_code`` and an ``error`` that
is a string or vLLM's ``ErrorResponse`` object): docs/providers/direct.md.

Batch files are hostile input: a line may be cut off, not JSON, missing fields
or carrying fields of the wrong type. :func:`parse_batch_line` raises
:class:`~aeval.errors.InputFileError` (naming file and line) only when a line
cannot be attributed to a request at all (not JSON, no ``custom_id``);
anything else odd inside an attributable line becomes ``None`` fields, so the
line is still scored (usually as ``no_answer`` or ``api_error``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from aeval.errors import InputFileError
from aeval.study_reasons import NO_ANSWER
from aeval.verdicts import CheckResult, Status, Verdict

if TYPE_CHECKING:  # score_response only receives a pool; parsing lines never needs one
    from aeval.verify.checker import Checker

__all__ = [
    "Response",
    "api_error_verdict",
    "parse_batch_line",
    "published_unanswered",
    "score_response",
    "verdict_from_check",
    "with_finish_reason",
]


@dataclass(frozen=True, slots=True)
class Response:
    """One line of a batch output or error file, reduced to what scoring needs."""

    custom_id: str
    model: str | None = None
    content: str | None = None  # choices[0].message.content
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None  # every output token billed, reasoning included
    # Of those, the reasoning (thinking) tokens: None where the provider does not say.
    reasoning_tokens: int | None = None
    error_code: str | None = None  # e.g. "batch_expired", or "http_<status>"
    error_message: str | None = None
    status_code: int | None = None

    @property
    def is_error(self) -> bool:
        return self.error_code is not None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _content(message: dict[str, Any]) -> str | None:
    content = message.get("content")
    if isinstance(content, list):  # content parts: keep the text ones, in order
        texts = [p.get("text") for p in content if isinstance(p, dict)]
        joined = "".join(t for t in texts if isinstance(t, str))
        return joined or None
    return _str(content)


def parse_batch_line(line: str | bytes, *, source: str = "<input>", lineno: int = 0) -> Response:
    """Parse one line of a Batch API output or error file.

    :param source: the file name, for error messages.
    :param lineno: the 1-based line number, for error messages.
    :raises InputFileError: the line is not a JSON object or has no ``custom_id``.
    """
    where = f"{source}, line {lineno}"
    if isinstance(line, bytes):
        # Invalid UTF-8 is replaced (U+FFFD) rather than fatal: the answer part
        # of the line then fails verification, the rest is still usable.
        line = line.decode("utf-8", "replace")
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as err:
        raise InputFileError(f"{where}: not valid JSON ({err.msg} at column {err.colno})") from None
    except RecursionError:
        raise InputFileError(f"{where}: JSON nested too deeply") from None
    if not isinstance(obj, dict):
        raise InputFileError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    custom_id = obj.get("custom_id")
    if isinstance(custom_id, int) and not isinstance(custom_id, bool):
        custom_id = str(custom_id)
    if not isinstance(custom_id, str) or not custom_id:
        raise InputFileError(f"{where}: the line has no custom_id, so no dataset row to score")

    error = obj.get("error")
    response = _dict(obj.get("response"))
    status_code = _int(response.get("status_code"))
    body = _dict(response.get("body"))
    model = _str(body.get("model"))
    if error is not None:
        # OpenAI writes {"code", "message"}; vLLM's run-batch writes a string, or its
        # ErrorResponse ({"error": {...}} or, before 0.10, {"object": "error", ...})
        # whose code is the HTTP status as an int. All are the request's failure.
        code, message = _error_fields(error)
        return Response(
            custom_id,
            model=model,
            error_code=code or (f"http_{status_code}" if status_code else "unknown_error"),
            error_message=message,
            status_code=status_code,
        )
    if not response:
        return Response(
            custom_id, error_code="no_response", error_message="neither response nor error"
        )
    if status_code is not None and status_code >= 400:
        body_error = _dict(body.get("error"))
        return Response(
            custom_id,
            model=model,
            error_code=f"http_{status_code}",
            error_message=_str(body_error.get("message")) or _str(body_error.get("code")),
            status_code=status_code,
        )
    if body.get("object") == "response":
        return _responses_body(custom_id, model, body, status_code)
    choices = body.get("choices")
    first = _dict(choices[0]) if isinstance(choices, list) and choices else {}
    usage = _dict(body.get("usage"))
    message = first.get("message")
    # A chat completion's answer is choices[0].message.content; a text completion's
    # (/v1/completions: direct mode's base models, vLLM's run-batch) choices[0].text.
    content = _content(_dict(message)) if message is not None else _str(first.get("text"))
    return Response(
        custom_id,
        model=model,
        content=content,
        finish_reason=_str(first.get("finish_reason")),
        prompt_tokens=_int(usage.get("prompt_tokens")),
        completion_tokens=_int(usage.get("completion_tokens")),
        # openai 3.57 types/completion_usage.py: CompletionTokensDetails.reasoning_tokens,
        # counted inside completion_tokens.
        reasoning_tokens=_int(
            _dict(usage.get("completion_tokens_details")).get("reasoning_tokens")
        ),
        status_code=status_code,
    )


# A Response's status and incomplete_details.reason as a chat finish_reason (openai 3.57
# types/responses/response.py: ResponseStatus, IncompleteDetails.reason). Any other
# incomplete reason (max_messages, steered) is kept as the Response says it.
_INCOMPLETE = {"max_output_tokens": "length", "content_filter": "content_filter"}


def _responses_body(
    custom_id: str, model: str | None, body: dict[str, Any], status_code: int | None
) -> Response:
    """A Responses API ``Response`` (openai 3.57 ``types/responses/response.py``) read into
    the fields a chat completion gives.

    The answer is what ``Response.output_text`` gathers: the ``output_text`` parts of the
    ``message`` items, in order; ``reasoning`` items (the model's working, or its
    summary) and refusal parts are not the answer. ``usage.output_tokens`` counts
    every output token, reasoning included (``output_tokens_details.reasoning_tokens``
    says how many of them). A ``failed`` Response is the request's failure, under its
    ``error.code`` (``server_error``, ``rate_limit_exceeded``… are retryable).
    """
    status = _str(body.get("status"))
    if status == "failed":
        code, message = _error_fields(body.get("error"))
        return Response(
            custom_id,
            model=model,
            error_code=code or "response_failed",
            error_message=message,
            status_code=status_code,
        )
    texts = [
        part.get("text")
        for item in body.get("output") or ()
        if isinstance(item, dict) and item.get("type") == "message"
        for part in item.get("content") or ()
        if isinstance(part, dict) and part.get("type") == "output_text"
    ]
    content = "".join(t for t in texts if isinstance(t, str)) or None
    if status == "incomplete":
        reason = _str(_dict(body.get("incomplete_details")).get("reason"))
        finish = _INCOMPLETE.get(reason or "", reason or "incomplete")
    else:  # completed; in_progress, queued and cancelled carry no finished answer
        finish = "stop" if status in (None, "completed") else status
    usage = _dict(body.get("usage"))
    return Response(
        custom_id,
        model=model,
        content=content,
        finish_reason=finish,
        prompt_tokens=_int(usage.get("input_tokens")),
        completion_tokens=_int(usage.get("output_tokens")),
        reasoning_tokens=_int(_dict(usage.get("output_tokens_details")).get("reasoning_tokens")),
        status_code=status_code,
    )


def _error_fields(error: Any) -> tuple[str | None, str | None]:
    """The (code, message) of a line's ``error`` field, whichever shape it has."""
    if not isinstance(error, dict):
        return None, str(error)[:500] or None
    inner = error.get("error")
    err = inner if isinstance(inner, dict) else error
    code = err.get("code")
    if isinstance(code, int) and not isinstance(code, bool):
        code = f"http_{code}"  # vLLM: the HTTP status, not a code name
    return _str(code), _str(err.get("message"))


# A model that ended on its own: OpenAI's "stop", and Together's "eos" (its end-of-sequence
# token; together types/chat/chat_completion.py). Any other reason is worth naming.
NORMAL_ENDS = (None, "stop", "eos")


def api_error_verdict(
    response: Response, *, model: str, trial: int, tier: str | None = None
) -> Verdict:
    """The ``api_error`` verdict of an error line (an infrastructure failure, not the model's)."""
    reason = response.error_code or "api_error"
    if response.error_message:
        reason += f": {response.error_message}"
    return Verdict(
        model=model,
        trial=trial,
        custom_id=response.custom_id,
        status=Status.API_ERROR,
        reason=reason,
        tier=tier,
    )


def with_finish_reason(check: CheckResult, finish_reason: str | None) -> CheckResult:
    """``check`` with an unusual finish reason named in its reason, where the answer is
    missing or does not parse: "length" explains most cut-off answers, so the verdict
    (and a repair round's feedback, which quotes the reason) says so."""
    if (
        check.status in (Status.NO_ANSWER, Status.PARSE_ERROR)
        and finish_reason not in NORMAL_ENDS
        and "finish_reason" not in check.reason
    ):
        return replace(check, reason=f"{check.reason} (finish_reason={finish_reason})")
    return check


def verdict_from_check(
    response: Response, check: CheckResult, *, model: str, trial: int, tier: str | None = None
) -> Verdict:
    """A verifier result plus who/what: the verdict row of a successful response line."""
    check = with_finish_reason(check, response.finish_reason)
    return Verdict.from_check(
        check,
        model=model,
        trial=trial,
        custom_id=response.custom_id,
        tier=tier,
        finish_reason=response.finish_reason,
        prompt_tokens=response.prompt_tokens,
        completion_tokens=response.completion_tokens,
        reasoning_tokens=response.reasoning_tokens,
    )


async def score_response(
    pool: Checker,
    response: Response,
    *,
    truth: str,
    constants: str,
    trial: int,
    model: str | None = None,
    tier: str | None = None,
) -> Verdict:
    """Score one batch line: ``api_error`` for error lines, else the pool's verdict.

    When the pool was made with ``published=True``, the verdict also carries the
    published reading (an error line has no content: incorrect, as the study
    counted it).

    :param model: the model name for the verdict; default: the response body's
        ``model``, else ``"unknown"``.
    """
    who = model or response.model or "unknown"
    if response.is_error:
        verdict = api_error_verdict(response, model=who, trial=trial, tier=tier)
        return replace(verdict, **published_unanswered()) if pool.published else verdict
    if not pool.published:
        check = await pool.check(response.content, truth, constants)
        return verdict_from_check(response, check, model=who, trial=trial, tier=tier)
    check, published = await pool.check_both(response.content, truth, constants)
    verdict = verdict_from_check(response, check, model=who, trial=trial, tier=tier)
    return replace(verdict, correct_published=published.correct, published_reason=published.reason)


def published_unanswered() -> dict[str, Any]:
    """The published-reading fields of a request that got no answer (error or missing line)."""
    return {"correct_published": False, "published_reason": NO_ANSWER}
