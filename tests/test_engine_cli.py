"""``python -m aeval run / resume / status / cancel`` as a user types them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import polars as pl
import pytest
from engine_helpers import (
    SPECS,
    benchmark_slice,
    expected_statuses,
    fast_config,
    observed,
    slice_path,
)
from test_cli_options import _aeval

from aeval.cli import main
from aeval.config import RunConfig
from aeval.dataset import demo_dataset_path, load_dataset
from aeval.engine import Run, RunResult
from aeval.events import ShardUpdated
from aeval.local import LocalBatchServer, Timing, demo_models

FAST_FLAGS = ["--poll-initial", "0.05", "--poll-max", "0.2", "--workers", "1"]


def _env(base_url: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_KEY")}
    env.pop("OPENAI_BASE_URL", None)
    if base_url is not None:
        # aeval's own server, as 'aeval serve' tells its user to say
        env.update(OPENAI_API_KEY="sk-cli", OPENAI_BASE_URL=base_url, AEVAL_LOCAL_SERVER=base_url)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
    return env


def _run_args(data: Path, out: Path, run_id: str, *models: str) -> list[str]:
    """``run`` of ``models`` (model-a by default) on ``data`` into ``out``/``run_id``."""
    model = ",".join(models or ("model-a",))
    return ["run", "--model", model, "--dataset", str(data), "--out", str(out), "--run-id", run_id]


def _use_server(monkeypatch: pytest.MonkeyPatch, base_url: str) -> None:
    monkeypatch.delenv("OPENAI_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-cli")
    monkeypatch.setenv("OPENAI_BASE_URL", base_url)
    monkeypatch.setenv("AEVAL_LOCAL_SERVER", base_url)


def test_offline_default_runs_the_demo_and_says_so(tmp_path: Path) -> None:
    demo = ["--limit", "12", "--trials", "2", "--out", str(tmp_path), "--quiet"]
    proc = _aeval(*demo, cwd=tmp_path, timeout=180)  # no key, no base URL
    assert proc.returncode == 0, proc.stderr
    assert "offline" in proc.stderr and "OPENAI_API_KEY" in proc.stderr
    (run_dir,) = [p for p in tmp_path.iterdir() if (p / "manifest.json").exists()]
    verdicts = pl.read_parquet(run_dir / "verdicts.parquet")
    assert verdicts.height == 3 * 12 * 2  # the three mission models, 12 demo rows, 2 trials
    assert verdicts["model"].n_unique() == 3
    assert "sk-offline" not in (run_dir / "config.json").read_text()
    assert "SYNTHETIC aeval summary" in proc.stdout  # the summary table, model names unclipped:
    assert "gpt-4o-mini-2024-07-18" in proc.stdout and "gpt-3.5-turbo-0125" in proc.stdout
    # Synthetic, and says so; its trials differ the way sampled trials do.
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["provenance"]["synthetic"] is True and summary["provenance"]["offline"]
    assert "gpt-4o-2024-11-20=synthetic" in summary["provenance"]["responder"]
    stds = [m["across_trials"]["std"] for m in summary["models"]]
    assert all(s is not None for s in stds) and any(s > 0 for s in stds), stds
    pairs = verdicts.pivot(on="trial", index=["model", "custom_id"], values="status")
    assert (pairs["1"] != pairs["2"]).any()  # some items answered differently in trial 2


def test_the_offline_banner_names_the_keys_of_the_providers_the_run_uses() -> None:
    from aeval.commands.execute import offline_banner

    # OpenAI alone (the default run): its two variables, and how to run for real.
    openai = offline_banner(["gpt-4o-mini-2024-07-18"], direct=False)
    assert "no OPENAI_API_KEY (or OPENAI_KEY) is set" in openai
    # A run of other providers names their keys, not OpenAI's it does not use.
    mixed = offline_banner(
        ["anthropic/claude-sonnet-4-5", "google/gemini-2.5-flash", "groq/llama-3.3-70b"],
        direct=False,
    )
    assert "anthropic: ANTHROPIC_API_KEY" in mixed
    assert "google: GEMINI_API_KEY or GOOGLE_API_KEY" in mixed
    assert "groq: GROQ_API_KEY" in mixed
    assert "OPENAI_API_KEY" not in mixed
    assert "export ANTHROPIC_API_KEY=… GEMINI_API_KEY=… GROQ_API_KEY=…" in mixed
    # Both OpenAI and another: both named, each once.
    both = offline_banner(["gpt-4o", "xai/grok-4", "openai/gpt-5"], direct=False)
    assert both.count("OPENAI_API_KEY") == 2 and "xai: XAI_API_KEY" in both  # named, exported
    clouds = offline_banner(["bedrock/amazon.nova-lite-v1:0", "vertex/gemini-2.5-flash"],
                            direct=False)  # fmt: skip
    assert "AWS_PROFILE" in clouds and "GOOGLE_CLOUD_PROJECT" in clouds
    # Direct mode talks to one OpenAI-compatible endpoint whatever the names say.
    direct = offline_banner(["Qwen/Qwen2.5-7B-Instruct"], direct=True)
    assert "OPENAI_API_KEY" in direct and "OPENAI_BASE_URL" in direct


def test_an_offline_run_of_other_providers_says_which_keys_it_looked_for(tmp_path: Path) -> None:
    models = "anthropic/claude-haiku-4-5,mistral/mistral-small-latest"
    args = ["run", "--model", models, "--limit", "4", "--out", str(tmp_path), "--quiet"]
    # No key of any provider in the child's environment: the offline demo.
    scrubbed = {k: "" for k in ("ANTHROPIC_API_KEY", "MISTRAL_API_KEY")}
    proc = _aeval(*args, cwd=tmp_path, timeout=180, **scrubbed)
    assert proc.returncode == 0, proc.stderr
    banner = " ".join(proc.stderr.split())  # as Rich wrapped it, joined
    assert "offline demo: no key of this run's providers is set" in banner
    assert "ANTHROPIC_API_KEY" in banner and "MISTRAL_API_KEY" in banner
    assert "OPENAI_API_KEY" not in banner


def test_dry_run_writes_requests_and_calls_nothing(
    benchmark_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = slice_path(benchmark_path, tmp_path, rows=5)
    code = main(
        [
            "run",
            "--dry-run",
            "--dataset",
            str(data),
            "--out",
            str(tmp_path / "r"),
            "--model",
            "m1,m2",
            "--trials",
            "2",
            "--run-id",
            "dry",
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "20 requests" in out and "input tokens" in out
    files = sorted((tmp_path / "r" / "dry" / "requests").iterdir())
    assert len(files) == 4
    first = json.loads(files[0].read_text().splitlines()[0])
    assert first["url"] == "/v1/chat/completions" and first["body"]["model"] in ("m1", "m2")


def test_run_exit_codes_and_status(
    benchmark_path: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=4)
    with LocalBatchServer(dataset=frame, models=dict(SPECS)) as server:
        _use_server(monkeypatch, server.base_url)
        out = tmp_path / "r"
        assert main([*_run_args(data, out, "ok"), "--quiet", *FAST_FLAGS]) == 0
        # a model the server does not know: its batch fails validation, a failed job
        unknown = _run_args(data, out, "nomodel", "no-such-model")
        assert main([*unknown, "--quiet", *FAST_FLAGS]) == 1
        capsys.readouterr()
        assert main(["status", str(tmp_path / "r" / "ok"), "--json"]) == 0
        status = json.loads(capsys.readouterr().out)
    assert status["verdicts"] == 4
    assert [s["status"] for s in status["shards"]] == ["done"]
    with LocalBatchServer(dataset=frame, models=dict(SPECS), api_key="other") as server:
        _use_server(monkeypatch, server.base_url)
        # finished with a failed job
        assert main([*_run_args(data, out, "badkey"), "--quiet", *FAST_FLAGS]) == 1
    bad = pl.read_parquet(tmp_path / "r" / "badkey" / "verdicts.parquet")
    assert set(bad["status"]) == {"api_error"}


def test_cancel_cancels_remote_batches_and_collects_partial_results(
    benchmark_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=12)
    with LocalBatchServer(
        dataset=frame, models=dict(SPECS), timing=Timing(requests_per_second=4.0)
    ) as server:
        config = fast_config(data, tmp_path / "r", server.base_url, models=("model-a",))
        first = _run_stopped_once_polling(config)
        _use_server(monkeypatch, server.base_url)
        code = main(["cancel", str(first.run_dir), "--quiet", "--delete-files", *FAST_FLAGS])
        counters = server.counters()
    assert code == 0
    assert counters.cancels == 1
    assert counters.batches == 1
    verdicts = pl.read_parquet(first.run_dir / "verdicts.parquet")
    assert verdicts.height == 12  # every row accounted for
    want = expected_statuses(frame, SPECS, trials=1)
    got = observed(verdicts)
    assert {got[k] for k in got if got[k] != want[k]} <= {"api_error", "missing"}
    assert any(got[k] != want[k] for k in got)


def test_ctrl_c_exits_130_and_resume_finishes(
    benchmark_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=8)
    out = tmp_path / "r"
    with LocalBatchServer(
        dataset=frame, models=dict(SPECS), timing=Timing(requests_per_second=4.0)
    ) as server:
        args = [*_run_args(data, out, "ctrlc"), "--display", "plain", *FAST_FLAGS]
        proc = subprocess.Popen(
            [sys.executable, "-m", "aeval", *args],
            env=_env(server.base_url),
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        manifest = out / "ctrlc" / "manifest.json"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if manifest.exists() and '"in_progress"' in manifest.read_text():
                break
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
        assert proc.returncode == 130, stderr
        assert "resume" in stderr and "cancel" in stderr
        json.loads(manifest.read_text())  # consistent
        _use_server(monkeypatch, server.base_url)
        assert main(["resume", str(out / "ctrlc"), "--quiet", *FAST_FLAGS[:4]]) == 0
        counters = server.counters()
    assert counters.batches == 1
    verdicts = pl.read_parquet(out / "ctrlc" / "verdicts.parquet")
    want = expected_statuses(frame, SPECS, trials=1)
    assert observed(verdicts) == {k: v for k, v in want.items() if k[0] == "model-a"}


def _offline(args: list[str], cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "aeval", *args, "--display", "plain"],
        env=_env(None),
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_a_killed_offline_run_resumes_on_its_own_server_state(tmp_path: Path) -> None:
    # The offline default keeps its local server's files and batches inside the
    # run directory, so SIGKILL then 'resume' (no key) reattaches to the same
    # batches instead of starting over.
    common = ["--limit", "10", "--out", str(tmp_path)]
    proc = _offline(["run", *common, "--run-id", "killed"], tmp_path)
    run_dir = tmp_path / "killed"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        manifest = run_dir / "manifest.json"
        if manifest.exists() and '"in_progress"' in manifest.read_text():
            break
        time.sleep(0.05)
    proc.kill()
    proc.communicate(timeout=30)
    assert not (run_dir / "verdicts.parquet").exists()  # it really was cut short
    batches_before = sorted(p.name for p in (run_dir / "local-server" / "batches").iterdir())

    resumed = _offline(["resume", str(run_dir)], tmp_path)
    _, stderr = resumed.communicate(timeout=180)
    assert resumed.returncode == 0, stderr
    assert sorted(p.name for p in (run_dir / "local-server" / "batches").iterdir()) == (
        batches_before
    )  # reattached: no batch created a second time

    got = pl.read_parquet(run_dir / "verdicts.parquet")
    assert got.height == 3 * 10 and not got.select("model", "custom_id").is_duplicated().any()
    # what an uninterrupted run gives: what the demo's synthetic responders were told
    rows = load_dataset(demo_dataset_path(), limit=10)
    assert observed(got) == expected_statuses(rows, demo_models(), trials=1)


def test_a_refused_cancel_is_not_marked_said_in_one_line_and_a_later_cancel_succeeds(
    benchmark_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    from aeval.local import FaultPlan, FaultRule

    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=8)
    # The first cancel is refused (403: no retry helps); the next one goes through.
    refuse = FaultRule("http", endpoint="POST /v1/batches/*/cancel", status=403, times=1)
    with LocalBatchServer(
        dataset=frame, models=dict(SPECS), timing=Timing(requests_per_second=2.0),
        faults=FaultPlan(rules=(refuse,)),
    ) as server:  # fmt: skip
        config = fast_config(data, tmp_path / "r", server.base_url, models=("model-a",))
        first = _run_stopped_once_polling(config)
        _use_server(monkeypatch, server.base_url)
        capsys.readouterr()
        code = main(["cancel", str(first.run_dir), "--quiet", *FAST_FLAGS])
        said = capsys.readouterr().err.strip().splitlines()
        refused = server.counters()
        assert main(["status", str(first.run_dir), "--json"]) == 0
        status = json.loads(capsys.readouterr().out)
        later = main(["cancel", str(first.run_dir), "--quiet", *FAST_FLAGS])
        capsys.readouterr()
        assert main(["status", str(first.run_dir), "--json"]) == 0
        after = json.loads(capsys.readouterr().out)
        counters = server.counters()
    (batch_id,) = status["cancel_failures"]
    assert code == 1
    assert refused.cancels == 0 and refused.faults_injected == {"http:403": 1}
    assert [s["status"] for s in status["shards"]] == ["in_progress"]  # not marked
    assert len(said) == 1 and batch_id in said[0]
    assert f"python -m aeval cancel {first.run_dir}" in said[0]
    assert later == 0 and counters.cancels == 1
    assert after["cancel_failures"] == {}
    assert pl.read_parquet(first.run_dir / "verdicts.parquet").height == 8


def test_a_run_that_lost_answers_to_the_infrastructure_exits_3_and_says_how_many_and_why(
    benchmark_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    from aeval.local import FaultPlan, FaultRule

    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=8)
    expire = FaultRule("expire", fraction=0.5)  # half the requests never run
    with LocalBatchServer(
        dataset=frame, models=dict(SPECS), faults=FaultPlan(rules=(expire,))
    ) as server:
        _use_server(monkeypatch, server.base_url)
        # Not known as aeval's own server: a real provider, as far as the run can tell.
        monkeypatch.delenv("AEVAL_LOCAL_SERVER")
        args = ["run", "--model", "model-a", "--dataset", str(data), "--out",
                str(tmp_path / "r"), "--run-id", "lost", "--quiet", *FAST_FLAGS]  # fmt: skip
        capsys.readouterr()
        code = main(args)
        said = capsys.readouterr().err
    verdicts = pl.read_parquet(tmp_path / "r" / "lost" / "verdicts.parquet")
    lost = verdicts.filter(pl.col("status").is_in(["missing", "api_error"])).height
    assert 0 < lost < 8
    assert code == 3
    (line,) = [x for x in said.splitlines() if "answers lost to the infrastructure" in x]
    assert line.startswith(f"{lost} of 8 answers lost")
    assert "expired" in line  # why


def test_the_lost_answers_line_names_the_exit_status_it_brings() -> None:
    from aeval.commands.execute import lost_answers

    verdicts = pl.DataFrame(
        {"status": ["equivalent", "api_error", "missing"], "reason": [None, "http_500: x", None]}
    )
    real = lost_answers(verdicts)
    assert real is not None and real.startswith("2 of 3 answers lost") and "(exit 3;" in real
    demo = lost_answers(verdicts, synthetic=True)
    # The offline demo's synthetic failures end with exit 0: the line must not say 3.
    assert demo is not None and "exit 3" not in demo and "synthetic models: exit 0" in demo
    assert lost_answers(verdicts.head(1)) is None


def _run_stopped_once_polling(config: RunConfig) -> RunResult:
    """Run ``config`` in this process and stop it once a batch is in progress (its remote
    batches left running, as Ctrl-C leaves them)."""
    run = Run(config)

    def stop(event: object) -> None:
        if isinstance(event, ShardUpdated) and event.phase == "in_progress":
            run.cancel()

    run.subscribe(stop)
    result = anyio.run(run.run)
    assert result.outcome == "interrupted"
    return result
