"""The published reading in what users get: rescore and run outputs, summary.json, every
report format, old verdict files; and ``run --protocol warp-2025``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import polars as pl
import pytest
from engine_helpers import benchmark_slice

from aeval.cli import main
from aeval.commands.run import config_from_args
from aeval.commands.run_args import add_arguments
from aeval.config import RunConfig
from aeval.dataset import load_dataset
from aeval.errors import ConfigError
from aeval.local import LocalBatchServer, ModelSpec
from aeval.local.questions import QuestionIndex
from aeval.prompts import DEFAULT_INSTRUCTION, WARP_2025_INSTRUCTION, PromptSettings, format_prompt
from aeval.report import load_run, summarize
from aeval.study_reasons import EQUIVALENT, NO_ANSWER, NOT_IMPLIED
from aeval.verdicts import Status, Verdict, verdict_schema

MODEL = "gpt-4o-2024-11-20"


def ok_line(custom_id: str, content: str) -> str:
    body = {
        "model": MODEL,
        "choices": [{"index": 0, "message": {"content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5},
    }
    return json.dumps(
        {"custom_id": custom_id, "response": {"status_code": 200, "body": body}, "error": None}
    )


def error_line(custom_id: str) -> str:
    error = {"code": "batch_expired", "message": "not executed before the deadline"}
    return json.dumps({"custom_id": custom_id, "response": None, "error": error})


def truths(benchmark_path: Path, rows: int) -> list[str]:
    return pl.read_parquet(benchmark_path).head(rows).get_column("answer").to_list()


# Per kind: (content or None for an error line, strict status, correct_published, reason).
def trial_lines(answers: list[str]) -> tuple[list[str], list[tuple[str, bool, str | None]]]:
    lines, expected = [], []
    for i, truth in enumerate(answers):
        kind = i % 5
        if kind == 0:  # a copy: correct under every reading
            lines.append(ok_line(str(i), f"<answer>{truth}</answer>"))
            expected.append(("equivalent", True, EQUIVALENT))
        elif kind == 1:  # surplus ")": published runs the assert and skips the rest
            lines.append(ok_line(str(i), f"<answer>{truth}))))</answer>"))
            expected.append(("strict-wrong", True, EQUIVALENT))
        elif kind == 2:  # too strong under every reading
            lines.append(ok_line(str(i), "<answer>(assert false)</answer>"))
            expected.append(("not_equivalent", False, NOT_IMPLIED))
        elif kind == 3:  # would forge two "unsat" lines: refused before z3
            forged = f'<answer>{truth} (echo "unsat") (echo "unsat")</answer>'
            lines.append(ok_line(str(i), forged))
            expected.append(("forbidden_command", False, None))
        else:  # an error line: no answer
            lines.append(error_line(str(i)))
            expected.append(("api_error", False, NO_ANSWER))
    return lines, expected


def test_rescore_gives_every_verdict_the_published_reading(
    tmp_path: Path, benchmark_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    answers = truths(benchmark_path, 10)
    lines, expected = trial_lines(answers)
    (tmp_path / "t1.jsonl").write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    args = ["rescore", "--dataset", str(benchmark_path), "--out", str(out), "--workers", "1"]
    assert main([*args, str(tmp_path / "t1.jsonl")]) == 0, capsys.readouterr().err
    frame = pl.read_parquet(out / "verdicts.parquet").sort(pl.col("custom_id").cast(pl.Int64))
    assert frame.schema == pl.Schema(verdict_schema())
    for row, (status, published, reason) in zip(frame.iter_rows(named=True), expected, strict=True):
        if status == "strict-wrong":
            assert row["status"] != "equivalent" or row["repaired"] is not None
        else:
            assert row["status"] == status
        assert row["correct_published"] is published
        if reason is None:
            assert row["published_reason"].startswith("refused:")
            assert "'echo'" in row["published_reason"]
        else:
            assert row["published_reason"] == reason
    summary = json.loads((out / "summary.json").read_text())
    # The study's count: every verdict, the error lines included, as incorrect.
    for group in (summary["models"][0], summary["trials"][0], summary["overall"]):
        assert group["published_accuracy"]["value"] == 4 / 10
        assert group["published_accuracy"]["n"] == 10
    assert {t["tier"] for t in summary["tiers"]} and all(
        t["published_accuracy"]["n"] == t["n"] for t in summary["tiers"]
    )
    capsys.readouterr()

    # Every report format carries the column, with the same figure.
    for fmt in ("table", "md", "csv", "json", "html"):
        assert main(["report", str(out), "-f", fmt, "-o", str(tmp_path / f"r.{fmt}")]) == 0
        text = (tmp_path / f"r.{fmt}").read_text()
        if fmt == "json":
            assert json.loads(text)["models"][0]["published_accuracy"]["value"] == 0.4
        elif fmt == "csv":
            head, first = text.splitlines()[:2]
            row = dict(zip(head.split(","), first.split(","), strict=True))
            assert float(row["published_accuracy"]) == 0.4
        else:
            assert "Published" in text and "40.0%" in text


def test_no_published_leaves_the_column_empty(
    tmp_path: Path, benchmark_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines, _ = trial_lines(truths(benchmark_path, 5))
    (tmp_path / "t1.jsonl").write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    args = ["rescore", "--dataset", str(benchmark_path), "--out", str(out), "--no-published"]
    assert main([*args, "--workers", "1", str(tmp_path / "t1.jsonl")]) == 0
    frame = pl.read_parquet(out / "verdicts.parquet")
    assert frame.get_column("correct_published").null_count() == frame.height == 5
    assert frame.get_column("status").to_list().count("equivalent") >= 1  # strict as ever
    summary = json.loads((out / "summary.json").read_text())
    assert summary["models"][0]["published_accuracy"]["value"] is None
    printed = capsys.readouterr().out
    assert "Published" in printed and "—" in printed


def test_verdict_records_without_the_reading_load_with_it_empty(tmp_path: Path) -> None:
    run = tmp_path / "old"
    run.mkdir()
    old = Verdict(model="m", trial=1, custom_id="0", status=Status.EQUIVALENT).to_record()
    del old["correct_published"], old["published_reason"]
    (run / "verdicts.jsonl").write_text(json.dumps(old) + "\n")
    assert Verdict.from_record(old).correct_published is None
    frame = load_run(run)
    assert frame.get_column("correct_published").to_list() == [None]
    summary = summarize(frame)
    assert summary["models"][0]["accuracy"]["value"] == 1.0
    assert summary["models"][0]["published_accuracy"]["value"] is None
    # And an old parquet without the columns, too.
    frame.drop("correct_published", "published_reason").write_parquet(run / "verdicts.parquet")
    assert load_run(run).get_column("correct_published").to_list() == [None]


# -- --protocol warp-2025 ---------------------------------------------------------------------

# The text, typed out independently of the module, byte for byte.
WARP_TEXT = (
    b"All per-variable constraints must be combined using a top-level (assert (and ...)) clause.\n"
    b"The output must be in exact, canonical SMT-LIB format without extra commentary in the "
    b"constraint string.\nShow your work in <think> </think> tags. And return the final SMT-LIB "
    b"constraint string in <answer> </answer> tags.\nFor example: <answer>(assert (and  ( >=  "
    b"in0 97)  ( <=  in0 122)))</answer>."
)


def test_warp_prompt_bytes() -> None:
    assert WARP_2025_INSTRUCTION.encode() == WARP_TEXT
    question = "Given …\nN=1: (assert (> x 0))\nWhat is N=2?"
    warp = PromptSettings.for_protocol("warp-2025")
    assert format_prompt(question, warp).encode() == WARP_TEXT + b"\n" + question.encode()
    # The default stays: the seed instruction after the question.
    default = PromptSettings.for_protocol("default")
    assert format_prompt(question, default) == question + "\n" + DEFAULT_INSTRUCTION
    with pytest.raises(ConfigError, match="unknown protocol 'warp-2024'"):
        PromptSettings.for_protocol("warp-2024")


def test_protocol_is_a_config_field_that_round_trips() -> None:
    config = RunConfig(protocol="warp-2025")
    assert config.prompt.instruction == WARP_2025_INSTRUCTION and config.prompt.instruction_first
    saved = json.loads(json.dumps(config.to_dict()))
    assert saved["protocol"] == "warp-2025" and saved["published"] is True
    assert RunConfig.from_dict(saved) == config
    old = {k: v for k, v in RunConfig().to_dict().items() if k not in ("protocol", "published")}
    assert RunConfig.from_dict(old).protocol == "default"
    with pytest.raises(ConfigError, match="unknown protocol"):
        RunConfig(protocol="nope")


def test_protocol_flag_and_its_conflict(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--protocol", "warp-2025", "--no-published"])
    config = config_from_args(args, dataset=None)
    assert config.protocol == "warp-2025" and config.prompt.instruction_first
    assert config.published is False
    (tmp_path / "i.txt").write_text("mine\n")
    args = parser.parse_args(
        ["--protocol", "warp-2025", "--instruction-file", str(tmp_path / "i.txt")]
    )
    with pytest.raises(ConfigError, match="--protocol warp-2025 fixes the instruction"):
        config_from_args(args, dataset=None)


def test_local_server_matches_an_instruction_first_prompt(benchmark_path: Path) -> None:
    frame = load_dataset(str(benchmark_path))
    index = QuestionIndex.from_frame(frame)
    question = frame.get_column("question")[5]
    warp = PromptSettings.for_protocol("warp-2025")
    found = index.match(format_prompt(question, warp))
    assert found is not None and found.question == question


def test_run_with_the_warp_protocol(
    benchmark_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=3)
    with LocalBatchServer(dataset=frame, models={"ref": ModelSpec("reference")}) as server:
        monkeypatch.delenv("OPENAI_KEY", raising=False)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-cli")
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        args = ["run", "--model", "ref", "--dataset", str(data), "--out", str(tmp_path / "r")]
        fast = ["--poll-initial", "0.05", "--poll-max", "0.2", "--workers", "1", "--quiet"]
        assert main([*args, *fast, "--run-id", "w", "--protocol", "warp-2025"]) == 0
    run = tmp_path / "r" / "w"
    assert json.loads((run / "config.json").read_text())["protocol"] == "warp-2025"
    (request_file,) = (run / "requests").glob("*.jsonl")
    sent = [json.loads(line) for line in request_file.read_text().splitlines()]
    questions = frame.get_column("question").to_list()
    for line in sent:
        content = line["body"]["messages"][-1]["content"]
        assert content == WARP_2025_INSTRUCTION + "\n" + questions[int(line["custom_id"])]
    verdicts = pl.read_parquet(run / "verdicts.parquet")
    # The reference responder found each row from the instruction-first prompt.
    assert verdicts.get_column("status").to_list() == ["equivalent"] * 3
    assert verdicts.get_column("correct_published").to_list() == [True] * 3
