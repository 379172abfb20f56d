"""Responders: what a local "model" answers to one chat request.

A responder is a pure function of the request (and of the benchmark it was
given): the same request always gets the same reply, so a batch that is
re-run after a server restart, or a test that is replayed, sees identical
answers. Three kinds exist:

- :class:`ReferenceResponder` answers with the ground truth (a perfect model);
- :class:`ReplayResponder` re-serves answers recorded in a batch output file;
- :class:`~aeval.local.synthetic.SyntheticResponder` picks, per request, a seeded *intent* (correct,
  fenced, too strong, no answer, …) and writes an answer that realises it.

Requests are matched to benchmark rows by question text
(:class:`~aeval.local.questions.QuestionIndex`);
a question that matches no row gets a plausible wrong answer, never an error.

The request and reply types live in :mod:`aeval.local.chat`, the matching in
:mod:`aeval.local.questions` and the synthetic responder in
:mod:`aeval.local.synthetic`; import each from there.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Literal

from aeval.errors import InputFileError
from aeval.local.answer_text import plausible_wrong_answer, reasoning, tagged
from aeval.local.chat import (
    ChatRequest,
    Completion,
    HttpFailure,
    Reply,
)
from aeval.local.questions import QuestionIndex

__all__ = ["ReferenceResponder", "ReplayResponder"]


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

    def __len__(self) -> int:
        return len(self._replies)

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
    if status == 200:
        try:
            choice = body["choices"][0]
            content = choice["message"]["content"] or ""
            finish: Literal["stop", "length"] = (
                "length" if choice.get("finish_reason") == "length" else "stop"
            )
        except (KeyError, IndexError, TypeError) as err:
            raise InputFileError(f"{where}: response body has no choices[0].message") from err
        return custom_id, Completion(content, finish)
    error = (body.get("error") if isinstance(body, Mapping) else None) or record.get("error") or {}
    return custom_id, HttpFailure(
        status_code=status or 500,
        message=str(error.get("message", "recorded error")),
        type=str(error.get("type", "server_error")),
        code=error.get("code"),
    )
