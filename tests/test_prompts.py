from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from aeval.errors import ConfigError, InputFileError
from aeval.prompts import (
    DEFAULT_INSTRUCTION,
    GenerationSettings,
    PromptSettings,
    format_prompt,
    messages,
    request_body,
)

# The issue's text, typed out independently of the module, byte for byte.
ISSUE_TEXT = (
    b"Structure your response by placing your thought process between <think></think> tags and"
    b" your final answer between <answer></answer> tags like this:\n<think>[REASONING]</think>"
    b"<answer>(assert (and (not ( = cell_0_0 0)) (not ( = cell_0_0 1))))</answer>"
)


def test_default_instruction_is_byte_exact() -> None:
    assert DEFAULT_INSTRUCTION.encode("utf-8") == ISSUE_TEXT
    assert DEFAULT_INSTRUCTION.count("\n") == 1  # two lines, a real newline after "like this:"
    assert DEFAULT_INSTRUCTION.split("\n")[0].endswith("like this:")
    assert (
        hashlib.sha256(ISSUE_TEXT).hexdigest()
        == hashlib.sha256(DEFAULT_INSTRUCTION.encode()).hexdigest()
    )


def test_prompt_is_question_newline_instruction() -> None:
    question = (
        "Given the following examples…\nN=1: (assert (> x 0))\nWhat is the constraint for N=2?"
    )
    assert format_prompt(question) == question + "\n" + DEFAULT_INSTRUCTION
    custom = PromptSettings(instruction="Answer in SMT-LIB.")
    assert format_prompt("Q?", custom) == "Q?\nAnswer in SMT-LIB."


def test_default_body_has_only_model_and_messages() -> None:
    body = request_body("gpt-4o-mini", "Q?")
    assert body == {
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": "Q?\n" + DEFAULT_INSTRUCTION}],
    }


def test_body_carries_exactly_what_was_configured() -> None:
    gen = GenerationSettings(temperature=0.0, seed=7, max_completion_tokens=4096)
    body = request_body("o3-mini", "Q?", PromptSettings(system="You are careful."), gen)
    assert set(body) == {"model", "messages", "temperature", "seed", "max_completion_tokens"}
    assert body["temperature"] == 0.0  # zero is a setting, not "unset"
    assert body["seed"] == 7 and body["max_completion_tokens"] == 4096
    assert body["messages"][0] == {"role": "system", "content": "You are careful."}
    assert body["messages"][1]["role"] == "user"
    assert "max_tokens" not in body and "top_p" not in body
    assert request_body("m", "Q", gen=GenerationSettings(max_tokens=10, top_p=0.5)) == {
        "model": "m",
        "messages": messages("Q"),
        "top_p": 0.5,
        "max_tokens": 10,
    }


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"temperature": 3.0}, "temperature must be in"),
        ({"temperature": float("nan")}, "temperature must be a number"),
        ({"top_p": 0.0}, r"top_p must be in \(0.0"),
        ({"max_tokens": 0}, "max_tokens must be at least 1"),
        ({"max_completion_tokens": 2.5}, "max_completion_tokens must be an integer"),
        ({"seed": True}, "seed must be an integer"),
        ({"max_tokens": 10, "max_completion_tokens": 10}, "not both"),
    ],
)
def test_bad_generation_settings_are_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        GenerationSettings(**kwargs)  # type: ignore[arg-type]


def test_empty_model_and_instruction_are_refused() -> None:
    with pytest.raises(ConfigError, match="model name"):
        request_body("  ", "Q")
    with pytest.raises(ConfigError, match="instruction"):
        PromptSettings(instruction="")


def test_instruction_and_system_from_files(tmp_path: Path) -> None:
    text = "First line.\n  Second line, indented.\n"
    (tmp_path / "inst.txt").write_text(text)
    (tmp_path / "sys.txt").write_bytes(b"Be brief.\r\n")
    settings = PromptSettings.from_files(tmp_path / "inst.txt", tmp_path / "sys.txt")
    # One trailing newline (the editor's) is dropped; everything else is kept.
    assert settings.instruction == "First line.\n  Second line, indented."
    assert settings.system == "Be brief."
    # A file holding exactly the default instruction plus a newline round-trips byte for byte.
    (tmp_path / "default.txt").write_bytes(ISSUE_TEXT + b"\n")
    assert PromptSettings.from_files(tmp_path / "default.txt") == PromptSettings()
    assert PromptSettings.from_files(system="S").system == "S"


@pytest.mark.parametrize(
    ("content", "message"),
    [(None, "cannot read instruction file"), (b"\n", "is empty"), (b"\xff\xfe\x00", "not UTF-8")],
)
def test_unusable_instruction_files(tmp_path: Path, content: bytes | None, message: str) -> None:
    path = tmp_path / "inst.txt"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(InputFileError, match=message) as info:
        PromptSettings.from_files(path)
    assert str(path) in str(info.value)
