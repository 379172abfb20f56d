"""``vllm run-batch`` output lines (vllm/entrypoints/openai/run_batch.py), as rescore reads them.

The shapes are vLLM's ``BatchRequestOutput.model_dump_json()``: a success has
``response.status_code`` 200 and the chat completion as ``body``; a failure has
``response.status_code`` (400 for the runner's own errors), ``body`` null and
``error`` either a string or the server's ``ErrorResponse`` object.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from aeval.rescoring.rescore import rescore_files
from aeval.scoring.responses import parse_batch_line
from aeval.verdicts import Status

MODEL = "Qwen/Qwen2.5-7B-Instruct"


def vllm_ok(custom_id: str, content: str) -> str:
    body = {
        "id": "chatcmpl-9f2c",
        "object": "chat.completion",
        "created": 1732000000,
        "model": MODEL,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "tool_calls": []},
                "logprobs": None,
                "finish_reason": "stop",
                "stop_reason": None,
            }
        ],
        "usage": {"prompt_tokens": 120, "total_tokens": 150, "completion_tokens": 30},
        "prompt_logprobs": None,
    }
    return json.dumps(
        {
            "id": "vllm-0c1d",
            "custom_id": custom_id,
            "response": {"status_code": 200, "request_id": "vllm-batch-77aa", "body": body},
            "error": None,
        }
    )


def vllm_error(custom_id: str, error: object, status: int = 400) -> str:
    return json.dumps(
        {
            "id": "vllm-5e6f",
            "custom_id": custom_id,
            "response": {"status_code": status, "request_id": "vllm-batch-88bb", "body": None},
            "error": error,
        }
    )


def test_a_success_line() -> None:
    r = parse_batch_line(vllm_ok("3", "<answer>(assert (> x 1))</answer>"))
    assert not r.is_error
    assert (r.custom_id, r.model, r.status_code) == ("3", MODEL, 200)
    assert (r.content, r.finish_reason, r.completion_tokens) == (
        "<answer>(assert (> x 1))</answer>",
        "stop",
        30,
    )


def test_a_string_error_keeps_its_message_and_status() -> None:
    r = parse_batch_line(vllm_error("4", "Request must not be sent in stream mode"))
    assert r.is_error
    assert (r.error_code, r.error_message, r.status_code) == (
        "http_400",
        "Request must not be sent in stream mode",
        400,
    )


@pytest.mark.parametrize(
    "error",
    [
        # vLLM >= 0.10: ErrorResponse(error=ErrorInfo(...))
        {
            "error": {
                "message": "This model's maximum context length is 4096 tokens.",
                "type": "BadRequestError",
                "param": None,
                "code": 400,
            }
        },
        # older vLLM: a flat ErrorResponse
        {
            "object": "error",
            "message": "This model's maximum context length is 4096 tokens.",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        },
    ],
)
def test_an_error_response_object(error: dict[str, object]) -> None:
    r = parse_batch_line(vllm_error("5", error))
    assert r.is_error
    assert r.error_code == "http_400"
    assert r.error_message == "This model's maximum context length is 4096 tokens."


def test_a_non_200_status_with_a_body_is_an_error() -> None:
    line = json.dumps(
        {
            "id": "vllm-1",
            "custom_id": "6",
            "response": {
                "status_code": 503,
                "request_id": "vllm-batch-1",
                "body": {"error": {"message": "engine overloaded", "code": 503}},
            },
            "error": None,
        }
    )
    r = parse_batch_line(line)
    assert (r.error_code, r.error_message, r.status_code) == ("http_503", "engine overloaded", 503)


@pytest.mark.anyio
async def test_rescore_reads_one_vllm_file_of_successes_and_errors(tmp_path: Path) -> None:
    dataset = pl.DataFrame(
        {
            "id": ["a", "b", "c", "d"],
            "answer": ["(assert (> x 1))"] * 4,
            "constants": ["(declare-const x Int)"] * 4,
        }
    )
    lines = [
        vllm_ok("a", "<answer>(assert (> x 1))</answer>"),
        vllm_error("b", "Request must not be sent in stream mode"),
        vllm_ok("c", "<answer>(assert (> x 2))</answer>"),
        vllm_error("d", {"error": {"message": "too long", "type": "BadRequestError", "code": 400}}),
    ]
    results = tmp_path / "results.jsonl"
    results.write_text("\n".join(lines) + "\n")
    result = await rescore_files([results], dataset, workers=1)
    assert not result.problems
    by_id = {v.custom_id: v for v in result.verdicts}
    assert by_id["a"].status is Status.EQUIVALENT
    assert by_id["c"].status is Status.NOT_EQUIVALENT
    assert by_id["b"].status is Status.API_ERROR and "stream mode" in (by_id["b"].reason or "")
    assert by_id["d"].status is Status.API_ERROR and "too long" in (by_id["d"].reason or "")
    # the error lines carry no model: they take the model of the file's answers
    assert {v.model for v in result.verdicts} == {MODEL}


def test_dry_run_then_a_vllm_shaped_output_then_rescore(
    benchmark_path: Path, dataset: pl.DataFrame, tmp_path: Path
) -> None:
    """The three steps of docs/providers.md, with ``vllm run-batch`` stood in for (it needs a
    GPU): its output is written in vLLM's shape from the request file ``--dry-run`` wrote."""
    from aeval.cli import main

    # A name with a '/' is an OpenAI-compatible server's under the openai/ prefix; the
    # request bodies name the model as the server knows it.
    argv = ["run", "--model", f"openai/{MODEL}", "--dataset", str(benchmark_path), "--limit", "4"]
    assert main([*argv, "--dry-run", "--out", str(tmp_path / "runs"), "-q"]) == 0
    (request_file,) = (tmp_path / "runs").glob("*/requests/*.jsonl")
    answers = dataset["answer"].to_list()
    out_lines = []
    for n, raw in enumerate(request_file.read_text().splitlines()):
        request = json.loads(raw)
        assert request["url"] == "/v1/chat/completions" and request["body"]["model"] == MODEL
        cid = request["custom_id"]
        out_lines.append(
            vllm_error(cid, "Request must not be sent in stream mode")
            if n == 1
            else vllm_ok(cid, f"<answer>{answers[int(cid)]}</answer>")
        )
    results = tmp_path / "results.jsonl"
    results.write_text("\n".join(out_lines) + "\n")
    out = tmp_path / "rescored"
    argv = ["rescore", "--dataset", str(benchmark_path), "--out", str(out), "--workers", "1"]
    assert main([*argv, "-q", str(results)]) == 0
    verdicts = pl.read_parquet(out / "verdicts.parquet")
    assert verdicts.height == 4 and set(verdicts["model"].to_list()) == {MODEL}
    assert sorted(verdicts["status"].to_list()) == ["api_error"] + ["equivalent"] * 3
