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
from aeval.errors import AevalError, ConfigError, InputFileError
from aeval.feedback import (
    DEFAULT_FEEDBACK_TEMPLATE,
    FEEDBACK_LEVELS,
    FeedbackLevel,
    render_feedback,
    split_round,
)
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
    "RoundSettings",
    "Samples",
    "answer_span",
    "extracted_answer",
    "load_samples",
    "round_settings",
    "run_config",
    "run_rounds",
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


@dataclass(frozen=True, slots=True)
class RoundSettings:
    """A run's repair rounds as its ``config.json`` records them: K, the feedback level
    and the feedback template (a run made before rounds existed: one round)."""

    rounds: int = 1
    feedback: FeedbackLevel = "counterexample"
    template: str = DEFAULT_FEEDBACK_TEMPLATE

    def feedback_after(self, verdict: Mapping[str, Any]) -> str | None:
        """The feedback message the next round was sent after ``verdict`` (a verdict
        frame row), rebuilt as the engine built it (:func:`aeval.feedback.render_feedback`);
        None when the recorded template cannot be rendered."""
        counterexample = verdict.get("counterexample")
        if isinstance(counterexample, str):
            try:
                counterexample = json.loads(counterexample)
            except ValueError:
                counterexample = None
        try:
            return render_feedback(
                self.feedback,
                status=verdict["status"],
                reason=verdict.get("reason") or "",
                direction=verdict.get("direction"),
                counterexample=counterexample if isinstance(counterexample, dict) else None,
                template=self.template,
            )
        except (ConfigError, ValueError, KeyError, IndexError):
            return None


def run_config(run_dir: Path | str) -> dict[str, Any]:
    """A run directory's ``config.json`` ({} for a rescore directory or an unreadable one)."""
    return _json_file(RunLayout(Path(run_dir)).config)


def round_settings(config: Mapping[str, Any]) -> RoundSettings:
    """The repair rounds a run's config records, read defensively: a config without
    ``rounds`` (or with a value that is not a positive integer) is one round; an
    unknown feedback level or a template that is not text falls back to the default."""
    rounds = config.get("rounds")
    k = rounds if isinstance(rounds, int) and not isinstance(rounds, bool) and rounds > 0 else 1
    level = config.get("feedback")
    feedback: FeedbackLevel = level if level in FEEDBACK_LEVELS else "counterexample"
    template = config.get("feedback_template")
    text = template if isinstance(template, str) and template else DEFAULT_FEEDBACK_TEMPLATE
    return RoundSettings(k, feedback, text)


def run_rounds(run_dir: Path | str) -> int | None:
    """K of a run directory's config, or None when it records none (a rescore
    directory, or a run made before rounds existed: the verdicts then say)."""
    config = run_config(run_dir)
    return round_settings(config).rounds if "rounds" in config else None


@dataclass
class Samples:
    """The verdicts of a run with the responses and items that go with them."""

    verdicts: pl.DataFrame
    responses: dict[Key, Response] = field(default_factory=dict)
    items: dict[str, Item] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    dataset: str | None = None
    synthetic: bool = False  # answered by synthetic models (the provenance says so)
    rounds: RoundSettings = field(default_factory=RoundSettings)

    def response(self, model: str, trial: int, custom_id: str) -> Response | None:
        return self.responses.get((model, trial, custom_id))

    def item(self, custom_id: str) -> Item | None:
        """The dataset row a verdict of any round answers (``ID_rR`` is item ``ID``)."""
        found = self.items.get(custom_id)
        return found if found is not None else self.items.get(split_round(custom_id)[0])


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
    settings = round_settings(config)
    return Samples(frame, found, items, notes, str(ref) if ref else None, synthetic, settings)


def extracted_answer(response: Response | None) -> tuple[str | None, str]:
    """The answer the checker read from a response (``None`` and why, when none)."""
    if response is None:
        return None, "no response line found"
    if response.is_error:
        return None, f"API error: {response.error_code}"
    extraction = extract_answer(response.content)
    return extraction.text, extraction.reason
