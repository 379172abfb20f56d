"""Repair rounds in the engine (#44): batch and direct mode against the local server over
real HTTP, every provider's wire, the configuration, and the first round unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import polars as pl
import pytest
from engine_helpers import FAST_POLL, FAST_RETRY, SPECS, benchmark_slice, fast_config, slice_path
from rounds_checks import (
    NO_500,
    body_recording_proxy,
    check_conversations,
    check_round_structure,
    split,
)
from test_cli_options import _aeval

from aeval.cli import main
from aeval.config import Credentials, RunConfig
from aeval.engine import Run
from aeval.errors import ConfigError
from aeval.events import ShardUpdated
from aeval.local import LocalBatchServer
from aeval.store import RunStore
from aeval.summary.aggregate import summarize
from aeval.verify import VerifyLimits


@pytest.mark.anyio
async def test_three_rounds_ask_again_only_what_is_wrong_with_the_answer_and_a_true_counterexample(
    benchmark_path: Path, tmp_path: Path
) -> None:
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=12)
    events: list[object] = []
    async with LocalBatchServer(dataset=frame, models=dict(SPECS)) as server:
        config = fast_config(data, tmp_path / "r", server.base_url, rounds=3)
        result = await Run(config, subscribers=[events.append]).run()
        counters = server.counters()
    assert result.outcome == "finished", result.message
    run_dir = result.run_dir
    by_item = check_round_structure(run_dir, rounds=3, items=12, jobs=3)
    assert any(len(r) == 3 for r in by_item.values())  # some item went all the way
    assert any(len(r) == 1 for r in by_item.values())
    assert check_conversations(run_dir, frame, by_item) > 0
    # one batch per shard, each round's shards its own: nothing created twice
    manifest = json.loads((run_dir / "manifest.json").read_text())["shards"]
    assert counters.batches == len(manifest) == counters.files
    assert {r.get("repair_round", 1) for r in manifest.values()} == {1, 2, 3}
    config_saved = json.loads((run_dir / "config.json").read_text())
    assert config_saved["rounds"] == 3 and config_saved["feedback"] == "counterexample"
    # the run's verdicts: every round; the summary's accuracy is the first round's
    assert set(result.verdicts["round"].unique()) == {1, 2, 3}
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["overall"]["n"] == 3 * 12
    firsts = result.verdicts.filter(pl.col("round") == 1)
    assert summary["overall"]["correct"] == firsts.filter(pl.col("status") == "equivalent").height
    assert any(isinstance(e, ShardUpdated) and e.shard > 0 for e in events)


@pytest.mark.anyio
async def test_one_round_writes_what_it_wrote_before_rounds_existed(
    benchmark_path: Path, tmp_path: Path
) -> None:
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=4)
    async with LocalBatchServer(dataset=frame, models=dict(SPECS)) as server:
        config = fast_config(data, tmp_path / "r", server.base_url, models=("model-a",))
        result = await Run(config).run()
    run_dir = result.run_dir
    saved = json.loads((run_dir / "config.json").read_text())
    assert not {"rounds", "feedback", "feedback_template"} & set(saved)
    manifest = json.loads((run_dir / "manifest.json").read_text())["shards"]
    assert all("repair_round" not in r for r in manifest.values())
    assert len(list((run_dir / "requests").iterdir())) == 1
    records = [json.loads(x) for x in (run_dir / "verdicts.jsonl").read_text().splitlines()]
    assert {r["round"] for r in records} == {1} and len(records) == 4


@pytest.mark.anyio
@pytest.mark.parametrize("feedback", ["retry", "reason"])
async def test_lower_feedback_levels_tell_no_counterexample(
    benchmark_path: Path, tmp_path: Path, feedback: str
) -> None:
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=8)
    async with LocalBatchServer(dataset=frame, models=dict(SPECS)) as server:
        config = fast_config(
            data, tmp_path / "r", server.base_url, rounds=2, feedback=feedback, models=("model-c",)
        )
        result = await Run(config).run()
    by_item = check_round_structure(result.run_dir, rounds=2, items=8, jobs=1)
    assert check_conversations(result.run_dir, frame, by_item) == 0
    bodies = "".join(p.read_text() for p in (result.run_dir / "requests").iterdir())
    assert "A counterexample" not in bodies
    assert ("What the solver found" in bodies) == (feedback == "reason")


PROVIDERS = ("openai", "anthropic", "google", "together", "groq", "mistral")


@pytest.mark.anyio
async def test_every_provider_carries_the_conversation_in_its_own_wire(
    benchmark_path: Path, tmp_path: Path
) -> None:
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=6)
    async with LocalBatchServer(dataset=frame, models=dict(SPECS)) as server:
        root = server.base_url.removesuffix("/v1")
        creds = {p: Credentials("k", root + ("/v1" if p == "openai" else "")) for p in PROVIDERS}
        config = RunConfig(
            models=tuple(f"{p}/model-c" for p in PROVIDERS),
            dataset=str(data),
            poll=FAST_POLL,
            retry=FAST_RETRY,
            limits=VerifyLimits(timeout_s=20.0),
            out_dir=tmp_path / "r",
            workers=2,
            credentials=creds,
            rounds=3,
        )
        with anyio.fail_after(180):
            result = await Run(config).run()
        counters = server.counters()
    assert result.outcome == "finished", result.message
    by_item = check_round_structure(result.run_dir, rounds=3, items=6, jobs=len(PROVIDERS))
    assert check_conversations(result.run_dir, frame, by_item) > 0
    models = {m for (m, _, _), r in by_item.items() if len(r) > 1}
    assert models == {f"{p}/model-c" for p in PROVIDERS}  # every provider asked again
    manifest = json.loads((result.run_dir / "manifest.json").read_text())["shards"]
    assert counters.batches == len(manifest)


@pytest.mark.anyio
async def test_the_responses_endpoint_carries_the_conversation_as_input_messages(
    benchmark_path: Path, tmp_path: Path
) -> None:
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=6)
    async with LocalBatchServer(dataset=frame, models=dict(SPECS)) as server:
        config = fast_config(
            data, tmp_path / "r", server.base_url, models=("model-c",), rounds=2,
            endpoint="responses",
        )  # fmt: skip
        result = await Run(config).run()
    assert result.outcome == "finished", result.message
    by_item = check_round_structure(result.run_dir, rounds=2, items=6, jobs=1)
    check_conversations(result.run_dir, frame, by_item)


@pytest.mark.anyio
async def test_direct_mode_asks_the_next_round_before_the_first_round_ends(
    benchmark_path: Path, tmp_path: Path
) -> None:
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=12)
    sent: dict[tuple[str, str], dict[str, object]] = {}
    async with LocalBatchServer(dataset=frame, models=dict(NO_500)) as server:
        root = server.base_url.removesuffix("/v1")
        with body_recording_proxy(root, sent) as proxy:
            config = fast_config(
                data, tmp_path / "r", server.base_url, rounds=3, api="direct", max_connections=2,
                credentials=Credentials("sk-test", proxy + "/v1", aeval_server=True),
            )  # fmt: skip
            result = await Run(config).run()
        asked = server.direct_counters()
    assert result.outcome == "finished", result.message
    by_item = check_round_structure(result.run_dir, rounds=3, items=12, jobs=3)
    assert check_conversations(result.run_dir, frame, by_item, sent=sent) > 0
    # The answer files hold the answers in the order they arrived: a round-2 answer
    # (so its request) came before the last round-1 answer of its job.
    for path in (result.run_dir / "outputs").glob("*-direct.jsonl"):
        order = [split(json.loads(x)["custom_id"])[1] for x in path.read_text().splitlines()]
        if 2 in order:
            assert order.index(2) < len(order) - 1 - order[::-1].index(1), order
    # every request of every round sent once
    assert asked.total == sum(len(r) for r in by_item.values())
    assert set(asked.requests.values()) == {1}


def test_round_settings_are_checked_before_anything_is_written(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--rounds"):
        RunConfig(models=("m",), rounds=0)
    with pytest.raises(ConfigError, match="--feedback"):
        RunConfig(models=("m",), rounds=2, feedback="hint")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="--rounds K"):
        RunConfig(models=("m",), feedback="retry")
    with pytest.raises(ConfigError, match="names \\{hint\\}"):
        RunConfig(models=("m",), rounds=2, feedback_template="{hint}")
    with pytest.raises(ConfigError, match="completions"):
        RunConfig(
            models=("m",),
            rounds=2,
            api="direct",
            endpoint="completions",
            prompt_template="{question}",
        )
    config = RunConfig(models=("m",), rounds=3, out_dir=tmp_path)
    assert config.feedback == "counterexample"
    again = RunConfig.from_dict(config.to_dict())
    assert (again.rounds, again.feedback, again.feedback_template) == (3, "counterexample", None)
    assert "rounds" not in RunConfig(models=("m",)).to_dict()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--rounds", "0"], "--rounds: must be a positive integer, got '0'"),
        (["--rounds", "2", "--feedback", "hint"], "invalid choice: 'hint'"),
        (["--feedback", "retry"], "--feedback is for repair rounds: add --rounds K"),
        (["--rounds", "3", "--feedback-file", "{tmp}/bad.txt"], "--feedback-file names {hint}"),
        (["--rounds", "3", "--feedback-file", "{tmp}/none.txt"], "cannot read feedback template"),
    ],
)
def test_bad_round_flags_exit_2_in_one_line_before_any_run_directory(
    args: list[str], message: str, tmp_path: Path
) -> None:
    (tmp_path / "bad.txt").write_text("Wrong. {hint}")
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    proc = _aeval("run", *args, "--limit", "2", "--out", str(tmp_path / "r"), cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr
    assert len([x for x in proc.stderr.splitlines() if "error" in x]) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "r").exists()


def test_a_feedback_file_is_kept_byte_for_byte_and_the_dry_run_bounds_all_rounds(
    benchmark_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = slice_path(benchmark_path, tmp_path, rows=5)
    template = "Not yet.{reason}{counterexample}\r\nAgain, with <answer></answer> tags.\n"
    (tmp_path / "fb.txt").write_bytes(template.encode())
    code = main(
        ["run", "--dry-run", "--dataset", str(data), "--out", str(tmp_path / "r"),
         "--model", "gpt-4o-mini", "--rounds", "3", "--feedback", "reason",
         "--feedback-file", str(tmp_path / "fb.txt"), "--max-tokens", "100", "--run-id", "dry"]
    )  # fmt: skip
    assert code == 0
    out = capsys.readouterr().out
    saved = json.loads((tmp_path / "r" / "dry" / "config.json").read_text())
    assert (saved["rounds"], saved["feedback"]) == (3, "reason")
    assert saved["feedback_template"] == template  # its exact text, line ends included
    # the first round's estimate, then the most all three rounds can cost
    assert "all 3 rounds at most" in out
    first, every = (line for line in out.splitlines() if line.strip().startswith("gpt-4o-mini:"))
    assert "5 requests" in first and "15 requests" in every
    assert "≤300 output tokens" not in first and "≤1,500 output tokens" in every


def test_status_shows_each_shards_round(
    benchmark_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=6)

    async def run() -> Path:
        async with LocalBatchServer(dataset=frame, models=dict(SPECS)) as server:
            config = fast_config(
                data, tmp_path / "r", server.base_url, models=("model-c",), rounds=2
            )
            return (await Run(config).run()).run_dir

    run_dir = anyio.run(run)
    capsys.readouterr()
    assert main(["status", str(run_dir), "--json", "--local"]) == 0
    rows = json.loads(capsys.readouterr().out)["shards"]
    assert sorted(r["round"] for r in rows) == [1, 2]
    assert main(["status", str(run_dir), "--local"]) == 0
    assert "round" in capsys.readouterr().out


@pytest.mark.slow
def test_the_offline_demo_runs_three_rounds(tmp_path: Path) -> None:
    """`python -m aeval run --rounds 3 --feedback counterexample --limit 40` with no key."""
    from aeval.dataset import demo_dataset_path, load_dataset

    proc = _aeval(
        "run", "--rounds", "3", "--feedback", "counterexample", "--limit", "40",
        "--out", str(tmp_path / "r"), "--display", "plain", cwd=tmp_path, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (run_dir,) = (tmp_path / "r").iterdir()
    by_item = check_round_structure(run_dir, rounds=3, items=40, jobs=3)
    frame = load_dataset(str(demo_dataset_path()), limit=40)
    assert check_conversations(run_dir, frame, by_item) > 0


@pytest.mark.anyio
async def test_the_end_files_are_those_of_the_whole_frame(
    benchmark_path: Path, tmp_path: Path
) -> None:
    """The run's end writes the verdict frame, lets it go, summarises from the file and
    reads the frame back (#44's memory target). What it leaves must be what the whole
    frame gives: the run's verdicts are the file's, the file is verdicts.jsonl's with the
    answers' classes, and summary.json is summarize() of the frame, byte for byte (two
    trials: maj@n classes and the rounds beside the trials)."""
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=10)
    async with LocalBatchServer(dataset=frame, models=dict(SPECS)) as server:
        config = fast_config(data, tmp_path / "r", server.base_url, rounds=3, trials=2)
        result = await Run(config).run()
    assert result.outcome == "finished", result.message
    run_dir = result.run_dir
    written = pl.read_parquet(run_dir / "verdicts.parquet")
    assert written.equals(result.verdicts)
    assert set(written["round"].unique()) == {1, 2, 3}
    assert written["answer_class"].null_count() < written.height
    with RunStore.open(run_dir, read_only=True) as store:
        appended = store.verdicts_frame()
    assert written.drop("answer_class").equals(appended.drop("answer_class"))
    assert result.summary is not None
    expected = summarize(written, batch_prices=True, rounds=3)
    expected["provenance"] = result.summary["provenance"]
    assert (run_dir / "summary.json").read_text() == json.dumps(
        expected, indent=2, sort_keys=True, default=str
    )
    assert "versus_trials" in expected["models"][0]["rounds"]
