"""Inspect AI both ways (Issue 21 §2), with the real inspect-ai package.

- An ``inspect eval`` of the ``aeval/warp`` task with Inspect's built-in
  ``mockllm/model``, answers chosen per item, every sample scored by aeval's
  judge (its worker pool, the three readings, the verdict as score metadata).
- ``aeval export inspect`` of a real offline run, read back by Inspect's own
  ``read_eval_log`` with the same counts and numbers as aeval's summary.
- (slow) the ``inspect eval aeval/warp`` command line, the name resolved through
  aeval's entry point, against aeval's local server through Inspect's OpenAI
  provider.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import anyio
import polars as pl
import pytest
from engine_helpers import FAST_POLL, FAST_RETRY
from inspect_ai import eval as inspect_eval
from inspect_ai.log import read_eval_log
from inspect_ai.model import ChatMessage, ModelOutput, ModelUsage, get_model
from inspect_ai.util import registry_info

from aeval.config import Credentials, RunConfig
from aeval.dataset import demo_dataset_path, load_dataset
from aeval.engine import Run
from aeval.errors import ConfigError
from aeval.interop.inspect_task import warp
from aeval.local import LocalBatchServer, ModelSpec
from aeval.report import load_summary
from aeval.verdicts import INFRA_STATUSES

DEMO = load_dataset(str(demo_dataset_path()))
ITEMS = ("1", "2", "3", "4", "5")


def truth_of(cid: str) -> str:
    return str(DEMO.filter(pl.col("id") == cid)["answer"].item())


def answers() -> dict[str, str]:
    """One response per item, each read differently by the three readings."""
    return {
        "1": f"<think>extend it</think><answer>{truth_of('1')}</answer>",  # right
        "2": f"<answer>```smt\n{truth_of('2')}\n```</answer>",  # right after a named repair
        "3": "<answer>(assert (> undeclared_name 0))</answer>",  # unknown symbol
        "4": "I cannot tell.",  # no answer
        "5": f"<answer>{truth_of('5')})</answer>",  # one ")" too many: lenient only
    }


def mock_outputs() -> object:
    by_question = {
        str(DEMO.filter(pl.col("id") == cid)["question"].item()): text
        for cid, text in answers().items()
    }

    def generate(input: list[ChatMessage], *_: object) -> ModelOutput:
        prompt = input[-1].text
        text = next(t for q, t in by_question.items() if prompt.startswith(q))
        output = ModelOutput.from_content(model="mockllm/model", content=text)
        # Usage given: mockllm would otherwise count tokens with tiktoken's o200k
        # file, which it downloads (no network here).
        output.usage = ModelUsage(input_tokens=100, output_tokens=20, total_tokens=120)
        return output

    return generate


def test_the_task_is_declared_to_inspect_through_the_entry_point() -> None:
    """What `inspect eval aeval/warp` loads to resolve the name (the command-line test
    below, slow, resolves it for real)."""
    [point] = [p for p in entry_points(group="inspect_ai") if p.name == "aeval"]
    module = point.load()
    assert module.warp is warp and registry_info(module.warp).type == "task"


def test_inspect_eval_scores_every_sample_with_aevals_judge(tmp_path: Path) -> None:
    task = warp(dataset="demo", sample_ids=",".join(ITEMS))
    model = get_model("mockllm/model", custom_outputs=mock_outputs())
    [log] = inspect_eval(task, model=model, log_dir=str(tmp_path), display="none", epochs=2)
    assert log.status == "success", log.error
    assert log.samples is not None and len(log.samples) == len(ITEMS) * 2
    got: dict[tuple[str, int], tuple[dict[str, str], dict[str, object]]] = {}
    for sample in log.samples:
        assert sample.scores is not None
        score = sample.scores["equivalence"]
        assert sample.target == truth_of(str(sample.id))
        got[(str(sample.id), sample.epoch)] = (score.value, score.metadata or {})  # type: ignore[assignment]
    for epoch in (1, 2):
        value, meta = got[("1", epoch)]
        assert value == {"lenient": "C", "strict": "C", "published": "C"}
        assert meta["status"] == "equivalent" and meta["repaired"] is None
        value, meta = got[("2", epoch)]
        assert value["lenient"] == "C" and value["strict"] == "I"  # a repair is not strict
        assert meta["repaired"] == "code_fence"
        value, meta = got[("3", epoch)]
        assert value == {"lenient": "I", "strict": "I", "published": "I"}
        assert meta["status"] == "unknown_symbol"
        assert got[("4", epoch)][1]["status"] == "no_answer"
        value, meta = got[("5", epoch)]
        assert (value["lenient"], value["strict"]) == ("C", "I")
        assert meta["repaired"] == "dropped_extra_parens"
    assert log.results is not None
    metrics = {s.name: s.metrics["accuracy"].value for s in log.results.scores}
    assert metrics == {"lenient": pytest.approx(0.6), "strict": 0.2, "published": 0.4}
    # The scorer's pool of worker processes is aeval's: killed on close.
    scorer: Any = task.scorer[0]
    pids = scorer.aeval_pool.pids
    assert pids
    scorer.aeval_pool.close()
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_task_options_as_inspects_command_line_parses_them() -> None:
    """``-T sample_ids=5,7,10-12`` arrives as a list, ``-T sample_ids=5`` as a number."""
    assert [s.id for s in warp(dataset="demo", sample_ids=["5", 7, "10-12"]).dataset] == [
        "5",
        "7",
        "10",
        "11",
        "12",
    ]
    assert [s.id for s in warp(dataset="demo", sample_ids=5).dataset] == ["5"]
    task = warp(dataset="demo", tier="small", limit=3, protocol="warp-2025")
    assert len(task.dataset) == 3
    sample = task.dataset[0]
    assert sample.metadata is not None and sample.metadata["tier"] == "small"
    prompt = str(sample.input[-1].text)  # type: ignore[union-attr]
    assert prompt.startswith("All per-variable constraints")  # the study's order
    with pytest.raises(ConfigError, match="unknown protocol"):
        warp(dataset="demo", protocol="nope")


def run_offline(tmp_path: Path) -> Path:
    """A small real run (two synthetic models, two trials) through the local server."""
    specs = {
        "model-a": ModelSpec("synthetic", seed=1, accuracy=0.6),
        "model-b": ModelSpec("synthetic", seed=2, accuracy=0.3),
    }

    async def main() -> Path:
        async with LocalBatchServer(dataset=DEMO.head(12), models=specs) as server:
            config = RunConfig(
                models=tuple(specs),
                trials=2,
                dataset=str(demo_dataset_path()),
                limit=12,
                poll=FAST_POLL,
                retry=FAST_RETRY,
                workers=2,
                out_dir=tmp_path / "results",
                credentials=Credentials("sk-local", server.base_url),
            )
            result = await Run(config).run()
        assert result.outcome == "finished"
        return result.run_dir

    return anyio.run(main)


def test_export_is_read_back_by_inspect_with_the_same_counts(tmp_path: Path) -> None:
    from aeval.cli import main

    run_dir = run_offline(tmp_path)
    summary = load_summary(run_dir)
    assert summary is not None
    verdicts = pl.read_parquet(run_dir / "verdicts.parquet")
    out = tmp_path / "logs" / "run.eval"
    assert main(["export", "inspect", str(run_dir), "--out", str(out)]) == 0
    infra = {s.value for s in INFRA_STATUSES}
    for entry in summary["models"]:
        model = entry["model"]
        log = read_eval_log(str(out.with_name(f"run-{model}.eval")))
        mine = verdicts.filter(pl.col("model") == model)
        assert log.eval.model == model and log.eval.task == "aeval/warp"
        assert log.samples is not None and len(log.samples) == mine.height == 24
        assert {(s.id, s.epoch) for s in log.samples} == set(
            zip(mine["custom_id"], mine["trial"], strict=True)
        )
        by_key = {(r["custom_id"], r["trial"]): r for r in mine.iter_rows(named=True)}
        for sample in log.samples:
            row = by_key[(str(sample.id), sample.epoch)]
            assert sample.target == truth_of(str(sample.id))
            assert str(sample.input[-1].text).startswith(  # type: ignore[union-attr]
                str(DEMO.filter(pl.col("id") == str(sample.id))["question"].item())
            )
            if row["status"] in infra:
                assert sample.scores is None and sample.error is not None
                continue
            assert sample.output.completion  # the model's full response
            usage = sample.output.usage
            assert usage is not None and usage.reasoning_tokens == row["reasoning_tokens"]
            score: Any = sample.scores["equivalence"]  # type: ignore[index]
            assert score.metadata["status"] == row["status"]
            assert (score.value["lenient"] == "C") == row["correct"]
            assert (score.value["published"] == "C") == row["correct_published"]
        assert log.results is not None
        scored = sum(1 for s in mine["status"] if s not in infra)
        assert log.results.completed_samples == scored
        metrics = {s.name: s.metrics["accuracy"].value for s in log.results.scores}
        assert metrics["lenient"] == pytest.approx(entry["accuracy"]["value"])
        assert metrics["strict"] == pytest.approx(entry["strict_accuracy"]["value"])


def test_export_refuses_an_out_file_inspect_cannot_read(tmp_path: Path) -> None:
    from aeval.cli import main

    run_dir = tmp_path / "r"
    run_dir.mkdir()
    assert main(["export", "inspect", str(run_dir), "--out", str(tmp_path / "x.txt")]) == 2


@pytest.mark.slow
def test_inspect_eval_command_line_resolves_aeval_warp(tmp_path: Path) -> None:
    """``inspect eval aeval/warp``: the name from the entry point, answers from aeval's
    local server (reference responder: every answer right) through Inspect's OpenAI
    provider, scored by aeval's judge."""
    server = subprocess.Popen(
        [sys.executable, "-m", "aeval", "serve", "--port", "0", "--log-level", "warning"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert server.stdout is not None
        line = ""
        while "http://" not in line:
            line = server.stdout.readline()
            assert line, "the local server did not start"
        base_url = line[line.index("http://") :].split()[0]
        env = {**os.environ, "OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": "sk-local"}
        proc = subprocess.run(
            [
                str(Path(sys.executable).with_name("inspect")),
                "eval",
                "aeval/warp",
                "--model",
                "openai/gpt-4o-mini-2024-07-18",
                "-T",
                "dataset=demo",
                "-T",
                "limit=6",
                "--log-dir",
                str(tmp_path),
                "--display",
                "plain",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=30)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [path] = list(tmp_path.glob("*.eval"))
    log = read_eval_log(str(path))
    assert log.eval.task == "aeval/warp" and log.status == "success"
    assert log.samples is not None and len(log.samples) == 6
    for sample in log.samples:
        score = sample.scores["equivalence"]  # type: ignore[index]
        assert score.value == {"lenient": "C", "strict": "C", "published": "C"}
        assert score.metadata["status"] == "equivalent"  # type: ignore[index]


@pytest.mark.slow
def test_inspect_view_serves_the_export(tmp_path: Path) -> None:
    """``inspect view`` lists the exported log and serves it as the log it is."""
    import socket
    import urllib.request

    run_dir = run_offline(tmp_path)
    out = tmp_path / "logs" / "run.eval"
    from aeval.cli import main

    assert main(["export", "inspect", str(run_dir), "--out", str(out), "--model", "model-a"]) == 0
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    view = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("inspect")),
            "view",
            "--log-dir",
            str(out.parent),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        base = f"http://127.0.0.1:{port}/api"
        listing = None
        for _ in range(120):
            try:
                with urllib.request.urlopen(f"{base}/logs", timeout=5) as reply:
                    listing = json.loads(reply.read())
                break
            except OSError:
                time.sleep(0.5)
        assert listing is not None, "inspect view did not answer"
        [entry] = listing["files"]
        assert entry["task"] == "aeval/warp" and entry["name"].endswith("run.eval")
        with urllib.request.urlopen(f"{base}/logs/{out}?header-only=100", timeout=30) as reply:
            header = json.loads(reply.read())
        assert header["status"] == "success" and header["eval"]["model"] == "model-a"
        names = {s["name"] for s in header["results"]["scores"]}
        assert names == {"lenient", "strict", "published"}
    finally:
        view.send_signal(signal.SIGINT)
        try:
            view.wait(timeout=30)
        except subprocess.TimeoutExpired:
            view.kill()
            view.wait()


def test_an_infrastructure_status_gets_no_score(tmp_path: Path) -> None:
    # A ground truth Z3 cannot read is the dataset's failure, not the model's: no score,
    # as aeval's summary and the .eval export leave it (a scorer may return None:
    # inspect_ai 0.3.285, scorer/_scorer.py `Scorer.__call__ -> Score | None`, and
    # _eval/task/run.py records a score only when it is not None).
    from inspect_ai import Task
    from inspect_ai.dataset import MemoryDataset, Sample
    from inspect_ai.solver import generate

    from aeval.interop.inspect_task import equivalence

    constants = "(declare-const x Int)"
    samples = [
        Sample(id="bad", input="q", target="(assert (> x", metadata={"constants": constants}),
        Sample(id="good", input="q", target="(assert (> x 1))", metadata={"constants": constants}),
    ]
    scorer = equivalence(workers=1)
    task = Task(dataset=MemoryDataset(samples), solver=generate(), scorer=scorer)

    def reply(input: list[ChatMessage], *_: object) -> ModelOutput:
        output = ModelOutput.from_content("mockllm/model", "<answer>(assert (> x 1))</answer>")
        output.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
        return output

    model = get_model("mockllm/model", custom_outputs=reply)
    try:
        [log] = inspect_eval(task, model=model, log_dir=str(tmp_path), display="none", epochs=2)
    finally:
        scorer.aeval_pool.close()  # type: ignore[attr-defined]
    assert log.status == "success", log.error
    assert log.samples is not None
    scored = {(str(s.id), s.epoch): (s.scores or {}).get("equivalence") for s in log.samples}
    assert scored[("bad", 1)] is None and scored[("bad", 2)] is None
    good = scored[("good", 1)]
    assert good is not None and good.value == {"lenient": "C", "strict": "C", "published": "C"}
    assert log.results is not None
    metrics = {s.name: s.metrics["accuracy"].value for s in log.results.scores}
    assert metrics == {"lenient": 1.0, "strict": 1.0, "published": 1.0}
