"""Load a benchmark (hub id, local file, ``save_to_disk`` directory) into a checked polars frame.

Every source ends as the same frame: ``id``, ``question``, ``answer``,
``constants``, ``tier`` (all ``pl.String``; ``tier`` may be null), then any
extra columns as they were. Row selection (tier, sample, limit) happens here,
before anything is sent anywhere, and ids are assigned before selection so
that a row keeps its id whatever subset is run.

Ground truths are not parsed here: one that does not parse is the verifier's
``bad_ground_truth`` verdict for that row, not a load error.

One module per step: :mod:`~aeval.dataset.local_files` and :mod:`~aeval.dataset.hub`
read, :mod:`~aeval.dataset.validation` checks and shapes,
:mod:`~aeval.dataset.selection` picks rows, :mod:`~aeval.dataset.truth` keeps
the ground truth a run checks against, :mod:`~aeval.dataset.fingerprint` names
the data a result was scored on. The names of loading and selecting import from
here.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any, Unpack

import polars as pl

from aeval.config import RowSelection
from aeval.dataset.extrapolation import QuestionShape, item_facts, parse_question
from aeval.dataset.fingerprint import DatasetFingerprint, content_sha256, directory_sha256
from aeval.dataset.hub import HUB_ID, HUB_PROBE_TIMEOUT_S, read_hub
from aeval.dataset.local_files import FILE_SUFFIXES, read_local
from aeval.dataset.programs import known_programs, with_programs
from aeval.dataset.selection import check_selection, parse_id_spec, select_rows
from aeval.dataset.source import Source
from aeval.dataset.truth import Truth, TruthTable
from aeval.dataset.validation import FRAME_COLUMNS, REQUIRED_COLUMNS, validate_frame
from aeval.errors import DatasetError
from aeval.store.atomic_files import file_sha256

__all__ = [
    "DEFAULT_DATASET",
    "FRAME_COLUMNS",
    "HUB_PROBE_TIMEOUT_S",
    "REQUIRED_COLUMNS",
    "QuestionShape",
    "Truth",
    "TruthTable",
    "demo_dataset_path",
    "item_facts",
    "known_programs",
    "load_dataset",
    "load_dataset_fingerprinted",
    "parse_id_spec",
    "parse_question",
    "select_rows",
    "validate_frame",
    "with_programs",
]

DEFAULT_DATASET = "dannkoh/invaR1ant-benchmark"
DEFAULT_SPLIT = "test"


def demo_dataset_path() -> Path:
    """The small synthetic benchmark shipped inside the package (the offline demo's data)."""
    return Path(__file__).resolve().parent.parent / "data" / "demo-benchmark.jsonl"


def load_dataset(
    ref: str | os.PathLike[str] = DEFAULT_DATASET,
    *,
    split: str = DEFAULT_SPLIT,
    revision: str | None = None,
    config_name: str | None = None,
    limit: int | None = None,
    sample: int | None = None,
    seed: int = 0,
    tier: str | None = None,
    ids: str | None = None,
) -> pl.DataFrame:
    """Load a benchmark and select rows from it.

    :param ref: a Hugging Face hub id (``owner/name``), a ``.parquet``,
        ``.jsonl``/``.ndjson``/``.json`` or ``.csv`` file, or a directory written
        by ``datasets.save_to_disk``. An existing path always wins over a hub id.
    :param split: the split to load from the hub or a saved ``DatasetDict``.
    :param revision: hub revision (branch, tag or commit).
    :param config_name: hub configuration name.
    :param limit: keep the first ``limit`` rows (after ``tier`` and ``sample``).
    :param sample: keep ``sample`` rows drawn at random with ``seed``, in dataset order.
    :param seed: seed for ``sample``; the same seed draws the same rows.
    :param tier: keep only rows of this tier.
    :param ids: keep only rows with these ids (:func:`parse_id_spec`: ``"5,7,10-20"``).
    :returns: ``id``, ``question``, ``answer``, ``constants``, ``tier`` (all
        ``pl.String``; a null ``answer``/``constants`` becomes ``""`` so the
        verifier can flag it per row), then extra columns unchanged, then
        ``program`` when the rows are WARP ones (:mod:`aeval.dataset.programs`,
        matched by ground truth; absent for any other benchmark).
    :raises DatasetError: the source cannot be read, lacks a required column,
        has a null/empty question or a null/duplicate id, the hub is
        unreachable, or the selection is invalid or empty.
    """
    _, selected, _ = _load(
        ref, split, revision, config_name, limit=limit, sample=sample, seed=seed, tier=tier, ids=ids
    )
    return selected


def load_dataset_fingerprinted(
    ref: str | os.PathLike[str] = DEFAULT_DATASET, **selection: Unpack[RowSelection]
) -> tuple[pl.DataFrame, DatasetFingerprint]:
    """:func:`load_dataset` of the default split and configuration (``selection``: the
    keyword arguments that pick a run's rows), and the fingerprint of the data it read.

    The fingerprint holds the file's sha256 (a local file or directory) or the
    hub commit the rows were loaded at (``revision`` pins it: pass the
    fingerprint's ``revision`` to load the same rows again), and a digest of
    every row's content before selection.
    """
    frame, selected, source = _load(ref, **selection)
    return selected, DatasetFingerprint(
        ref=os.fspath(ref),
        kind=source.kind,
        sha256=source.sha256,
        revision=source.revision,
        content_sha256=content_sha256(frame),
        total_rows=frame.height,
        rows=selected.height,
    )


def _load(
    ref: str | os.PathLike[str],
    split: str = DEFAULT_SPLIT,
    revision: str | None = None,
    config_name: str | None = None,
    **selection: Any,
) -> tuple[pl.DataFrame, pl.DataFrame, Source]:
    """The whole validated frame, the selected rows, and where they came from."""
    check_selection(**selection)
    frame, source = _read(ref, split=split, revision=revision, config_name=config_name)
    frame = validate_frame(frame, source=source.name, locate=source.locate)
    # The program is looked up for the selected rows only, after the fingerprint's
    # frame is read: it is aeval's knowledge of the data, not part of the data.
    return frame, with_programs(select_rows(frame, **selection, source=source.name)), source


def _read(
    ref: str | os.PathLike[str], *, split: str, revision: str | None, config_name: str | None
) -> tuple[pl.DataFrame, Source]:
    candidate = Path(os.fspath(ref)).expanduser()
    if isinstance(ref, os.PathLike) or candidate.exists():
        frame, source = read_local(candidate, split=split)
        if candidate.is_dir():
            return frame, replace(source, kind="directory", sha256=directory_sha256(candidate))
        return frame, replace(source, kind="file", sha256=file_sha256(candidate))
    text = os.fspath(ref).strip()
    looks_like_path = (
        text.lower().endswith(FILE_SUFFIXES) or text.startswith(("/", ".", "~")) or "\\" in text
    )
    if looks_like_path:
        raise DatasetError(f"dataset file {text!r} does not exist")
    if HUB_ID.match(text):
        return read_hub(text, split=split, revision=revision, config_name=config_name)
    raise DatasetError(
        f"dataset {text!r} is neither an existing file or directory nor a Hugging Face hub id "
        "of the form owner/name; pass a local .parquet, .jsonl, .csv or save_to_disk directory "
        "with --dataset"
    )
