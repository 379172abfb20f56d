"""The reward as an HTTP service: OpenRLHF's remote reward protocol, on starlette.

OpenRLHF (``--reward.remote_url http://HOST:PORT/get_reward``) posts
``{"query": [...], "prompts": [...], "labels": [...]}``: each query is the
prompt followed by the policy's response, as its tokenizer decoded them
(special tokens included), each label the dataset's label column for that
row. It reads back ``{"rewards": [...], "scores": [...], "extra_logs": {...}}``,
one value per query: ``rewards`` feed the advantage, ``scores`` (in [0, 1])
drive its dynamic filtering, and each ``extra_logs`` entry is logged.

What this service puts there, per query:

- ``rewards``: the :class:`~aeval.reward.scores.RewardScores` score of the verdict;
- ``scores``: 1.0 when the answer is correct under the reward's reading, else 0.0;
- ``extra_logs``: ``correct``, ``undecided`` (Z3 or the budget gave up) and
  ``well_formed``, each 1.0 or 0.0, so their means are logged as rates.

A **label** carries the row's ground truth and declarations: a JSON object
``{"answer": "(assert …)", "constants": "(declare-const …)…"}``, or that
object as a JSON string (a dataset column of strings). The **response** is
the query after its prompt; a query that does not contain its prompt is
scored whole (``extra_logs.prompt_not_found``). End-of-sequence markers the
decoder left at its end (``<|im_end|>``, ``</s>``, …) are dropped.

Bad input is the caller's: a body too large is a 413, one that is not JSON a
400, fields of the wrong shape a 422, each with one line naming what and
where (``{"error": "labels[3]: …"}``); a full server answers 503 with
``Retry-After``. None of them is a 500.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from aeval.errors import AevalError
from aeval.reward.batcher import MicroBatcher
from aeval.reward.equivalence import EquivalenceReward
from aeval.reward.schedule import Check
from aeval.reward.scores import UNDECIDED, is_correct, well_formed

__all__ = ["REWARD_PATH", "BadRequest", "ServiceLimits", "build_app", "parse_request"]

REWARD_PATH = "/get_reward"  # OpenRLHF's reference server's path
# Special tokens a decoder with skip_special_tokens=False leaves after the answer.
END_MARKERS = (
    "<|im_end|>",
    "<|endoftext|>",
    "<|eot_id|>",
    "<|end_of_text|>",
    "</s>",
    "<eos>",
    "<end_of_turn>",
    "<|end|>",
    "<｜end▁of▁sentence｜>",
)
_REVERSED_END = re.compile("(?:\\s|" + "|".join(re.escape(m[::-1]) for m in END_MARKERS) + ")+")


@dataclass(frozen=True, slots=True)
class ServiceLimits:
    """What one server accepts.

    :param max_concurrency: requests scored at once; more wait for a turn.
    :param max_waiting: requests allowed to wait for a turn; beyond, 503.
    :param max_body_bytes: the largest request body; beyond, 413.
    :param max_items: the most queries in one request; beyond, 413.
    """

    max_concurrency: int = 256
    max_waiting: int = 4096
    max_body_bytes: int = 256 * 1024 * 1024
    max_items: int = 65536


class BadRequest(Exception):
    """Input the caller must fix: the HTTP status and one line saying what and where."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _json(text: str | bytes, where: str) -> Any:
    try:
        return json.loads(text)
    except RecursionError:
        raise BadRequest(400, f"{where} is nested too deeply to read") from None
    except ValueError as err:  # JSONDecodeError, UnicodeDecodeError, too many digits
        raise BadRequest(400, f"{where} is not valid JSON: {err}") from None


def _label(value: Any, index: int) -> tuple[str, str]:
    where = f"labels[{index}]"
    if isinstance(value, str):
        value = _json(value, where)
    if not isinstance(value, Mapping):
        raise BadRequest(
            422,
            f'{where}: expected {{"answer": …, "constants": …}} (an object or its JSON '
            f"string), got {type(value).__name__}",
        )
    truth, constants = value.get("answer"), value.get("constants")
    for key, field_value in (("answer", truth), ("constants", constants)):
        if not isinstance(field_value, str):
            got = "nothing" if field_value is None else type(field_value).__name__
            raise BadRequest(422, f"{where}.{key}: expected a string, got {got}")
    return truth, constants  # type: ignore[return-value]  # both checked above


def _strings(body: Mapping[str, Any], key: str, size: int | None) -> list[str]:
    values = body[key]
    if not isinstance(values, list):
        raise BadRequest(422, f"{key}: expected a list, got {type(values).__name__}")
    if size is not None and len(values) != size:
        raise BadRequest(422, f"{key}: {len(values)} values for {size} queries")
    for i, v in enumerate(values):
        if not isinstance(v, str):
            raise BadRequest(422, f"{key}[{i}]: expected a string, got {type(v).__name__}")
    return values


def response_of(query: str, prompt: str | None) -> tuple[str, bool]:
    """The policy's response in ``query``, and whether its prompt was found there."""
    found = True
    if prompt:
        at = query.find(prompt)
        if at >= 0:
            query = query[at + len(prompt) :]
        else:
            found = False
    return _without_end_markers(query), found


def _without_end_markers(text: str) -> str:
    """``text`` less the end-of-sequence markers (and the space around them) at its end.

    Text with no marker at its end is returned unchanged. Linear in the length
    of the text, whatever it holds: the reversed text is matched from its start
    (a pattern anchored at the end would be tried from every position).
    """
    tail = _REVERSED_END.match(text[::-1])
    if tail is None or not tail.group().strip():
        return text
    return text[: len(text) - tail.end()]


def parse_request(raw: bytes, max_items: int) -> tuple[list[Check], list[bool]]:
    """The checks of one request body, and for each whether its prompt was found.

    :raises BadRequest: anything about the body that the caller must fix.
    """
    body = _json(raw, "the request body")
    if not isinstance(body, dict):
        raise BadRequest(422, f"the request body must be a JSON object, got {type(body).__name__}")
    for key in ("query", "labels"):
        if key not in body:
            raise BadRequest(422, f'the request body has no "{key}" list')
    queries = _strings(body, "query", None)
    if len(queries) > max_items:
        raise BadRequest(413, f"{len(queries)} queries in one request; the limit is {max_items}")
    prompts: list[str | None] = [None] * len(queries)
    if body.get("prompts") is not None:
        prompts = list(_strings(body, "prompts", len(queries)))
    labels = body["labels"]
    if not isinstance(labels, list):
        raise BadRequest(422, f"labels: expected a list, got {type(labels).__name__}")
    if len(labels) != len(queries):
        raise BadRequest(422, f"labels: {len(labels)} values for {len(queries)} queries")
    checks: list[Check] = []
    found: list[bool] = []
    for i, (query, prompt, label) in enumerate(zip(queries, prompts, labels, strict=True)):
        truth, constants = _label(label, i)
        response, seen = response_of(query, prompt)
        checks.append((response, truth, constants))
        found.append(seen)
    return checks, found


class _State:
    """One server's reward, batcher, admission and counters (all in the server's event loop)."""

    def __init__(self, reward: EquivalenceReward, batcher: MicroBatcher, limits: ServiceLimits):
        self.reward = reward
        self.batcher = batcher
        self.limits = limits
        self.limiter = anyio.CapacityLimiter(limits.max_concurrency)
        self.waiting = 0
        self.in_flight = 0
        self.peak_in_flight = 0
        self.requests = 0
        self.items = 0
        self.rejected = 0  # 4xx and 503 answers

    def stats(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "items": self.items,
            "in_flight": self.in_flight,
            "waiting": self.waiting,
            "peak_in_flight": self.peak_in_flight,
            "rejected": self.rejected,
            "chunks": self.batcher.chunks_sent,
            "workers": len(self.reward.worker_pids),
            "max_concurrency": self.limits.max_concurrency,
        }


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BadRequest(413, f"the request body is {int(declared)} bytes; the limit is {limit}")
    parts: list[bytes] = []
    size = 0
    async for part in request.stream():
        size += len(part)
        if size > limit:
            raise BadRequest(413, f"the request body is over the limit of {limit} bytes")
        parts.append(part)
    return b"".join(parts)


def build_app(reward: EquivalenceReward, batcher: MicroBatcher, limits: ServiceLimits) -> Starlette:
    """The ASGI app: ``POST /get_reward``, ``GET /health`` and ``GET /stats``."""
    state = _State(reward, batcher, limits)

    async def get_reward(request: Request) -> JSONResponse:
        try:
            raw = await _read_body(request, limits.max_body_bytes)
            checks, found = parse_request(raw, limits.max_items)
        except BadRequest as bad:
            state.rejected += 1
            return _error(bad.status, bad.message)
        except ClientDisconnect:
            return _error(400, "the client went away before sending the whole body")
        if state.in_flight >= limits.max_concurrency and state.waiting >= limits.max_waiting:
            state.rejected += 1
            return _error(
                503,
                f"the reward server is full ({limits.max_concurrency} requests being scored, "
                f"{state.waiting} waiting); retry shortly",
                headers={"Retry-After": "1"},
            )
        state.waiting += 1
        try:
            await state.limiter.acquire()
        finally:
            state.waiting -= 1
        state.in_flight += 1
        state.peak_in_flight = max(state.peak_in_flight, state.in_flight)
        try:
            results = await batcher.check(checks)
        except AevalError as err:  # no verifier can start: the server's fault, said plainly
            return _error(503, f"the reward server cannot verify right now: {err}")
        finally:
            state.in_flight -= 1
            state.limiter.release()
        state.requests += 1
        state.items += len(checks)
        rewards, correct, undecided, formed = [], [], [], []
        for (response, _, _), result in zip(checks, results, strict=True):
            rewards.append(reward.score_of(result, response))
            correct.append(1.0 if is_correct(result, reward.reading) else 0.0)
            undecided.append(1.0 if result.status in UNDECIDED else 0.0)
            formed.append(1.0 if well_formed(response) else 0.0)
        logs: dict[str, list[float]] = {
            "correct": correct,
            "undecided": undecided,
            "well_formed": formed,
        }
        if not all(found):
            logs["prompt_not_found"] = [0.0 if f else 1.0 for f in found]
        return JSONResponse({"rewards": rewards, "scores": correct, "extra_logs": logs})

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok", "time": time.time()})

    async def stats(request: Request) -> JSONResponse:
        return JSONResponse(state.stats())

    return Starlette(
        routes=[
            Route(REWARD_PATH, get_reward, methods=["POST"]),
            Route("/health", health, methods=["GET"]),
            Route("/stats", stats, methods=["GET"]),
        ]
    )
