"""Rescore: verify Batch API output/error files that already exist.

Also the lm-evaluation-harness's logged samples (``samples_<task>_<date>.jsonl``,
:mod:`aeval.scoring.lm_eval_samples`): each line's answers are read as output
lines of the row its doc names, one per repeat; and an Inspect AI eval log
(``.eval``, :mod:`aeval.scoring.inspect_samples`): each sample's answer as the
output line of the row its id names, one trial per epoch.

The same path as a live run, minus the API: each line is parsed with
:func:`aeval.scoring.responses.parse_batch_line`, matched to its dataset row by
``custom_id`` (the dataset's ``id`` column, else the 0-based row index) and
handed to the run's scoring pipeline (:class:`~aeval.scoring.pipeline.Scoring`,
over a :class:`~aeval.verify.VerifierPool`), which keeps the verdicts in memory
here instead of a run directory. Each line's model and trial are worked out by
:mod:`aeval.scoring.attribution` (trials are numbered per model; an error line
gets the model of its request), unless ``models`` and ``trials`` say them
explicitly. A (model, trial, custom_id) is scored once.

A line that cannot be scored (not JSON, no ``custom_id``, an id not in the
dataset, a duplicate) and a file that cannot be read become :class:`Problem`s
naming file and line; every other line is still scored.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from aeval.dataset import TruthTable
from aeval.errors import AevalError, ConfigError, InputFileError
from aeval.events import Event, VerdictProduced
from aeval.scoring.answer_classes import (
    answer_classes,
    canonical_answer,
    keys_needing_text,
    with_answer_classes,
)
from aeval.scoring.attribution import BatchFile, LineReader, assign_models, assign_trials
from aeval.scoring.inspect_samples import inspect_log_answers, is_inspect_log
from aeval.scoring.pipeline import Scoring
from aeval.scoring.responses import Response
from aeval.store import write_results
from aeval.summary.aggregate import Summary, summarize
from aeval.verdicts import Verdict, verdicts_frame
from aeval.verify import DEFAULT_LIMITS, VerifyLimits
from aeval.verify.cache import CachedChecker, VerdictCache
from aeval.verify.checker import Checker, open_checker

if TYPE_CHECKING:
    from aeval.store.provenance import Provenance

__all__ = ["Problem", "RescoreResult", "check_out_dir", "rescore_files", "write_outputs"]

# Answers checked at once per verifier worker: enough to keep every worker busy
# while the parent pickles requests and reads results.
_CHECKERS_PER_WORKER = 4


@dataclass(frozen=True, slots=True)
class Problem:
    """A file or line that could not be scored."""

    source: str
    lineno: int  # 0 for the file as a whole
    message: str

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True, slots=True)
class RescoreResult:
    verdicts: tuple[Verdict, ...]
    problems: tuple[Problem, ...] = ()
    lines: int = 0  # non-blank lines read
    files: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()  # lines scored, but whose model could not be settled
    # The equivalence classes the checks decided among an item's trials (maj@n's
    # votes; aeval.scoring.answer_classes): the wrong answers with a formula, the
    # others' classes follow from their status. None when not computed.
    answer_classes: dict[tuple[str, int, str], int] | None = None


@dataclass(frozen=True, slots=True)
class _Line:
    """One line to score, with the model and trial it was attributed to."""

    source: str
    lineno: int
    response: Response
    model: str
    trial: int

    @property
    def key(self) -> tuple[str, int, str]:
        return (self.model, self.trial, self.response.custom_id)


class _Kept:
    """The verdicts of a rescore, in memory: the scoring pipeline's store."""

    def __init__(self) -> None:
        self.verdicts: dict[tuple[str, int, str], Verdict] = {}

    def has_verdict(self, model: str, trial: int, custom_id: str) -> bool:
        return (model, trial, custom_id) in self.verdicts

    def append_verdict(self, verdict: Verdict) -> bool:
        key = (verdict.model, verdict.trial, verdict.custom_id)
        if key in self.verdicts:
            return False
        self.verdicts[key] = verdict
        return True


def _rows(dataset: pl.DataFrame) -> TruthTable:
    missing = [c for c in ("answer", "constants") if c not in dataset.columns]
    if missing:
        raise InputFileError(
            f"the dataset lacks column(s) {', '.join(missing)}: rescoring needs each row's "
            "ground truth ('answer') and declarations ('constants')"
        )
    return TruthTable(dataset)


def _read_file(path: Path, index: int, rows: TruthTable, problems: list[Problem]) -> BatchFile:
    """The file's lines that name a dataset row; the others become problems."""
    file = BatchFile(path, index)
    source = file.source
    if is_inspect_log(path):
        return _read_inspect_log(file, rows, problems)
    try:
        handle = path.open("rb")
    except OSError as err:
        problems.append(Problem(source, 0, f"{source}: cannot read the file ({err.strerror})"))
        return file
    reader = LineReader(path)
    with handle:
        for lineno, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            file.read += 1
            try:
                answers = reader.answers(raw, lineno)
            except InputFileError as err:
                problems.append(Problem(source, lineno, str(err)))
                continue
            if answers and answers[0][1].custom_id not in rows:
                problems.append(_not_in_dataset(source, lineno, answers[0][1].custom_id, "line"))
                continue
            for repeat, response in answers:
                file.lines.append((lineno, response))
                file.repeats.append(repeat)
    return file


def _not_in_dataset(source: str, number: int, custom_id: str, where: str) -> Problem:
    return Problem(
        source,
        number,
        f"{source}, {where} {number}: custom_id {custom_id!r} is not in the dataset (ids are "
        "its 'id' column, else the 0-based row index)",
    )


def _read_inspect_log(file: BatchFile, rows: TruthTable, problems: list[Problem]) -> BatchFile:
    """An Inspect eval log's samples, each epoch a trial (as a harness sample's repeats);
    a sample is numbered by its place in the log where a line would be."""
    try:
        answers = inspect_log_answers(file.path)
    except InputFileError as err:
        problems.append(Problem(file.source, 0, str(err)))
        return file
    for number, (epoch, response) in enumerate(answers, start=1):
        file.read += 1
        if response.custom_id not in rows:
            problems.append(_not_in_dataset(file.source, number, response.custom_id, "sample"))
            continue
        file.lines.append((number, response))
        file.repeats.append(epoch)
    return file


def _deduplicate(files: Sequence[BatchFile], problems: list[Problem]) -> list[_Line]:
    """One line per (model, trial, custom_id): the first answer. An error line is
    replaced by a line for the same request in a later file: a run resubmits the
    requests that failed, and the retry's line is the one the run scored."""
    kept: dict[tuple[str, int, str], _Line] = {}
    for file in files:
        for (lineno, response), model, trial in zip(
            file.lines, file.models, file.trials, strict=True
        ):
            key = (model, trial, response.custom_id)
            first = kept.get(key)
            if first is None or (
                first.response.is_error and (first.source != file.source or not response.is_error)
            ):
                kept.pop(key, None)  # the replacement goes where it was read
                kept[key] = _Line(file.source, lineno, response, model, trial)
                continue
            if first.source == file.source:
                message = f"repeats line {first.lineno}; only the first is scored"
            else:
                message = (
                    f"of model {model!r}, trial {trial} was already scored from "
                    f"{first.source}, line {first.lineno}"
                )
            problems.append(
                Problem(
                    file.source,
                    lineno,
                    f"{file.source}, line {lineno}: custom_id {response.custom_id!r} {message}",
                )
            )
    return list(kept.values())


async def rescore_files(
    files: Sequence[str | os.PathLike[str]],
    dataset: pl.DataFrame,
    *,
    trials: Sequence[int] | None = None,
    models: Sequence[str | None] | str | None = None,
    limits: VerifyLimits = DEFAULT_LIMITS,
    workers: int | None = None,
    pool: Checker | None = None,
    ray_address: str | None = None,
    on_verdict: Callable[[Verdict], None] | None = None,
    published: bool = True,
    published_binary: bool = False,
    cache: VerdictCache | None = None,
) -> RescoreResult:
    """Score every line of ``files`` against ``dataset`` (a frame from ``load_dataset``).

    :param trials: the trial of each file (same length as ``files``); default:
        from an aeval run's file names, else numbered per model in the order
        given, an error file sharing its paired output file's trial (see
        :mod:`aeval.scoring.attribution`).
    :param models: the model of every line of each file (one name for all files,
        or one per file, None for "work it out"); default: the model each
        response names, else its request's (see :mod:`aeval.scoring.attribution`).
    :param pool: an entered pool to use; default: a new one with ``limits`` and
        ``workers``, on this machine or on the Ray cluster at ``ray_address``
        (see :func:`aeval.verify.checker.open_checker`).
    :param on_verdict: called with each verdict as it is produced (progress).
    :param published: also give each verdict the published reading
        (``correct_published``); ignored when ``pool`` is given (its own
        ``published`` applies).
    :param published_binary: read every published verdict with the z3 binary
        (an audit; ignored when ``pool`` is given).
    :param cache: answer each distinct (truth, extracted answer, limits) from this
        verdict cache where it can (:mod:`aeval.verify.cache`); without ``pool``,
        the workers start only when an answer misses it.
    :returns: the verdicts in file and line order, the problems found, and a
        note for each file whose lines could not be given a model.
    :raises InputFileError: the dataset lacks ``answer``/``constants``.
    :raises ConfigError: ``trials`` or ``models`` does not match ``files``.
    """
    if not files:
        raise ConfigError("rescore needs at least one batch output or error file")
    if trials is not None:
        if len(trials) != len(files):
            raise ConfigError(f"{len(trials)} trial number(s) given for {len(files)} file(s)")
        if any(t < 1 for t in trials):
            raise ConfigError(f"trial numbers start at 1, got {list(trials)}")
    if models is not None:
        if isinstance(models, str):
            models = [models] * len(files)
        if len(models) == 1:
            models = list(models) * len(files)
        if len(models) != len(files):
            raise ConfigError(f"{len(models)} model name(s) given for {len(files)} file(s)")
    rows = _rows(dataset)
    problems: list[Problem] = []
    parsed = [_read_file(Path(path), i, rows, problems) for i, path in enumerate(files)]
    notes = assign_models(parsed, models)
    assign_trials(parsed, trials)
    lines = _deduplicate(parsed, problems)
    verdicts: list[Verdict] = []
    classes: dict[tuple[str, int, str], int] = {}

    async def score_and_classify(own_pool: Checker) -> None:
        verdicts.extend(await _score(own_pool, lines, rows, on_verdict))
        classes.update(await _answer_classes(own_pool, verdicts, lines, rows, own_pool.limits))

    if lines:
        if pool is not None:
            if cache is None:
                await score_and_classify(pool)
            else:
                async with CachedChecker(cache, pool) as cached:
                    await score_and_classify(cached)
        else:

            def start() -> Checker:
                return open_checker(
                    limits,
                    workers,
                    published=published,
                    published_binary=published_binary,
                    ray_address=ray_address,
                )

            if cache is None:
                async with start() as own:
                    await score_and_classify(own)
            elif ray_address is not None:  # its size is known once it is entered
                async with start() as own, CachedChecker(cache, own) as cached:
                    await score_and_classify(cached)
            else:  # the workers start only when an answer misses the cache
                async with CachedChecker(
                    cache,
                    start=start,
                    limits=limits,
                    published=published,
                    published_binary=published_binary,
                    workers=workers or os.cpu_count() or 1,
                ) as cached:
                    await score_and_classify(cached)
    return RescoreResult(
        tuple(verdicts),
        tuple(problems),
        sum(f.read for f in parsed),
        tuple(str(Path(f)) for f in files),
        tuple(notes),
        classes,
    )


async def _score(
    pool: Checker,
    lines: list[_Line],
    rows: TruthTable,
    on_verdict: Callable[[Verdict], None] | None,
) -> list[Verdict]:
    """Every line's verdict, by the run's scoring pipeline, in the order of ``lines``."""
    kept = _Kept()

    def emit(event: Event) -> None:
        if on_verdict is not None and isinstance(event, VerdictProduced):
            on_verdict(event.verdict)

    scoring = Scoring(
        kept,
        rows,
        emit=emit,
        published=pool.published,
        queue=max(1, len(lines)),  # the lines are in memory already
        measure_pace=False,  # nothing waits for the verifier but this
        checkers_per_worker=_CHECKERS_PER_WORKER,
    )

    async def submit_all() -> None:
        for line in lines:  # a rescore has no shards: every answer is shard 0's
            await scoring.submit(line.response, line.model, line.trial, 0)

    await scoring.run(pool, submit_all)
    return [kept.verdicts[line.key] for line in lines if line.key in kept.verdicts]


def write_outputs(
    result: RescoreResult,
    out_dir: str | os.PathLike[str],
    provenance: Provenance | None = None,
) -> Summary:
    """Write ``verdicts.parquet`` and ``summary.json`` into ``out_dir``; return the summary.

    :param provenance: what the rescore knows of its inputs
        (:func:`aeval.store.provenance.rescore_provenance`), kept in ``summary.json``.

    :raises InputFileError: ``out_dir`` cannot be created or written.
    """
    out = Path(out_dir)
    frame = verdicts_frame(list(result.verdicts))
    if result.answer_classes is not None:
        frame = with_answer_classes(frame, result.answer_classes)
    summary = summarize(frame)
    if provenance is not None:
        summary["provenance"] = provenance
    try:
        out.mkdir(parents=True, exist_ok=True)
        write_results(out, frame, summary)
    except OSError as err:
        raise InputFileError(f"cannot write rescore output to {out}: {err}") from None
    return summary


def check_out_dir(out_dir: Path) -> None:
    """Fail early (before any checking) when ``out_dir`` is unusable."""
    if out_dir.exists() and not out_dir.is_dir():
        raise AevalError(f"--out {out_dir} exists and is not a directory")


async def _answer_classes(
    pool: Checker,
    verdicts: list[Verdict],
    lines: list[_Line],
    rows: TruthTable,
    limits: VerifyLimits,
) -> dict[tuple[str, int, str], int]:
    """Every verdict's equivalence class among its item's trials (see
    :mod:`aeval.scoring.answer_classes`), from the lines just scored."""
    frame = verdicts_frame(verdicts)
    keys = keys_needing_text(frame)
    texts = {
        key: canonical_answer(line.response.content, limits)
        for line in lines
        if (key := (line.model, line.trial, line.response.custom_id)) in keys
    }
    found = await answer_classes(
        frame, pool, texts, lambda cid: row.constants if (row := rows.get(cid)) else None
    )
    return found.classes
