"""A run's verdicts as an Inspect AI eval log (``aeval export inspect``).

One log per model (Inspect's unit: one task, one model), one sample per
verdict: the item id and the trial as Inspect's sample id and epoch, the
prompt the model was sent as input, its full response as output, the ground
truth as target, and a score whose value holds the three readings
(``lenient``, ``strict``, ``published``) with the verdict (status, repair,
direction, counterexample) as metadata. The log's results are aeval's own
numbers from the summary (accuracy per reading with its 95 % interval), so
``inspect view`` and ``aeval report`` say the same thing; infrastructure
failures (``api_error``, ``missing``, ``bad_ground_truth``) are samples with an
error and no score, as Inspect shows a sample the model never answered.

Needs the ``aeval[inspect]`` extra; the log is written with Inspect's own
``write_eval_log``, so any Inspect version that reads what it writes reads it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import polars as pl

try:
    from inspect_ai.log import (
        EvalConfig,
        EvalDataset,
        EvalError,
        EvalLog,
        EvalMetric,
        EvalPlan,
        EvalPlanStep,
        EvalResults,
        EvalSample,
        EvalScore,
        EvalSpec,
        EvalStats,
        write_eval_log,
    )
    from inspect_ai.model import (
        ChatMessageAssistant,
        ChatMessageSystem,
        ChatMessageUser,
        GenerateConfig,
        ModelOutput,
        ModelUsage,
    )
    from inspect_ai.scorer import CORRECT, INCORRECT, Score
except ImportError as err:  # pragma: no cover - depends on the environment
    raise ImportError(
        "exporting to Inspect AI needs inspect-ai: pip install 'aeval[inspect]'"
    ) from err

from aeval.errors import ConfigError, RunDirError
from aeval.model_names import split_variant
from aeval.prompts import PromptSettings, format_prompt
from aeval.report.samples import Samples, load_samples
from aeval.store import RunLayout
from aeval.summary.aggregate import INFRA_STATUS_VALUES, load_run, load_summary, summarize
from aeval.summary.rounds import first_round
from aeval.verdicts import Status
from aeval.verify.extract import extract_answer
from aeval.version import __version__

__all__ = ["eval_log", "export_run"]

_SCORER = "aeval/equivalence"


def export_run(
    run_dir: Path | str, out: Path | str, *, model: str | None = None
) -> list[tuple[str, Path]]:
    """Write ``run_dir``'s verdicts as Inspect eval logs; returns (model, path) pairs.

    One model (the run's only one, or ``model``): written to ``out``. Several:
    one file per model beside ``out``, named ``<stem>-<model>.eval``.

    :raises RunDirError: no verdicts in ``run_dir``.
    :raises ConfigError: ``model`` has no verdicts there, or ``out`` is not a ``.eval``
        or ``.json`` file.
    """
    run_dir, out = Path(run_dir), Path(out)
    if out.suffix not in (".eval", ".json"):
        raise ConfigError(f"--out {out}: an Inspect log file ends in .eval (or .json)")
    # Inspect's sample is one (item, epoch): a repair run's round 1, the answers its
    # accuracy counts (the summary's numbers are of round 1 too).
    every_round = load_run(run_dir)
    verdicts = first_round(every_round)
    if verdicts.is_empty():
        raise RunDirError(f"{run_dir} has no verdicts to export")
    models = verdicts["model"].unique(maintain_order=True).to_list()
    if model is not None:
        if model not in models:
            raise ConfigError(
                f"no verdicts for model {model!r} in {run_dir} (models: {', '.join(models)})"
            )
        models = [model]
    summary = load_summary(run_dir) or summarize(every_round)
    samples = load_samples(run_dir, verdicts=verdicts)
    prompt = _prompt_settings(run_dir)
    written = []
    for name in models:
        path = out if len(models) == 1 else out.with_name(f"{out.stem}-{_slug(name)}{out.suffix}")
        log = eval_log(
            verdicts.filter(pl.col("model") == name),
            samples,
            summary,
            model=name,
            run_dir=run_dir,
            prompt=prompt,
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        write_eval_log(log, str(path), format="eval" if path.suffix == ".eval" else "json")
        written.append((name, path))
    return written


def eval_log(
    verdicts: pl.DataFrame,
    samples: Samples,
    summary: Mapping[str, Any],
    *,
    model: str,
    run_dir: Path,
    prompt: PromptSettings | None,
) -> EvalLog:
    """The eval log of one model's verdicts."""
    provenance = summary.get("provenance") or {}
    dataset = provenance.get("dataset") or {}
    created = datetime.fromtimestamp(run_dir.stat().st_mtime, UTC).isoformat()
    eval_samples = [
        _sample(row, samples, model=model, prompt=prompt)
        for row in verdicts.sort(["trial", "custom_id"]).iter_rows(named=True)
    ]
    trials = max(verdicts["trial"].to_list(), default=1)
    spec = EvalSpec(
        created=created,
        run_id=run_dir.name,
        eval_id=f"{run_dir.name}-{_slug(model)}",
        task="aeval/warp",
        task_id=run_dir.name,
        task_registry_name="aeval/warp",
        dataset=EvalDataset(
            name=str(dataset.get("ref") or samples.dataset or "unknown"),
            samples=len({r["custom_id"] for r in verdicts.iter_rows(named=True)}),
        ),
        model=model,
        model_generate_config=_generate_config(model),
        config=EvalConfig(epochs=trials),
        packages={"aeval": __version__},
        metadata={"aeval_run_dir": str(run_dir), "aeval_provenance": provenance},
    )
    return EvalLog(
        eval=spec,
        status="success",
        plan=EvalPlan(name="aeval", steps=[EvalPlanStep(solver="aeval batch run")]),
        results=_results(summary, model, verdicts),
        stats=EvalStats(started_at=created, completed_at=created),
        samples=eval_samples,
    )


def _sample(
    row: dict[str, Any], samples: Samples, *, model: str, prompt: PromptSettings | None
) -> EvalSample:
    cid, trial = row["custom_id"], row["trial"]
    item = samples.items.get(cid)
    response = samples.response(model, trial, cid)
    content = response.content if response is not None else None
    question = item.question if item is not None else ""
    messages: list[Any] = []
    if prompt is not None and prompt.system is not None:
        messages.append(ChatMessageSystem(content=prompt.system))
    messages.append(
        ChatMessageUser(
            content=format_prompt(question, prompt) if prompt and question else question
        )
    )
    output = ModelOutput.from_content(model=model, content=content or "")
    if response is not None and response.prompt_tokens is not None:
        output.usage = ModelUsage(
            input_tokens=response.prompt_tokens or 0,
            output_tokens=response.completion_tokens or 0,
            total_tokens=(response.prompt_tokens or 0) + (response.completion_tokens or 0),
            reasoning_tokens=response.reasoning_tokens,  # of the output tokens, when said
        )
    metadata = {
        "status": row["status"],
        "reason": row["reason"],
        "repaired": row["repaired"],
        "direction": row["direction"],
        "counterexample": _json(row.get("counterexample")),
        "published_reason": row.get("published_reason"),
        "tier": row.get("tier"),
        "finish_reason": row.get("finish_reason"),
    }
    infra = row["status"] in INFRA_STATUS_VALUES
    scores = None
    if not infra:
        published = row.get("correct_published")
        value = {
            "lenient": CORRECT if row["status"] == Status.EQUIVALENT.value else INCORRECT,
            "strict": CORRECT
            if row["status"] == Status.EQUIVALENT.value and not row["repaired"]
            else INCORRECT,
        }
        if published is not None:
            value["published"] = CORRECT if published else INCORRECT
        scores = {
            "equivalence": Score(
                value=value,
                answer=extract_answer(content).text,
                explanation=row["reason"] or row["status"],
                metadata=metadata,
            )
        }
    return EvalSample(
        id=cid,
        epoch=trial,
        input=messages,
        target=item.truth if item is not None else "",
        messages=[*messages, ChatMessageAssistant(content=content or "", model=model)],
        output=output,
        scores=scores,
        metadata={"tier": row.get("tier"), "aeval": metadata},
        error=None
        if not infra
        else _infra_error(row),  # an answer that never came is Inspect's sample error
    )


def _generate_config(model: str) -> GenerateConfig:
    """A variant's setting (``gpt-5@high``, ``…@16000``) in Inspect's own fields
    (inspect_ai 0.3.285 ``GenerateConfig.reasoning_effort``, the same vocabulary, and
    ``reasoning_tokens``, a thinking budget); the label stays the log's model."""
    try:
        _, reasoning = split_variant(model)
    except ConfigError:  # a rescored run's name, not a variant
        return GenerateConfig()
    if reasoning is None:
        return GenerateConfig()
    return GenerateConfig(reasoning_effort=reasoning.effort, reasoning_tokens=reasoning.budget)


def _infra_error(row: dict[str, Any]) -> EvalError:
    message = f"{row['status']}: {row['reason'] or 'no answer'}"
    return EvalError(message=message, traceback="", traceback_ansi="")


def _results(summary: Mapping[str, Any], model: str, verdicts: pl.DataFrame) -> EvalResults:
    entry = next((m for m in summary.get("models", []) if m["model"] == model), None)
    scored = sum(1 for s in verdicts["status"].to_list() if s not in INFRA_STATUS_VALUES)
    scores = []
    readings = (
        ("lenient", "accuracy"),
        ("strict", "strict_accuracy"),
        ("published", "published_accuracy"),
    )
    for reading, key in readings:
        rate = (entry or {}).get(key) or {}
        if rate.get("value") is None:
            continue
        metrics = {"accuracy": EvalMetric(name="accuracy", value=rate["value"])}
        for bound in ("low", "high"):
            if rate.get(bound) is not None:
                name = f"ci95_{bound}"
                metrics[name] = EvalMetric(name=name, value=rate[bound])
        scores.append(
            EvalScore(
                name=reading,
                scorer=_SCORER,
                scored_samples=scored,
                unscored_samples=verdicts.height - scored,
                metrics=metrics,
            )
        )
    return EvalResults(total_samples=verdicts.height, completed_samples=scored, scores=scores)


def _prompt_settings(run_dir: Path) -> PromptSettings | None:
    """The prompt the run sent (its config.json), or ``None`` (a rescore directory)."""
    try:
        saved = RunLayout(run_dir).read_config()
        # a mapping of PromptSettings' fields as to_dict saved them; anything else is a TypeError
        return None if saved is None else PromptSettings(**cast("dict[str, Any]", saved["prompt"]))
    except (RunDirError, KeyError, TypeError):
        return None


def _json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name)
