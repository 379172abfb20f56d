"""The embedding API as an application uses it: the runnable examples, the live view
fed from an embedded run, two runs in one loop, and cancelling from outside."""

from __future__ import annotations

import io
import json
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from engine_helpers import (
    SPECS,
    benchmark_slice,
    expected_statuses,
    fast_config,
    observed,
)
from rich.console import Console

from aeval.display import progress_view
from aeval.engine import Run
from aeval.events import RunFinished, ShardUpdated, VerdictProduced
from aeval.local import LocalBatchServer, Timing
from aeval.report import load_run, summarize

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.mark.parametrize("script", ["embed_asyncio.py", "embed_trio.py"])
def test_example_runs(script: str, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / script), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "finished: 40 verdicts" in proc.stdout, proc.stdout
    assert "strong-model trial 1: ok" in proc.stdout
    (run_dir,) = tmp_path.iterdir()
    # The run's own summary.json is what a report recomputes from its verdicts.
    on_disk = json.loads((run_dir / "summary.json").read_text())
    provenance = on_disk.pop("provenance")  # what the run was made from, beside the numbers
    assert on_disk == json.loads(json.dumps(summarize(load_run(run_dir))))
    assert provenance["synthetic"] is True
    assert "strong-model=synthetic" in provenance["responder"]
    assert provenance["dataset"]["rows"] == 20
    assert {m["model"]: m["n"] for m in on_disk["models"]} == {
        "strong-model": 20,
        "weak-model": 20,
    }


@pytest.mark.anyio
async def test_two_embedded_runs_each_with_a_live_view_print_nothing_else(
    benchmark_path: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=6)
    sigint = signal.getsignal(signal.SIGINT)
    consoles = [
        Console(record=True, width=160, force_terminal=True, file=io.StringIO()) for _ in "ab"
    ]
    handlers_seen: list[object] = []
    async with LocalBatchServer(dataset=frame, models=dict(SPECS)) as server:
        results: list[object] = [None, None]

        async def go(i: int, model: str) -> None:
            config = fast_config(data, tmp_path / "results", server.base_url, models=(model,))
            with progress_view(consoles[i], mode="live", refresh_per_second=20) as on_event:

                def spy(event: object) -> None:
                    if isinstance(event, VerdictProduced) and not handlers_seen:
                        handlers_seen.append(signal.getsignal(signal.SIGINT))

                results[i] = await Run(config, subscribers=[on_event, spy]).run()

        async with anyio.create_task_group() as tg:
            tg.start_soon(go, 0, "model-a")
            tg.start_soon(go, 1, "model-b")
    want = expected_statuses(frame, SPECS, trials=1)
    for i, model in enumerate(("model-a", "model-b")):
        assert results[i].outcome == "finished"  # type: ignore[union-attr]
        got = observed(results[i].verdicts)  # type: ignore[union-attr]
        assert got == {k: v for k, v in want.items() if k[0] == model}
        # Each view shows its own run only, finished, with every verdict counted.
        text = consoles[i].export_text()
        final = text[text.rindex("aeval run") :]
        row = next(line for line in final.splitlines() if model in line)
        assert "done" in row and "6/6" in row
        other = "model-b" if model == "model-a" else "model-a"
        assert other not in text
        assert "run finished" in final
    # Embedded, aeval writes nothing to stdout/stderr and installs no signal handler.
    out, err = capfd.readouterr()
    assert out == "" and err == ""
    assert handlers_seen == [sigint] and signal.getsignal(signal.SIGINT) is sigint


@pytest.mark.anyio
@pytest.mark.parametrize("how", ["run.cancel()", "enclosing scope"])
async def test_cancel_from_outside_leaves_a_resumable_run_directory(
    benchmark_path: Path, tmp_path: Path, how: str
) -> None:
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=10)
    # Slow enough to interrupt mid-flight: the batches take a second or two.
    timing = Timing(validating_s=0.2, requests_per_second=15.0, finalizing_s=0.2)
    specs = {m: SPECS[m] for m in ("model-a", "model-b")}
    async with LocalBatchServer(dataset=frame, models=dict(specs), timing=timing) as server:
        config = fast_config(data, tmp_path / "results", server.base_url, models=tuple(specs))
        run = Run(config)
        seen: list[object] = []
        result = None

        async def go() -> None:
            nonlocal result
            result = await run.run()

        with anyio.CancelScope() as outside:

            async def cancel_when_running() -> None:
                running: set[str] = set()
                async for event in events:
                    seen.append(event)
                    if isinstance(event, ShardUpdated) and event.phase == "in_progress":
                        running.add(event.model)
                    if running == set(specs):  # both batches exist remotely
                        if how == "run.cancel()":
                            run.cancel()
                        else:
                            outside.cancel()
                        return

            events = run.events()
            async with anyio.create_task_group() as tg:
                tg.start_soon(cancel_when_running)
                tg.start_soon(go)
        if how == "run.cancel()":
            assert result is not None and result.outcome == "interrupted"
            assert "python -m aeval resume" in result.message
        else:
            assert result is None  # run() was cancelled by its caller's scope
        run_dir = run.run_dir
        manifest = json.loads((run_dir / "manifest.json").read_text())
        assert manifest["shards"], "the plan was recorded"
        assert any(s.get("batch_id") for s in manifest["shards"].values())
        assert not (run_dir / "verdicts.parquet").exists()
        batches_before = server.counters().batches

        # Resume the same directory from the same program: it finishes, pays nothing twice.
        resumed = Run.resume(run_dir, credentials=config.credentials)
        final = await resumed.run()
        counters = server.counters()

    assert final.outcome == "finished", final.message
    want = expected_statuses(frame, specs, trials=1)
    assert observed(final.verdicts) == want
    assert final.verdicts.height == len(want)  # none lost, none duplicated
    assert counters.batches == batches_before == 2  # one batch per shard, ever
    lines = (run_dir / "verdicts.jsonl").read_text().splitlines()
    keys = [(r["model"], r["custom_id"]) for r in map(json.loads, lines)]
    assert len(keys) == len(set(keys)) == len(want)
    assert isinstance(seen[-1], ShardUpdated)
    assert not any(isinstance(e, RunFinished) and e.outcome == "finished" for e in seen)
