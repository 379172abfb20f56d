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
- ``extra_logs``: ``correct``, ``undecided`` (Z3 or the budget gave up),
  ``well_formed``, ``prompt_not_found`` and ``bad_label``, each 1.0 or 0.0 and
  present for every query, so their means are logged as rates. OpenRLHF
  turns each into a tensor per sample and merges and splits its experience
  batches key by key, so every sample must carry the same keys, as numbers.

A **label** carries the row's ground truth and declarations: a JSON object
``{"answer": "(assert …)", "constants": "(declare-const …)…"}``, or that
object as a JSON string (a dataset column of strings). The **response** is
the query after its prompt. OpenRLHF cuts a prompt too long for its context
from the left (``prompt_token_ids[-max_prompt_length:]``) but sends the whole
prompt beside the query: the response is then what follows the longest end
of the prompt that the query starts with. A query in which no end of its
prompt is found is scored as no answer (``extra_logs.prompt_not_found``),
never whole: the evaluation's instruction shows an ``<answer>`` example,
which must never be scored. End-of-sequence markers the decoder left at its
end (``<|im_end|>``, ``</s>``, …) are dropped.

A **bad label** (not the object above) is that query's problem, not the
request's: it scores ``RewardScores.wrong`` with ``extra_logs.bad_label`` 1.0,
and the reason is in the reply's ``label_errors`` (one entry per query,
``null`` when the label was good). OpenRLHF retries a 4xx like any error and
then gives the sample no reward at all, which fails its training step.

A malformed **request** is the caller's: a body too large is a 413, one that
is not JSON a 400, a body of the wrong shape a 422, each with one line naming
what and where (``{"error": "query[3]: …"}``); a full server answers 503 with
``Retry-After`` before it reads the body. None of them is a 500.

A body is read whole, under a deadline (408 past it) and with at most
``max_reading`` bodies read at once, *before* it waits for a scoring slot: a
client that sends half a body and waits holds a connection until its deadline,
never a slot. With a token, every route but ``/health`` needs
``Authorization: Bearer TOKEN`` (401); on loopback, a ``Host`` that is not a
loopback name is refused (400: DNS rebinding).
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.to_process
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from aeval.errors import AevalError
from aeval.http_guard import bearer_matches, guard_body, host_allowed, loads, presented_token
from aeval.reward.batcher import MicroBatcher
from aeval.reward.equivalence import EquivalenceReward
from aeval.reward.schedule import Check
from aeval.reward.scores import UNDECIDED, is_correct, well_formed
from aeval.verdicts import CheckResult, Status

__all__ = [
    "REWARD_PATH",
    "BadRequest",
    "ParsedRequest",
    "ServiceLimits",
    "build_app",
    "parse_request",
    "response_of",
]

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

    :param max_concurrency: requests read and scored at once; more wait for a turn.
    :param max_waiting: requests allowed to wait for a turn; beyond, 503 (before
        their body is read).
    :param max_body_bytes: the largest request body; beyond, 413.
    :param max_items: the most queries in one request; beyond, 413.
    :param max_reading: bodies read at once (before scoring); beyond, 503 before reading.
    :param read_timeout_s: a body must arrive whole this long after the request's head; else 408.

    The defaults fit a whole GRPO step in one request: 2,048 samples of the
    benchmark's median prompt (3 KB, sent twice: as the prompt and in the
    query), label (1.5 KB) and a response of 8,192 tokens (about 32 KB) are
    about 80 MB; OpenRLHF's one-sample requests are a few tens of KB.
    """

    max_concurrency: int = 256
    max_waiting: int = 4096
    max_body_bytes: int = 96 * 1024 * 1024
    max_items: int = 4096
    max_reading: int = 512
    read_timeout_s: float = 30.0


# A body larger than this is parsed in a worker process, never on the server's
# event loop (``json.loads`` holds the GIL, so a thread would stall the loop
# just the same); at most two such bodies are read and parsed at once.
LARGE_BODY_BYTES = 1024 * 1024
LARGE_BODIES_AT_ONCE = 2


class BadRequest(Exception):
    """Input the caller must fix: the HTTP status and one line saying what and where."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _json(text: str | bytes, where: str) -> Any:
    try:
        return loads(text)
    except ValueError as err:  # JSONDecodeError, UnicodeDecodeError, too many digits
        raise BadRequest(400, f"{where} is not valid JSON: {err}") from None


def _label(value: Any, index: int) -> tuple[str, str] | str:
    """(truth, constants) from one label, or why it cannot be read."""
    where = f"labels[{index}]"
    if isinstance(value, str):
        try:
            value = _json(value, where)
        except BadRequest as bad:
            return bad.message
    if not isinstance(value, Mapping):
        return (
            f'{where}: expected {{"answer": …, "constants": …}} (an object or its JSON '
            f"string), got {type(value).__name__}"
        )
    truth, constants = value.get("answer"), value.get("constants")
    for key, field_value in (("answer", truth), ("constants", constants)):
        if not isinstance(field_value, str):
            got = "nothing" if field_value is None else type(field_value).__name__
            return f"{where}.{key}: expected a string, got {got}"
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


def response_of(query: str, prompt: str | None) -> tuple[str | None, bool]:
    """The policy's response in ``query``, and whether its prompt was found there.

    The response follows the whole prompt where the query holds it, else the
    longest end of the prompt that the query starts with (a prompt cut from
    the left; a first character the cut garbled may be skipped). ``None``
    when neither is found: the query is not scored as an answer.
    """
    if not prompt:
        return _without_end_markers(query), True
    at = query.find(prompt)
    if at >= 0:
        return _without_end_markers(query[at + len(prompt) :]), True
    kept = _kept_end(prompt, query)
    if kept is None:
        return None, False
    return _without_end_markers(query[kept:]), True


# A cut prompt must leave at least this much of its end in the query to be
# recognised (a chat template's assistant header alone is longer).
_MIN_KEPT_CHARS = 16
# Characters at the start of a query that a cut through a multi-byte character
# (or a tokenizer's leading-space marker) may have garbled.
_GARBLED_LEAD = 4


# What one query's search for its cut prompt may compare, per character of the prompt: a real
# cut is found within a few; a query crafted to match poorly runs out of it and is not found.
_SCAN_PER_PROMPT_CHAR = 8


def _kept_end(prompt: str, query: str) -> int | None:
    """Where the response starts in ``query`` when it begins with an end of ``prompt``.

    The longest end wins: a shorter one would leave part of the prompt (its
    ``<answer>`` example, say) in the response. Every kept end finishes with the
    prompt's last characters, so the places they occur in the query's head are
    the candidates, tried from the longest. Every comparison is a C string
    operation, and all of them together cover at most ``_SCAN_PER_PROMPT_CHAR``
    characters per character of the prompt: past that, the end is not found.
    """
    tail = prompt[-_MIN_KEPT_CHARS:]
    if tail not in query[: len(prompt) + _GARBLED_LEAD]:
        return None  # the prompt's last characters are in every end of it that was kept
    budget = _SCAN_PER_PROMPT_CHAR * (len(prompt) + _MIN_KEPT_CHARS)
    for skip in range(min(_GARBLED_LEAD, len(query)) + 1):
        head = query[skip : skip + len(prompt)]
        at = head.rfind(tail)
        while at >= 0 and budget > 0:
            kept = at + len(tail)
            found, cost = _ends_at(prompt, head, len(prompt) - kept)
            budget -= cost
            if found:
                return skip + kept  # the fewest garbled characters that explain the cut
            at = head.rfind(tail, 0, kept - 1)
        if budget <= 0:
            return None
    return None


def _ends_at(prompt: str, head: str, at: int) -> tuple[bool, int]:
    """Whether ``head`` starts with ``prompt[at:]``, and how many characters that took
    (compared in growing pieces, so a mismatch costs about as much as the match before it)."""
    want, piece, compared = len(prompt) - at, 64, 0
    while True:
        piece = min(piece, want)
        compared += piece
        if not head.startswith(prompt[at : at + piece]):
            return False, compared
        if piece == want:
            return True, compared
        piece *= 4


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


@dataclass(frozen=True, slots=True)
class ParsedRequest:
    """One request's checks, and per query whether its prompt was found and its label's problem.

    A query whose response was not found has a check with no response (scored
    as no answer); one whose label is bad is not checked (its error says why).
    """

    checks: list[Check]
    prompt_found: list[bool]
    label_errors: list[str | None]


def parse_request(raw: bytes, max_items: int) -> ParsedRequest:
    """The checks of one request body.

    :raises BadRequest: anything about the body that the caller must fix (a bad
        label is not: it is that query's verdict).
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
    errors: list[str | None] = []
    for i, (query, prompt, label) in enumerate(zip(queries, prompts, labels, strict=True)):
        read = _label(label, i)
        response, seen = response_of(query, prompt)
        if isinstance(read, str):
            checks.append((response, "", ""))  # never sent to the pool
            errors.append(read)
        else:
            checks.append((response, *read))
            errors.append(None)
        found.append(seen)
    return ParsedRequest(checks, found, errors)


class _State:
    """One server's reward, batcher, admission and counters (all in the server's event loop)."""

    def __init__(self, reward: EquivalenceReward, batcher: MicroBatcher, limits: ServiceLimits):
        self.reward = reward
        self.batcher = batcher
        self.limits = limits
        self.limiter = anyio.CapacityLimiter(limits.max_concurrency)
        self.large = anyio.CapacityLimiter(LARGE_BODIES_AT_ONCE)
        self.reading = 0
        self.waiting = 0
        self.in_flight = 0
        self.peak_in_flight = 0
        self.requests = 0
        self.items = 0
        self.rejected = 0  # 4xx and 503 answers
        self.parsed_in_process = 0

    def stats(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "items": self.items,
            "in_flight": self.in_flight,
            "reading": self.reading,
            "waiting": self.waiting,
            "peak_in_flight": self.peak_in_flight,
            "rejected": self.rejected,
            "chunks": self.batcher.chunks_sent,
            "workers": len(self.reward.worker_pids),
            "max_concurrency": self.limits.max_concurrency,
            "parsed_in_process": self.parsed_in_process,
        }


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def _declared_size(request: Request) -> int | None:
    declared = request.headers.get("content-length")
    return int(declared) if declared is not None and declared.isdigit() else None


async def _read_body(request: Request, limit: int) -> bytes:
    declared = _declared_size(request)
    if declared is not None and declared > limit:
        raise BadRequest(413, f"the request body is {declared} bytes; the limit is {limit}")
    parts: list[bytes] = []
    size = 0
    async for part in request.stream():
        size += len(part)
        if size > limit:
            raise BadRequest(413, f"the request body is over the limit of {limit} bytes")
        parts.append(part)
    return b"".join(parts)


async def _read_and_parse(request: Request, state: _State) -> ParsedRequest:
    """The request's checks; a large body is read under its own limit and parsed in a process."""
    limits = state.limits
    declared = _declared_size(request)
    if declared is not None and declared <= LARGE_BODY_BYTES:
        raw = await _read_body(request, limits.max_body_bytes)
        return await _parse_in_thread(raw, limits.max_items)
    async with state.large:
        raw = await _read_body(request, limits.max_body_bytes)
        if len(raw) <= LARGE_BODY_BYTES:
            return await _parse_in_thread(raw, limits.max_items)
        state.parsed_in_process += 1
        parsed: ParsedRequest | tuple[int, str] = await anyio.to_process.run_sync(
            _parse_or_bad, raw, limits.max_items, cancellable=True
        )
    if isinstance(parsed, tuple):
        raise BadRequest(*parsed)
    return parsed


async def _parse_in_thread(raw: bytes, max_items: int) -> ParsedRequest:
    """:func:`parse_request` off the event loop (its matching is bounded, but not free)."""
    parsed = await anyio.to_thread.run_sync(_parse_or_bad, raw, max_items)
    if isinstance(parsed, tuple):
        raise BadRequest(*parsed)
    return parsed


def _parse_or_bad(raw: bytes, max_items: int) -> ParsedRequest | tuple[int, str]:
    """:func:`parse_request` in a worker process: a bad request comes back as (status, message)."""
    try:
        return parse_request(raw, max_items)
    except BadRequest as bad:
        return bad.status, bad.message


def _bad_label(reason: str) -> CheckResult:
    return CheckResult(Status.BAD_GROUND_TRUTH, reason)


def build_app(reward: EquivalenceReward, batcher: MicroBatcher, limits: ServiceLimits, *,
              token: str | None = None, loopback: bool = False) -> ASGIApp:  # fmt: skip
    """The ASGI app: ``POST /get_reward``, ``GET /health`` and ``GET /stats``.

    :param token: when set, every route but ``/health`` needs ``Authorization: Bearer TOKEN``.
    :param loopback: the server listens on loopback: a ``Host`` that is not loopback is refused.
    """
    state = _State(reward, batcher, limits)

    async def get_reward(request: Request) -> JSONResponse:
        # Reading first, under the body's deadline: a slot is taken only by a body read whole.
        if state.reading >= limits.max_reading:
            state.rejected += 1
            return _full(f"{state.reading} request bodies being read")
        state.reading += 1
        try:
            parsed = await _read_and_parse(request, state)
        except BadRequest as bad:
            state.rejected += 1
            return _error(bad.status, bad.message)
        except ClientDisconnect:
            return _error(400, "the client went away before sending the whole body")
        finally:
            state.reading -= 1
        if state.in_flight >= limits.max_concurrency and state.waiting >= limits.max_waiting:
            state.rejected += 1
            return _full(f"{limits.max_concurrency} requests being scored, {state.waiting} waiting")
        state.waiting += 1
        try:
            await state.limiter.acquire()
        finally:
            state.waiting -= 1
        state.in_flight += 1
        state.peak_in_flight = max(state.peak_in_flight, state.in_flight)
        try:
            todo = [i for i, e in enumerate(parsed.label_errors) if e is None]
            try:
                verdicts = await batcher.check([parsed.checks[i] for i in todo]) if todo else []
            except AevalError as err:  # no verifier can start: the server's fault, said plainly
                return _error(503, f"the reward server cannot verify right now: {err}")
        finally:
            state.in_flight -= 1
            state.limiter.release()
        results = [_bad_label(e) if e is not None else None for e in parsed.label_errors]
        for i, verdict in zip(todo, verdicts, strict=True):
            results[i] = verdict
        state.requests += 1
        state.items += len(parsed.checks)
        rewards, correct, undecided, formed = [], [], [], []
        for (response, _, _), result, error in zip(
            parsed.checks, results, parsed.label_errors, strict=True
        ):
            assert result is not None
            rewards.append(reward.scores.wrong if error else reward.score_of(result, response))
            correct.append(1.0 if is_correct(result, reward.reading) else 0.0)
            undecided.append(1.0 if result.status in UNDECIDED else 0.0)
            formed.append(1.0 if well_formed(response) else 0.0)
        # The same keys for every query, every request: OpenRLHF merges samples key by key.
        logs: dict[str, list[float]] = {
            "correct": correct,
            "undecided": undecided,
            "well_formed": formed,
            "prompt_not_found": [0.0 if f else 1.0 for f in parsed.prompt_found],
            "bad_label": [0.0 if e is None else 1.0 for e in parsed.label_errors],
        }
        return JSONResponse(
            {
                "rewards": rewards,
                "scores": correct,
                "extra_logs": logs,
                "label_errors": parsed.label_errors,
            }
        )

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok", "time": time.time()})

    async def stats(request: Request) -> JSONResponse:
        return JSONResponse(state.stats())

    app = Starlette(
        routes=[
            Route(REWARD_PATH, get_reward, methods=["POST"]),
            Route("/health", health, methods=["GET"]),
            Route("/stats", stats, methods=["GET"]),
        ]
    )

    def refusal(status: int, message: str) -> tuple[int, dict[str, Any]]:
        state.rejected += 1
        return status, {"error": message}

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        if loopback and not host_allowed(scope):
            message = "invalid Host header: a server on loopback answers only to a loopback name"
            await _error(400, message)(scope, receive, send)
            return
        given = presented_token(dict(scope.get("headers") or []))
        if token is not None and scope["path"] != "/health" and not bearer_matches(given, token):
            what = "no token" if given is None else "a wrong token"
            message = f"{what}: send the server's token as 'Authorization: Bearer TOKEN'"
            await _error(401, message, {"WWW-Authenticate": "Bearer"})(scope, receive, send)
            return
        await guard_body(app, scope, receive, send, limit=limits.max_body_bytes,
                         deadline_s=limits.read_timeout_s, refusal=refusal)  # fmt: skip

    return guarded


def _full(why: str) -> JSONResponse:
    message = f"the reward server is full ({why}); retry shortly"
    return _error(503, message, headers={"Retry-After": "1"})
