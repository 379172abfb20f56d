"""Each model's own reasoning settings (issue #45 item 8), from the shipped copy of
litellm's model map (aeval/data/litellm_reasoning.json) and the providers' model pages
(aeval.batch.providers.model_reasoning.GAPS): a setting the model does not take is
refused in one line before anything is written; Gemini 2.5 gets a level as the budget
Gemini documents for it; a model no source knows is sent as asked, with one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aeval.batch.providers.model_reasoning import (
    GAPS,
    LITELLM_PREFIXES,
    check_model_reasoning,
    litellm_source,
    model_reasoning,
)
from aeval.batch.providers.registry import provider_spec
from aeval.cli import main
from aeval.errors import ConfigError
from aeval.model_names import parse_model
from aeval.prompts import GenerationSettings, PromptSettings
from aeval.reasoning import EFFORTS

DATA = Path(__file__).parent.parent / "aeval" / "data" / "litellm_reasoning.json"


@pytest.fixture
def no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_KEY", "OPENAI_BASE_URL", "XAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def test_the_shipped_map_names_its_source_and_its_flags_parse() -> None:
    doc = json.loads(DATA.read_text())
    assert doc["source"].startswith("litellm ") and "MIT" in doc["source"]
    assert litellm_source().startswith("litellm 1.")
    assert (DATA.parent / "LICENSE-litellm").read_text().count("MIT License") == 1
    flags = {"supports_reasoning", "supports_none_reasoning_effort", "thinking_always_on",
             "supports_minimal_reasoning_effort", "supports_low_reasoning_effort",
             "supports_xhigh_reasoning_effort", "supports_max_reasoning_effort"}  # fmt: skip
    reasoning = 0
    for name, entry in doc["models"].items():
        for key, value in entry.items():
            if key in flags:
                assert isinstance(value, bool), (name, key)
            elif key == "reasoning_effort_levels":
                assert value and set(value) <= set(EFFORTS), (name, value)
            else:
                assert key == "litellm_provider" and isinstance(value, str), (name, key)
        reasoning += bool(entry.get("supports_reasoning"))
    # Every provider aeval reaches has models in it, and hundreds reason.
    providers = {e["litellm_provider"] for e in doc["models"].values()}
    assert {"openai", "anthropic", "gemini", "groq", "mistral", "xai", "azure"} <= providers
    assert reasoning > 200


@pytest.mark.parametrize(
    ("model", "takes"),
    [
        ("openai/gpt-5", ("minimal", "low", "medium", "high")),
        ("openai/gpt-5.1", ("none", "low", "medium", "high")),
        ("openai/o3", ("low", "medium", "high")),
        ("openai/gpt-4o-2024-11-20", ()),
        ("anthropic/claude-3-5-haiku-20241022", ()),
        ("groq/llama-3.3-70b-versatile", ()),
        ("xai/grok-3-mini", ("low", "high")),
        ("xai/grok-4", ()),
        ("xai/grok-4.3", ("none", "low", "medium", "high")),
    ],
)
def test_what_each_model_takes(model: str, takes: tuple[str, ...]) -> None:
    parsed = parse_model(model)
    known = model_reasoning(parsed.provider, parsed.name)
    assert known is not None and known.levels == takes and known.source


@pytest.mark.parametrize(
    ("model", "said"),
    [
        ("gpt-5@none", "gpt-5 takes reasoning effort minimal, low, medium, high, not @none"),
        ("o3@minimal", "o3 takes reasoning effort low, medium, high, not @minimal"),
        ("gpt-4o-2024-11-20@high", "gpt-4o-2024-11-20 is not a reasoning model"),
        ("google/gemini-2.5-pro@none", "its thinking cannot be switched off"),
        ("google/gemini-2.5-pro@64", "gemini-2.5-pro takes low, medium, high, or a budget @128"),
        ("anthropic/claude-3-5-haiku-20241022@2048", "not a thinking budget of 2048"),
        ("groq/llama-3.3-70b-versatile@high", "llama-3.3-70b-versatile is not a reasoning model"),
        ("xai/grok-4@high", "grok-4 always reasons and takes no reasoning effort level"),
        ("xai/grok-3-mini@medium", "grok-3-mini takes reasoning effort low, high"),
    ],
)
def test_a_setting_the_model_does_not_take_is_refused_in_one_line_with_nothing_on_disk(
    model: str, said: str, tmp_path: Path, no_key: None, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert main(["run", "--dry-run", "--limit", "1", "--out", str(out), "--model", model]) == 2
    err = capsys.readouterr().err.strip()
    assert said in err and len(err.splitlines()) == 1, err
    assert not out.exists()


def test_gemini_2_5_gets_a_level_as_the_budget_gemini_documents() -> None:
    from google.genai import types

    for level, budget in (("low", 1024), ("medium", 8192), ("high", 24576)):
        model = parse_model(f"google/gemini-2.5-pro@{level}")
        gen = GenerationSettings().with_reasoning(model.reasoning)
        spec = provider_spec("google")
        spec.check_request(model, gen, PromptSettings())
        body = spec.request_body(model.name, "q", PromptSettings(), gen)
        config = types.GenerateContentConfig.model_validate(body["generationConfig"])
        assert config.thinking_config is not None
        assert config.thinking_config.thinking_budget == budget
        assert config.thinking_config.thinking_level is None  # Gemini 3's field, not 2.5's
    three = parse_model("google/gemini-3-flash-preview@high")
    gen = GenerationSettings().with_reasoning(three.reasoning)
    body = provider_spec("google").request_body(three.name, "q", PromptSettings(), gen)
    assert body["generationConfig"]["thinkingConfig"] == {"thinkingLevel": "HIGH"}


def test_a_model_no_source_knows_is_sent_as_asked_with_one_line(
    tmp_path: Path, no_key: None, capsys: pytest.CaptureFixture[str]
) -> None:
    parsed = parse_model("openai/my-own-finetune@high")
    note = check_model_reasoning(parsed, GenerationSettings().with_reasoning(parsed.reasoning))
    assert note is not None and "unchecked" in note and "my-own-finetune" in note
    assert (
        check_model_reasoning(parse_model("openai/my-own-finetune"), GenerationSettings()) is None
    )
    argv = ["run", "--dry-run", "--limit", "1", "--out", str(tmp_path), "--run-id", "d"]
    assert main([*argv, "--model", "openai/my-own-finetune@high"]) == 0
    err = capsys.readouterr().err
    assert [line for line in err.splitlines() if "unchecked" in line] == [note]
    body = json.loads(next((tmp_path / "d" / "requests").iterdir()).read_text().splitlines()[0])
    assert body["body"]["reasoning_effort"] == "high"


def test_every_gap_names_its_source_and_every_provider_has_a_prefix() -> None:
    assert all(found.source.startswith(("Anthropic", "Groq", "xAI")) for found in GAPS.values())
    for provider in ("openai", "anthropic", "google", "groq", "together", "mistral", "xai"):
        assert provider in LITELLM_PREFIXES


def test_a_refusal_names_the_model_and_what_it_takes() -> None:
    model = parse_model("gpt-5@none")
    with pytest.raises(ConfigError, match=r"^gpt-5@none: gpt-5 takes reasoning effort minimal"):
        check_model_reasoning(model, GenerationSettings().with_reasoning(model.reasoning))
