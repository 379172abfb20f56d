"""Provenance: what a result was made from, in config.json, summary.json and every
report; SYNTHETIC on every synthetic run; no comparison across different data."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import shutil
from pathlib import Path

import polars as pl
import pytest
from engine_helpers import SPECS, benchmark_slice, fast_config

from aeval.cli import main
from aeval.dataset import load_dataset, load_dataset_fingerprinted
from aeval.dataset.fingerprint import DatasetFingerprint, content_sha256
from aeval.engine import Run
from aeval.local import LocalBatchServer
from aeval.local.models import describe_models
from aeval.prompts import DEFAULT_INSTRUCTION


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def synthetic_run(benchmark_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One finished two-trial run of the synthetic test models on a 10-row slice."""
    import anyio

    tmp = tmp_path_factory.mktemp("prov")
    data, frame = benchmark_slice(benchmark_path, tmp, rows=10)

    async def go() -> Path:
        async with LocalBatchServer(dataset=frame, models=dict(SPECS)) as server:
            config = fast_config(data, tmp / "out", server.base_url, trials=2, run_id="syn")
            # Not told: the run asks the loopback server which responders answer.
            result = await Run(config).run()
        assert result.outcome == "finished", result.message
        return result.run_dir

    return anyio.run(go)


def test_config_and_summary_record_the_provenance(synthetic_run: Path) -> None:
    config = json.loads((synthetic_run / "config.json").read_text())
    summary = json.loads((synthetic_run / "summary.json").read_text())
    prov = config["provenance"]
    assert summary["provenance"] == prov  # carried, not recomputed at the end
    assert prov["synthetic"] is True and prov["offline"] is False
    assert "model-a=synthetic seed=1 accuracy=0.6" in prov["responder"]
    data = Path(config["dataset"])
    dataset = prov["dataset"]
    assert dataset["kind"] == "file" and dataset["ref"] == str(data)
    assert dataset["sha256"] == _sha256(data) and dataset["revision"] is None
    assert dataset["rows"] == dataset["total_rows"] == 10
    assert dataset["content_sha256"] == content_sha256(load_dataset(data))
    assert prov["instruction_sha256"] == hashlib.sha256(DEFAULT_INSTRUCTION.encode()).hexdigest()
    assert prov["protocol"] == "default"
    assert set(prov["generation"]) >= {"temperature", "top_p", "seed"}
    assert set(prov["versions"]) >= {"aeval", "z3-solver", "openai", "python"}
    assert all(prov["versions"][k] for k in ("aeval", "z3-solver", "openai", "python"))


@pytest.mark.anyio
async def test_only_aeval_s_own_loopback_server_is_asked_and_recognised(tmp_path: Path) -> None:
    import socket

    from aeval.local import ModelSpec
    from aeval.store.provenance import probe_local_server

    assert await probe_local_server("https://api.openai.com/v1", "sk-x") is None  # never asked
    assert await probe_local_server(None, None) is None
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    assert await probe_local_server(closed, "sk-x") is None  # nothing listening: not labelled
    async with LocalBatchServer(models=dict(SPECS), api_key="sk-x") as server:
        found = await probe_local_server(server.base_url, "sk-x")
    assert found == describe_models(SPECS)
    recorded = tmp_path / "out.jsonl"
    recorded.write_text("")
    replay = {"*": ModelSpec("replay", replay=(recorded,))}
    async with LocalBatchServer(models=replay) as server:  # recorded real answers: not synthetic
        assert await probe_local_server(server.base_url, None) is None


def test_synthetic_trials_differ_like_sampled_trials(synthetic_run: Path) -> None:
    frame = pl.read_parquet(synthetic_run / "verdicts.parquet")
    by_trial = {
        t: dict(zip(g["custom_id"], g["status"], strict=True))
        for (t,), g in frame.filter(pl.col("model") == "model-a").group_by("trial")
    }
    assert by_trial[1].keys() == by_trial[2].keys()
    changed = [cid for cid in by_trial[1] if by_trial[1][cid] != by_trial[2][cid]]
    assert changed  # a sampled trial answers some items differently...
    assert len(changed) < len(by_trial[1])  # ...but not all of them
    summary = json.loads((synthetic_run / "summary.json").read_text())
    stds = [m["across_trials"]["std"] for m in summary["models"]]
    assert any(s is not None and s > 0 for s in stds), stds


@pytest.mark.parametrize("fmt", ["table", "md", "csv", "json", "html"])
def test_every_report_format_shows_provenance_and_the_synthetic_label(
    synthetic_run: Path, fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / f"report.{fmt}"
    assert main(["report", str(synthetic_run), "-f", fmt, "-o", str(out)]) == 0
    text = out.read_text()
    prov = json.loads((synthetic_run / "config.json").read_text())["provenance"]
    sha = prov["dataset"]["sha256"]
    if fmt == "json":
        assert json.loads(text)["provenance"] == prov
        return
    if fmt == "csv":
        rows = list(csv.DictReader(io.StringIO(text)))
        assert rows and all(r["synthetic"] == "true" and r["dataset_sha256"] == sha for r in rows)
        return
    assert "SYNTHETIC" in text
    assert sha in text and prov["instruction_sha256"] in text
    assert "z3-solver" in text
    if fmt == "html":
        head = text[: text.index("<h2>")]  # the header, before the first chart
        assert 'class="synthetic"' in head and sha in head
    if fmt in ("table", "md"):
        assert "SYNTHETIC Accuracy per model" in text  # the summary table's own title


def test_the_wrong_answer_listing_is_labelled_too(
    synthetic_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", str(synthetic_run), "--wrong", "model-c", "-f", "md"]) == 0
    assert capsys.readouterr().out.startswith("# SYNTHETIC aeval: wrong answers of model-c")
    out = tmp_path / "w.csv"
    assert (
        main(["report", str(synthetic_run), "--wrong", "model-c", "-f", "csv", "-o", str(out)]) == 0
    )
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert rows and {r["synthetic"] for r in rows} == {"true"}


def test_a_real_run_is_not_labelled_synthetic(
    synthetic_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    real = tmp_path / "real"
    shutil.copytree(synthetic_run, real)
    for name in ("config.json", "summary.json"):
        doc = json.loads((real / name).read_text())
        doc["provenance"].update(synthetic=False, responder=None)
        (real / name).write_text(json.dumps(doc))
    assert main(["report", str(real), "-f", "md"]) == 0
    out = capsys.readouterr().out
    assert "SYNTHETIC" not in out and "model API" in out


def _with_other_data(run_dir: Path, dest: Path) -> DatasetFingerprint:
    """A copy of ``run_dir`` whose provenance says it was scored on other data."""
    shutil.copytree(run_dir, dest)
    other = None
    for name in ("config.json", "summary.json"):
        doc = json.loads((dest / name).read_text())
        doc["provenance"]["dataset"].update(sha256="ab" * 32, content_sha256="cd" * 32)
        other = DatasetFingerprint.from_dict(doc["provenance"]["dataset"])
        (dest / name).write_text(json.dumps(doc))
    assert other is not None
    return other


def test_report_a_b_refuses_runs_on_different_data(
    synthetic_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = _with_other_data(synthetic_run, tmp_path / "other")
    mine = DatasetFingerprint.from_dict(
        json.loads((synthetic_run / "config.json").read_text())["provenance"]["dataset"]
    )
    assert mine is not None
    assert main(["report", str(synthetic_run), str(tmp_path / "other")]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.strip().splitlines()  # one clear line
    assert "different datasets" in line and "--allow-different-datasets" in line
    assert mine.content_sha256[:12] in line and other.content_sha256[:12] in line
    assert not (tmp_path / "other" / "compare.html").exists()


def test_allow_different_datasets_compares_with_a_banner(
    synthetic_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = _with_other_data(synthetic_run, tmp_path / "other")
    args = ["report", str(synthetic_run), str(tmp_path / "other"), "--allow-different-datasets"]
    assert main([*args, "-f", "md"]) == 0
    captured = capsys.readouterr()
    assert "WARNING: different datasets" in captured.out
    assert other.content_sha256[:12] in captured.out
    assert "WARNING: different datasets" in captured.err
    assert main([*args, "-f", "html"]) == 0
    page = (tmp_path / "other" / "compare.html").read_text()
    assert "WARNING: different datasets" in page and "SYNTHETIC" in page
    assert main([*args, "-f", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert rows and {r["b_content_sha256"] for r in rows} == {other.content_sha256}
    assert {r["a_synthetic"] for r in rows} == {"true"}
    assert main([*args, "-f", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["banner"].startswith("WARNING: different datasets")
    assert doc["provenance"]["b"]["dataset"]["content_sha256"] == other.content_sha256


def test_report_a_b_on_the_same_data_in_another_format_is_allowed(
    synthetic_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Same rows, written as jsonl instead of parquet: a different file, the same data.
    copy = tmp_path / "copy"
    shutil.copytree(synthetic_run, copy)
    config = json.loads((copy / "config.json").read_text())
    jsonl = tmp_path / "same.jsonl"
    pl.read_parquet(config["dataset"]).write_ndjson(jsonl)
    _, fingerprint = load_dataset_fingerprinted(jsonl)
    assert fingerprint.sha256 != config["provenance"]["dataset"]["sha256"]
    for name in ("config.json", "summary.json"):
        doc = json.loads((copy / name).read_text())
        doc["provenance"]["dataset"] = fingerprint.to_dict()
        (copy / name).write_text(json.dumps(doc))
    assert main(["report", str(synthetic_run), str(copy), "-f", "md"]) == 0
    captured = capsys.readouterr()
    assert "different datasets" not in captured.out + captured.err


def test_rescore_summary_carries_what_it_knows(
    synthetic_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = json.loads((synthetic_run / "config.json").read_text())
    outputs = sorted((synthetic_run / "outputs").glob("model-a-*t1-*.output.jsonl"))
    out = tmp_path / "rescored"
    code = main(["rescore", "--dataset", config["dataset"], "--out", str(out), *map(str, outputs)])
    assert code == 0
    prov = json.loads((out / "summary.json").read_text())["provenance"]
    assert prov["dataset"] == config["provenance"]["dataset"]
    assert prov["synthetic"] is None  # output files alone do not say
    assert [f["sha256"] for f in prov["scored_files"]] == [_sha256(p) for p in outputs]
    assert main(["report", str(out), "-f", "md"]) == 0
    assert "unknown (rescored output files)" in capsys.readouterr().out


def test_the_content_digest_names_rows_not_files(
    benchmark_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from aeval.dataset import fingerprint

    frame, parquet = load_dataset_fingerprinted(benchmark_path)
    frame.drop("id").write_ndjson(tmp_path / "b.jsonl")
    _, jsonl = load_dataset_fingerprinted(tmp_path / "b.jsonl", limit=5)
    assert jsonl.content_sha256 == parquet.content_sha256  # same rows, other format
    assert jsonl.sha256 != parquet.sha256 and (jsonl.rows, parquet.rows) == (5, 671)
    monkeypatch.setattr(fingerprint, "_CHUNK", 7)  # hashed in slices: the same digest
    assert content_sha256(frame) == parquet.content_sha256
    # Text moved across a value boundary, a row moved, a null tier: all different.
    rows = pl.DataFrame(
        {"id": ["1", "2"], "question": ["ab", "c"], "answer": ["x", "y"], "constants": ["", ""]}
    ).with_columns(tier=pl.lit("small"))
    variants = [
        rows,
        rows.with_columns(question=pl.Series(["a", "bc"])),
        rows.reverse(),
        rows.with_columns(tier=pl.Series(["small", None], dtype=pl.String)),
    ]
    assert len({content_sha256(v) for v in variants}) == len(variants)


@pytest.mark.parametrize("synthetic", [True, False])
def test_the_live_view_and_plain_lines_say_synthetic(synthetic: bool) -> None:
    from rich.console import Console

    from aeval.display import ProgressState, progress_view, render_progress
    from aeval.events import RunStarted, ShardInfo

    started = RunStarted(
        run_id="r",
        run_dir="/tmp/r",
        models=("m",),
        trials=1,
        items=3,
        shards=(ShardInfo(model="m", trial=1, shard=0, requests=3),),
        offline=True,
        synthetic=synthetic,
    )
    state = ProgressState()
    state.apply(started)
    live = Console(record=True, width=120, file=io.StringIO())
    live.print(render_progress(state))
    assert ("SYNTHETIC aeval run r" in live.export_text()) is synthetic
    out = io.StringIO()
    with progress_view(Console(file=out, width=200), mode="plain") as subscriber:
        subscriber(started)
    assert ("SYNTHETIC" in out.getvalue()) is synthetic
