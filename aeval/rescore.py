"""Rescore: verify Batch API output/error files that already exist.

The same path as a live run, minus the API: each line is parsed with
:func:`aeval.responses.parse_batch_line`, matched to its dataset row by
``custom_id`` (the dataset's ``id`` column, else the 0-based row index) and
scored in a :class:`~aeval.verify.VerifierPool`. One file is one trial, in the
order given (1-based, like a run), unless ``trials`` maps files to trials
explicitly (to score a trial's output and error files together).

A line that cannot be scored (not JSON, no ``custom_id``, an id not in the
dataset, a duplicate) and a file that cannot be read become :class:`Problem`s
naming file and line; every other line is still scored.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import polars as pl

from aeval.errors import AevalError, ConfigError, InputFileError
from aeval.responses import Response, parse_batch_line, score_response
from aeval.store import write_results
from aeval.verdicts import Verdict, verdicts_frame
from aeval.verify import DEFAULT_LIMITS, VerifierPool, VerifyLimits

__all__ = ["Problem", "RescoreResult", "check_out_dir", "rescore_files", "write_outputs"]

# Scoring tasks per worker: enough to keep every worker busy while the
# parent parses lines and pickles requests.
_TASKS_PER_WORKER = 4


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


@dataclass(frozen=True, slots=True)
class _Row:
    truth: str
    constants: str
    tier: str | None


def _rows(dataset: pl.DataFrame) -> dict[str, _Row]:
    missing = [c for c in ("answer", "constants") if c not in dataset.columns]
    if missing:
        raise InputFileError(
            f"the dataset lacks column(s) {', '.join(missing)}: rescoring needs each row's "
            "ground truth ('answer') and declarations ('constants')"
        )
    ids = (
        dataset.get_column("id").cast(pl.String).to_list()
        if "id" in dataset.columns
        else [str(i) for i in range(dataset.height)]
    )
    tiers = (
        dataset.get_column("tier").cast(pl.String).to_list()
        if "tier" in dataset.columns
        else [None] * dataset.height
    )
    answers = dataset.get_column("answer").cast(pl.String).fill_null("").to_list()
    constants = dataset.get_column("constants").cast(pl.String).fill_null("").to_list()
    return {i: _Row(a, c, t) for i, a, c, t in zip(ids, answers, constants, tiers, strict=True)}


@dataclass
class _Parsed:
    """One file's attributable lines, in order, with their trial."""

    source: str
    trial: int
    items: list[tuple[int, Response]]
    default_model: str


def _read_file(
    path: Path, trial: int, rows: dict[str, _Row], problems: list[Problem]
) -> tuple[_Parsed, int]:
    source = str(path)
    items: list[tuple[int, Response]] = []
    first_seen: dict[str, int] = {}
    lines = 0
    try:
        handle = path.open("rb")
    except OSError as err:
        problems.append(Problem(source, 0, f"{source}: cannot read the file ({err.strerror})"))
        return _Parsed(source, trial, [], "unknown"), 0
    with handle:
        for lineno, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            lines += 1
            try:
                response = parse_batch_line(raw, source=source, lineno=lineno)
            except InputFileError as err:
                problems.append(Problem(source, lineno, str(err)))
                continue
            if response.custom_id not in rows:
                problems.append(
                    Problem(
                        source,
                        lineno,
                        f"{source}, line {lineno}: custom_id {response.custom_id!r} is not "
                        "in the dataset (ids are its 'id' column, else the 0-based row index)",
                    )
                )
                continue
            if response.custom_id in first_seen:
                problems.append(
                    Problem(
                        source,
                        lineno,
                        f"{source}, line {lineno}: custom_id {response.custom_id!r} repeats "
                        f"line {first_seen[response.custom_id]}; only the first is scored",
                    )
                )
                continue
            first_seen[response.custom_id] = lineno
            items.append((lineno, response))
    models = Counter(r.model for _, r in items if r.model)
    # Error lines carry no response body: they get the file's model.
    default_model = models.most_common(1)[0][0] if models else "unknown"
    return _Parsed(source, trial, items, default_model), lines


async def rescore_files(
    files: Sequence[str | os.PathLike[str]],
    dataset: pl.DataFrame,
    *,
    trials: Sequence[int] | None = None,
    limits: VerifyLimits = DEFAULT_LIMITS,
    workers: int | None = None,
    pool: VerifierPool | None = None,
    on_verdict: Callable[[Verdict], None] | None = None,
) -> RescoreResult:
    """Score every line of ``files`` against ``dataset`` (a frame from ``load_dataset``).

    :param trials: the trial of each file (same length as ``files``); default
        1, 2, 3… in the order given.
    :param pool: an entered pool to use; default: a new one with ``limits`` and
        ``workers``.
    :param on_verdict: called with each verdict as it is produced (progress).
    :returns: the verdicts in file and line order, and the problems found.
    :raises InputFileError: the dataset lacks ``answer``/``constants``.
    :raises ConfigError: ``trials`` does not match ``files``.
    """
    if not files:
        raise ConfigError("rescore needs at least one batch output or error file")
    if trials is None:
        trials = list(range(1, len(files) + 1))
    if len(trials) != len(files):
        raise ConfigError(f"{len(trials)} trial number(s) given for {len(files)} file(s)")
    if any(t < 1 for t in trials):
        raise ConfigError(f"trial numbers start at 1, got {list(trials)}")
    rows = _rows(dataset)
    problems: list[Problem] = []
    parsed: list[_Parsed] = []
    total_lines = 0
    by_trial: dict[int, dict[str, tuple[str, int]]] = {}
    for path, trial in zip(files, trials, strict=True):
        file, lines = _read_file(Path(path), trial, rows, problems)
        total_lines += lines
        # Across files of one trial (output + error file), an id is scored once too.
        seen = by_trial.setdefault(trial, {})
        kept = []
        for lineno, response in file.items:
            if response.custom_id in seen:
                src, first = seen[response.custom_id]
                problems.append(
                    Problem(
                        file.source,
                        lineno,
                        f"{file.source}, line {lineno}: custom_id {response.custom_id!r} of "
                        f"trial {trial} was already scored from {src}, line {first}",
                    )
                )
                continue
            seen[response.custom_id] = (file.source, lineno)
            kept.append((lineno, response))
        file.items = kept
        parsed.append(file)

    jobs = [(f, response) for f in parsed for _, response in f.items]
    results: list[Verdict | None] = [None] * len(jobs)

    async def score(own_pool: VerifierPool) -> None:
        send, receive = anyio.create_memory_object_stream[int](len(jobs) or 1)
        for index in range(len(jobs)):
            send.send_nowait(index)
        send.close()

        async def worker() -> None:
            async for index in receive:
                file, response = jobs[index]
                row = rows[response.custom_id]
                verdict = await score_response(
                    own_pool,
                    response,
                    truth=row.truth,
                    constants=row.constants,
                    trial=file.trial,
                    model=response.model or file.default_model,
                    tier=row.tier,
                )
                results[index] = verdict
                if on_verdict is not None:
                    on_verdict(verdict)

        async with anyio.create_task_group() as tg:
            for _ in range(max(1, own_pool.workers * _TASKS_PER_WORKER)):
                tg.start_soon(worker)

    if jobs:
        if pool is not None:
            await score(pool)
        else:
            async with VerifierPool(limits, workers) as own:
                await score(own)
    verdicts = tuple(v for v in results if v is not None)
    return RescoreResult(verdicts, tuple(problems), total_lines, tuple(str(Path(f)) for f in files))


def write_outputs(
    result: RescoreResult,
    out_dir: str | os.PathLike[str],
    provenance: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Write ``verdicts.parquet`` and ``summary.json`` into ``out_dir``; return the summary.

    :param provenance: what the rescore knows of its inputs
        (:func:`aeval.provenance.rescore_provenance`), kept in ``summary.json``.

    :raises InputFileError: ``out_dir`` cannot be created or written.
    """
    from aeval.report import summarize

    out = Path(out_dir)
    frame = verdicts_frame(list(result.verdicts))
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
