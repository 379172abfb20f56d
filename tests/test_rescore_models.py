"""`rescore` over several models' output and error files: models, trials, duplicates."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import polars as pl
import pytest
from engine_helpers import SPECS, benchmark_slice, fast_config, observed
from output_lines import ok_line

from aeval.cli import main
from aeval.engine import Run
from aeval.local import LocalBatchServer

MODELS = ("gpt-4o-mini-2024-07-18", "gpt-4o-2024-11-20", "gpt-3.5-turbo-0125")
ROWS = 24
ERRORS = 4  # the last rows of each model's batch expired: error-file lines


def error_line(custom_id: str) -> str:
    error = {"code": "batch_expired", "message": "This request could not be executed in time"}
    return json.dumps({"id": "x", "custom_id": custom_id, "response": None, "error": error})


def request_line(custom_id: str, model: str) -> str:
    body = {"model": model, "messages": [{"role": "user", "content": "q"}]}
    return json.dumps(
        {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body}
    )


@pytest.fixture(scope="module")
def truths(benchmark_path: Path) -> list[str]:
    return pl.read_parquet(benchmark_path).head(ROWS).get_column("answer").to_list()


def write_batch(folder: Path, name: str, model: str, truths: list[str], right: int) -> list[Path]:
    """A Batch API output and error file of ``model``: the first ``right`` rows answered
    correctly, the rest wrongly, the last ``ERRORS`` rows expired."""
    out, err = folder / f"{name}_output.jsonl", folder / f"{name}_error.jsonl"
    answered = range(ROWS - ERRORS)
    out.write_text(
        "\n".join(
            ok_line(
                str(i), f"<answer>{truths[i] if i < right else '(assert false)'}</answer>", model
            )
            for i in answered
        )
        + "\n"
    )
    err.write_text("\n".join(error_line(str(i)) for i in range(ROWS - ERRORS, ROWS)) + "\n")
    return [out, err]


def rescore(benchmark_path: Path, out: Path, files: list[Path], *extra: str) -> int:
    args = ["rescore", "--dataset", str(benchmark_path), "--out", str(out), *extra]
    return main([*args, *map(str, files)])


def counts(out: Path) -> dict[tuple[str, int, str], int]:
    frame = pl.read_parquet(out / "verdicts.parquet")
    grouped = frame.group_by("model", "trial", "status").len().rows()
    return {(m, t, s): n for m, t, s, n in grouped}


@pytest.mark.parametrize("trials", [None, "1,1,1,1,1,1"])
def test_three_models_output_and_error_files(
    tmp_path: Path, benchmark_path: Path, truths: list[str], trials: str | None, capsys
) -> None:
    files = []
    for k, model in enumerate(MODELS):
        files += write_batch(tmp_path, f"batch_{k}", model, truths, right=6 + 4 * k)
    extra = ["--trials", trials] if trials else []
    code = rescore(benchmark_path, tmp_path / "o", files, *extra)
    err = capsys.readouterr().err
    assert code == 0, err
    assert "skipped" not in err and "note" not in err
    assert f"{3 * ROWS} verdict(s) from {3 * ROWS} line(s) in 6 file(s)" in err
    want = {}
    for k, model in enumerate(MODELS):
        want[(model, 1, "equivalent")] = 6 + 4 * k
        want[(model, 1, "not_equivalent")] = ROWS - ERRORS - 6 - 4 * k
        want[(model, 1, "api_error")] = ERRORS  # the error lines, under their own model
    assert counts(tmp_path / "o") == want


def test_trials_are_numbered_per_model(tmp_path: Path, benchmark_path: Path, truths) -> None:
    files = []
    for trial in (1, 2):
        for k, model in enumerate(MODELS):
            files += write_batch(tmp_path, f"t{trial}_m{k}", model, truths, right=trial + k)
    assert rescore(benchmark_path, tmp_path / "o", files) == 0
    frame = pl.read_parquet(tmp_path / "o" / "verdicts.parquet")
    for trial in (1, 2):
        for k, model in enumerate(MODELS):
            rows = frame.filter((pl.col("model") == model) & (pl.col("trial") == trial))
            assert rows.height == ROWS
            assert rows.get_column("correct").sum() == trial + k
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert [m["across_trials"]["trials"] for m in summary["models"]] == [2, 2, 2]


def test_an_unpaired_error_file_says_its_model_is_unknown(
    tmp_path: Path, benchmark_path: Path, truths, capsys
) -> None:
    out, err = write_batch(tmp_path, "b", MODELS[0], truths, right=3)
    lone = err.rename(tmp_path / "expired.jsonl")
    assert rescore(benchmark_path, tmp_path / "o", [out, lone]) == 0
    stderr = capsys.readouterr().err
    notes = [line for line in stderr.splitlines() if "note:" in line]
    assert notes == [
        f"aeval: note: {lone}: {ERRORS} line(s) name no model, and neither a request file, "
        "a paired output file nor --model says which: scored as model 'unknown'"
    ]
    frame = pl.read_parquet(tmp_path / "o" / "verdicts.parquet")
    assert frame.filter(pl.col("model") == "unknown").height == ERRORS
    # One --model per file settles it (empty: work it out).
    assert rescore(benchmark_path, tmp_path / "o2", [out, lone], "--model", f",{MODELS[0]}") == 0
    assert "note:" not in capsys.readouterr().err
    frame = pl.read_parquet(tmp_path / "o2" / "verdicts.parquet")
    assert frame.get_column("model").unique().to_list() == [MODELS[0]]
    # Not paired by name, so each file is a trial of its own model; --trials groups them.
    assert sorted(frame.get_column("trial").unique().to_list()) == [1, 2]


def test_a_paired_output_file_of_several_models_is_ambiguous(
    tmp_path: Path, benchmark_path: Path, truths, capsys
) -> None:
    out, err = write_batch(tmp_path, "mixed", MODELS[0], truths, right=3)
    lines = out.read_text().splitlines()
    lines[0] = ok_line("0", "<answer>(assert false)</answer>", MODELS[1])
    out.write_text("\n".join(lines) + "\n")
    assert rescore(benchmark_path, tmp_path / "o", [out, err]) == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if "note:" in line]
    assert notes == [
        f"aeval: note: {err}: {ERRORS} line(s) name no model and its paired output file "
        f"{out} names several ({', '.join(sorted(MODELS[:2]))}): scored as model 'unknown'; "
        "say which with --model"
    ]


def test_error_lines_take_the_model_of_their_request_file(
    tmp_path: Path, benchmark_path: Path, truths
) -> None:
    # An aeval run directory where trial 2 of one model expired entirely: no output file.
    run = tmp_path / "run"
    (run / "outputs").mkdir(parents=True)
    (run / "requests").mkdir()
    model = "ft:gpt-4o-mini:acme/x"  # not filesystem-safe: the stem cannot give it back
    stem = "ft_gpt-4o-mini_acme_x-t2-s0"
    (run / "requests" / f"{stem}.jsonl").write_text(
        "\n".join(request_line(str(i), model) for i in range(ROWS)) + "\n"
    )
    errors = run / "outputs" / f"{stem}-a1.error.jsonl"
    errors.write_text("\n".join(error_line(str(i)) for i in range(ROWS)) + "\n")
    assert rescore(benchmark_path, tmp_path / "o", [errors]) == 0
    frame = pl.read_parquet(tmp_path / "o" / "verdicts.parquet")
    assert frame.select("model", "trial", "status").unique().rows() == [(model, 2, "api_error")]


def test_a_retry_replaces_an_error_line_and_a_repeated_answer_is_named(
    tmp_path: Path, benchmark_path: Path, truths, capsys
) -> None:
    first = tmp_path / "first_output.jsonl"
    retry = tmp_path / "retry_output.jsonl"
    first.write_text(
        error_line("0") + "\n" + ok_line("1", f"<answer>{truths[1]}</answer>", MODELS[0]) + "\n"
    )
    retry.write_text(
        ok_line("0", f"<answer>{truths[0]}</answer>", MODELS[0])
        + "\n"
        + ok_line("1", "<answer>(assert false)</answer>", MODELS[0])
        + "\n"
    )
    code = rescore(benchmark_path, tmp_path / "o", [first, retry], "--trials", "1,1")
    assert code == 1
    err = capsys.readouterr().err
    assert (
        f"{retry}, line 2: custom_id '1' of model '{MODELS[0]}', trial 1 was already scored "
        f"from {first}, line 2"
    ) in err
    frame = pl.read_parquet(tmp_path / "o" / "verdicts.parquet").sort("custom_id")
    assert frame.select("custom_id", "status").rows() == [("0", "equivalent"), ("1", "equivalent")]


@pytest.mark.anyio
async def test_rescoring_a_three_model_run_reproduces_its_verdicts(
    benchmark_path: Path, tmp_path: Path, capsys
) -> None:
    data, frame = benchmark_slice(benchmark_path, tmp_path)
    async with LocalBatchServer(dataset=frame, models=dict(SPECS)) as server:
        config = fast_config(data, tmp_path / "results", server.base_url, trials=2, retry_failed=1)
        result = await Run(config).run()
    assert result.outcome == "finished", result.message
    files = sorted((result.run_dir / "outputs").glob("*.jsonl"))
    assert any(f.name.endswith(".error.jsonl") for f in files)  # error lines are exercised
    assert any("-s1-" in f.name for f in files)  # and a retry shard
    capsys.readouterr()
    args = ["rescore", "--dataset", str(data), "--out", str(tmp_path / "o"), *map(str, files)]
    code = await anyio.to_thread.run_sync(main, args)  # the command runs its own event loop
    err = capsys.readouterr().err
    assert code == 0, err
    assert "note:" not in err
    rescored = pl.read_parquet(tmp_path / "o" / "verdicts.parquet")
    assert observed(rescored) == observed(result.verdicts)
