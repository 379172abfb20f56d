"""One pass over a batch's input that answers its requests into the output and error files.

The pass runs in worker-thread steps, a chunk of requests at a time, and never
holds the batch in memory. Requests are answered in a shuffled order (seeded
by the batch id), so output lines do not follow the input's order and a
partial result is a scattered subset, as with the real API.
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Mapping
from pathlib import Path

from aeval.local.batch_input import nonblank_lines, prompt_tokens
from aeval.local.chat import ChatRequest, Completion, Responder
from aeval.local.state import BatchRecord
from aeval.local.wire import batch_line, chat_completion, failure_body

__all__ = ["AnsweringPass", "trial_of"]

_WINDOW = 2048  # input lines the answer order is shuffled across


def trial_of(metadata: Mapping[str, str] | None) -> int | None:
    """The trial an aeval batch belongs to, from its ``aeval_shard`` metadata (``model|tN|sK``).

    The real API samples each trial's answers afresh; the synthetic responders
    need the trial to do the same. ``None`` for a batch that is not aeval's.
    """
    parts = (metadata or {}).get("aeval_shard", "").rsplit("|", 2)
    if len(parts) == 3 and parts[1].startswith("t") and parts[1][1:].isdigit():
        return int(parts[1][1:])
    return None


class AnsweringPass:
    """One pass over a batch's input that answers requests, in worker-thread steps."""

    def __init__(
        self,
        batch: BatchRecord,
        input_path: Path,
        out_path: Path,
        err_path: Path,
        responder: Responder,
    ) -> None:
        self._batch_id = batch.id
        self._model = batch.model or ""
        self._trial = trial_of(batch.metadata)
        self._responder = responder
        self._input = input_path.open("rb")
        self._lines = nonblank_lines(self._input)
        self._out = out_path.open("w", encoding="utf-8")
        self._err = err_path.open("w", encoding="utf-8")
        self._rng = random.Random(batch.id)
        self._pending: list[bytes] = []
        self._input_done = False
        self.exhausted = False
        self.completed = 0
        self.failed = 0
        self.error_lines = 0  # failed requests plus those abandoned at the end
        self.output_tokens = 0

    def step(self, n: int) -> None:
        """Answer up to ``n`` more requests (call from a worker thread).

        Requests are drawn at random from a window of the next ``_WINDOW``
        input lines, so the answer order, and any partial result, is scattered.
        """
        pending = self._pending
        if not self._input_done:
            want = max(_WINDOW, n) - len(pending)
            for _, raw in self._lines:
                pending.append(raw)
                want -= 1
                if want <= 0:
                    break
            else:
                self._input_done = True
            self._rng.shuffle(pending)
        chunk = pending[-n:]
        del pending[-n:]
        self.exhausted = self._input_done and not pending
        out, err = self._out, self._err
        for raw in chunk:
            request = json.loads(raw)
            body = request["body"]
            # A Message Batch's line names the dataset row apart from its tagged custom id.
            row_id = request.get("row_id", request["custom_id"])
            reply = self._responder.respond(ChatRequest(self._model, body, row_id, self._trial))
            if isinstance(reply, Completion):
                completion = chat_completion(self._model, reply, prompt_tokens(raw))
                self.output_tokens += completion["usage"]["completion_tokens"]
                line = batch_line(request["custom_id"], status_code=200, body=completion)
                out.write(json.dumps(line))
                out.write("\n")
                self.completed += 1
            else:
                line = batch_line(
                    request["custom_id"], status_code=reply.status_code, body=failure_body(reply)
                )
                err.write(json.dumps(line))
                err.write("\n")
                self.failed += 1
                self.error_lines += 1

    def abandon(self, code: str, message: str) -> None:
        """Report every request not answered yet as ``code`` in the error file."""
        error = {"code": code, "message": message}
        rest = itertools.chain(self._pending, (raw for _, raw in self._lines))
        for raw in rest:
            custom_id = json.loads(raw).get("custom_id")
            self._err.write(json.dumps(batch_line(custom_id, error=error)))
            self._err.write("\n")
            self.error_lines += 1
        self._pending = []
        self.exhausted = True

    def close(self) -> None:
        for handle in (self._input, self._out, self._err):
            handle.close()
