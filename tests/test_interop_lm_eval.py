"""The ``warp`` lm-evaluation-harness task (Issue 30 §1), with the real lm-eval package.

The harness's own command line (``python -m lm_eval``, lm-eval 0.4.13 from PyPI
as ``lm-eval[api]``: no torch) runs the task files aeval ships against aeval's
local server through the harness's OpenAI-compatible chat back end
(``local-chat-completions``: ``lm_eval/models/openai_completions.py``,
``LocalChatCompletion``), logs its samples, and ``aeval rescore`` of those
samples gives, item for item, the readings the harness reported. Sources: the
harness's task config (``lm_eval/config/task.py``: ``custom_dataset``,
``process_results``, ``generation_kwargs``), its metric aggregation
(``lm_eval/api/metrics.py``: ``mean_stderr``) and its sample log
(``lm_eval/loggers/evaluation_tracker.py``: ``save_results_samples``), at
EleutherAI/lm-evaluation-harness@4e7e0d47 and in the installed 0.4.13.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import polars as pl
import pytest

from aeval.dataset import load_dataset
from aeval.errors import ConfigError
from aeval.interop.lm_eval_task import READINGS, TASKS_DIR, load_docs
from aeval.local import LocalBatchServer, ModelSpec, fetch_direct_counters, serve_process
from aeval.prompts import PromptSettings, messages
from aeval.report.samples import load_samples
from aeval.rescoring.rescore import rescore_files, write_outputs
from aeval.store.provenance import rescore_provenance

pytestmark = pytest.mark.anyio

# Every failure the verifier tells apart, and no HTTP error: the harness gives up a
# whole run on a request that keeps failing (its retries are its own).
SPEC = ModelSpec(
    "synthetic",
    seed=6,
    accuracy=0.55,
    fenced_share=0.4,
    failure_mix={
        "too_strong": 0.25,
        "too_weak": 0.25,
        "no_answer": 0.1,
        "unbalanced": 0.2,
        "undeclared_var": 0.1,
        "truncated_length": 0.1,
    },
)
LIMIT = 6  # rows per task: warp's first 6 and 6, 6 and 5 of the three tiers


def harness_env() -> dict[str, str]:
    # The hub is unreachable here; the task reads a local file, never the hub.
    return {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}


def read_samples(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


async def test_a_harness_run_of_warp_is_what_rescore_says_item_for_item(
    tmp_path: Path, benchmark_path: Path, dataset: pl.DataFrame
) -> None:
    out = tmp_path / "harness"
    async with LocalBatchServer(dataset=dataset, models={"syn": SPEC}) as server:
        done = await anyio.run_process(
            [
                sys.executable,
                "-m",
                "lm_eval",
                "--model",
                "local-chat-completions",
                "--model_args",
                f"base_url={server.base_url}/chat/completions,model=syn,num_concurrent=4",
                "--tasks",
                "warp,warp_tiers",
                "--include_path",
                str(TASKS_DIR),
                "--apply_chat_template",
                "--limit",
                str(LIMIT),
                "--metadata",
                json.dumps({"dataset": str(benchmark_path), "workers": 2}),
                "--output_path",
                str(out),
                "--log_samples",
            ],
            env=harness_env(),
            check=False,
        )
        counted = server.direct_counters()
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    assert counted.total == LIMIT + 6 + 6 + 5  # one request per doc, nothing retried

    (results_path,) = (out / "syn").glob("results_*.json")
    results = json.loads(results_path.read_text())
    files = {p.name.split("_20")[0].removeprefix("samples_"): p for p in out.glob("syn/samples_*")}
    assert sorted(files) == ["warp", "warp_large", "warp_medium", "warp_small"]

    frame = load_dataset(str(benchmark_path))
    questions = dict(zip(frame["id"], frame["question"], strict=True))
    seen: set[tuple[int, int, int]] = set()
    for task, path in files.items():
        samples = read_samples(path)
        assert len(samples) == (5 if task == "warp_large" else LIMIT)
        scored = await rescore_files([path], frame, workers=2)
        assert not scored.problems
        verdicts = {v.custom_id: v for v in scored.verdicts}
        assert len(verdicts) == len(samples)
        for sample in samples:
            row = sample["doc"]["id"]
            # the prompt aeval sends: the one user message, question then instruction
            (sent,) = sample["arguments"]["gen_args_0"]["arg_0"]
            assert json.loads(sent) == messages(questions[row])
            verdict = verdicts[row]
            assert verdict.model == "syn" and verdict.trial == 1
            rescored = {
                "lenient": int(verdict.correct),
                "strict": int(verdict.correct and verdict.repaired is None),
                "published": int(bool(verdict.correct_published)),
            }
            assert {r: sample[r] for r in READINGS} == rescored, (task, row, verdict)
            seen.add((rescored["lenient"], rescored["strict"], rescored["published"]))
        # the harness's aggregate: the mean of the per-sample readings, with its
        # closed-form standard error (sample standard deviation over sqrt(n))
        reported = results["results"][task]
        for reading in READINGS:
            values = [s[reading] for s in samples]
            mean = sum(values) / len(values)
            assert reported[f"{reading},none"] == pytest.approx(mean)
            spread = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
            assert reported[f"{reading}_stderr,none"] == pytest.approx(
                spread / math.sqrt(len(values))
            )
    # the readings disagree somewhere, so agreeing item for item means something
    assert (1, 1, 1) in seen and (0, 0, 0) in seen and (1, 0, 0) in seen
    # aeval's report and viewer of the harness's run: a rescore directory, its
    # answers taken from the samples file the rescore read
    scored = await rescore_files([files["warp"]], frame, workers=2)
    verdicts_of_warp = {v.custom_id: v.status.value for v in scored.verdicts}
    rescored_dir = tmp_path / "rescored"
    summary = write_outputs(scored, rescored_dir, rescore_provenance(None, [files["warp"]]))
    (model_summary,) = summary["models"]
    assert model_summary["model"] == "syn" and model_summary["scored"] == LIMIT
    assert summary["programs"] and summary["distances"]  # the study's per-program lens
    shown = load_samples(rescored_dir, dataset=str(benchmark_path))
    for sample in read_samples(files["warp"]):
        response = shown.response("syn", 1, sample["doc"]["id"])
        assert response is not None and response.content == sample["resps"][0][0]
    # With `repeats: n` a doc's one request holds n answers (evaluator.py logs
    # `"resps": [req.resps for req in requests]`): rescore reads each as a trial.
    first = read_samples(files["warp"])[0]
    first["resps"] = [[first["resps"][0][0], "I cannot tell."]]
    repeated = tmp_path / "syn" / files["warp"].name
    repeated.parent.mkdir()
    repeated.write_text(json.dumps(first) + "\n", encoding="utf-8")
    twice = await rescore_files([repeated], frame, workers=2)
    assert [(v.model, v.trial, v.status.value) for v in twice.verdicts] == [
        ("syn", 1, verdicts_of_warp[first["doc"]["id"]]),
        ("syn", 2, "no_answer"),
    ]
    group = results["results"]["warp_tiers"]
    tiers = [read_samples(files[t]) for t in ("warp_small", "warp_medium", "warp_large")]
    pooled = [s["lenient"] for tier in tiers for s in tier]
    assert group["lenient,none"] == pytest.approx(sum(pooled) / len(pooled))


def test_the_protocol_and_tier_come_from_the_metadata(benchmark_path: Path) -> None:
    frame = load_dataset(str(benchmark_path))
    # the harness passes the task's whole metadata: its own keys are ignored
    docs = load_docs(
        str(benchmark_path), protocol="warp-2025", tier="large", version=1.0, model="m"
    )["test"]
    assert docs.num_rows == frame.filter(pl.col("tier") == "large").height
    first = docs[0]
    study = PromptSettings.for_protocol("warp-2025")
    assert first["prompt"] == f"{study.instruction}\n{first['question']}"
    assert first["check_timeout_s"] == 10.0
    with pytest.raises(ConfigError, match="protocol='nope'"):
        load_docs(str(benchmark_path), protocol="nope")
    with pytest.raises(ConfigError, match="check_timeout"):
        load_docs(str(benchmark_path), check_timeout="soon")


def test_the_judge_pool_is_killed_when_the_process_exits(benchmark_path: Path) -> None:
    # How the harness uses the task: process_results in its process, then exit.
    script = f"""
import json
from aeval.interop.lm_eval_task import judge_pids, load_docs, process_results
doc = load_docs({str(benchmark_path)!r}, workers=2)["test"][0]
print(json.dumps(process_results(doc, ["<answer>" + doc["answer"] + "</answer>"])))
print(json.dumps(judge_pids()))
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    readings, pids = (json.loads(line) for line in done.stdout.splitlines())
    assert readings == {"lenient": 1, "strict": 1, "published": 1}
    assert len(pids) == 2
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


@pytest.mark.slow  # a minute: the harness starts, and backs off a second a retry
def test_the_harness_gets_through_the_demo_models_transient_500s(tmp_path: Path) -> None:
    # `aeval serve --models demo` (synthetic, default failure mix, its HTTP 500s transient
    # as a real service's): the harness's own retries (lm_eval/models/api_models.py,
    # max_retries=3) get each failed request answered, and a --limit 40 run completes.
    model, out = "gpt-4o-mini-2024-07-18", tmp_path / "harness"
    with serve_process(["--models", "demo"]) as base_url:
        done = subprocess.run(
            [sys.executable, "-m", "lm_eval", "--model", "local-chat-completions",
             "--model_args", f"base_url={base_url}/chat/completions,model={model},"
             "num_concurrent=4", "--tasks", "warp", "--include_path", str(TASKS_DIR),
             "--apply_chat_template", "--limit", "40",
             "--metadata", json.dumps({"dataset": "demo", "workers": 2}),
             "--output_path", str(out), "--log_samples"],
            env=harness_env(), capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        counted = fetch_direct_counters(base_url)
    assert done.returncode == 0, done.stderr[-3000:]
    (samples,) = out.glob("*/samples_warp_*.jsonl")
    assert len(read_samples(samples)) == 40
    assert counted.total > 40  # some requests failed with a 500 and were sent again
