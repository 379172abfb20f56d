"""Load a benchmark (hub id, local file, ``save_to_disk`` directory) into a checked polars frame.

Every source ends as the same frame: ``id``, ``question``, ``answer``,
``constants``, ``tier`` (all ``pl.String``; ``tier`` may be null), then any
extra columns as they were. Row selection (tier, sample, limit) happens here,
before anything is sent anywhere, and ids are assigned before selection so
that a row keeps its id whatever subset is run.

Ground truths are not parsed here: one that does not parse is the verifier's
``bad_ground_truth`` verdict for that row, not a load error.
"""

from __future__ import annotations

import csv
import json
import os
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx
import polars as pl

from aeval.errors import DatasetError
from aeval.provenance import (
    DatasetFingerprint,
    SourceKind,
    content_sha256,
    directory_sha256,
    file_sha256,
)

__all__ = [
    "DEFAULT_DATASET",
    "FRAME_COLUMNS",
    "REQUIRED_COLUMNS",
    "Truth",
    "TruthTable",
    "demo_dataset_path",
    "load_dataset",
    "load_dataset_fingerprinted",
    "select_rows",
    "validate_frame",
]

DEFAULT_DATASET = "dannkoh/invaR1ant-benchmark"
REQUIRED_COLUMNS = ("question", "answer", "constants")
FRAME_COLUMNS = ("id", *REQUIRED_COLUMNS, "tier")

# How long the hub reachability probe may take before we call the hub unreachable.
HUB_PROBE_TIMEOUT_S = 5.0

_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_FILE_SUFFIXES = (".parquet", ".pq", ".jsonl", ".ndjson", ".json", ".csv")
_SAVE_TO_DISK_MARKERS = ("dataset_info.json", "state.json", "dataset_dict.json")
_TEXT_TYPES = (pl.String, pl.Categorical, pl.Enum, pl.Null)
_MAX_LISTED = 5


def demo_dataset_path() -> Path:
    """The small synthetic benchmark shipped inside the package (the offline demo's data)."""
    return Path(__file__).resolve().parent / "data" / "demo-benchmark.jsonl"


@dataclass(frozen=True)
class _Source:
    """Where rows came from, for messages: a name, and a way to turn a row number into a place."""

    name: str
    locate: Callable[[int], str]
    kind: SourceKind = "file"
    sha256: str | None = None  # of a local file's (or directory's) bytes
    revision: str | None = None  # the hub commit the rows were loaded at


def _row_only(row: int) -> str:
    return f"row {row}"


def load_dataset(
    ref: str | os.PathLike[str] = DEFAULT_DATASET,
    *,
    split: str = "test",
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
        verifier can flag it per row), then extra columns unchanged.
    :raises DatasetError: the source cannot be read, lacks a required column,
        has a null/empty question or a null/duplicate id, the hub is
        unreachable, or the selection is invalid or empty.
    """
    _, selected, _ = _load(
        ref, split, revision, config_name, limit=limit, sample=sample, seed=seed, tier=tier, ids=ids
    )
    return selected


def load_dataset_fingerprinted(
    ref: str | os.PathLike[str] = DEFAULT_DATASET,
    *,
    split: str = "test",
    revision: str | None = None,
    config_name: str | None = None,
    limit: int | None = None,
    sample: int | None = None,
    seed: int = 0,
    tier: str | None = None,
    ids: str | None = None,
) -> tuple[pl.DataFrame, DatasetFingerprint]:
    """:func:`load_dataset`, and the fingerprint of the data it read.

    The fingerprint holds the file's sha256 (a local file or directory) or the
    hub commit the rows were loaded at (``revision`` pins it: pass the
    fingerprint's ``revision`` to load the same rows again), and a digest of
    every row's content before selection.
    """
    frame, selected, source = _load(
        ref, split, revision, config_name, limit=limit, sample=sample, seed=seed, tier=tier, ids=ids
    )
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
    split: str,
    revision: str | None,
    config_name: str | None,
    **selection: Any,
) -> tuple[pl.DataFrame, pl.DataFrame, _Source]:
    """The whole validated frame, the selected rows, and where they came from."""
    _check_selection(**selection)
    frame, source = _read(ref, split=split, revision=revision, config_name=config_name)
    frame = validate_frame(frame, source=source.name, locate=source.locate)
    return frame, select_rows(frame, **selection, source=source.name), source


# --------------------------------------------------------------------------- reading


def _read(
    ref: str | os.PathLike[str], *, split: str, revision: str | None, config_name: str | None
) -> tuple[pl.DataFrame, _Source]:
    candidate = Path(os.fspath(ref)).expanduser()
    if isinstance(ref, os.PathLike) or candidate.exists():
        frame, source = _read_local(candidate, split=split)
        if candidate.is_dir():
            return frame, replace(source, kind="directory", sha256=directory_sha256(candidate))
        return frame, replace(source, kind="file", sha256=file_sha256(candidate))
    text = os.fspath(ref).strip()
    looks_like_path = (
        text.lower().endswith(_FILE_SUFFIXES) or text.startswith(("/", ".", "~")) or "\\" in text
    )
    if looks_like_path:
        raise DatasetError(f"dataset file {text!r} does not exist")
    if _HUB_ID.match(text):
        return _read_hub(text, split=split, revision=revision, config_name=config_name)
    raise DatasetError(
        f"dataset {text!r} is neither an existing file or directory nor a Hugging Face hub id "
        "of the form owner/name; pass a local .parquet, .jsonl, .csv or save_to_disk directory "
        "with --dataset"
    )


def _read_local(path: Path, *, split: str) -> tuple[pl.DataFrame, _Source]:
    if not path.exists():
        raise DatasetError(f"dataset file {path} does not exist")
    if path.is_dir():
        return _read_saved(path, split=split)
    if not path.is_file():
        raise DatasetError(f"dataset path {path} is not a regular file or directory")
    suffix = path.suffix.lower()
    name = str(path)
    try:
        if suffix in (".parquet", ".pq"):
            return pl.read_parquet(path), _Source(name, _row_only)
        if suffix == ".csv":
            return _read_csv(path)
        if suffix in (".jsonl", ".ndjson", ".json"):
            return _read_json(path)
    except DatasetError:
        raise
    except (pl.exceptions.PolarsError, OSError, ValueError) as err:
        raise DatasetError(f"cannot read dataset {path}: {_first_line(err)}") from err
    raise DatasetError(
        f"dataset file {path} has an unsupported extension {suffix!r}; use .parquet, .jsonl, "
        ".json, .csv or a directory written by datasets.save_to_disk"
    )


def _read_csv(path: Path) -> tuple[pl.DataFrame, _Source]:
    try:
        # No inference: every field is text, exactly as written.
        frame = pl.read_csv(path, infer_schema=False, raise_if_empty=False)
    except (pl.exceptions.PolarsError, ValueError) as err:
        raise DatasetError(f"cannot read dataset {path}: {_bad_csv_line(path, err)}") from err
    return frame, _Source(str(path), _csv_locator(path))


def _bad_csv_line(path: Path, err: Exception) -> str:
    """polars does not say where a CSV is broken; find the place (error path only)."""
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as bad:
        line = raw.count(b"\n", 0, bad.start) + 1
        return f"line {line} is not UTF-8 (byte {bad.start} of the file); save the file as UTF-8"
    reader = csv.reader(text.splitlines(keepends=True), strict=True)
    try:
        header = next(reader, [])
        start = reader.line_num + 1
        for record in reader:
            if len(record) != len(header):
                return (
                    f"the record at line {start} has {len(record)} fields, "
                    f"the header has {len(header)}"
                )
            start = reader.line_num + 1
    except csv.Error as bad:
        return f"line {reader.line_num}: {bad}"
    return _first_line(err)


def _read_json(path: Path) -> tuple[pl.DataFrame, _Source]:
    with path.open("rb") as fh:
        head = fh.read(4096).lstrip()
    if head.startswith(b"["):
        return pl.read_json(path), _Source(str(path), _row_only)
    try:
        frame = pl.read_ndjson(path)
    except (pl.exceptions.PolarsError, ValueError):
        try:
            # The schema was guessed from the first lines; a type that changes
            # further down (an id that turns from integer to text) needs them all.
            frame = pl.read_ndjson(path, infer_schema_length=None)
        except (pl.exceptions.PolarsError, ValueError) as err:
            reason = _bad_json_line(path, err)
            raise DatasetError(f"cannot read dataset {path}: {reason}") from err
    return frame, _Source(str(path), _jsonl_locator(path))


def _bad_json_line(path: Path, err: Exception) -> str:
    """polars does not say which line is broken; find the first one that is (error path only)."""
    with path.open("rb") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except ValueError as bad:
                return f"line {number} is not valid JSON ({bad})"
            if not isinstance(value, dict):
                return f"line {number} is not a JSON object"
    return _first_line(err)


def _jsonl_locator(path: Path) -> Callable[[int], str]:
    def locate(row: int) -> str:
        seen = -1
        with path.open("rb") as fh:
            for number, line in enumerate(fh, start=1):
                if line.strip():
                    seen += 1
                    if seen == row:
                        return f"row {row} (line {number})"
        return f"row {row}"

    return locate


def _csv_locator(path: Path) -> Callable[[int], str]:
    def locate(row: int) -> str:
        # Quoted fields span lines (questions do), so count records, not lines.
        with path.open(newline="", encoding="utf-8", errors="replace") as fh:
            reader = csv.reader(fh)
            start = 1
            for index, _ in enumerate(reader):
                if index == row + 1:  # record 0 is the header
                    return f"row {row} (line {start})"
                start = reader.line_num + 1
        return f"row {row}"

    return locate


def _read_saved(path: Path, *, split: str) -> tuple[pl.DataFrame, _Source]:
    if not any((path / marker).exists() for marker in _SAVE_TO_DISK_MARKERS):
        raise DatasetError(
            f"directory {path} was not written by datasets.save_to_disk (no "
            f"{' / '.join(_SAVE_TO_DISK_MARKERS)} in it); pass the directory save_to_disk "
            "wrote, or a .parquet/.jsonl/.csv file"
        )
    import datasets  # heavy: imported only when a saved dataset is loaded

    try:
        loaded = datasets.load_from_disk(str(path))
    except Exception as err:  # datasets raises many unrelated types for one broken directory
        raise DatasetError(f"cannot load saved dataset {path}: {_first_line(err)}") from err
    if isinstance(loaded, datasets.DatasetDict):
        if split not in loaded:
            raise DatasetError(
                f"saved dataset {path} has no split {split!r}; it has "
                f"{', '.join(sorted(loaded))} (choose one with --split)"
            )
        loaded = loaded[split]
    return loaded.to_polars(), _Source(f"{path}", _row_only)


def _probe_hub(endpoint: str) -> str | None:
    """One quick request to the hub: ``None`` if it answered, else why not.

    huggingface_hub retries a refused or unresolvable connection five times with
    back-off (about 23 s) and has no setting to shorten that, so an unreachable
    hub is detected here first, in seconds, before ``datasets`` is asked.
    """
    try:
        httpx.head(endpoint, timeout=HUB_PROBE_TIMEOUT_S, follow_redirects=False)
    except httpx.HTTPError as err:
        return f"{type(err).__name__}: {_first_line(err) or 'no response'}"
    return None


def _read_hub(
    repo_id: str, *, split: str, revision: str | None, config_name: str | None
) -> tuple[pl.DataFrame, _Source]:
    import datasets  # deferred: the hub stack costs ~1 s to import, paid only for a hub id
    from datasets import config as ds_config

    where = repo_id + (f"@{revision}" if revision else "")
    fix = "pass a local file with --dataset (.parquet, .jsonl, .csv or a save_to_disk directory)"
    if not ds_config.HF_HUB_OFFLINE:
        reason = _probe_hub(ds_config.HF_ENDPOINT)
        if reason is not None:
            raise DatasetError(
                f"cannot load dataset {where!r}: the Hugging Face hub at {ds_config.HF_ENDPOINT} "
                f"is unreachable ({reason}). Either {fix}, or, if the dataset is already in "
                "your Hugging Face cache, set HF_HUB_OFFLINE=1 to load it from there"
            )
    try:
        # What datasets.load_dataset does, in its three steps, to learn the hub
        # commit the rows come from (the builder's hash): the run pins it, so a
        # resume reloads exactly these rows even after the dataset is updated.
        builder = datasets.load_dataset_builder(repo_id, name=config_name, revision=revision)
        builder.download_and_prepare()
        loaded = builder.as_dataset(split=split)
        commit = builder.hash if _COMMIT.match(str(builder.hash or "")) else revision
    except datasets.exceptions.DatasetNotFoundError as err:
        raise DatasetError(
            f"dataset {where!r} was not found on the Hugging Face hub (or it is private/gated: "
            f"log in with `hf auth login`); check the id, or {fix}"
        ) from err
    except ConnectionError as err:
        why = (
            "with HF_HUB_OFFLINE=1 only datasets already in the cache load"
            if ds_config.HF_HUB_OFFLINE
            else "the connection to the hub failed"
        )
        raise DatasetError(
            f"cannot load dataset {where!r} from the Hugging Face hub ({_first_line(err)}); "
            f"{why}. {fix[0].upper()}{fix[1:]}"
        ) from err
    except ValueError as err:
        message = _first_line(err)
        if "split" in message.lower():
            raise DatasetError(
                f"dataset {where!r} has no split {split!r} ({message}); choose one with --split"
            ) from err
        raise DatasetError(f"cannot load dataset {where!r}: {message}") from err
    except Exception as err:  # anything else from deep inside datasets: name it, no trace
        raise DatasetError(
            f"cannot load dataset {where!r}: {type(err).__name__}: {_first_line(err)}"
        ) from err
    if not isinstance(loaded, datasets.Dataset):
        raise DatasetError(f"dataset {where!r} split {split!r} did not load as one table")
    source = _Source(f"{where} (split {split})", _row_only, kind="hub", revision=commit)
    return loaded.to_polars(), source


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


# --------------------------------------------------------------------------- validation


def _listed(values: list[Any]) -> str:
    shown = ", ".join(str(v) for v in values[:_MAX_LISTED])
    more = len(values) - _MAX_LISTED
    return shown + (f" and {more} more" if more > 0 else "")


def _text_column(frame: pl.DataFrame, name: str, source: str) -> pl.Series:
    column = frame.get_column(name)
    if not isinstance(column.dtype, _TEXT_TYPES):
        raise DatasetError(
            f"dataset {source}: column {name!r} holds {column.dtype}, expected text (strings)"
        )
    return column.cast(pl.String)


def validate_frame(
    frame: pl.DataFrame,
    *,
    source: str = "<frame>",
    locate: Callable[[int], str] = _row_only,
) -> pl.DataFrame:
    """Check a raw benchmark frame and bring it to the standard shape (see :func:`load_dataset`).

    :param source: names the dataset in error messages.
    :param locate: turns a 0-based row number into a place (``"row 3 (line 5)"``).
    :raises DatasetError: a required column is missing or not text, a question is
        null or empty, an id is null or duplicated, or there are no rows.
    """
    missing = [c for c in REQUIRED_COLUMNS if c not in frame.columns]
    if missing:
        raise DatasetError(
            f"dataset {source} lacks required column(s) {', '.join(missing)}; it has "
            f"{', '.join(frame.columns) or 'no columns'} (a benchmark needs "
            f"{', '.join(REQUIRED_COLUMNS)}; tier and id are optional)"
        )
    if frame.height == 0:
        raise DatasetError(f"dataset {source} has no rows")

    question = _text_column(frame, "question", source)
    # contains(r"\S") stops at the first visible character; no copy of the text is made.
    empty = (~question.str.contains(r"\S")).fill_null(True).arg_true().to_list()
    if empty:
        raise DatasetError(
            f"dataset {source}: {len(empty)} row(s) have a null or empty question, first at "
            f"{locate(empty[0])}; every row needs a question"
        )
    # A missing ground truth is the verifier's per-row bad_ground_truth, not a load failure.
    answer = _text_column(frame, "answer", source).fill_null("")
    constants = _text_column(frame, "constants", source).fill_null("")
    tier = (
        _text_column(frame, "tier", source)
        if "tier" in frame.columns
        else pl.Series("tier", [None] * frame.height, dtype=pl.String)
    )
    if "id" in frame.columns:
        raw_id = frame.get_column("id")
        if raw_id.dtype.is_nested() or raw_id.dtype == pl.Binary:
            raise DatasetError(
                f"dataset {source}: column 'id' holds {raw_id.dtype}, expected text or integers"
            )
        ids = raw_id.cast(pl.String)
        nulls = ids.is_null().arg_true().to_list()
        if nulls:
            raise DatasetError(
                f"dataset {source}: {len(nulls)} row(s) have a null id, first at "
                f"{locate(nulls[0])}; give every row an id or drop the id column"
            )
        dup_rows = ids.is_duplicated().arg_true().to_list()
        if dup_rows:
            dup_ids = list(dict.fromkeys(ids.gather(dup_rows).to_list()))
            raise DatasetError(
                f"dataset {source}: duplicate id(s) {_listed([repr(i) for i in dup_ids])}, "
                f"first at {locate(dup_rows[0])}; ids must be unique"
            )
    else:
        ids = pl.int_range(frame.height, eager=True).cast(pl.String)

    extras = [c for c in frame.columns if c not in FRAME_COLUMNS]
    return pl.DataFrame(
        [
            ids.alias("id"),
            question.alias("question"),
            answer.alias("answer"),
            constants.alias("constants"),
            tier.alias("tier"),
        ]
    ).hstack(frame.select(extras))


# --------------------------------------------------------------------------- selection


def _check_selection(
    *,
    limit: int | None,
    sample: int | None,
    seed: int,
    tier: str | None,
    ids: str | None = None,
) -> None:
    for name, value in (("limit", limit), ("sample", sample)):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise DatasetError(f"--{name} must be a positive integer, got {value!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise DatasetError(f"--sample-seed must be an integer, got {seed!r}")
    if tier is not None and (not isinstance(tier, str) or not tier):
        raise DatasetError(f"--tier must be a tier name, got {tier!r}")
    if ids is not None:
        parse_id_spec(ids)


# A range wider than this is a typo (10-2000000), not a selection.
_MAX_RANGE = 10_000_000


def parse_id_spec(spec: str) -> tuple[str, ...]:
    """The item ids named by ``--sample-id``: ``"5,7,10-20"`` → 5, 7, 10, 11, …, 20.

    Comma-separated; ``A-B`` with two integers is the inclusive range (ids are
    compared as text, so ``7`` names the row whose id is ``"7"``); anything else
    is one id as written. Duplicates are kept once, first mention first.

    :raises DatasetError: an empty spec or entry, or a range that runs backwards.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise DatasetError(f"--sample-id must list item ids (e.g. 5,7,10-20), got {spec!r}")
    out: dict[str, None] = {}
    for raw in spec.split(","):
        entry = raw.strip()
        if not entry:
            raise DatasetError(f"--sample-id {spec!r}: an empty entry between commas")
        low, sep, high = entry.partition("-")
        if sep and low.strip().isdigit() and high.strip().isdigit():
            a, b = int(low), int(high)
            if b < a or b - a > _MAX_RANGE:
                raise DatasetError(
                    f"--sample-id {spec!r}: range {entry!r} runs backwards or is too wide"
                )
            out.update(dict.fromkeys(str(i) for i in range(a, b + 1)))
        else:
            out[entry] = None
    return tuple(out)


def select_rows(
    frame: pl.DataFrame,
    *,
    limit: int | None = None,
    sample: int | None = None,
    seed: int = 0,
    tier: str | None = None,
    ids: str | None = None,
    source: str = "<frame>",
) -> pl.DataFrame:
    """Keep rows with ``ids`` and of ``tier``, then ``sample`` of them at random, then
    the first ``limit``.

    Sampled rows stay in dataset order.

    The sample is drawn with :class:`random.Random` (stable across Python and
    polars versions), so a seed names the same rows everywhere. A ``limit`` or
    ``sample`` larger than what is left keeps everything.

    :raises DatasetError: a bad value, a tier that no row has, or an id that no row has
        (a range may name ids that do not exist, as long as one does).
    """
    _check_selection(limit=limit, sample=sample, seed=seed, tier=tier, ids=ids)
    if ids is not None:
        frame = _rows_with_ids(frame, ids, source)
    if tier is not None:
        tiers = frame.get_column("tier")
        kept = frame.filter(tiers == tier)
        if kept.height == 0:
            present = sorted(t for t in tiers.unique().to_list() if t is not None)
            have = f"its tiers are {', '.join(present)}" if present else "it has no tier column"
            raise DatasetError(f"dataset {source} has no rows of tier {tier!r}; {have}")
        frame = kept
    if sample is not None and sample < frame.height:
        picked = sorted(random.Random(seed).sample(range(frame.height), sample))
        frame = frame[picked]
    if limit is not None:
        frame = frame.head(limit)
    return frame


def _rows_with_ids(frame: pl.DataFrame, spec: str, source: str) -> pl.DataFrame:
    wanted = parse_id_spec(spec)
    present = frame.get_column("id")
    kept = frame.filter(present.is_in(wanted))
    singles = {e.strip() for e in spec.split(",") if not _is_range(e)}
    missing = sorted(singles - set(kept.get_column("id").to_list()), key=_id_order)
    if missing or kept.height == 0:
        named = ", ".join(missing[:5]) + (" …" if len(missing) > 5 else "")
        raise DatasetError(
            f"--sample-id: dataset {source} has no row with id {named or spec} "
            f"({present.len()} rows, ids {present.head(1).item()} … {present.tail(1).item()})"
        )
    return kept


def _is_range(entry: str) -> bool:
    low, sep, high = entry.strip().partition("-")
    return bool(sep) and low.strip().isdigit() and high.strip().isdigit()


def _id_order(item_id: str) -> tuple[int, int | str]:
    """Numeric ids in numeric order (2 before 10), then the rest as text."""
    return (0, int(item_id)) if item_id.isdigit() else (1, item_id)


# --------------------------------------------------------------------------- ground truth


@dataclass(frozen=True, slots=True)
class Truth:
    """One row's ground truth: what an answer to it is checked against."""

    answer: str
    constants: str
    tier: str | None


class TruthTable:
    """Ground truth by row id, kept in the dataset's own columns (the run and rescore share it).

    A dict of Python strings would copy every answer and declaration block
    (~125 MB more for 50,000 synthetic rows); a row's strings are made only
    when its answer is checked. Ids are the ``id`` column, else the 0-based row
    index; a null answer or declaration block is empty text (the verifier's
    ``bad_ground_truth``), a missing ``tier`` is ``None``.
    """

    def __init__(self, frame: pl.DataFrame) -> None:
        ids = (
            frame.get_column("id").cast(pl.String).to_list()
            if "id" in frame.columns
            else [str(i) for i in range(frame.height)]
        )
        self._index = {cid: i for i, cid in enumerate(ids)}
        self._answer = frame.get_column("answer").cast(pl.String).fill_null("")
        self._constants = frame.get_column("constants").cast(pl.String).fill_null("")
        self._tier = (
            frame.get_column("tier").cast(pl.String)
            if "tier" in frame.columns
            else pl.Series("tier", [None] * frame.height, dtype=pl.String)
        )

    def get(self, cid: str) -> Truth | None:
        i = self._index.get(cid)
        if i is None:
            return None
        return Truth(self._answer[i], self._constants[i], self._tier[i])

    def __getitem__(self, cid: str) -> Truth:
        truth = self.get(cid)
        if truth is None:
            raise KeyError(cid)
        return truth

    def __contains__(self, cid: object) -> bool:
        return cid in self._index

    def ids(self) -> list[str]:
        """Every row id, in the dataset's order."""
        return list(self._index)

    def __len__(self) -> int:
        return len(self._index)
