"""`python -m aeval rescore` over real files built from the real benchmark."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from output_lines import ok_line as _ok_line

from aeval.cli import main
from aeval.verdicts import verdict_schema

MODEL = "gpt-4o-mini-2024-07-18"
ROWS = 24


def _rescore(dataset: Path, out: Path, *args: str | Path) -> int:
    """``aeval rescore --dataset DATASET --out OUT ARGS…`` in this process: its exit code."""
    return main(["rescore", "--dataset", str(dataset), "--out", str(out), *map(str, args)])


def error_line(custom_id: str, code: str = "batch_expired") -> str:
    error = {"code": code, "message": "This request could not be executed before the deadline"}
    return json.dumps({"id": "x", "custom_id": custom_id, "response": None, "error": error})


def ok_line(custom_id: str, content: str, finish: str = "stop") -> str:
    return _ok_line(custom_id, content, MODEL, finish=finish)


@pytest.fixture(scope="module")
def truths(benchmark_path: Path) -> list[dict[str, str]]:
    return pl.read_parquet(benchmark_path).head(ROWS).to_dicts()


def answer_for(kind: int, truth: str) -> str:
    return [
        f"<think>hmm</think><answer>{truth}</answer>",  # equivalent, strict
        f"<answer>```lisp\n{truth}\n```</answer>",  # equivalent, repaired
        "<answer>(assert false)</answer>",  # not_equivalent (too strong)
        f"<answer>{truth}\n(check-sat)</answer>",  # forbidden_command
    ][kind]


def write_trial(path: Path, truths: list[dict[str, str]], shift: int) -> None:
    lines = []
    for i, row in enumerate(truths):
        kind = (i + shift) % 5
        lines.append(
            error_line(str(i)) if kind == 4 else ok_line(str(i), answer_for(kind, row["answer"]))
        )
    path.write_text("\n".join(lines) + "\n")


def test_rescore_two_trials(tmp_path: Path, benchmark_path: Path, truths, capsys) -> None:
    t1, t2, out = tmp_path / "t1.jsonl", tmp_path / "t2.jsonl", tmp_path / "out"
    write_trial(t1, truths, 0)
    write_trial(t2, truths, 1)
    code = _rescore(benchmark_path, out, t1, t2)
    assert code == 0, capsys.readouterr().err
    frame = pl.read_parquet(out / "verdicts.parquet")
    assert frame.schema == pl.Schema(verdict_schema())
    assert frame.height == 2 * ROWS
    assert frame.get_column("model").unique().to_list() == [MODEL]  # error lines too
    assert sorted(frame.get_column("trial").unique().to_list()) == [1, 2]
    for trial, shift in ((1, 0), (2, 1)):
        rows = frame.filter(pl.col("trial") == trial).sort(pl.col("custom_id").cast(pl.Int64))
        kinds = [(i + shift) % 5 for i in range(ROWS)]
        expected = ["equivalent", "equivalent", "not_equivalent", "forbidden_command", "api_error"]
        assert rows.get_column("status").to_list() == [expected[k] for k in kinds]
        repaired = rows.get_column("repaired").to_list()
        assert [r for r, k in zip(repaired, kinds, strict=True) if k == 1] == [
            "code_fence"
        ] * kinds.count(1)
        wrong = rows.filter(pl.col("status") == "not_equivalent")
        assert set(wrong.get_column("direction").to_list()) == {"too_strong"}
        assert all(json.loads(ce) for ce in wrong.get_column("counterexample").to_list())
        assert rows.get_column("tier").null_count() == 0
    summary = json.loads((out / "summary.json").read_text())
    (model,) = summary["models"]
    assert model["model"] == MODEL
    correct = frame.get_column("correct").sum()
    assert model["correct"] == correct
    printed = capsys.readouterr().out
    assert "gpt-4o" in printed


def test_bad_lines_are_named_and_the_rest_is_scored(
    tmp_path: Path, benchmark_path: Path, truths, capsys
) -> None:
    good = ok_line("1", answer_for(0, truths[1]["answer"]))
    f = tmp_path / "t1.jsonl"
    f.write_bytes(
        "\n".join(
            [
                good,
                "this is not json",
                ok_line("9999", "<answer>(assert true)</answer>"),
                '{"response": null}',
                "",
            ]
        ).encode()
        + ok_line("2", "<answer>\udcff</answer>").encode("utf-8", "surrogateescape")[:50]
        + b"\n"
        + ok_line("3", answer_for(2, truths[3]["answer"])).encode()
        + b"\n"
        + good.encode()
        + b"\n"
    )
    out = tmp_path / "out"
    code = _rescore(benchmark_path, out, f, tmp_path / "nope.jsonl")
    err = capsys.readouterr().err
    assert code == 1
    assert f"{f}, line 2: not valid JSON" in err
    assert f"{f}, line 3: custom_id '9999' is not in the dataset" in err
    assert f"{f}, line 4: the line has no custom_id" in err
    assert f"{f}, line 5: not valid JSON" in err  # cut-off line
    assert f"{f}, line 7: custom_id '1' repeats line 1" in err
    assert "nope.jsonl: cannot read the file" in err
    frame = pl.read_parquet(out / "verdicts.parquet")
    assert dict(zip(frame["custom_id"], frame["status"], strict=True)) == {
        "1": "equivalent",
        "3": "not_equivalent",
    }


def test_trials_option_groups_output_and_error_files(
    tmp_path: Path, benchmark_path: Path, truths
) -> None:
    output, errors = tmp_path / "t1_output.jsonl", tmp_path / "t1_error.jsonl"
    output.write_text(ok_line("0", answer_for(0, truths[0]["answer"])) + "\n")
    errors.write_text(error_line("1") + "\n" + error_line("0") + "\n")
    out = tmp_path / "o"
    code = _rescore(benchmark_path, out, "--trials", "1,1", output, errors)
    assert code == 1  # custom_id 0 appears in both files of trial 1
    frame = pl.read_parquet(out / "verdicts.parquet").sort("custom_id")
    # The error file's lines get the model of its paired output file (…error… ↔ …output…).
    assert frame.select("trial", "custom_id", "status", "model").rows() == [
        (1, "0", "equivalent", MODEL),
        (1, "1", "api_error", MODEL),
    ]


def test_dataset_id_column_names_the_rows(tmp_path: Path) -> None:
    data = tmp_path / "bench.jsonl"
    rows = [
        {
            "id": "alpha",
            "question": "q",
            "answer": "(assert (> x 1))",
            "constants": "(declare-const x Int)",
        },
        {
            "id": "beta",
            "question": "q",
            "answer": "(assert (< x 1))",
            "constants": "(declare-const x Int)",
        },
    ]
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    f = tmp_path / "t.jsonl"
    f.write_text(
        ok_line("beta", "<answer>(assert (< x 1))</answer>") + "\n" + ok_line("0", "x") + "\n"
    )
    code = _rescore(data, tmp_path / "o", f)
    assert code == 1  # "0" is not an id of this dataset
    frame = pl.read_parquet(tmp_path / "o" / "verdicts.parquet")
    assert frame.select("custom_id", "status").rows() == [("beta", "equivalent")]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--trials", "1,2"], "--trials gives 2 trial(s) for 1 file(s)"),
        (["--trials", "a"], "comma-separated integers"),
        (["--workers", "0"], "--workers must be at least 1"),
        (["--model", "a,b"], "--model gives 2 model(s) for 1 file(s)"),
        (["--model", ""], "--model: expected a model name"),
    ],
)
def test_bad_options_are_clear_errors(
    tmp_path: Path, benchmark_path: Path, args, needle, capsys
) -> None:
    f = tmp_path / "t.jsonl"
    f.write_text("")
    code = _rescore(benchmark_path, tmp_path / "o", *args, f)
    assert code == 2
    assert needle in capsys.readouterr().err


def test_dataset_without_ground_truth_is_a_clear_error(tmp_path: Path, capsys) -> None:
    data = tmp_path / "bench.csv"
    data.write_text("question,constants\nq,(declare-const x Int)\n")
    f = tmp_path / "t.jsonl"
    f.write_text(ok_line("0", "x") + "\n")
    code = _rescore(data, tmp_path / "o", f)
    err = capsys.readouterr().err
    assert code == 2
    assert "answer" in err and "bench.csv" in err


def test_python_dash_m_aeval_rescore(tmp_path: Path, benchmark_path: Path, truths) -> None:
    f = tmp_path / "t.jsonl"
    write_trial(f, truths[:5], 0)
    out = tmp_path / "o"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "aeval",
            "rescore",
            "--dataset",
            str(benchmark_path),
            "--out",
            str(out),
            str(f),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert (out / "verdicts.parquet").exists() and (out / "summary.json").exists()
    assert "5 verdict(s) from 5 line(s)" in proc.stderr


def test_a_gpt5_outputs_reasoning_tokens_reach_verdicts_summary_and_cost(
    tmp_path: Path, benchmark_path: Path, truths, capsys
) -> None:
    """The study's gpt-5 outputs, rescored: each line's reasoning tokens (chat's
    completion_tokens_details, or a Responses API line's output_tokens_details) land in
    verdicts.parquet and summary.json, and the model has a price (reasoning as output)."""
    model = "gpt-5-2025-08-07"
    lines = []
    for i, row in enumerate(truths[:4]):
        line = json.loads(_ok_line(str(i), f"<answer>{row['answer']}</answer>", model))
        usage = line["response"]["body"]["usage"]
        usage["completion_tokens_details"] = {"reasoning_tokens": 100 * (i + 1)}
        usage["completion_tokens"] += 100 * (i + 1)
        lines.append(json.dumps(line))
    # one answer through the Responses API (openai 3.57 types/responses/response.py)
    body = {
        "id": "resp_1", "object": "response", "created_at": 1, "model": model,
        "status": "completed", "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
        "output": [
            {"id": "rs_1", "type": "reasoning", "summary": []},
            {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
             "content": [{"type": "output_text", "annotations": [],
                          "text": f"<answer>{truths[4]['answer']}</answer>"}]},
        ],
        "usage": {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0},
                  "output_tokens": 510, "output_tokens_details": {"reasoning_tokens": 500},
                  "total_tokens": 610},
    }  # fmt: skip
    response = {"status_code": 200, "request_id": "r", "body": body}
    lines.append(json.dumps({"id": "b", "custom_id": "4", "response": response, "error": None}))
    path = tmp_path / "gpt5.jsonl"
    path.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    assert _rescore(benchmark_path, out, path) == 0, capsys.readouterr().err
    frame = pl.read_parquet(out / "verdicts.parquet").sort(pl.col("custom_id").cast(pl.Int64))
    assert frame.get_column("reasoning_tokens").to_list() == [100, 200, 300, 400, 500]
    assert frame.get_column("status").to_list() == ["equivalent"] * 5
    (summary,) = json.loads((out / "summary.json").read_text())["models"]
    assert summary["tokens"] == {
        "prompt": 500, "completion": 1000 + 40 + 510, "total": 500 + 1550, "reasoning": 1500,
    }  # fmt: skip
    # gpt-5 at its batch price (genai-prices): $0.625 input, $5 output per million tokens
    assert summary["cost_usd"] == pytest.approx((500 * 0.625 + 1550 * 5.0) / 1e6, abs=1e-6)


def test_rescore_with_only_files_named_scores_a_run_on_its_own_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`rescore results/<run>/outputs/*.jsonl`: the data the run recorded, a fresh
    directory under results/ named on stderr, the run's own verdicts again."""
    for name in ("OPENAI_API_KEY", "OPENAI_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    run = ["run", "--model", MODEL, "--limit", "6", "--trials", "2", "--run-id", "r", "-q"]
    assert main(run) == 0  # the offline demo: the bundled benchmark, recorded in config.json
    outputs = sorted(Path("results/r/outputs").glob("*.jsonl"))
    assert outputs
    capsys.readouterr()
    assert main(["rescore", "-q", *map(str, outputs)]) == 0
    err = capsys.readouterr().err
    (made,) = Path("results").glob("rescore-*")
    assert f"aeval: rescoring into {made}" in err.splitlines()
    columns = ["model", "trial", "custom_id", "status"]
    again = pl.read_parquet(made / "verdicts.parquet").select(columns).sort(columns[:3])
    before = pl.read_parquet("results/r/verdicts.parquet").select(columns).sort(columns[:3])
    assert again.height == 12 and again.equals(before)
    # a second rescore never writes into the first one's directory
    assert main(["rescore", "-q", *map(str, outputs)]) == 0
    assert len(list(Path("results").glob("rescore-*"))) == 2


def test_rescore_files_of_two_runs_on_different_data_asks_for_dataset(
    tmp_path: Path, benchmark_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    base = ["run", "--model", MODEL, "--limit", "3", "-q"]
    assert main([*base, "--run-id", "demo"]) == 0
    assert main([*base, "--run-id", "real", "--dataset", str(benchmark_path)]) == 0
    files = sorted(Path("results").glob("*/outputs/*.jsonl"))
    capsys.readouterr()
    assert main(["rescore", "--out", "o", *map(str, files)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("aeval: error: the files come from runs scored on different data")
    assert "results/demo" in line and "results/real" in line and "give --dataset" in line


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_rescore_without_dataset_reads_the_hub_as_run_does_with_its_offline_error(
    tmp_path: Path, truths
) -> None:
    """Files from no aeval run: the hub benchmark, as `run`'s default; with the hub
    unreachable, exit 2 and the one line `run` gives, before anything is written."""
    write_trial(tmp_path / "t1.jsonl", truths, 0)
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "HF_DATASETS_CACHE")}
    env.update(
        HF_HOME=str(tmp_path / "hf"),
        HF_ENDPOINT=f"http://127.0.0.1:{_closed_port()}",
        OPENAI_API_KEY="sk-test",  # so `run` reads the hub rather than the offline demo
        PYTHONPATH=str(Path(__file__).resolve().parents[1]),
    )

    def error_of(*args: str) -> str:
        proc = subprocess.run(
            [sys.executable, "-m", "aeval", *args],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 2, proc.stderr
        (line,) = [x for x in proc.stderr.splitlines() if x.startswith("aeval: error:")]
        return line

    rescored = error_of("rescore", "t1.jsonl")
    assert rescored.startswith("aeval: error: cannot load dataset 'dannkoh/invaR1ant-benchmark'")
    assert "pass a local file with --dataset" in rescored
    assert rescored == error_of("run", "--dry-run", "--out", "r")
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").iterdir())
