"""A run is pinned to its data: resume refuses different data, the hub revision is pinned."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import anyio
import polars as pl
import pytest
from engine_helpers import SPECS, benchmark_slice, fast_config
from test_dataset import _SHA, _FakeHub, serving_hub

from aeval.cli import main
from aeval.dataset import DEFAULT_DATASET, load_dataset
from aeval.engine import Run
from aeval.events import Event, VerdictProduced
from aeval.local import LocalBatchServer
from aeval.local.models import describe_models


def _interrupted_run(data: Path, out: Path, base_url: str, *, offline: bool = False) -> Path:
    """Start a run and cancel it once a few verdicts are written: a run to resume."""
    config = fast_config(data, out, base_url, run_id="pinned")
    seen: list[Event] = []

    def stop_early(event: Event) -> None:
        if isinstance(event, VerdictProduced):
            seen.append(event)
            if len(seen) == 3:
                run.cancel()

    run = Run(config, subscribers=[stop_early], offline=offline, synthetic=describe_models(SPECS))
    result = anyio.run(run.run)
    assert result.outcome == "interrupted", result.message
    assert 3 <= result.verdicts.height < 3 * 12
    return result.run_dir


def _insert_row_at_top(data: Path) -> None:
    """The issue's repro: ids are row positions, so every row after it shifts."""
    frame = pl.read_parquet(data)
    pl.concat([frame.tail(1), frame]).write_parquet(data)


def _snapshot(run_dir: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run_dir)): p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}


def test_resume_refuses_a_dataset_that_changed(
    benchmark_path: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=12)
    with LocalBatchServer(dataset=frame, models=dict(SPECS)) as server:
        run_dir = _interrupted_run(data, tmp_path / "r", server.base_url)
        recorded = json.loads((run_dir / "config.json").read_text())["provenance"]["dataset"]
        _insert_row_at_top(data)
        before = _snapshot(run_dir)
        created = server.counters()
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        capsys.readouterr()
        assert main(["resume", str(run_dir), "--quiet"]) == 2
        assert server.counters() == created  # nothing sent
    err = capsys.readouterr().err
    line = next(x for x in err.splitlines() if x.startswith("aeval: "))
    assert "refusing to resume against different data" in line
    now = load_dataset(str(data))
    assert now.height == 13
    assert recorded["content_sha256"][:12] in line  # both fingerprints named
    from aeval.dataset.fingerprint import content_sha256

    assert content_sha256(now)[:12] in line
    assert _snapshot(run_dir) == before  # nothing written: no lock, no verdict, no manifest


def test_an_offline_resume_refuses_before_its_server_answers_again(
    benchmark_path: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=12)
    state = tmp_path / "r" / "pinned" / "local-server"  # where the offline demo keeps it
    with LocalBatchServer(dataset=frame, models=dict(SPECS), state_dir=state) as server:
        run_dir = _interrupted_run(data, tmp_path / "r", server.base_url, offline=True)
    _insert_row_at_top(data)
    before = _snapshot(run_dir)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_KEY", raising=False)
    capsys.readouterr()
    assert main(["resume", str(run_dir), "--quiet"]) == 2
    assert "refusing to resume against different data" in capsys.readouterr().err
    assert _snapshot(run_dir) == before  # the local server never restarted on its state


def test_resume_with_the_same_rows_in_a_rewritten_file_goes_on(
    benchmark_path: Path, tmp_path: Path
) -> None:
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=12)
    with LocalBatchServer(dataset=frame, models=dict(SPECS)) as server:
        run_dir = _interrupted_run(data, tmp_path / "r", server.base_url)
        # Same rows, other bytes (another compression): the data did not change.
        pl.read_parquet(data).write_parquet(data, compression="uncompressed")
        run = Run.resume(
            run_dir, credentials=fast_config(data, tmp_path, server.base_url).credentials
        )
        result = anyio.run(run.run)
    assert result.outcome == "finished", result.message
    assert result.verdicts.height == 3 * 12


# --------------------------------------------------------------------------- the hub


class _LoggingHub(_FakeHub):
    paths: ClassVar[list[str]] = []

    def _handle(self) -> None:
        self.paths.append(self.path)
        super()._handle()

    do_GET = do_HEAD = _handle


@pytest.fixture
def logging_hub(benchmark_path: Path) -> Iterator[type[_LoggingHub]]:
    with serving_hub(_LoggingHub, benchmark_path, paths=[]) as hub:
        yield hub


_PLAN = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from aeval.config import RunConfig
    from aeval.engine import Run, plan_run
    from aeval.engine.planning import load_truth
    if sys.argv[1] == "plan":
        plan = plan_run(RunConfig(models=("m",), dataset=sys.argv[2], limit=3,
                                  dataset_revision="main",  # a branch: it can move
                                  out_dir=Path(sys.argv[3]), run_id="hub"))
        print(json.dumps(str(plan.run_dir)))
    else:
        run = Run.resume(Path(sys.argv[3]) / "hub")
        _, truth, fingerprint = load_truth(run.config)
        print(json.dumps(fingerprint.to_dict()))
    """
)


def _in_subprocess(env: dict[str, str], *args: str) -> object:
    # datasets reads HF_ENDPOINT at import: a fresh process per setting.
    done = subprocess.run(
        [sys.executable, "-c", _PLAN, *args], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_hub_dataset_is_pinned_to_the_commit_it_was_loaded_at(
    logging_hub: type[_LoggingHub], tmp_path: Path
) -> None:
    env = dict(os.environ, HF_HOME=str(tmp_path / "hf"), HF_ENDPOINT=logging_hub.url)
    env.pop("HF_HUB_OFFLINE", None)
    env.pop("HF_DATASETS_CACHE", None)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
    run_dir = Path(str(_in_subprocess(env, "plan", DEFAULT_DATASET, str(tmp_path))))
    config = json.loads((run_dir / "config.json").read_text())
    assert config["dataset_revision"] == _SHA  # the run pins the commit "main" was at
    dataset = config["provenance"]["dataset"]
    assert dataset["kind"] == "hub" and dataset["revision"] == _SHA
    assert dataset["total_rows"] == 671 and dataset["rows"] == 3
    assert any("/resolve/main/" in p for p in logging_hub.paths)  # resolved from main...

    logging_hub.paths.clear()
    reloaded = _in_subprocess(env, "resume", DEFAULT_DATASET, str(tmp_path))
    assert reloaded == dataset  # ...and a resume reloads exactly that commit,
    asked = [p for p in logging_hub.paths if f"/{DEFAULT_DATASET}/" in p]
    assert any(f"/resolve/{_SHA}/" in p for p in asked), asked
    assert not any("/main" in p for p in asked), asked  # never whatever main is now
