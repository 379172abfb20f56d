"""``--endpoint responses`` (OpenAI's Responses API) end to end, offline: batch and direct
mode through the local server, over real HTTP, with the official openai SDK; the request
bodies held against the SDK's own ``ResponseCreateParams`` (openai 3.57), the answers read
as its ``Response`` defines them, reasoning tokens counted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from engine_helpers import SPECS, benchmark_slice, expected_statuses, fast_config, observed
from openai.types.responses import Response
from openai.types.responses.response_create_params import ResponseCreateParamsNonStreaming
from pydantic import TypeAdapter

from aeval.config import RunConfig
from aeval.engine import Run
from aeval.errors import ConfigError
from aeval.local import LocalBatchServer
from aeval.prompts import GenerationSettings

ONE = {"model-a": SPECS["model-a"]}


def _rows(frame: pl.DataFrame) -> dict[tuple[str, int, str], tuple[object, ...]]:
    return {
        (r["model"], r["trial"], r["custom_id"]): (r["status"], r["reasoning_tokens"])
        for r in frame.iter_rows(named=True)
    }


@pytest.mark.anyio
async def test_batch_and_direct_runs_through_the_responses_api(
    benchmark_path: Path, tmp_path: Path
) -> None:
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=8)
    gen = GenerationSettings(max_completion_tokens=20_000, reasoning_effort="high")
    async with LocalBatchServer(dataset=frame, models=ONE) as server:
        results = {}
        for api in ("batch", "direct"):
            config = fast_config(data, tmp_path / api, server.base_url, models=tuple(ONE),
                                 api=api, endpoint="responses", generation=gen)  # fmt: skip
            results[api] = await Run(config).run()
    for api, result in results.items():
        assert result.outcome == "finished", (api, result.message)
        # the same synthetic answers as through chat completions: the reader takes the
        # message's output_text, whatever the reasoning item holds
        assert observed(result.verdicts) == expected_statuses(frame, ONE, trials=1)
        requests = next((result.run_dir / "requests").glob("*.jsonl")).read_text().splitlines()
        sdk = TypeAdapter(ResponseCreateParamsNonStreaming)
        for line in map(json.loads, requests):
            assert line["url"] == "/v1/responses"
            assert sdk.validate_python(line["body"]) == line["body"]
            assert line["body"]["reasoning"] == {"effort": "high"}
            assert line["body"]["max_output_tokens"] == 20_000
        answers = [
            json.loads(raw)["response"]["body"]
            for path in (result.run_dir / "outputs").glob("*.jsonl")
            for raw in path.read_text().splitlines()
        ]
        answered = [Response.model_validate(b) for b in answers if b.get("object") == "response"]
        assert answered, api
        reasoning = result.verdicts.get_column("reasoning_tokens").drop_nulls().to_list()
        assert reasoning and all(r > 0 for r in reasoning), api
        for response in answered:  # the reasoning stays out of the answer text
            assert "<think>" not in response.output_text
        summary = json.loads((result.run_dir / "summary.json").read_text())
        assert summary["models"][0]["tokens"]["reasoning"] == sum(reasoning)
    assert _rows(results["batch"].verdicts) == _rows(results["direct"].verdicts)


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"models": ("anthropic/claude-sonnet-4-5",)}, "not OpenAI's"),
        ({"generation": GenerationSettings(seed=3)}, "takes no seed"),
        ({"api": "direct", "generation": GenerationSettings(seed=3)}, "takes no seed"),
    ],
)
def test_what_the_responses_api_does_not_take_is_refused(
    changes: dict[str, object], says: str
) -> None:
    with pytest.raises(ConfigError, match=says):
        RunConfig(**{"models": ("gpt-5",), "endpoint": "responses", **changes})  # type: ignore[arg-type]


def test_a_refused_responses_run_exits_2_and_leaves_nothing(tmp_path: Path) -> None:
    out = tmp_path / "results"
    args = ["run", "--endpoint", "responses", "--generation-seed", "1", "--out", str(out)]
    proc = subprocess.run(
        [sys.executable, "-m", "aeval", *args], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2, proc.stderr
    assert "takes no seed" in proc.stderr and not out.exists()
