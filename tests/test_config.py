from __future__ import annotations

import json
from pathlib import Path

import pytest

from aeval.config import (
    MISSION_MODELS,
    Credentials,
    PollSettings,
    RunConfig,
    resolve_credentials,
)
from aeval.errors import ConfigError
from aeval.prompts import GenerationSettings, PromptSettings


def test_credentials_from_the_usual_variables() -> None:
    assert resolve_credentials({}) is None
    assert resolve_credentials({"OPENAI_API_KEY": "  "}) is None
    creds = resolve_credentials({"OPENAI_KEY": "sk-1", "OPENAI_BASE_URL": "http://x/v1"})
    assert creds == Credentials("sk-1", "http://x/v1")
    both = resolve_credentials({"OPENAI_API_KEY": "sk-a", "OPENAI_KEY": "sk-b"})
    assert both is not None and both.api_key == "sk-a"
    assert "sk-a" not in repr(both)


def test_defaults_are_the_mission_models() -> None:
    config = RunConfig()
    assert config.models == MISSION_MODELS and len(MISSION_MODELS) == 3
    assert config.trials == 1 and config.out_dir == Path("results")


def test_round_trip_without_the_key(tmp_path: Path) -> None:
    config = RunConfig(
        models=("a", "b"),
        trials=3,
        dataset="x.parquet",
        limit=5,
        prompt=PromptSettings(system="be brief"),
        generation=GenerationSettings(temperature=0.5, max_completion_tokens=100),
        poll=PollSettings(initial_s=0.5, max_s=5),
        retry_failed=2,
        out_dir=tmp_path,
        credentials=Credentials("sk-secret", "http://h/v1"),
    )
    text = json.dumps(config.to_dict())
    assert "sk-secret" not in text and "http://h/v1" not in text
    back = RunConfig.from_dict(json.loads(text))
    assert back == config  # credentials are not part of equality
    assert back.credentials is None


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"models": ()}, "no model"),
        ({"models": ("a", "a")}, "twice"),
        ({"trials": 0}, "trials"),
        ({"retry_failed": -1}, "retry-failed"),
        ({"limit": 0}, "limit"),
        ({"run_id": "../x"}, "run id"),
        ({"workers": 0}, "workers"),
    ],
)
def test_bad_settings_say_what_is_wrong(changes: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        RunConfig(**changes)  # type: ignore[arg-type]


def test_poll_settings_are_checked() -> None:
    with pytest.raises(ConfigError, match="poll"):
        PollSettings(initial_s=10, max_s=1)
    with pytest.raises(ConfigError, match="jitter"):
        PollSettings(jitter=1.5)


def test_unknown_saved_setting_is_an_error() -> None:
    with pytest.raises(ConfigError, match="unknown setting"):
        RunConfig.from_dict({"models": ["a"], "colour": "red"}, source="config.json")
