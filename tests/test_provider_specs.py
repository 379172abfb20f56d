"""What the Gemini, Together, Groq and Mistral specs decide before anything is sent.

Request bodies in each provider's own shape (the generation settings mapped),
keys from each SDK's own variables, and the settings a provider would refuse,
each said in one line, before a run directory exists.
"""

from __future__ import annotations

import json

import pytest

from aeval.batch.providers.gemini_api import gemini_result_line
from aeval.batch.providers.registry import check_providers, missing_key_error, provider_spec
from aeval.config import Credentials, RunConfig
from aeval.errors import ConfigError
from aeval.model_names import parse_model
from aeval.prompts import GenerationSettings, PromptSettings


def test_gemini_body_maps_system_text_and_settings() -> None:
    spec = provider_spec("google")
    gen = GenerationSettings(temperature=0.3, top_p=0.9, seed=7, max_completion_tokens=900)
    body = spec.request_body("gemini-2.5-flash", "Q?", PromptSettings(system="Be terse."), gen)
    assert body["model"] == "models/gemini-2.5-flash"
    assert body["systemInstruction"] == {"parts": [{"text": "Be terse."}]}
    assert body["contents"][0]["role"] == "user"
    assert body["contents"][0]["parts"][0]["text"].startswith("Q?\n")
    assert body["generationConfig"] == {
        "temperature": 0.3,
        "topP": 0.9,
        "maxOutputTokens": 900,
        "seed": 7,
    }


def test_mistral_body_names_the_seed_random_seed() -> None:
    body = provider_spec("mistral").request_body(
        "mistral-small-latest", "Q?", PromptSettings(), GenerationSettings(seed=3, max_tokens=50)
    )
    assert body["random_seed"] == 3 and body["max_tokens"] == 50 and "seed" not in body


@pytest.mark.parametrize(
    ("model", "settings", "says"),
    [
        ("google/gemini-2.5-flash", {"seed": 2**40}, "32-bit seed"),
        ("mistral/mistral-small-latest", {"temperature": 1.8}, "0 to 1.5"),
        ("mistral/mistral-small-latest", {"max_completion_tokens": 10}, "max_tokens"),
        ("together/meta-llama/Llama-3.3-70B", {"max_completion_tokens": 10}, "max_tokens"),
    ],
)
def test_a_setting_the_provider_would_refuse_is_refused_in_one_line(
    model: str, settings: dict[str, object], says: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        check_providers(RunConfig(models=(model,), generation=GenerationSettings(**settings)))  # type: ignore[arg-type]
    assert says in str(caught.value) and "\n" not in str(caught.value)
    assert str(caught.value).startswith(parse_model(model).qualified)


def test_keys_come_from_each_sdks_own_variables() -> None:
    google = provider_spec("google").resolve
    both = {"GEMINI_API_KEY": "g", "GOOGLE_API_KEY": "G", "GOOGLE_GEMINI_BASE_URL": "http://h"}
    assert google(both) == Credentials("G", "http://h")  # google-genai prefers GOOGLE_API_KEY
    assert google({"GEMINI_API_KEY": "g"}) == Credentials("g", None)
    assert google({}) is None
    for provider, key, base in (
        ("together", "TOGETHER_API_KEY", "TOGETHER_BASE_URL"),
        ("groq", "GROQ_API_KEY", "GROQ_BASE_URL"),
        ("mistral", "MISTRAL_API_KEY", "MISTRAL_BASE_URL"),
    ):
        resolve = provider_spec(provider).resolve
        assert resolve({key: "k", base: "http://x"}) == Credentials("k", "http://x")
        assert resolve({base: "http://x"}) is None
        assert key in str(missing_key_error(provider))
    assert "GEMINI_API_KEY (or GOOGLE_API_KEY)" in str(missing_key_error("google"))


def test_a_gemini_result_keeps_the_answer_and_bills_thoughts_as_output() -> None:
    record = {
        "key": "row-1",
        "response": {
            "candidates": [
                {
                    "content": {"parts": [{"text": "summary", "thought": True}, {"text": "ans"}]},
                    "finishReason": "MAX_TOKENS",
                }
            ],
            "usageMetadata": {
                "promptTokenCount": 10,
                "candidatesTokenCount": 4,
                "thoughtsTokenCount": 6,
            },
            "modelVersion": "gemini-2.5-flash",
        },
    }
    line = json.loads(gemini_result_line(record))
    body = line["response"]["body"]
    assert line["custom_id"] == "row-1" and body["choices"][0]["message"]["content"] == "ans"
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["usage"]["completion_tokens"] == 10
    assert body["usage"]["completion_tokens_details"] == {"reasoning_tokens": 6}
    failed = json.loads(gemini_result_line({"key": "row-2", "error": {"code": 4, "message": "x"}}))
    assert failed["error"]["code"] == "batch_expired" and failed["response"] is None


def test_every_no_key_message_is_the_registry_line() -> None:
    # One builder (registry.missing_key_error) for the batch commands, resume and direct mode.
    from aeval.commands.drive import no_api_key

    several = str(no_api_key("to reach it", ["anthropic/claude-x", "google/gemini-x"]))
    assert several.startswith("no API key: set ANTHROPIC_API_KEY, GEMINI_API_KEY to reach it")
    assert several.endswith("; 'python -m aeval' with no key runs the offline demo")
    one = str(no_api_key("to reach it", ["groq/llama"]))
    assert one == str(
        missing_key_error(
            "groq", "to reach it", "'python -m aeval' with no key runs the offline demo"
        )
    )
    assert "GROQ_BASE_URL for another endpoint" in one and "aeval[groq]" in one
    assert str(no_api_key()).startswith("no API key: set OPENAI_API_KEY (or OPENAI_KEY) to reach")


@pytest.mark.parametrize(
    ("provider", "sdk", "extra"),
    [
        ("anthropic", "anthropic", "anthropic"),
        ("groq", "groq", "groq"),
        ("mistral", "mistralai", "mistral"),
    ],
)
def test_opening_a_provider_without_its_sdk_names_the_extra(
    provider: str, sdk: str, extra: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    from aeval.config import RetrySettings

    spec = provider_spec(provider)
    # None in sys.modules: the import fails as if the SDK were not installed (its
    # submodules, and the adapter, already imported by another test, are dropped first).
    adapter = spec.adapter.partition(":")[0]
    for name in [n for n in sys.modules if n == adapter or n.startswith(f"{sdk}.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, sdk, None)
    with pytest.raises(ConfigError) as caught:
        spec.open(Credentials("k", None), RetrySettings())
    assert str(caught.value) == (
        f"{provider}/ models need the {sdk} SDK: pip install 'aeval[{extra}]'"
    )
