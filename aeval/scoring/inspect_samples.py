"""An Inspect AI eval log's samples, read as answers ``rescore`` can score.

``inspect eval aeval/warp --model M`` (:mod:`aeval.interop.inspect_task`) writes
one log per task run (``logs/<date>_warp_<id>.eval``, a zip archive; ``.json``
with ``--log-format json``) whose samples are the benchmark's rows: a sample's
``id`` is the row's ``id``. The log is read with Inspect's own reader,
``inspect_ai.log.read_eval_log`` (``inspect_ai/log/_file.py``, inspect-ai
0.3.285): ``EvalLog.eval.model`` names the model (Inspect's ``provider/model``,
which aeval reads the same way), and each ``EvalSample`` has its ``epoch``
(1, 2, …: one trial each), its ``output`` (``ModelOutput``: ``completion``, the
final text; ``usage``: ``ModelUsage`` with ``input_tokens`` and
``output_tokens``; ``choices[0].stop_reason``) and ``error`` (``EvalError``,
when the sample failed: an infrastructure failure, not an answer). Field names
from ``inspect_ai/log/_log.py`` and ``inspect_ai/model/_model_output.py`` at that
version.

inspect-ai is the ``aeval[inspect]`` extra, imported only when a log is read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aeval.errors import InputFileError
from aeval.scoring.responses import Response

__all__ = ["INSPECT_SUFFIXES", "inspect_log_answers", "is_inspect_log"]

# An Inspect log's own format (a zip archive), the one `inspect eval` writes by default.
INSPECT_SUFFIXES = (".eval",)
_HINT = "reading an Inspect AI log needs inspect-ai: pip install 'aeval[inspect]'"


def is_inspect_log(path: Path) -> bool:
    """Whether ``path`` is an Inspect eval log (by its suffix: the format is a zip)."""
    return path.suffix in INSPECT_SUFFIXES


def _tokens(output: Any) -> tuple[int | None, int | None]:
    usage = getattr(output, "usage", None)
    if usage is None:
        return None, None
    return usage.input_tokens, usage.output_tokens


def inspect_log_answers(path: Path) -> list[tuple[int, Response]]:
    """Every sample of the log as ``(epoch, response)``, in the log's order.

    A sample that failed (``EvalSample.error``) is an error response
    (``inspect_error``, with Inspect's message): an infrastructure failure.

    :raises InputFileError: inspect-ai is missing, or the file is not a log it reads.
    """
    try:
        from inspect_ai.log import read_eval_log
    except ImportError as err:
        raise InputFileError(f"{path}: {_HINT}") from err
    try:
        log = read_eval_log(str(path), exclude_fields={"events", "store", "attachments"})
    except Exception as err:  # Inspect raises several unrelated types for a bad file
        raise InputFileError(f"{path}: not an Inspect eval log Inspect can read ({err})") from err
    model = log.eval.model or None
    out = []
    for sample in log.samples or []:
        prompt, completion = _tokens(sample.output)
        choices = sample.output.choices
        finish = str(choices[0].stop_reason) if choices else None
        if sample.error is not None:
            response = Response(
                custom_id=str(sample.id),
                model=model,
                error_code="inspect_error",
                error_message=sample.error.message,
            )
        else:
            response = Response(
                custom_id=str(sample.id),
                model=model,
                content=sample.output.completion or None,
                finish_reason=finish,
                prompt_tokens=prompt,
                completion_tokens=completion,
            )
        out.append((sample.epoch, response))
    return out
