"""Equivalence classes of a model's answers to one item, proved by Z3: the votes of maj@n.

Majority voting over answer *text* splits votes between answers that say the
same thing differently (``(> x 0)`` and ``(>= x 1)``), so a model that is right
three times in five, in three spellings, loses to two identical wrong answers.
Here the n answers of one (model, item) are grouped into classes of answers
that Z3 proves equivalent to each other, with the verifier pool (the same
killable workers, limits and sanitiser as the verdicts), and the classes vote.

Class numbers (the ``answer_class`` column of the verdicts):

- ``0``: equivalent to the ground truth (``status == equivalent``). These are
  one class by transitivity, with no further check.
- ``1, 2, …``: the other answers with a formula (``not_equivalent``,
  ``unknown``, ``timeout``, ``resource_limit``), numbered in trial order. Each
  is compared with one representative of each class found so far (equivalence
  is transitive, so one suffices), after skipping answers whose sanitised text
  is identical to one already placed. A pair Z3 cannot decide (timeout,
  unknown) is kept apart: that can split a class, never merge different ones.
  An answer Z3 could not decide against the truth never joins class 0.
- ``-1``: no vote: no formula (``no_answer``, ``parse_error``,
  ``unknown_symbol``, ``forbidden_command``, ``too_large``) or an
  infrastructure failure.

An item with w answers outside class 0 takes at most w·(w−1)/2 checks; in
practice far fewer (correct answers take none, repeated texts none, and most
wrong answers match the first representative they meet).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import polars as pl

from aeval.errors import InputFileError
from aeval.scoring.responses import parse_batch_line
from aeval.store.layout import RunLayout
from aeval.verdicts import Status
from aeval.verify.extract import extract_answer
from aeval.verify.limits import DEFAULT_LIMITS, VerifyLimits
from aeval.verify.sanitiser import Rejection, sanitise

if TYPE_CHECKING:
    from aeval.store import ShardRecord
    from aeval.verify.checker import Checker

__all__ = [
    "NO_VOTE",
    "TRUTH_CLASS",
    "VOTING_STATUSES",
    "AnswerClasses",
    "Key",
    "answer_classes",
    "canonical_answer",
    "keys_needing_text",
    "run_answer_texts",
    "with_answer_classes",
]

Key = tuple[str, int, str]  # (model, trial, custom_id)

NO_VOTE = -1
TRUTH_CLASS = 0
# The statuses of answers the verifier read as a formula: they vote.
VOTING_STATUSES: frozenset[str] = frozenset(
    s.value
    for s in (
        Status.EQUIVALENT,
        Status.NOT_EQUIVALENT,
        Status.UNKNOWN,
        Status.TIMEOUT,
        Status.RESOURCE_LIMIT,
    )
)
_WRONG = sorted(VOTING_STATUSES - {Status.EQUIVALENT.value})
# Items classified at once per verifier worker: checks of one item run one after
# the other (each depends on the last), so several items keep the workers busy.
_ITEMS_PER_WORKER = 2


@dataclass(frozen=True, slots=True)
class AnswerClasses:
    """The classes the answers' checks decided, and what finding them cost.

    ``classes`` holds the answers with a formula that are not equivalent to the
    truth (classes 1, 2, …); the rest follow from their status alone (0 for
    ``equivalent``, -1 for no formula), so :func:`with_answer_classes` gives them
    from the frame instead of a Python entry per verdict (~60 MB for 200,000)."""

    classes: dict[Key, int] = field(default_factory=dict)
    checks: int = 0  # Z3 checks of one answer against another
    undecided: int = 0  # of which Z3 could decide neither way (kept apart)
    bound: int = 0  # Σ w·(w−1)/2 over items: the checks a naive all-pairs grouping would make


def canonical_answer(
    response_text: str | None, limits: VerifyLimits = DEFAULT_LIMITS
) -> str | None:
    """The lenient reading of a response as the sanitiser re-emits it (identical
    formulas give identical text), or None when it has no readable formula.

    Pure Python with the verifier's size and depth limits; it is only asked for
    answers that already passed the same sanitiser in a worker.
    """
    extraction = extract_answer(response_text)
    if extraction.text is None:
        return None
    clean = sanitise(extraction.text, limits)
    return None if isinstance(clean, Rejection) else clean.text


def _round_one(frame: pl.DataFrame) -> pl.Expr:
    """Which verdicts vote: round 1's (maj@n is of the run's first answers; a repair
    round's answer is another question, asked with feedback)."""
    if "round" not in frame.columns:
        return pl.lit(True)
    return pl.col("round").fill_null(1) == 1


def keys_needing_text(frame: pl.DataFrame) -> set[Key]:
    """The answers whose class takes a look at their text: those with a formula and
    not equivalent to the truth, in an item (model, custom_id) with two or more of
    them (round 1 only). A run with one trial needs none."""
    wrong = frame.filter(pl.col("status").is_in(_WRONG) & _round_one(frame)).select(
        "model", "trial", "custom_id"
    )
    if wrong.is_empty():
        return set()
    several = wrong.filter(pl.len().over("model", "custom_id") > 1)
    return {(m, int(t), c) for m, t, c in several.iter_rows()}


async def answer_classes(
    frame: pl.DataFrame,
    pool: Checker,
    texts: Mapping[Key, str | None],
    constants: Callable[[str], str | None],
) -> AnswerClasses:
    """The class of every answer of a verdict frame (see the module docstring).

    :param texts: the canonical answer (:func:`canonical_answer`) of each key in
        :func:`keys_needing_text`; an answer whose text is missing or unreadable
        is a class of its own.
    :param constants: a row's declarations by custom_id (None: unknown row, whose
        wrong answers each keep a class of their own).
    """
    rows = (
        frame.filter(pl.col("status").is_in(_WRONG) & _round_one(frame))
        .select("model", "trial", "custom_id")
        .sort("model", "custom_id", "trial")
    )
    classes: dict[Key, int] = {}
    pending: dict[tuple[str, str], list[tuple[int, str | None]]] = {}
    for model, trial, cid in rows.iter_rows():
        key = (model, int(trial), cid)
        pending.setdefault((model, cid), []).append((int(trial), texts.get(key)))
    checks = undecided = bound = 0

    async def classify(model: str, cid: str, answers: list[tuple[int, str | None]]) -> None:
        nonlocal checks, undecided, bound
        bound += len(answers) * (len(answers) - 1) // 2
        decls = constants(cid)
        reps: list[str | None] = []  # one representative per class 1, 2, …
        by_text: dict[str, int] = {}
        for trial, text in answers:
            found = by_text.get(text) if text is not None else None
            if found is None and text is not None and decls is not None:
                for index, rep in enumerate(reps):
                    if rep is None:
                        continue
                    result = await pool.check(f"<answer>{text}</answer>", rep, decls)
                    checks += 1
                    if result.status is Status.EQUIVALENT:
                        found = index + 1
                        break
                    if result.status is not Status.NOT_EQUIVALENT:
                        undecided += 1
            if found is None:
                reps.append(text)
                found = len(reps)
            if text is not None:
                by_text.setdefault(text, found)
            classes[(model, trial, cid)] = found

    send, receive = anyio.create_memory_object_stream[tuple[str, str]](len(pending) or 1)
    for item in pending:
        send.send_nowait(item)
    send.close()

    async def worker() -> None:
        async for model, cid in receive:
            await classify(model, cid, pending[model, cid])

    if pending:
        async with anyio.create_task_group() as tg:
            for _ in range(min(len(pending), max(1, pool.workers * _ITEMS_PER_WORKER))):
                tg.start_soon(worker)
    return AnswerClasses(classes, checks, undecided, bound)


def with_answer_classes(frame: pl.DataFrame, classes: Mapping[Key, int] | None) -> pl.DataFrame:
    """``frame`` with its ``answer_class`` column filled, once the classes are found
    (``classes`` is :attr:`AnswerClasses.classes`; None: not found yet, the frame
    is returned as it is).

    An ``equivalent`` answer is class 0 and an answer without a formula -1, by
    their status; the others take their class from ``classes``, or keep what
    they had when it does not name them."""
    if classes is None:
        return frame
    if "answer_class" not in frame.columns:
        frame = frame.with_columns(pl.lit(None, dtype=pl.Int64).alias("answer_class"))
    found: pl.Series | pl.Expr = pl.lit(None, dtype=pl.Int64)
    if classes:
        table = pl.DataFrame(
            [(m, t, c, k) for (m, t, c), k in classes.items()],
            schema={
                "model": pl.String,
                "trial": pl.Int64,
                "custom_id": pl.String,
                "_class": pl.Int64,
            },
            orient="row",
        )
        # Only the keys are joined, in the frame's order: joining the whole frame
        # and sorting it back copied all of it twice (+100 MB at the end of a
        # 200,000-verdict run).
        found = (
            frame.select("model", "trial", "custom_id")
            .join(table, on=["model", "trial", "custom_id"], how="left", maintain_order="left")
            .get_column("_class")
        )
    status = pl.col("status")
    return frame.with_columns(
        pl.when(status == Status.EQUIVALENT.value)
        .then(pl.lit(TRUTH_CLASS, dtype=pl.Int64))
        .when(status.is_in(_WRONG))
        .then(pl.coalesce(found, "answer_class"))
        .otherwise(pl.lit(NO_VOTE, dtype=pl.Int64))
        .alias("answer_class")
    )


def run_answer_texts(
    run_dir: Path,
    shards: Iterable[ShardRecord],
    keys: set[Key],
    limits: VerifyLimits = DEFAULT_LIMITS,
) -> dict[Key, str | None]:
    """The canonical answers of ``keys``, read back from a run's ``outputs/`` files.

    Only the answers asked for are kept (a run's responses can be gigabytes);
    an unreadable line is skipped, as the engine skipped it.
    """
    if not keys:
        return {}
    owners = {rec.stem: (rec.model, rec.trial) for rec in shards}
    wanted = {(m, t) for m, t, _ in keys}
    texts: dict[Key, str | None] = {}
    for name, path in RunLayout(run_dir).batch_output_files():
        owner = owners.get(name.stem) if name.kind == "output" else None
        if owner is None or owner not in wanted:
            continue
        model, trial = owner
        with path.open("rb") as fh:
            for lineno, raw in enumerate(fh, start=1):
                try:
                    response = parse_batch_line(raw, source=str(path), lineno=lineno)
                except InputFileError:
                    continue
                key = (model, trial, response.custom_id)
                if key in keys and key not in texts and not response.is_error:
                    texts[key] = canonical_answer(response.content, limits)
    return texts


async def classes_of_run(
    frame: pl.DataFrame,
    pool: Checker,
    run_dir: Path,
    shards: Iterable[ShardRecord],
    constants: Callable[[str], str | None],
    limits: VerifyLimits = DEFAULT_LIMITS,
) -> dict[Key, int]:
    """Every answer's class for a run's verdicts, the answers read back from its
    ``outputs/`` (in a worker thread: they can be large), so that a resumed run
    classes the answers of earlier processes too."""
    keys = keys_needing_text(frame)
    texts = await anyio.to_thread.run_sync(run_answer_texts, run_dir, list(shards), keys, limits)
    found = await answer_classes(frame, pool, texts, constants)
    return found.classes
