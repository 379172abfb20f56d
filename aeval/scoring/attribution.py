"""Which model and trial each line of a batch output or error file belongs to.

``rescore`` is given files, not jobs. An output line names its model in the
response body; an error line (a request the API never answered) names none, and
neither kind names its trial. This module works both out:

- **model** of a line: ``--model`` for its file when given; else the model its
  response names; else the model of its request, from the request file of an
  aeval run directory (``outputs/<stem>-aN.error.jsonl`` ↔ ``requests/<stem>.jsonl``);
  else the one model of the paired output file (``…error…`` ↔ ``…output…``, the
  Batch API's and aeval's naming alike); else the one model the file's other
  lines name. When none of these settles it (no source, or a source naming
  several models) the line is scored as model ``unknown`` and a note says so.
- **trial** of a file's lines: ``--trials`` when given; else the trial in the
  name of an aeval run's output file (``<model>-t<T>-s<S>-a<A>.output.jsonl``);
  else numbered per model, 1, 2, … in the order given, with an error file
  sharing the trial of its paired output file. The repeats of an
  lm-evaluation-harness sample (``repeats: n``) are trials 1…n (``--trials T``:
  T…T+n−1).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from aeval.scoring.lm_eval_samples import harness_model, harness_responses, is_harness_sample
from aeval.scoring.responses import Response, parse_batch_line
from aeval.store.layout import RunLayout, parse_output_name

__all__ = ["UNKNOWN_MODEL", "BatchFile", "LineReader", "assign_models", "assign_trials"]

UNKNOWN_MODEL = "unknown"


@dataclass
class BatchFile:
    """One given file: its attributable lines, and the model and trial of each."""

    path: Path
    index: int  # position among the files given
    read: int = 0  # non-blank lines read
    lines: list[tuple[int, Response]] = field(default_factory=list)
    models: list[str] = field(default_factory=list)  # per line, set by assign_models
    trials: list[int] = field(default_factory=list)  # per line, set by assign_trials
    # per line: the harness's repeat (1, 2, …) of an lm-evaluation-harness sample, else 0
    repeats: list[int] = field(default_factory=list)

    @property
    def source(self) -> str:
        return str(self.path)

    def named_models(self) -> Counter[str]:
        """The models the file's responses name, with their line counts."""
        return Counter(r.model for _, r in self.lines if r.model)


class LineReader:
    """The answers on each line of one file: a Batch API output or error line is one
    answer (repeat 0); an lm-evaluation-harness logged sample is one per repeat (1, 2, …)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._harness_model: str | None = None

    def answers(self, raw: bytes, lineno: int) -> list[tuple[int, Response]]:
        """:raises InputFileError: the line cannot be read as either."""
        source = str(self.path)
        if is_harness_sample(raw):
            if self._harness_model is None:
                self._harness_model = harness_model(self.path) or ""
            model = self._harness_model or None
            return harness_responses(raw, model=model, source=source, lineno=lineno)
        return [(0, parse_batch_line(raw, source=source, lineno=lineno))]


def _run_request_file(path: Path) -> Path | None:
    """The request file of an aeval run's output or error file, when it exists."""
    name = parse_output_name(path.name)
    layout = RunLayout(path.parent.parent)
    if name is None or path.parent != layout.outputs_dir:
        return None
    request = layout.request(name.stem)
    return request if request.is_file() else None


def _run_trial(path: Path) -> int | None:
    """The trial of an aeval run's output or error file (its request file exists)."""
    name = parse_output_name(path.name)
    if name is None or _run_request_file(path) is None:
        return None
    return name.trial


def _request_models(path: Path) -> dict[str, str]:
    """``custom_id`` → ``body.model`` of a request file; lines it cannot read are left out."""
    out: dict[str, str] = {}
    try:
        with path.open("rb") as fh:
            for raw in fh:
                try:
                    line = json.loads(raw)
                    cid, model = line["custom_id"], line["body"]["model"]
                except (ValueError, KeyError, TypeError):
                    continue
                if isinstance(cid, int | str) and isinstance(model, str):
                    out.setdefault(str(cid), model)
    except OSError:
        return {}
    return out


def _paired_output_path(path: Path) -> Path | None:
    """``…error…`` → ``…output…`` in the file name (the last ``error``), else None."""
    name = path.name
    at = name.rfind("error")
    if at < 0:
        return None
    return path.with_name(name[:at] + "output" + name[at + len("error") :])


def _models_on_disk(path: Path) -> Counter[str]:
    """The models an output file's responses name (a file that was not given)."""
    found: Counter[str] = Counter()
    try:
        with path.open("rb") as fh:
            for raw in fh:
                try:
                    model = json.loads(raw)["response"]["body"]["model"]
                except (ValueError, KeyError, TypeError):
                    continue
                if isinstance(model, str):
                    found[model] += 1
    except OSError:
        pass
    return found


def _paired(file: BatchFile, given: dict[Path, BatchFile]) -> tuple[Path, Counter[str]] | None:
    """The paired output file of an error file, and the models it names."""
    other = _paired_output_path(file.path)
    if other is None or other == file.path:
        return None
    if other in given:
        return other, given[other].named_models()
    if other.is_file():
        return other, _models_on_disk(other)
    return None


def _names(models: Iterable[str]) -> str:
    return ", ".join(sorted(models))


def assign_models(
    files: Sequence[BatchFile], explicit: Sequence[str | None] | None = None
) -> list[str]:
    """Set ``file.models`` for every line; returns one note per file whose model
    could not be settled (those lines are scored as model ``unknown``)."""
    given = {f.path: f for f in files}
    notes: list[str] = []
    for file in files:
        forced = explicit[file.index] if explicit else None
        if forced:
            file.models = [forced] * len(file.lines)
            continue
        unnamed = [i for i, (_, r) in enumerate(file.lines) if not r.model]
        file.models = [r.model or UNKNOWN_MODEL for _, r in file.lines]
        if not unnamed:
            continue
        request_file = _run_request_file(file.path)
        if request_file is not None:
            by_request = _request_models(request_file)
            for i in unnamed:
                file.models[i] = by_request.get(file.lines[i][1].custom_id, UNKNOWN_MODEL)
            unnamed = [i for i in unnamed if file.models[i] == UNKNOWN_MODEL]
            if not unnamed:
                continue
        # A file-level answer: the paired output file's model, else the file's own.
        paired = _paired(file, given)
        candidates = [(f"its paired output file {paired[0]}", paired[1])] if paired else []
        candidates.append(("its other lines", file.named_models()))
        where, models = next(((w, m) for w, m in candidates if m), ("", Counter()))
        if len(models) == 1:
            (model,) = models
            for i in unnamed:
                file.models[i] = model
            continue
        if models:
            notes.append(
                f"{file.source}: {len(unnamed)} line(s) name no model and {where} names "
                f"several ({_names(models)}): scored as model {UNKNOWN_MODEL!r}; "
                "say which with --model"
            )
        else:
            notes.append(
                f"{file.source}: {len(unnamed)} line(s) name no model, and neither a request "
                f"file, a paired output file nor --model says which: scored as model "
                f"{UNKNOWN_MODEL!r}"
            )
    return notes


def assign_trials(files: Sequence[BatchFile], explicit: Sequence[int] | None = None) -> None:
    """Set ``file.trials`` for every line (``assign_models`` first)."""
    if explicit is not None:
        for file in files:
            file.trials = [explicit[file.index]] * len(file.lines)
    else:
        _number_trials(files)
    for file in files:
        if any(file.repeats):  # a harness file: each repeat is its own trial
            base = explicit[file.index] if explicit is not None else 1
            file.trials = [
                base + r - 1 if r else t for t, r in zip(file.trials, file.repeats, strict=True)
            ]


def _number_trials(files: Sequence[BatchFile]) -> None:
    known = {file.index: _run_trial(file.path) for file in files}
    used: dict[str, set[int]] = {}
    for file in files:
        trial = known[file.index]
        if trial is not None:
            for model in file.models:
                used.setdefault(model, set()).add(trial)
    # An error file counts as one unit with its paired output file, when both were given.
    by_path = {f.path: f for f in files}
    unit_of: dict[int, int] = {}
    for file in files:
        other = _paired_output_path(file.path)
        partner = by_path.get(other) if other is not None else None
        unit_of[file.index] = (
            partner.index if partner is not None and partner is not file else file.index
        )
    first_of_unit: dict[int, int] = {}
    for file in files:
        unit = unit_of[file.index]
        first_of_unit[unit] = min(first_of_unit.get(unit, file.index), file.index)
    unit_trials: dict[tuple[int, str], int] = {}
    ordered = sorted(files, key=lambda f: (first_of_unit[unit_of[f.index]], f.index))
    for file in ordered:
        trial = known[file.index]
        if trial is not None:
            file.trials = [trial] * len(file.lines)
            continue
        unit = unit_of[file.index]
        file.trials = []
        for model in file.models:
            key = (unit, model)
            if key not in unit_trials:
                taken = used.setdefault(model, set())
                unit_trials[key] = next(t for t in range(1, len(taken) + 2) if t not in taken)
                taken.add(unit_trials[key])
            file.trials.append(unit_trials[key])
