"""Direct mode's answer files: one per (model, trial), in the Batch API output format.

Every answer (or failure) of a direct request is appended to its job's answer
file (:meth:`aeval.store.RunLayout.direct_answers`) and flushed **before** it is
scored, as one line in the format the Batch API's output and error files use::

    {"id": "direct-…", "custom_id": "17",
     "response": {"status_code": 200, "request_id": "req_…", "body": {…completion…}},
     "error": null}

so ``rescore``, ``report``, ``status`` and the verifier read one format
(:func:`aeval.scoring.responses.parse_batch_line`), whichever way the answer came. A
request is sent again on resume only when its file has no line for it. A line
torn by a crash (no trailing newline) is cut off when the file is opened: its
request simply counts as not answered.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from aeval.errors import InputFileError, RunDirError
from aeval.scoring.responses import Response, parse_batch_line

__all__ = ["AnswerFile", "answer_line"]


def _line(obj: dict[str, Any]) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n"


def answer_line(
    custom_id: str, status_code: int, request_id: str | None, body: dict[str, Any] | None
) -> str:
    """The output line of an HTTP answer (a 4xx keeps the server's error body)."""
    return _line(
        {
            "id": f"direct-{uuid.uuid4().hex[:24]}",
            "custom_id": custom_id,
            "response": {"status_code": status_code, "request_id": request_id, "body": body},
            "error": None,
        }
    )


class AnswerFile:
    """One job's answer file, opened for appending after what it already holds.

    :attr answered: the custom_ids with a line (their requests are never sent again).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.answered: set[str] = set()
        self._fh: IO[str] | None = None

    def open(self) -> Iterator[Response]:
        """Read the lines already there (cutting a torn last one), then open for
        appending. Yields each line's response, first line per request only."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            with self.path.open("rb+") as fh:
                end = 0
                for lineno, raw in enumerate(fh, start=1):
                    if not raw.endswith(b"\n"):
                        break  # torn by a crash mid-write: its request is sent again
                    end += len(raw)
                    try:
                        response = parse_batch_line(raw, source=str(self.path), lineno=lineno)
                    except InputFileError as err:
                        raise RunDirError(f"{err}: the answer file was edited or damaged") from err
                    if response.custom_id not in self.answered:
                        self.answered.add(response.custom_id)
                        yield response
                fh.truncate(end)
        self._fh = self.path.open("a", encoding="utf-8")

    def append(self, custom_id: str, line: str) -> Response:
        """Write and flush one line (before anything else is done with it); its response."""
        if self._fh is None:
            raise RunDirError(f"{self.path}: the answer file is not open")
        self._fh.write(line)
        # Flushed to the OS at once, as verdicts.jsonl is: a killed process loses
        # nothing it wrote; only a crash of the machine itself could.
        self._fh.flush()
        self.answered.add(custom_id)
        return parse_batch_line(line, source=str(self.path))

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
