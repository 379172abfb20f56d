"""Everything known about each answer of a run: its verdict, the model's full
response, and the item's question and ground truth.

The verdicts say what was decided; the response lines in ``outputs/`` say what
the model wrote; the dataset (named in ``config.json``) says what was asked and
what was right. :func:`load_samples` joins the three for the sample viewer and
the ``report --wrong`` listing. What cannot be found (a dataset no longer on
disk, a ``rescore`` directory without its input files) is left empty and said
in :attr:`Samples.notes`, never an error: the verdicts alone are still worth
showing.

A ``rescore`` output directory holds only verdicts, and (from the version that
records provenance on) the paths of the files it scored and of its dataset in
``summary.json``: those are read again when they still exist, or given
(``responses``, ``dataset``). Response files are attributed to models and
trials by the same rules ``rescore`` used (:mod:`aeval.scoring.attribution`), without
``--model`` or ``--trials`` overrides.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from aeval.dataset import DEFAULT_DATASET, load_dataset
from aeval.errors import AevalError, InputFileError
from aeval.scoring.attribution import BatchFile, LineReader, assign_models, assign_trials
from aeval.scoring.responses import Response
from aeval.store.layout import RunLayout
from aeval.store.provenance import load_provenance
from aeval.summary.aggregate import load_run
from aeval.verify.extract import extract_answer

if TYPE_CHECKING:
    import polars as pl

__all__ = [
    "Item",
    "Samples",
    "answer_span",
    "extracted_answer",
    "load_samples",
    "think_spans",
]

Key = tuple[str, int, str]  # (model, trial, custom_id)

_THINK_TAG = re.compile(r"<(/?)think>", re.IGNORECASE)
_ANSWER_OPEN = re.compile(r"<answer>", re.IGNORECASE)
_ANSWER_CLOSE = re.compile(r"</answer>", re.IGNORECASE)
_ITEM_TEXT = ("question", "answer", "constants")  # dataset columns → Item fields


@dataclass(frozen=True, slots=True)
class Item:
    """One dataset row, as the viewer shows it."""

    question: str
    truth: str
    constants: str = ""


@dataclass
class Samples:
    """The verdicts of a run with the responses and items that go with them."""

    verdicts: pl.DataFrame
    responses: dict[Key, Response] = field(default_factory=dict)
    items: dict[str, Item] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    dataset: str | None = None
    synthetic: bool = False  # answered by synthetic models (the provenance says so)

    def response(self, model: str, trial: int, custom_id: str) -> Response | None:
        return self.responses.get((model, trial, custom_id))


def think_spans(text: str) -> list[tuple[int, int]]:
    """The ``<think>…</think>`` drafts of a response, as (start, end) offsets.

    One linear scan over the tags (no backtracking regex on hostile text). A
    ``</think>`` with no opening tag (some chat templates open it in the prompt)
    makes everything before it draft; a ``<think>`` never closed runs to the end.
    """
    spans: list[tuple[int, int]] = []
    start: int | None = None
    for m in _THINK_TAG.finditer(text):
        if m.group(1):
            if start is not None:
                spans.append((start, m.end()))
                start = None
            elif not spans:
                spans.append((0, m.end()))
        elif start is None:
            start = m.start()
    if start is not None:
        spans.append((start, len(text)))
    return spans


def answer_span(text: str, extracted: str | None) -> tuple[int, int] | None:
    """Where the extracted answer sits in the response, for highlighting.

    The extraction takes the last block, so the last occurrence is searched; a
    repaired answer (code fences stripped) is not a substring, and then the
    last ``<answer>`` block (or what follows an unclosed one) is shown instead.
    """
    if not extracted:
        return None
    at = text.rfind(extracted)
    if at >= 0:
        return (at, at + len(extracted))
    opens = list(_ANSWER_OPEN.finditer(text))
    if not opens:
        return None
    begin = opens[-1].end()
    close = _ANSWER_CLOSE.search(text, begin)
    return (begin, close.start() if close else len(text))


def _run_responses(run_dir: Path, notes: list[str]) -> dict[Key, Response]:
    """The response of every (model, trial, item) in a run's ``outputs/``.

    Files are matched to their shard through the manifest (a file's stem is its
    request file's). A retry shard's line replaces its parent's, and an answer
    is never replaced by an error line: the verdict was made from the answer.
    """
    layout = RunLayout(run_dir)
    try:
        manifest = layout.read_json(layout.manifest)
        # What each record holds is checked as it is used (the errors caught below).
        records = cast("dict[str, dict[str, Any]]", manifest.get("shards", {}))
        shards = {
            Path(rec["input_path"]).stem: (rec["model"], int(rec["trial"]), int(rec["round"]))
            for rec in records.values()
        }
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        notes.append(f"{layout.manifest}: unreadable ({err}); responses not shown")
        return {}
    files: list[tuple[tuple[int, int, int], Path, str, int]] = []
    for name, path in layout.batch_output_files():
        if name.stem not in shards:
            continue
        model, trial, round_ = shards[name.stem]
        order = (round_, name.attempt, name.kind == "output")
        files.append((order, path, model, trial))
    out: dict[Key, Response] = {}
    for _, path, model, trial in sorted(files, key=lambda f: f[0]):
        for _, response in _read_lines(path, notes):
            key = (model, trial, response.custom_id)
            old = out.get(key)
            if old is None or not response.is_error or old.is_error:
                out[key] = response
    return out


def _read_lines(path: Path, notes: list[str]) -> Iterable[tuple[int, Response]]:
    bad = 0
    reader = LineReader(path)
    try:
        with path.open("rb") as fh:
            for lineno, raw in enumerate(fh, start=1):
                if not raw.strip():
                    continue
                try:
                    yield from reader.answers(raw, lineno)
                except InputFileError as err:
                    bad += 1
                    if bad == 1:
                        notes.append(f"skipped: {err}")
    except OSError as err:
        notes.append(f"{path}: cannot read ({err.strerror})")


def _given_responses(files: Sequence[Path], notes: list[str]) -> dict[Key, Response]:
    """Response files given for a ``rescore`` directory, attributed as ``rescore`` does."""
    parsed: list[BatchFile] = []
    for index, path in enumerate(files):
        if not path.is_file():
            raise InputFileError(f"--responses {path}: no such file")
        file = BatchFile(path, index)
        for repeat, response in _read_lines(path, notes):
            file.read += 1
            file.lines.append((0, response))
            file.repeats.append(repeat)
        parsed.append(file)
    notes.extend(assign_models(parsed))
    assign_trials(parsed)
    out: dict[Key, Response] = {}
    for file in parsed:
        for (_, response), model, trial in zip(file.lines, file.models, file.trials, strict=True):
            key = (model, trial, response.custom_id)
            old = out.get(key)
            # rescore keeps the first answer; an error line gives way to a later answer.
            if old is None or (old.is_error and not response.is_error):
                out[key] = response
    return out


def _items(ref: str, notes: list[str]) -> dict[str, Item]:
    import polars as pl

    try:
        frame = load_dataset(ref)
    except AevalError as err:
        notes.append(f"dataset {ref}: {err}; questions and ground truths not shown")
        return {}
    ids = frame.get_column("id").cast(pl.String).to_list()
    columns = [frame.get_column(c).cast(pl.String).fill_null("").to_list() for c in _ITEM_TEXT]
    return {i: Item(*values) for i, *values in zip(ids, *columns, strict=True)}


def _json_file(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _recorded_files(provenance: Mapping[str, Any], notes: list[str]) -> list[Path]:
    """The files a rescore scored, as its provenance names them, that still exist."""
    listed = [f.get("path") for f in provenance.get("scored_files") or [] if isinstance(f, dict)]
    paths = [Path(p) for p in listed if isinstance(p, str)]
    found = [p for p in paths if p.is_file()]
    if len(found) < len(paths):
        notes.append(
            f"{len(paths) - len(found)} of the {len(paths)} file(s) this rescore scored are "
            "no longer where it read them: give them with --responses"
        )
    return found


def load_samples(
    run_dir: Path | str,
    *,
    dataset: str | None = None,
    responses: Sequence[Path] = (),
    verdicts: pl.DataFrame | None = None,
) -> Samples:
    """Join a run's (or a ``rescore`` directory's) verdicts with responses and items.

    :param dataset: the benchmark to take questions and truths from; default:
        the one ``config.json`` records (the hub benchmark when it records none).
        A ``rescore`` directory records none: without this, no items are shown.
    :param responses: Batch API output/error files to take responses from
        instead of the run's ``outputs/`` (a ``rescore`` directory has none).
    :param verdicts: the directory's verdicts when already loaded (``load_run``).
    :raises RunDirError: no verdicts in the directory.
    :raises InputFileError: a file in ``responses`` does not exist.
    """
    run_dir = Path(run_dir)
    frame = load_run(run_dir) if verdicts is None else verdicts
    notes: list[str] = []
    layout = RunLayout(run_dir)
    config = _json_file(layout.config)
    provenance: Mapping[str, Any] = load_provenance(run_dir) or {}
    is_run = layout.is_run()
    recorded = [] if responses or is_run else _recorded_files(provenance, notes)
    if responses or recorded:
        found = _given_responses([Path(p) for p in responses or recorded], notes)
    elif is_run:
        found = _run_responses(run_dir, notes)
    else:
        found = {}
        notes.append(
            f"{run_dir} holds no responses (a rescore output directory?): "
            "give the files it scored with --responses"
        )
    scored_on = (provenance.get("dataset") or {}).get("ref")
    ref = dataset or ((config.get("dataset") or DEFAULT_DATASET) if is_run else scored_on)
    if ref is None:
        notes.append("no dataset recorded here: give --dataset to see questions and truths")
        items: dict[str, Item] = {}
    else:
        items = _items(str(ref), notes)
    synthetic = bool(provenance.get("synthetic"))
    return Samples(frame, found, items, notes, str(ref) if ref else None, synthetic)


def extracted_answer(response: Response | None) -> tuple[str | None, str]:
    """The answer the checker read from a response (``None`` and why, when none)."""
    if response is None:
        return None, "no response line found"
    if response.is_error:
        return None, f"API error: {response.error_code}"
    extraction = extract_answer(response.content)
    return extraction.text, extraction.reason
