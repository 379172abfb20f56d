"""Where each thing in a run directory lives: the one module that names its files.

Everything else reaches a run's files through :class:`RunLayout` (the layout
itself is listed in :mod:`aeval.store`'s docstring), so a file can be renamed
here without a reader falling out of step.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, cast

from aeval.errors import RunDirError
from aeval.json_values import JsonObject
from aeval.store.names import shard_stem
from aeval.store.summary_record import Summary

__all__ = [
    "CONFIG_FILE",
    "HOLD_FILE",
    "LOCK_FILE",
    "MANIFEST_FILE",
    "OFFLINE_STATE_DIR",
    "OUTPUTS_DIR",
    "REQUESTS_DIR",
    "SUMMARY_FILE",
    "VERDICTS_FILE",
    "VERDICTS_PARQUET",
    "VERDICT_CACHE_FILE",
    "OutputKind",
    "OutputName",
    "RunLayout",
    "find_result_dirs",
    "finished_runs",
    "parse_output_name",
]

CONFIG_FILE = "config.json"
MANIFEST_FILE = "manifest.json"
LOCK_FILE = "run.lock"
HOLD_FILE = "submit-hold.json"
CANCEL_FAILURES_FILE = "cancel-failures.json"
VERDICTS_FILE = "verdicts.jsonl"
VERDICTS_PARQUET = "verdicts.parquet"
SUMMARY_FILE = "summary.json"
# Verdicts of distinct (truth, extracted answer, limits) checked so far (aeval.verify.cache);
# also in a rescore's --out.
VERDICT_CACHE_FILE = "verdict-cache.jsonl"
REQUESTS_DIR = "requests"
OUTPUTS_DIR = "outputs"
OFFLINE_STATE_DIR = "local-server"

OutputKind = Literal["output", "error"]

# A batch attempt's downloaded file: <shard stem>-a<attempt>.<kind>.jsonl, the
# shard stem ending in -t<trial>-s<shard> (names.shard_stem).
_OUTPUT_NAME = re.compile(
    r"^(?P<stem>.+-t(?P<trial>\d+)-s\d+)-a(?P<attempt>\d+)\.(?P<kind>output|error)\.jsonl$"
)


@dataclass(frozen=True, slots=True)
class OutputName:
    """What the name of a batch output or error file says."""

    stem: str  # the shard's stem, as its request file's
    trial: int
    attempt: int
    kind: OutputKind


def parse_output_name(name: str) -> OutputName | None:
    """The parts of a batch output or error file's name; ``None`` for any other name."""
    match = _OUTPUT_NAME.match(name)
    if match is None:
        return None
    kind: OutputKind = "output" if match["kind"] == "output" else "error"
    return OutputName(match["stem"], int(match["trial"]), int(match["attempt"]), kind)


@dataclass(frozen=True, slots=True)
class RunLayout:
    """The paths of one run directory. Reading through it never writes anything."""

    root: Path

    @property
    def config(self) -> Path:
        return self.root / CONFIG_FILE

    @property
    def manifest(self) -> Path:
        return self.root / MANIFEST_FILE

    @property
    def lock(self) -> Path:
        return self.root / LOCK_FILE

    @property
    def hold(self) -> Path:
        return self.root / HOLD_FILE

    @property
    def cancel_failures(self) -> Path:
        return self.root / CANCEL_FAILURES_FILE

    @property
    def verdicts(self) -> Path:
        return self.root / VERDICTS_FILE

    @property
    def verdicts_parquet(self) -> Path:
        return self.root / VERDICTS_PARQUET

    @property
    def summary(self) -> Path:
        return self.root / SUMMARY_FILE

    @property
    def verdict_cache(self) -> Path:
        return self.root / VERDICT_CACHE_FILE

    @property
    def requests_dir(self) -> Path:
        return self.root / REQUESTS_DIR

    @property
    def outputs_dir(self) -> Path:
        return self.root / OUTPUTS_DIR

    def batch_output_files(self) -> list[tuple[OutputName, Path]]:
        """The batch output and error files downloaded so far, by name (direct mode's
        answer files and anything else in ``outputs/`` are not among them)."""
        found = []
        for path in sorted(self.outputs_dir.glob("*.jsonl")):
            name = parse_output_name(path.name)
            if name is not None:
                found.append((name, path))
        return found

    @property
    def offline_state(self) -> Path:
        """The local server's state of an offline run (its resume restarts the server)."""
        return self.root / OFFLINE_STATE_DIR

    def request(self, stem: str) -> Path:
        """A shard's request file, exactly as uploaded."""
        return self.requests_dir / f"{stem}.jsonl"

    def output(self, stem: str, attempt: int, kind: str) -> Path:
        """A batch attempt's ``output`` or ``error`` file, exactly as downloaded."""
        return self.outputs_dir / f"{stem}-a{attempt}.{kind}.jsonl"

    def direct_answers(self, model: str, trial: int) -> Path:
        """Direct mode: the answers of ``model``'s trial (its job's stem, as its request
        files')."""
        stem = shard_stem(model, trial, 0).removesuffix("-s0")
        return self.outputs_dir / f"{stem}-direct.jsonl"

    # Pages written into the run directory when asked (``report``, ``view``).
    @property
    def report_page(self) -> Path:
        return self.root / "report.html"

    @property
    def samples_page(self) -> Path:
        return self.root / "samples.html"

    @property
    def compare_page(self) -> Path:
        """Written into the second of two runs compared."""
        return self.root / "compare.html"

    @property
    def paper_dir(self) -> Path:
        """``report --format latex``: the tables and figures for a paper."""
        return self.root / "paper"

    @property
    def compare_paper_dir(self) -> Path:
        """``report A B --format latex``, written into the second run like :attr:`compare_page`."""
        return self.root / "paper-compare"

    def report_by_page(self, slug: str) -> Path:
        """``report --by``: one page per grouping (``slug`` names it)."""
        return self.root / f"report-by-{slug}.html"

    def compare_by_page(self, slug: str) -> Path:
        """``report A B --by``, written into the second run like :attr:`compare_page`."""
        return self.root / f"compare-by-{slug}.html"

    def wrong_page(self, status: str) -> Path:
        """``report --wrong STATUS``'s page (``status`` made filename-safe by the caller)."""
        return self.root / f"wrong-{status}.html"

    def is_run(self) -> bool:
        """Made by ``aeval run`` (a manifest), not by ``rescore``."""
        return self.manifest.is_file()

    def holds_verdicts(self) -> bool:
        """A run or ``rescore`` output: it has verdicts (finished, or still being written)."""
        return self.verdicts_parquet.is_file() or self.verdicts.is_file()

    def dates(self) -> tuple[float | None, float | None]:
        """When the run started (its manifest's ``created``) and when its verdict frame
        was written (the end files' time), as POSIX times; ``None`` where unknown (a
        rescore output has no manifest; a run not finished has no frame)."""
        started: float | None = None
        try:
            created = self.read_json(self.manifest).get("created")
            started = float(created) if isinstance(created, int | float) else None
        except (OSError, ValueError):
            pass
        try:
            finished: float | None = self.verdicts_parquet.stat().st_mtime
        except OSError:
            finished = None
        return started, finished

    def is_finished(self) -> bool:
        """The end files are written (the verdict frame is the last of them)."""
        return self.verdicts_parquet.is_file()

    def read_json(self, path: Path) -> JsonObject:
        """A JSON object file of this run (the manifest, the configuration, the summary), parsed.

        :raises OSError: the file cannot be read.
        :raises ValueError: it is not JSON, or not a JSON object.
        """
        value = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(value, dict):
            raise ValueError("not a JSON object")
        return value

    def read_summary(self) -> Summary | None:
        """``summary.json`` (written at a run's end), or ``None`` when there is none.

        :raises RunDirError: the file is there but cannot be read.
        """
        # The file is the record summarize() returned, as the store wrote it.
        return cast("Summary | None", self._read_object(self.summary, "summary"))

    def read_config(self) -> JsonObject | None:
        """``config.json`` (the resolved run configuration), or ``None`` (a rescore's output).

        :raises RunDirError: the file is there but cannot be read.
        """
        return self._read_object(self.config, "run configuration")

    def _read_object(self, path: Path, what: str) -> JsonObject | None:
        if not path.is_file():
            return None
        try:
            return self.read_json(path)
        except (OSError, ValueError) as err:
            raise RunDirError(f"{path}: unreadable {what} ({err})") from err


def finished_runs(results_dir: Path) -> list[RunLayout]:
    """The run directories under ``results_dir`` that wrote a summary, newest first."""
    try:
        found = [RunLayout(p) for p in Path(results_dir).iterdir() if (p / SUMMARY_FILE).is_file()]
        found.sort(key=lambda layout: layout.summary.stat().st_mtime, reverse=True)
    except OSError:
        return []
    return found


def find_result_dirs(root: Path) -> list[Path]:
    """``root`` itself when it holds verdicts, else every directory under it that does
    (a run or a ``rescore`` output), in path order. A result directory's own
    subdirectories are not searched (``outputs/``, ``local-server/`` hold no runs)."""
    if RunLayout(root).holds_verdicts():
        return [root]
    found: list[Path] = []
    try:
        children = sorted(p for p in root.iterdir() if p.is_dir())
    except OSError:
        return []
    for child in children:
        found += find_result_dirs(child)
    return found
