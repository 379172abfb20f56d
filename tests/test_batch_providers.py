"""The provider seam: provider-qualified names, the registry, the one answer format, prices."""

from __future__ import annotations

from pathlib import Path

import pytest

from aeval.batch.providers import (
    KNOWN_PROVIDERS,
    ProviderSet,
    open_providers,
    parse_model,
    providers_of,
    run_credentials,
)
from aeval.batch.providers.lines import answer_line, error_line
from aeval.batch.providers.registry import check_providers
from aeval.config import Credentials, RetrySettings, RunConfig
from aeval.cost import actual_cost, batch_rate_from, price_of, token_counter
from aeval.engine import Run
from aeval.errors import ConfigError
from aeval.scoring.responses import parse_batch_line


def test_a_bare_name_is_openais_and_a_prefix_names_the_provider() -> None:
    assert parse_model("gpt-4o").provider == "openai"
    assert parse_model("gpt-4o").name == "gpt-4o"
    claude = parse_model("anthropic/claude-sonnet-4-5")
    assert (claude.provider, claude.name) == ("anthropic", "claude-sonnet-4-5")
    assert claude.qualified == "anthropic/claude-sonnet-4-5"
    # only the first '/' splits
    llama = parse_model("together/meta-llama/Llama-3.3-70B-Instruct-Turbo")
    assert (llama.provider, llama.name) == ("together", "meta-llama/Llama-3.3-70B-Instruct-Turbo")
    assert parse_model("openai/Qwen/Qwen2.5-7B-Instruct").name == "Qwen/Qwen2.5-7B-Instruct"
    assert providers_of(["gpt-4o", "anthropic/x", "openai/y", "anthropic/z"]) == [
        "openai",
        "anthropic",
    ]


def test_an_unknown_prefix_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_model("meta-llama/Llama-3-8B")
    message = str(caught.value)
    assert "'meta-llama'" in message
    assert all(f"{p}/" in message for p in KNOWN_PROVIDERS)
    assert "openai/meta-llama/Llama-3-8B" in message  # how to name such a model
    with pytest.raises(ConfigError, match="no model name"):
        parse_model("anthropic/")


def test_run_config_refuses_unknown_providers_and_one_model_twice(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown provider"):
        check_providers(RunConfig(models=("gpt-4o", "mistralai/x")))
    # a Run refuses it as it is made, before its directory exists
    with pytest.raises(ConfigError, match="unknown provider"):
        Run(RunConfig(models=("gpt-4o", "mistralai/x"), out_dir=tmp_path / "runs"))
    assert not (tmp_path / "runs").exists()
    with pytest.raises(ConfigError, match="same model"):
        RunConfig(models=("gpt-4o", "openai/gpt-4o"))
    # direct mode talks to one OpenAI-compatible endpoint: names as written
    assert RunConfig(models=("meta-llama/Llama-3-8B",), api="direct").models == (
        "meta-llama/Llama-3-8B",
    )


def test_an_unknown_prefix_exits_2_before_a_run_directory_exists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from aeval.cli import main

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    out = tmp_path / "results"
    assert main(["run", "--model", "gpt-4o,acme/model-1", "--out", str(out), "-q"]) == 2
    assert "unknown provider 'acme'" in capsys.readouterr().err
    assert not out.exists()


def test_a_missing_key_names_the_providers_variable() -> None:
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        open_providers(["gpt-4o"], None, RetrySettings(), env={})
    # given credentials count; a bare Credentials is OpenAI's
    given = Credentials("sk-given", "http://127.0.0.1:9/v1")
    assert run_credentials(["gpt-4o"], given, env={}) == {"openai": given}
    assert run_credentials(["gpt-4o"], {"openai": given}, env={}) == {"openai": given}
    from_env = run_credentials(["gpt-4o"], None, env={"OPENAI_API_KEY": "sk-env"})
    assert from_env["openai"].api_key == "sk-env"


def test_a_provider_set_routes_each_model_to_its_provider_and_says_what_is_missing() -> None:
    class Named:
        def __init__(self, name: str) -> None:
            self.name = name

    openai_side = Named("openai")
    providers = ProviderSet({"openai": openai_side})  # type: ignore[dict-item]
    assert providers.for_model("gpt-4o") is openai_side
    assert providers.for_model("openai/gpt-4o") is openai_side
    with pytest.raises(ConfigError, match=r"[Aa]nthropic"):
        providers.get("anthropic")
    single = Named("any")
    assert ProviderSet({}, default=single).for_model("anthropic/x") is single  # type: ignore[arg-type]


def test_the_shared_answer_and_error_lines_read_as_batch_api_lines() -> None:
    # Each adapter's own lines, over HTTP: test_batch_sdk_errors.py.
    line = answer_line(
        "7",
        text="(assert (> x 1))",
        model="claude-x",
        finish_reason="stop",
        prompt_tokens=12,
        completion_tokens=30,
        reasoning_tokens=20,
    )
    parsed = parse_batch_line(line)
    assert (parsed.custom_id, parsed.content, parsed.model) == ("7", "(assert (> x 1))", "claude-x")
    assert (parsed.prompt_tokens, parsed.completion_tokens) == (12, 30)
    assert not parsed.is_error
    failed = parse_batch_line(error_line("8", code="batch_expired", message="too late"))
    assert (failed.custom_id, failed.error_code, failed.error_message) == (
        "8",
        "batch_expired",
        "too late",
    )


def test_prices_are_per_provider_at_its_batch_discount() -> None:
    assert price_of("gpt-4o") == price_of("openai/gpt-4o") is not None
    sonnet = price_of("anthropic/claude-sonnet-4-5")
    assert sonnet is not None and (sonnet.input, sonnet.output) == (3.0, 15.0)
    assert price_of("claude-sonnet-4-5") is None  # a bare name is OpenAI's
    assert price_of("meta-llama/Llama-3-8B") is None  # no provider reads this name
    assert batch_rate_from("anthropic/claude-sonnet-4-5") == "genai-prices"
    tokens = {"prompt": 1_000_000, "completion": 1_000_000}
    assert actual_cost("anthropic/claude-sonnet-4-5", tokens, requests=1000) == 9.0
    assert actual_cost("anthropic/claude-sonnet-4-5", tokens, requests=1000, batch=False) == 18.0
    # another provider's tokenizer is its own: counted by characters, said so
    assert token_counter("anthropic/claude-sonnet-4-5")[1] == "characters"
