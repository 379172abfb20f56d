"""The lm-evaluation-harness's logged samples, read as answers ``rescore`` can score.

``lm_eval … --output_path OUT --log_samples`` writes
``OUT/<model>/samples_<task>_<date>.jsonl`` beside ``results_<date>.json``
(``EvaluationTracker.save_results_samples`` in ``lm_eval/loggers/evaluation_tracker.py``,
EleutherAI/lm-evaluation-harness@4e7e0d47; the same in lm-eval 0.4.13). Each line
is one doc: ``doc_id``, ``doc`` (the row, with aeval's ``id``), ``resps`` (one list
per request, holding each repeat's raw answer), ``filtered_resps``, and the
metrics. Each repeat becomes one :class:`~aeval.scoring.responses.Response`
whose ``custom_id`` is the row's ``id`` and whose model is the run's
``model_name`` (from ``results_<date>.json``, else the directory's name).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aeval.errors import InputFileError
from aeval.scoring.responses import Response

__all__ = ["harness_model", "harness_responses", "is_harness_sample"]

# The harness writes each sample with json.dumps of a dict whose first key is doc_id.
_SAMPLE_START = b'{"doc_id":'


def is_harness_sample(raw: bytes) -> bool:
    """Whether a line of a JSONL file is one of the harness's logged samples."""
    return raw.lstrip().startswith(_SAMPLE_START)


def harness_model(path: Path) -> str | None:
    """The model of a samples file: ``model_name`` of its run's results file, else
    the name of the directory the harness made for the model."""
    stem = path.stem  # samples_<task>_<date>
    if not stem.startswith("samples_") or "_" not in stem[len("samples_") :]:
        return None
    date = stem.rsplit("_", 1)[1]
    results = path.with_name(f"results_{date}.json")
    try:
        name = json.loads(results.read_text(encoding="utf-8")).get("model_name")
    except (OSError, ValueError, AttributeError):
        name = None
    if isinstance(name, str) and name:
        return name
    return path.parent.name or None


def harness_responses(
    raw: bytes, *, model: str | None, source: str, lineno: int
) -> list[tuple[int, Response]]:
    """The answers of one logged sample: ``(repeat, response)``, repeats from 1.

    :raises InputFileError: the line is not a sample the harness writes.
    """
    where = f"{source}, line {lineno}"
    try:
        obj: Any = json.loads(raw.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        raise InputFileError(f"{where}: not valid JSON") from None
    if not isinstance(obj, dict):
        raise InputFileError(f"{where}: expected a JSON object")
    doc = obj.get("doc")
    row_id = doc.get("id") if isinstance(doc, dict) else None
    if row_id is None:
        row_id = obj.get("doc_id")
    if isinstance(row_id, bool) or not isinstance(row_id, int | str) or row_id == "":
        raise InputFileError(f"{where}: the logged sample names no row (doc.id or doc_id)")
    resps = obj.get("resps")
    if not isinstance(resps, list) or not resps or not isinstance(resps[0], list):
        raise InputFileError(f"{where}: the logged sample has no resps")
    out = []
    for repeat, answer in enumerate(resps[0], start=1):
        content = answer if isinstance(answer, str) else None
        out.append((repeat, Response(custom_id=str(row_id), model=model, content=content)))
    return out
