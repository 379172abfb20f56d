from __future__ import annotations

import json

import pytest

from aeval.errors import InputFileError
from aeval.scoring.responses import Response, api_error_verdict, parse_batch_line, score_response
from aeval.verdicts import Status
from aeval.verify import VerifierPool

pytestmark = pytest.mark.anyio

TRUTH = "(assert (> x 1))"
CONSTANTS = "(declare-const x Int)"


def ok_line(content: object, *, custom_id: object = "12", finish: str = "stop") -> str:
    return json.dumps(
        {
            "id": "batch_req_x",
            "custom_id": custom_id,
            "response": {
                "status_code": 200,
                "request_id": "req",
                "body": {
                    "id": "chatcmpl-1",
                    "object": "chat.completion",
                    "model": "gpt-4o-mini-2024-07-18",
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": content},
                            "finish_reason": finish,
                        }
                    ],
                    "usage": {"prompt_tokens": 321, "completion_tokens": 45, "total_tokens": 366},
                },
            },
            "error": None,
        }
    )


def test_a_real_output_line() -> None:
    r = parse_batch_line(ok_line("<think>..</think><answer>(assert (> x 1))</answer>"))
    assert r == Response(
        custom_id="12",
        model="gpt-4o-mini-2024-07-18",
        content="<think>..</think><answer>(assert (> x 1))</answer>",
        finish_reason="stop",
        prompt_tokens=321,
        completion_tokens=45,
        status_code=200,
    )
    assert not r.is_error


def test_an_error_file_line() -> None:
    line = {
        "id": "batch_req_y",
        "custom_id": "3",
        "response": None,
        "error": {"code": "batch_expired", "message": "This request could not be executed"},
    }
    r = parse_batch_line(json.dumps(line).encode())
    assert r.is_error
    assert (r.custom_id, r.error_code, r.error_message) == (
        "3",
        "batch_expired",
        "This request could not be executed",
    )


def test_an_http_error_response() -> None:
    line = {
        "id": "batch_req_z",
        "custom_id": "4",
        "response": {
            "status_code": 429,
            "request_id": "r",
            "body": {"error": {"message": "Rate limit reached", "code": "rate_limit_exceeded"}},
        },
        "error": None,
    }
    r = parse_batch_line(json.dumps(line))
    assert (r.error_code, r.error_message, r.status_code) == ("http_429", "Rate limit reached", 429)


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ("not json at all", "not valid JSON"),
        ('{"custom_id": "1", "response": ', "not valid JSON"),
        ("[1, 2]", "expected a JSON object"),
        ('{"response": null, "error": {"code": "x"}}', "no custom_id"),
        ('{"custom_id": "", "response": null}', "no custom_id"),
        ("[" * 100_000, "JSON"),
    ],
)
def test_unattributable_lines_name_file_and_line(line: str, needle: str) -> None:
    with pytest.raises(InputFileError, match=needle) as info:
        parse_batch_line(line, source="out.jsonl", lineno=7)
    assert "out.jsonl, line 7" in str(info.value)


@pytest.mark.parametrize(
    "line",
    [
        ok_line(None),
        ok_line(42),
        ok_line("x", custom_id=12),
        json.dumps({"custom_id": "1", "response": {"status_code": 200, "body": "garbage"}}),
        json.dumps({"custom_id": "1", "response": {"status_code": 200, "body": {"choices": []}}}),
        json.dumps({"custom_id": "1", "response": {"body": {"choices": [{"message": None}]}}}),
        json.dumps({"custom_id": "1", "response": {"body": {"usage": {"prompt_tokens": "9"}}}}),
        json.dumps({"custom_id": "1", "response": None, "error": "boom"}),
        json.dumps({"custom_id": "1"}),
    ],
)
def test_odd_but_attributable_lines_parse(line: str) -> None:
    r = parse_batch_line(line)
    assert r.custom_id in ("1", "12")
    assert r.content is None or isinstance(r.content, str)
    assert r.prompt_tokens is None or isinstance(r.prompt_tokens, int)


def test_invalid_utf8_is_replaced_not_fatal() -> None:
    raw = ok_line("<answer>(assert (> x 1))</answer>").encode().replace(b"(> x", b"(> \xff\xfe x")
    r = parse_batch_line(raw)
    assert r.content is not None and "\ufffd" in r.content


def test_content_parts_are_joined() -> None:
    r = parse_batch_line(
        ok_line([{"type": "text", "text": "<answer>"}, {"type": "text", "text": "x"}])
    )
    assert r.content == "<answer>x"


def test_api_error_verdict_keeps_the_code() -> None:
    r = Response("5", error_code="batch_expired", error_message="expired")
    v = api_error_verdict(r, model="m", trial=2, tier="small")
    assert (v.status, v.reason, v.custom_id, v.trial) == (
        Status.API_ERROR,
        "batch_expired: expired",
        "5",
        2,
    )
    assert not v.correct


async def test_score_response_through_the_pool() -> None:
    async with VerifierPool(workers=1) as pool:
        good = parse_batch_line(ok_line("<answer>(assert (> x 1))</answer>"))
        v = await score_response(
            pool, good, truth=TRUTH, constants=CONSTANTS, trial=1, tier="small"
        )
        assert (v.status, v.model, v.prompt_tokens, v.completion_tokens, v.tier) == (
            Status.EQUIVALENT,
            "gpt-4o-mini-2024-07-18",
            321,
            45,
            "small",
        )
        assert v.correct
        cut = parse_batch_line(ok_line("<think>long", finish="length"))
        v = await score_response(pool, cut, truth=TRUTH, constants=CONSTANTS, trial=1, model="m")
        assert (v.status, v.model) == (Status.NO_ANSWER, "m")
        assert "finish_reason=length" in v.reason
        # Together's "eos" is the model's own end, as "stop": nothing to explain
        eos = parse_batch_line(ok_line("<think>long", finish="eos"))
        v = await score_response(pool, eos, truth=TRUTH, constants=CONSTANTS, trial=1, model="m")
        assert v.status == Status.NO_ANSWER
        assert "finish_reason" not in v.reason
        err = parse_batch_line(
            json.dumps({"custom_id": "1", "error": {"code": "x", "message": "y"}})
        )
        v = await score_response(pool, err, truth=TRUTH, constants=CONSTANTS, trial=3)
        assert (v.status, v.reason, v.model) == (Status.API_ERROR, "x: y", "unknown")
