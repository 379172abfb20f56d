"""What a local "model" answers to one chat request, and how its answers read.

A responder is a pure function of the request (and of the benchmark it was given), so a
batch re-run after a server restart, or a replayed test, sees identical answers:
:class:`ReferenceResponder` answers with the ground truth, :class:`ReplayResponder`
re-serves a recorded batch output file, and :mod:`aeval.local.synthetic` writes a seeded
mix of right and wrong answers. A question that matches no benchmark row
(:class:`~aeval.local.questions.QuestionIndex`) gets a plausible wrong answer, never an error.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from aeval.errors import InputFileError
from aeval.local.chat import ChatRequest, Completion, HttpFailure, Reply
from aeval.local.questions import QuestionIndex
from aeval.scoring.responses import parse_batch_line

__all__ = ["ReferenceResponder", "ReplayResponder", "plausible_wrong_answer", "reasoning", "tagged"]

_EXAMPLE = re.compile(r"^N=\d+: (\(assert .*\))\s*$", re.MULTILINE)


def tagged(think: str, answer: str) -> str:
    return f"<think>{think}</think><answer>{answer}</answer>"


def reasoning(text: str) -> str:
    size = re.findall(r"N=(\d+)\?", text)
    target = f"N={size[-1]}" if size else "the requested size"
    return (
        "The examples grow with the input size; I extend the pattern of the largest "
        f"example to {target}, keeping every constraint the worst-case path needs."
    )


def plausible_wrong_answer(text: str) -> str:
    """What a model would write for a question we do not know: the largest example of the
    question repeated (the classic wrong answer: it ignores the new size)."""
    examples = _EXAMPLE.findall(text)
    body = examples[-1] if examples else "(assert (and (>= in 0) (< in 10)))"
    return tagged(reasoning(text), body)


class ReferenceResponder:
    """A perfect model: every known question gets its ground truth."""

    def __init__(self, index: QuestionIndex) -> None:
        self._index = index

    def respond(self, request: ChatRequest) -> Reply:
        text = request.text
        row = self._index.match(text, request.custom_id)
        if row is None:
            return Completion(plausible_wrong_answer(text))
        return Completion(tagged(reasoning(text), row.answer))


class ReplayResponder:
    """Re-serves a recorded batch output file, line by line, by ``custom_id``.

    Successful lines are replayed with their content and ``finish_reason``;
    recorded HTTP errors are replayed as errors. A ``custom_id`` the recording
    does not have gets a plausible wrong answer.
    """

    def __init__(self, replies: Mapping[str, Reply]) -> None:
        self._replies = dict(replies)

    @classmethod
    def from_files(cls, paths: Iterable[Path]) -> ReplayResponder:
        replies: dict[str, Reply] = {}
        for path in paths:
            try:
                handle = path.open(encoding="utf-8")
            except OSError as err:
                raise InputFileError(f"replay file {path}: cannot read it ({err})") from err
            with handle:
                for number, line in enumerate(handle, start=1):
                    if line.strip():
                        custom_id, reply = _recorded_reply(line, path, number)
                        replies[custom_id] = reply
        return cls(replies)

    def respond(self, request: ChatRequest) -> Reply:
        reply = self._replies.get(request.custom_id or "")
        return reply if reply is not None else Completion(plausible_wrong_answer(request.text))


def _recorded_reply(line: str, path: Path, number: int) -> tuple[str, Reply]:
    where = f"replay file {path}, line {number}"
    try:
        record = json.loads(line)
        custom_id = str(record["custom_id"])
        response = record.get("response") or {}
        status = int(response.get("status_code", 0))
        body = response.get("body") or {}
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise InputFileError(f"{where}: not a batch output line ({err})") from err
    if status == 200:  # a chat completion, or a Responses API Response: read as scoring does
        read = parse_batch_line(line, source=f"replay file {path}", lineno=number)
        if read.content is None and read.finish_reason is None:
            raise InputFileError(f"{where}: response body has no choices[0].message or output")
        return custom_id, Completion(read.content or "", "length" if read.finish_reason ==
                                     "length" else "stop")  # fmt: skip
    error = (body.get("error") if isinstance(body, Mapping) else None) or record.get("error") or {}
    return custom_id, HttpFailure(
        status_code=status or 500,
        message=str(error.get("message", "recorded error")),
        type=str(error.get("type", "server_error")),
        code=error.get("code"),
    )
