"""The numbers of a run: per model, per model × trial and per model × tier.

:func:`summarize` turns a verdict frame (:data:`aeval.verdicts.VERDICT_SCHEMA`)
into the plain, JSON-ready dict written as ``summary.json``; every table, chart
and comparison is rendered from that dict, so what a report shows is what
``summary.json`` says.

Accuracy is counted over *scored* answers: every verdict except the
infrastructure failures (:data:`aeval.verdicts.INFRA_STATUSES`), which are
reported apart so an outage never reads as a weak model. *Lenient* accuracy
counts every ``equivalent``; *strict* accuracy counts only those whose answer
needed no repair (``repaired`` is null).

*Published* accuracy is the WARP study's own evaluator (``correct_published``,
see :mod:`aeval.verify.published`), counted the way the study counted it: over
every verdict that has the reading, infrastructure failures included (a line
with no answer is incorrect there). It is ``None`` when the reading was
switched off.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from statistics import NormalDist
from typing import Any, get_args

import polars as pl

from aeval.errors import RunDirError
from aeval.verdicts import INFRA_STATUSES, VERDICT_SCHEMA, Direction, Status

__all__ = [
    "INFRA_STATUS_VALUES",
    "SUMMARY_VERSION",
    "load_run",
    "load_summary",
    "summarize",
    "tier_key",
    "wilson_interval",
]

SUMMARY_VERSION = 1
CONFIDENCE = 0.95
INFRA_STATUS_VALUES: tuple[str, ...] = tuple(sorted(s.value for s in INFRA_STATUSES))
_STATUSES = [s.value for s in Status]
_DIRECTIONS: tuple[str, ...] = get_args(Direction)


# The benchmark's tiers read best from small to large; other names sort after, by name.
_TIER_ORDER = {"tiny": 0, "small": 1, "medium": 2, "large": 3, "huge": 4}


def tier_key(tier: str | None) -> tuple[bool, int, str]:
    """Sort key for tier names: known sizes in size order, then others, then none."""
    return (tier is None, _TIER_ORDER.get((tier or "").lower(), len(_TIER_ORDER)), tier or "")


def wilson_interval(
    successes: int, n: int, confidence: float = CONFIDENCE
) -> tuple[float, float] | None:
    """The Wilson score interval of a binomial proportion, or None when ``n`` is 0.

    Wilson rather than the normal approximation because it stays inside [0, 1]
    and behaves at accuracies near 0 or 1 and at small ``n`` (a tier with a
    handful of items), which is where this benchmark's numbers often sit.
    """
    if n <= 0:
        return None
    if not 0 <= successes <= n:
        raise ValueError(f"successes={successes} outside 0..{n}")
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # At 0 or n successes the bound is exactly 0 or 1; say so rather than 1e-17.
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return low, high


def _rate(successes: int, n: int) -> dict[str, float | int | None]:
    ci = wilson_interval(successes, n)
    return {
        "value": successes / n if n else None,
        "low": ci[0] if ci else None,
        "high": ci[1] if ci else None,
        "successes": successes,
        "n": n,
    }


def _stats_exprs() -> list[pl.Expr]:
    status = pl.col("status")
    infra = status.is_in(INFRA_STATUS_VALUES)
    correct = status == Status.EQUIVALENT.value
    exprs = [
        pl.len().alias("n"),
        infra.sum().alias("infra_failures"),
        correct.sum().alias("correct"),
        (correct & pl.col("repaired").is_null()).sum().alias("correct_strict"),
        (pl.col("repaired").is_not_null()).sum().alias("repaired"),
        pl.col("correct_published").sum().alias("correct_published"),
        pl.col("correct_published").is_not_null().sum().alias("n_published"),
        pl.col("prompt_tokens").sum().alias("prompt_tokens"),
        pl.col("completion_tokens").sum().alias("completion_tokens"),
    ]
    exprs += [(status == s).sum().alias(f"status:{s}") for s in _STATUSES]
    exprs += [(pl.col("direction") == d).sum().alias(f"direction:{d}") for d in _DIRECTIONS]
    return exprs


def _group_record(row: dict[str, Any]) -> dict[str, Any]:
    n = int(row["n"])
    infra = int(row["infra_failures"])
    scored = n - infra
    correct = int(row["correct"])
    strict = int(row["correct_strict"])
    return {
        "n": n,
        "scored": scored,
        "correct": correct,
        "correct_strict": strict,
        "accuracy": _rate(correct, scored),
        "strict_accuracy": _rate(strict, scored),
        "published_accuracy": _rate(
            int(row["correct_published"] or 0), int(row["n_published"] or 0)
        ),
        "model_failures": scored - correct,
        "infra_failures": infra,
        "repaired": int(row["repaired"]),
        "statuses": {s: int(row[f"status:{s}"]) for s in _STATUSES},
        "directions": {d: int(row[f"direction:{d}"]) for d in _DIRECTIONS},
        "tokens": {
            "prompt": int(row["prompt_tokens"] or 0),
            "completion": int(row["completion_tokens"] or 0),
            "total": int((row["prompt_tokens"] or 0) + (row["completion_tokens"] or 0)),
        },
    }


def _grouped(frame: pl.DataFrame, keys: list[str]) -> list[dict[str, Any]]:
    if frame.is_empty():
        return []
    out = frame.group_by(keys, maintain_order=True).agg(_stats_exprs())
    return [{**{k: row[k] for k in keys}, **_group_record(row)} for row in out.to_dicts()]


def _across_trials(trials: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean ± sample std of per-trial accuracy (the published comparisons' form)."""
    values = [t["accuracy"]["value"] for t in trials if t["accuracy"]["value"] is not None]
    k = len(values)
    mean = sum(values) / k if k else None
    std = (
        math.sqrt(sum((v - mean) ** 2 for v in values) / (k - 1))
        if k > 1 and mean is not None
        else None
    )
    return {"trials": k, "mean": mean, "std": std}


def _conform(verdicts: pl.DataFrame) -> pl.DataFrame:
    missing = [c for c in ("model", "trial", "custom_id", "status") if c not in verdicts.columns]
    if missing:
        raise RunDirError(f"verdict frame lacks column(s) {', '.join(missing)}")
    cols = [
        pl.col(c).cast(t) if c in verdicts.columns else pl.lit(None, dtype=t).alias(c)
        for c, t in VERDICT_SCHEMA.items()
    ]
    return verdicts.select(cols)


def summarize(verdicts: pl.DataFrame) -> dict[str, Any]:
    """The content of ``summary.json`` for a verdict frame with ``VERDICT_SCHEMA``.

    Returns a JSON-serialisable dict with keys ``version``, ``confidence``,
    ``overall`` (all verdicts), ``models`` (one entry per model, in order of first
    appearance, each with an ``across_trials`` mean ± std), ``trials`` (per model ×
    trial) and ``tiers`` (per model × tier). Every group carries ``n``, ``scored``,
    ``correct``, ``accuracy``, ``strict_accuracy`` and ``published_accuracy``
    (value with 95 % Wilson ``low``/``high``), ``model_failures``,
    ``infra_failures``, counts per status and per wrong direction, and tokens used.

    :raises RunDirError: when a required column is missing.
    """
    frame = _conform(verdicts)
    models = _grouped(frame, ["model"])
    trials = _grouped(frame, ["model", "trial"])
    tiers = _grouped(frame, ["model", "tier"])
    overall = _grouped(frame.with_columns(pl.lit("all").alias("_all")), ["_all"])
    for m in models:
        m["across_trials"] = _across_trials([t for t in trials if t["model"] == m["model"]])
    order = {m["model"]: i for i, m in enumerate(models)}
    trials.sort(key=lambda t: (order[t["model"]], t["trial"] is None, t["trial"] or 0))
    tiers.sort(key=lambda t: (order[t["model"]], *tier_key(t["tier"])))
    return {
        "version": SUMMARY_VERSION,
        "confidence": CONFIDENCE,
        "infra_statuses": list(INFRA_STATUS_VALUES),  # a fresh list: callers may edit it
        "overall": {k: v for k, v in overall[0].items() if k != "_all"} if overall else None,
        "models": models,
        "trials": trials,
        "tiers": tiers,
    }


def load_run(run_dir: Path | str) -> pl.DataFrame:
    """The verdicts of a run (or ``rescore`` output) directory as a ``VERDICT_SCHEMA`` frame.

    Reads ``verdicts.parquet`` when present, else ``verdicts.jsonl`` (a run still
    going or interrupted). In the JSONL, a torn last line (the process died
    mid-write) is ignored; any other unreadable line is an error naming it. When
    the same (model, trial, custom_id) appears twice, the later line wins.

    :raises RunDirError: the directory or its verdicts are missing or unreadable.
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise RunDirError(f"{run_dir}: not a directory (expected a run or rescore output dir)")
    parquet = run_dir / "verdicts.parquet"
    jsonl = run_dir / "verdicts.jsonl"
    if parquet.is_file():
        try:
            frame = pl.read_parquet(parquet)
        except Exception as err:  # polars raises several unrelated types here
            raise RunDirError(f"{parquet}: unreadable parquet ({err})") from err
        try:
            return _conform(frame)
        except RunDirError as err:
            raise RunDirError(f"{parquet}: {err}") from err
    if jsonl.is_file():
        return _read_jsonl(jsonl)
    raise RunDirError(
        f"{run_dir}: no verdicts.parquet or verdicts.jsonl "
        "(is this a run directory made by 'aeval run' or 'aeval rescore'?)"
    )


def _read_jsonl(path: Path) -> pl.DataFrame:
    from aeval.verdicts import verdicts_frame

    with path.open("rb") as f:
        lines = f.read().split(b"\n")
    records: list[dict[str, Any]] = []
    last = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            if not isinstance(rec, dict):
                raise ValueError("not a JSON object")
            for key in ("model", "trial", "custom_id", "status"):
                if key not in rec:
                    raise ValueError(f"no {key!r}")
            if not isinstance(rec["model"], str) or not isinstance(rec["custom_id"], str):
                raise ValueError("'model' and 'custom_id' must be strings")
            if not isinstance(rec["trial"], int) or isinstance(rec["trial"], bool):
                raise ValueError(f"'trial' must be an integer, not {rec['trial']!r}")
            Status(rec["status"])
        except ValueError as err:
            if i == last and not line.endswith(b"}"):
                break  # torn final write of an interrupted run: the verdict never existed
            raise RunDirError(f"{path}:{i + 1}: unreadable verdict line ({err})") from err
        records.append(rec)
    try:
        frame = verdicts_frame(records)
    except Exception as err:  # a field of the wrong type somewhere: polars says which
        raise RunDirError(f"{path}: verdict records of an unexpected shape ({err})") from err
    return frame.unique(["model", "trial", "custom_id"], keep="last", maintain_order=True)


def load_summary(run_dir: Path | str) -> dict[str, Any] | None:
    """``summary.json`` of a run directory, or None when the run never wrote one."""
    path = Path(run_dir) / "summary.json"
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise RunDirError(f"{path}: unreadable summary ({err})") from err
