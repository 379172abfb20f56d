"""Reasoning effort and thinking budgets (issue #37 items 1, 2, 4, 6): the variant syntax,
each provider's own request field checked against the installed SDK's own param types,
the refusals (one line, exit 2, nothing on disk), and an offline run of two variants.

The SDK types are the evidence (versions as installed by pyproject.toml): openai 3.57
``openai.types.chat.completion_create_params``; anthropic 2.14
``anthropic.types.message_create_params``; google-genai 3.6
``google.genai.types.GenerateContentConfig`` (pydantic, extra fields forbidden); groq 1.7
and together 3.1 ``types.chat.completion_create_params``; mistralai 3.7
``mistralai.client.models.ChatCompletionRequest``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter

from aeval.batch.providers.anthropic_api import _succeeded
from aeval.batch.providers.registry import provider_spec
from aeval.cli import main
from aeval.config import RunConfig
from aeval.errors import ConfigError
from aeval.model_names import parse_model
from aeval.prompts import GenerationSettings, PromptSettings
from aeval.reasoning import Reasoning


@pytest.fixture
def no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


def test_a_variant_is_its_label_the_bare_name_and_the_setting() -> None:
    high = parse_model("openai/gpt-5@high")
    assert (high.qualified, high.provider, high.name) == ("openai/gpt-5@high", "openai", "gpt-5")
    assert high.reasoning == Reasoning(effort="high")
    budget = parse_model("anthropic/claude-sonnet-4-5@16000")
    assert (budget.name, budget.reasoning) == ("claude-sonnet-4-5", Reasoning(budget=16000))
    assert parse_model("gpt-5").reasoning is None
    with pytest.raises(ConfigError, match=r"after '@' give an effort level \(none, minimal"):
        parse_model("gpt-5@hgih")
    with pytest.raises(ConfigError, match="no model name before '@'"):
        parse_model("@high")


def test_two_variants_of_one_model_are_two_models_but_one_twice_is_refused() -> None:
    config = RunConfig(models=("gpt-5@low", "gpt-5@high"))
    assert config.models == ("gpt-5@low", "gpt-5@high")
    with pytest.raises(ConfigError, match="are the same model"):
        RunConfig(models=("gpt-5@high", "openai/gpt-5@high"))


def _body(model: str, **settings: Any) -> dict[str, Any]:
    parsed = parse_model(model)
    gen = GenerationSettings(**settings).with_reasoning(parsed.reasoning)
    spec = provider_spec(parsed.provider)
    spec.check_request(parsed, gen, PromptSettings())
    return spec.request_body(parsed.name, "N=3?", PromptSettings(), gen)


def _typed_dict_keys(cls: Any) -> set[str]:
    return set(cls.__required_keys__) | set(cls.__optional_keys__)


def _holds(params: Any, body: dict[str, Any]) -> None:
    """``body`` validates as the SDK's TypedDict, with no key the TypedDict lacks."""
    TypeAdapter(params).validate_python(body)
    assert set(body) <= _typed_dict_keys(params), set(body) - _typed_dict_keys(params)


def test_openai_and_mistral_take_the_level_in_reasoning_effort() -> None:
    from mistralai.client.models import ChatCompletionRequest
    from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming

    body = _body("gpt-5@high")
    _holds(CompletionCreateParamsNonStreaming, body)
    assert body["reasoning_effort"] == "high"
    mistral = _body("mistral/magistral-medium-latest@high")
    assert ChatCompletionRequest.model_validate(mistral).reasoning_effort == "high"
    for model in ("gpt-5@8192", "mistral/magistral-medium-latest@8192"):
        with pytest.raises(ConfigError, match="no thinking budget, only an effort level"):
            _body(model)


def test_anthropic_takes_a_level_in_output_config_and_a_budget_in_thinking() -> None:
    from anthropic.types.message_create_params import MessageCreateParamsNonStreaming

    high = _body("anthropic/claude-sonnet-4-5@high")
    _holds(MessageCreateParamsNonStreaming, high)
    assert high["output_config"] == {"effort": "high"}
    budget = _body("anthropic/claude-sonnet-4-5@8192")
    _holds(MessageCreateParamsNonStreaming, budget)
    assert budget["thinking"] == {"type": "enabled", "budget_tokens": 8192}
    assert budget["max_tokens"] > 8192  # the thinking counts toward max_tokens
    assert _body("anthropic/claude-sonnet-4-5@8192", max_tokens=9000)["max_tokens"] == 9000


def test_gemini_takes_thinking_level_or_budget_in_thinking_config() -> None:
    from google.genai import types

    high = types.GenerateContentConfig.model_validate(
        _body("google/gemini-3-flash-preview@high")["generationConfig"]
    )
    assert high.thinking_config is not None
    assert high.thinking_config.thinking_level == types.ThinkingLevel.HIGH
    budget = types.GenerateContentConfig.model_validate(
        _body("google/gemini-2.5-flash@8192")["generationConfig"]
    )
    assert budget.thinking_config is not None and budget.thinking_config.thinking_budget == 8192
    off = _body("google/gemini-2.5-flash@none")["generationConfig"]["thinkingConfig"]
    assert off == {"thinkingBudget": 0}  # "0 is DISABLED" (ThinkingConfig.thinking_budget)


def test_groq_and_together_keep_the_thinking_out_of_the_answer_text() -> None:
    from groq.types.chat.completion_create_params import CompletionCreateParams as Groq
    from together.types.chat.completion_create_params import (
        CompletionCreateParamsNonStreaming as Together,
    )

    groq = _body("groq/openai/gpt-oss-120b@high")
    _holds(Groq, groq)
    assert (groq["reasoning_effort"], groq["reasoning_format"]) == ("high", "parsed")
    together = _body("together/deepseek-ai/DeepSeek-R1@low")
    _holds(Together, together)
    assert together["reasoning_effort"] == "low"
    off = _body("together/deepseek-ai/DeepSeek-R1@none")
    _holds(Together, off)
    assert off["reasoning"] == {"enabled": False} and "reasoning_effort" not in off


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--model", "o4-mini-2025-04-16", "--temperature", "0.6"], "refuse temperature"),
        (["--model", "gpt-5", "--top-p", "0.9"], "refuse top_p"),
        (["--model", "o3", "--max-tokens", "900"], "use --max-completion-tokens"),
        (["--model", "anthropic/claude-sonnet-4-5@8192", "--max-tokens", "8192"], "below max_tok"),
        (["--model", "anthropic/claude-sonnet-4-5@512"], "at least 1024 tokens"),
        (["--model", "anthropic/claude-sonnet-4-5@minimal"], "it takes low, medium, high"),
        (["--model", "groq/qwen/qwen3-32b@xhigh"], "it takes none, low, medium, high"),
        (["--model", "google/gemini-2.5-pro@max"], "it takes none, minimal"),
        (["--model", "gpt-5@4096"], "no thinking budget"),
        (["--model", "gpt-5", "--reasoning-effort", "extreme"], "--reasoning-effort 'extreme'"),
        (["--model", "qwen3", "--api", "direct", "--extra-body", "[1]"], "a JSON object"),
        (["--model", "qwen3", "--api", "direct", "--extra-body", "{x"], "is not JSON"),
        (["--model", "anthropic/claude-sonnet-4-5", "--extra-body", "{}"], "openai/ models"),
        (["--model", "qwen3@8192", "--api", "direct"], "pass a budget in --extra-body"),
    ],
)
def test_what_the_model_would_refuse_ends_in_one_line_with_nothing_on_disk(
    argv: list[str], said: str, tmp_path: Path, no_key: None, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert main(["run", "--dry-run", "--limit", "1", "--out", str(out), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert said in err and len(err.splitlines()) == 1, err
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_direct_mode_sends_the_bare_name_the_level_and_the_extra_body(
    tmp_path: Path, no_key: None, capsys: pytest.CaptureFixture[str]
) -> None:
    extra = {"chat_template_kwargs": {"enable_thinking": True}}
    argv = ["run", "--dry-run", "--limit", "2", "--api", "direct", "--out", str(tmp_path)]
    argv += ["--run-id", "d", "--model", "Qwen/Qwen3-8B@high,Qwen/Qwen3-8B@low"]
    assert main([*argv, "--extra-body", json.dumps(extra)]) == 0
    capsys.readouterr()
    bodies = [
        json.loads(path.read_text().splitlines()[0])["body"]
        for path in (tmp_path / "d" / "requests").iterdir()
    ]
    assert sorted(b["reasoning_effort"] for b in bodies) == ["high", "low"]
    assert all(b["model"] == "Qwen/Qwen3-8B" for b in bodies)
    assert all(b["chat_template_kwargs"] == extra["chat_template_kwargs"] for b in bodies)
    saved = json.loads((tmp_path / "d" / "config.json").read_text())
    assert saved["extra_body"] == extra
    assert saved["models"] == ["Qwen/Qwen3-8B@high", "Qwen/Qwen3-8B@low"]


def test_the_run_wide_level_is_saved_and_a_variant_overrides_it(
    tmp_path: Path, no_key: None, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["run", "--dry-run", "--limit", "1", "--out", str(tmp_path), "--run-id", "d"]
    assert main([*argv, "--model", "gpt-5,o3@low", "--reasoning-effort", "medium"]) == 0
    capsys.readouterr()
    efforts = sorted(
        json.loads(p.read_text().splitlines()[0])["body"]["reasoning_effort"]
        for p in (tmp_path / "d" / "requests").iterdir()
    )
    assert efforts == ["low", "medium"]
    saved = json.loads((tmp_path / "d" / "config.json").read_text())
    assert saved["generation"]["reasoning_effort"] == "medium"


def test_anthropic_thinking_blocks_stay_out_of_the_answer_and_their_tokens_are_counted() -> None:
    # A Message as anthropic 2.14 types/message.py, thinking_block.py and
    # output_tokens_details.py define it.
    message = {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "content": [
            {"type": "thinking", "thinking": "(assert (= x 1)) maybe?", "signature": "s"},
            {"type": "text", "text": "(assert (= x 2))"},
        ],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 10, "output_tokens": 900,
                  "output_tokens_details": {"thinking_tokens": 850}},
    }  # fmt: skip
    body = json.loads(_succeeded("c1", message))["response"]["body"]
    assert body["choices"][0]["message"]["content"] == "(assert (= x 2))"
    assert body["usage"]["completion_tokens"] == 900
    assert body["usage"]["completion_tokens_details"] == {"reasoning_tokens": 850}


def test_an_offline_run_of_two_efforts_gives_two_rows_high_thinking_more(
    tmp_path: Path, no_key: None, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["run", "--limit", "6", "--out", str(tmp_path), "--run-id", "r"]
    assert main([*argv, "--model", "gpt-5@low,gpt-5@high"]) == 0
    capsys.readouterr()
    run = tmp_path / "r"
    summary = json.loads((run / "summary.json").read_text())
    assert sorted(m["model"] for m in summary["models"]) == ["gpt-5@high", "gpt-5@low"]
    reasoning = {m["model"]: m["tokens"]["reasoning"] for m in summary["models"]}
    assert reasoning["gpt-5@high"] > 3 * reasoning["gpt-5@low"] > 0
    thought: dict[str, list[int]] = {}
    for path in (run / "outputs").iterdir():
        for line in path.read_text().splitlines():
            body = json.loads(line)["response"]["body"]
            assert body["model"] == "gpt-5"  # the provider got the bare name
            usage = body["usage"]
            thought.setdefault(path.name.partition("_")[2].partition("-")[0], []).append(
                usage["completion_tokens_details"]["reasoning_tokens"]
            )
    assert len(thought["high"]) == len(thought["low"]) == 6
    assert min(thought["high"]) > 3 * max(thought["low"])


@pytest.mark.anyio
async def test_the_local_server_thinks_by_anthropics_own_fields(
    benchmark_path: Path, tmp_path: Path
) -> None:
    # Read back through the anthropic SDK (2.14), so the result is what its Message type parses.
    import anthropic
    import anyio
    from engine_helpers import benchmark_slice

    from aeval.batch.providers.anthropic_spec import request_body
    from aeval.local import LocalBatchServer, ModelSpec

    _, frame = benchmark_slice(benchmark_path, tmp_path, rows=2)
    row_id, question = frame["id"][0], frame["question"][0]
    settings = {
        "low": GenerationSettings(reasoning_effort="low"),
        "high": GenerationSettings(reasoning_effort="high"),
        "budget": GenerationSettings(thinking_budget=8192),
    }
    async with LocalBatchServer(dataset=frame, models={"*": ModelSpec("synthetic")}) as server:
        client = anthropic.AsyncAnthropic(
            api_key="sk-test", base_url=server.base_url.removesuffix("/v1")
        )
        try:
            requests = [
                {"custom_id": f"{name}_{row_id}",
                 "params": request_body("claude-x", question, PromptSettings(), gen)}
                for name, gen in settings.items()
            ]  # fmt: skip
            batch = await client.messages.batches.create(requests=requests)  # type: ignore[arg-type]
            with anyio.fail_after(60):
                while batch.processing_status != "ended":
                    await anyio.sleep(0.2)
                    batch = await client.messages.batches.retrieve(batch.id)
            results = {r.custom_id.split("_")[0]: r.result async for r in
                       await client.messages.batches.results(batch.id)}  # fmt: skip
        finally:
            await client.close()
    thought = {}
    for name, result in results.items():
        assert result.type == "succeeded"
        blocks = result.message.content
        assert [b.type for b in blocks] == ["thinking", "text"]  # thinking first, then the answer
        details = result.message.usage.output_tokens_details
        assert details is not None and details.thinking_tokens is not None
        assert details.thinking_tokens < result.message.usage.output_tokens
        thought[name] = details.thinking_tokens
    assert thought["high"] > 3 * thought["low"]
    assert thought["budget"] < 8192


def test_the_local_gemini_codec_reads_thinking_config_and_bills_thoughts() -> None:
    from aeval.local.synthetic import thinking_tokens
    from aeval.local.wire_gemini import chat_body, generate_content_response

    request = _body("google/gemini-3-flash-preview@high")  # a level: Gemini 3's thinkingLevel
    body, _ = chat_body("models/gemini-3-flash-preview", request)
    assert body is not None and body["reasoning_effort"] == "high"
    spent = thinking_tokens(body, 0.5)
    budget, _ = chat_body("m", _body("google/gemini-2.5-flash@1024"))
    assert budget is not None and thinking_tokens(budget, 0.5) == 512
    completion = {
        "choices": [{"message": {"content": "(assert true)"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": spent + 4,
                  "completion_tokens_details": {"reasoning_tokens": spent}},
    }  # fmt: skip
    got = generate_content_response(completion, "models/gemini-2.5-flash", thoughts=True)
    assert got["usageMetadata"]["thoughtsTokenCount"] == spent
    assert got["usageMetadata"]["candidatesTokenCount"] == 4
    parts = got["candidates"][0]["content"]["parts"]
    assert parts[0]["thought"] is True and parts[-1] == {"text": "(assert true)"}
