"""What a repair-round run must hold, checked from its run directory alone (the engine
tests of #44 share these).

Every check reads the files as written (requests/, outputs/, verdicts.jsonl) with
``json`` and the counterexamples with Z3 itself, not with the code that produced them:
a round-r+1 request must carry the round-r answer byte for byte, and a counterexample
it names must make the ground truth and the answer disagree, on the side it says.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import polars as pl
import uvicorn
import z3
from engine_helpers import SPECS
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from aeval.local import ModelSpec
from aeval.local.synthetic import Intent, default_failure_mix
from aeval.store.names import shard_stem
from aeval.uvicorn_thread import UvicornThread, listening_socket

_HOP = {"host", "content-length", "transfer-encoding", "connection", "content-encoding"}

# The engine tests' synthetic models without their transient HTTP 500s: a direct request
# retried after one would count twice at the server, which the "sent once" checks forbid.
NO_500 = {
    name: ModelSpec(
        "synthetic",
        seed=spec.seed,
        accuracy=spec.accuracy,
        failure_mix={i: w for i, w in default_failure_mix().items() if i is not Intent.HTTP_ERROR},
    )
    for name, spec in SPECS.items()
}

REPAIRABLE = {
    "not_equivalent",
    "no_answer",
    "parse_error",
    "unknown_symbol",
    "forbidden_command",
    "too_large",
}
_ROUND_ID = re.compile(r"^(.+)_r([2-9][0-9]*)$")
_COUNTEREXAMPLE = re.compile(
    r"A counterexample: with (.*), (the correct constraint holds|yours holds)"
)
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


def split(cid: str) -> tuple[str, int]:
    match = _ROUND_ID.match(cid)
    return (cid, 1) if match is None else (match[1], int(match[2]))


def verdict_rounds(run_dir: Path) -> dict[tuple[str, int, str], dict[int, dict[str, Any]]]:
    """(model, trial, item) -> round -> verdict record, from verdicts.jsonl."""
    out: dict[tuple[str, int, str], dict[int, dict[str, Any]]] = defaultdict(dict)
    for line in (run_dir / "verdicts.jsonl").read_text().splitlines():
        rec = json.loads(line)
        item, rnd = split(rec["custom_id"])
        assert rec["round"] == rnd, rec
        key = (rec["model"], rec["trial"], item)
        assert rnd not in out[key], f"round {rnd} of {key} has two verdicts"
        out[key][rnd] = rec
    return out


def check_round_structure(
    run_dir: Path, rounds: int, items: int, jobs: int
) -> dict[tuple[str, int, str], dict[int, dict[str, Any]]]:
    """Rounds 1..k per item, a later round exactly when the one before was repairable."""
    got = verdict_rounds(run_dir)
    assert len(got) == items * jobs
    for key, by_round in got.items():
        have = sorted(by_round)
        assert have == list(range(1, len(have) + 1)), (key, have)
        for rnd in have:
            wrong = by_round[rnd]["status"] in REPAIRABLE
            if rnd < have[-1]:
                assert wrong, f"{key}: round {rnd + 1} asked after {by_round[rnd]['status']}"
            else:
                assert not wrong or rnd == rounds, f"{key}: wrong in round {rnd}, not asked again"
    return got


def request_lines(run_dir: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """(request file's job stem, custom_id) -> body, every request file."""
    out = {}
    for path in (run_dir / "requests").glob("*.jsonl"):
        job = path.stem.rsplit("-s", 1)[0]
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            out[(job, rec["custom_id"])] = rec["body"]
    return out


def answers(run_dir: Path) -> dict[tuple[str, str], str]:
    """(job stem, custom_id) -> the answer text exactly as the output line holds it."""
    out: dict[tuple[str, str], str] = {}
    for path in (run_dir / "outputs").glob("*.jsonl"):
        if ".error." in path.name:
            continue
        job = re.sub(r"(-s\d+-a\d+\.output|-direct)$", "", path.stem.removesuffix(".jsonl"))
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            body = (rec.get("response") or {}).get("body") or {}
            if (rec.get("response") or {}).get("status_code") != 200:
                continue
            if "choices" in body:
                content = body["choices"][0]["message"]["content"]
            else:  # a Responses API body
                content = "".join(
                    part["text"]
                    for item in body["output"]
                    if item.get("type") == "message"
                    for part in item["content"]
                    if part.get("type") == "output_text"
                )
            out.setdefault((job, rec["custom_id"]), content)
    return out


def conversation(body: dict[str, Any]) -> list[tuple[str, str]]:
    """A request body's turns as (role, text), in whichever provider's shape it is."""
    if "contents" in body:  # Gemini
        return [
            (
                "assistant" if c["role"] == "model" else c["role"],
                "".join(p["text"] for p in c["parts"]),
            )
            for c in body["contents"]
        ]
    turns = body.get("messages", body.get("input"))
    if isinstance(turns, str):
        return [("user", turns)]
    return [(m["role"], m["content"]) for m in turns if m["role"] != "system"]


def _z3_value(value: str) -> str:
    return f"(- {value[1:]})" if re.fullmatch(r"-\d+", value) else value


def check_counterexample(feedback: str, truth: str, constants: str, answer_text: str) -> bool:
    """The counterexample a feedback message names, evaluated with Z3: the truth and the
    answer take different values there, the one the message says holds is true. False
    when the message names none."""
    match = _COUNTEREXAMPLE.search(feedback)
    if match is None:
        return False
    values = dict(pair.split(" = ", 1) for pair in match[1].split(", "))
    (answer,) = _ANSWER.findall(answer_text)[-1:]
    pins = "".join(f"(assert (= {n} {_z3_value(v)}))" for n, v in values.items())
    solver = z3.Solver()
    solver.add(z3.parse_smt2_string(constants + pins))
    assert solver.check() == z3.sat
    model = solver.model()

    def holds(formula: str) -> bool:
        parsed = z3.parse_smt2_string(constants + formula)
        value = model.eval(z3.And(*parsed), model_completion=True)
        assert z3.is_true(value) or z3.is_false(value), value
        return z3.is_true(value)

    truth_holds, answer_holds = holds(truth), holds(answer)
    assert truth_holds != answer_holds, f"no disagreement at {values}"
    assert truth_holds == (match[2] == "the correct constraint holds"), feedback
    return True


@contextmanager
def body_recording_proxy(target: str, seen: dict[tuple[str, str], dict[str, Any]]) -> Iterator[str]:
    """A loopback proxy to ``target`` (a server root) keeping the JSON body of every
    direct request under (job stem, custom_id), as it went over the wire; yields its root
    URL (trial 1: the job stem is the model's first trial's)."""

    async def forward(request: Request) -> Response:
        raw = await request.body()
        cid = request.headers.get("x-aeval-custom-id")
        if cid is not None and raw:
            body = json.loads(raw)
            seen.setdefault((shard_stem(body["model"], 1, 0).removesuffix("-s0"), cid), body)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
        async with httpx.AsyncClient(timeout=60) as client:
            answer = await client.request(
                request.method, target + request.url.path, params=request.query_params,
                headers=headers, content=raw,
            )  # fmt: skip
        kept = {k: v for k, v in answer.headers.items() if k.lower() not in _HOP}
        return Response(answer.content, status_code=answer.status_code, headers=kept)

    app = Starlette(routes=[Route("/{path:path}", forward, methods=["GET", "POST"])])
    sock, url = listening_socket("127.0.0.1", 0)
    server = UvicornThread("the recording proxy", "recording-proxy", 10.0)
    server.start(uvicorn.Config(app, log_level="warning", lifespan="off"), sock)
    try:
        yield url.rstrip("/")
    finally:
        server.stop()


def check_conversations(
    run_dir: Path,
    frame: pl.DataFrame,
    by_item: dict[tuple[str, int, str], dict[int, dict[str, Any]]],
    *,
    counterexamples: bool = True,
    sent: dict[tuple[str, str], dict[str, Any]] | None = None,
) -> int:
    """Every round-r+1 request: the first request's messages, then for each earlier round
    its answer byte for byte and one feedback message; at the counterexample level the
    counterexamples checked with Z3. Returns how many counterexamples were checked.

    :param sent: the requests as a proxy saw them (direct mode: a later round's are
        built when due, not written to a request file); default: the request files."""
    requests, said = (request_lines(run_dir) if sent is None else sent), answers(run_dir)
    truth = {r["id"]: r for r in frame.iter_rows(named=True)}
    checked = 0
    later = [(job, cid) for job, cid in requests if split(cid)[1] > 1]
    assert later, "no request of a later round"
    for job, cid in later:
        item, rnd = split(cid)
        turns = conversation(requests[(job, cid)])
        first = conversation(requests[(job, item)])
        assert turns[: len(first)] == first  # the original messages, unchanged
        rest = turns[len(first) :]
        assert [role for role, _ in rest] == ["assistant", "user"] * (rnd - 1), rest
        for k in range(1, rnd):
            earlier_id = item if k == 1 else f"{item}_r{k}"
            answer = rest[2 * (k - 1)][1]
            assert answer == said[(job, earlier_id)]  # byte for byte as received
            feedback = rest[2 * (k - 1) + 1][1]
            assert feedback.startswith("Your answer is not correct.")
            if counterexamples and check_counterexample(
                feedback, truth[item]["answer"], truth[item]["constants"], answer
            ):
                checked += 1
    return checked
