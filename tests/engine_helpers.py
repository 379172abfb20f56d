"""Shared pieces of the engine tests: a small benchmark slice, fast settings, expectations."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import polars as pl

from aeval.config import Credentials, PollSettings, RetrySettings, RunConfig
from aeval.dataset import load_dataset
from aeval.local import EXPECTED_VERDICTS, ModelSpec
from aeval.local.questions import QuestionIndex
from aeval.verify import VerifyLimits

FAST_POLL = PollSettings(initial_s=0.02, factor=1.5, max_s=0.2, jitter=0.2, grace_s=20.0)
FAST_RETRY = RetrySettings(initial_s=0.02, max_s=0.3, deadline_s=20.0, token_limit_wait_s=0.05)

SPECS: dict[str, ModelSpec] = {
    "model-a": ModelSpec("synthetic", seed=1, accuracy=0.6),
    "model-b": ModelSpec("synthetic", seed=2, accuracy=0.4),
    "model-c": ModelSpec("synthetic", seed=3, accuracy=0.2),
}


def slice_path(benchmark_path: Path, tmp_path: Path, rows: int = 12) -> Path:
    """The first ``rows`` small-tier rows of the real benchmark, as a parquet file."""
    frame = pl.read_parquet(benchmark_path).filter(pl.col("tier") == "small").head(rows)
    out = tmp_path / "bench-slice.parquet"
    frame.write_parquet(out)
    return out


def benchmark_slice(
    benchmark_path: Path, tmp_path: Path, rows: int = 12
) -> tuple[Path, pl.DataFrame]:
    """:func:`slice_path` and the slice as ``aeval`` loads it (what the local server serves)."""
    data = slice_path(benchmark_path, tmp_path, rows)
    return data, load_dataset(str(data))


def fast_config(dataset: Path, out: Path, base_url: str, **changes: object) -> RunConfig:
    base: dict[str, object] = {
        "models": tuple(SPECS),
        "trials": 1,
        "dataset": str(dataset),
        "poll": FAST_POLL,
        "retry": FAST_RETRY,
        "limits": VerifyLimits(timeout_s=20.0),
        "out_dir": out,
        "workers": 2,
        "credentials": Credentials("sk-test", base_url, aeval_server=True),
    }
    base.update(changes)
    return RunConfig(**base)  # type: ignore[arg-type]


def expected_statuses(
    frame: pl.DataFrame, specs: Mapping[str, ModelSpec], trials: int
) -> dict[tuple[str, int, str], str]:
    """What the synthetic responder was told to produce, per (model, trial, id)."""
    index = QuestionIndex.from_frame(frame)
    out: dict[tuple[str, int, str], str] = {}
    for model, spec in specs.items():
        responder = spec.build(index)
        for cid in frame["id"].to_list():
            for trial in range(1, trials + 1):
                # Each trial samples afresh (the server knows the trial from the batch metadata).
                intent = responder.intent(model, cid, trial=trial)  # type: ignore[attr-defined]
                out[(model, trial, cid)] = EXPECTED_VERDICTS[intent].status.value
    return out


def observed(frame: pl.DataFrame) -> dict[tuple[str, int, str], str]:
    return {
        (r["model"], r["trial"], r["custom_id"]): r["status"] for r in frame.iter_rows(named=True)
    }


def distinct_verdict_count(run_dir: Path) -> int:
    """How many lines ``run_dir``'s verdicts.jsonl holds, asserting that no (model, trial,
    id) stands in two of them."""
    lines = (run_dir / "verdicts.jsonl").read_text().splitlines()
    keys = [(r["model"], r["trial"], r["custom_id"]) for r in map(json.loads, lines)]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    assert not twice, f"verdicts written twice: {twice}"
    return len(keys)


def aeval_process(args: list[str], env: Mapping[str, str], cwd: Path) -> subprocess.Popen[bytes]:
    """``python -m aeval ARGS`` in ``cwd`` with ``env`` and this checkout on the path; its
    stderr piped (:func:`assert_exits_ok` shows it)."""
    return subprocess.Popen(
        [sys.executable, "-m", "aeval", *args],
        cwd=cwd,
        env={**env, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def assert_exits_ok(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """Wait for ``proc`` (killed by its PID if it outlasts ``timeout``) and assert that it
    exited 0, showing its stderr otherwise."""
    try:
        proc.wait(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
    err = proc.stderr.read().decode() if proc.stderr else ""
    assert proc.returncode == 0, err
