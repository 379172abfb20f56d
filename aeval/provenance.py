"""What a result was made from: the data, the prompt, the settings, the software.

A run writes :func:`run_provenance` into ``config.json`` (key ``provenance``)
when it starts and carries it into ``summary.json``; ``rescore`` writes what it
knows into its ``summary.json``. Every report shows it, and labels a run whose
answers came from the local server's synthetic models **SYNTHETIC**, so a demo
can never pass for a measurement.

The dataset is identified by :class:`DatasetFingerprint`: the file's sha256
(or the hub commit it was loaded at) and a digest of its rows' content. Two
runs are over the same data when their content digests agree, whatever format
or source the rows came from; ``resume`` and ``report A B`` refuse otherwise.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import platform
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypedDict, cast
from urllib.parse import urlsplit

import httpx

from aeval.errors import DatasetError
from aeval.store.atomic_files import file_sha256
from aeval.store.layout import RunLayout

if TYPE_CHECKING:
    import polars as pl

    from aeval.config import RunConfig

__all__ = [
    "DEFAULT_PROTOCOL",
    "PROVENANCE_KEY",
    "DatasetFingerprint",
    "Provenance",
    "ScoredFile",
    "SourceKind",
    "check_same_data",
    "content_sha256",
    "directory_sha256",
    "fingerprint_of",
    "is_synthetic",
    "load_provenance",
    "probe_local_server",
    "provenance_lines",
    "rescore_provenance",
    "run_provenance",
    "synthetic_label",
    "versions",
]

PROVENANCE_KEY = "provenance"
# The generation protocol of a config that does not name one (the seed instruction,
# appended after the question). Read from the config's ``protocol`` when it has one.
DEFAULT_PROTOCOL = "default"

SourceKind = Literal["file", "directory", "hub"]

# Rows hashed per step (the digest does not depend on it): bounds the copy in memory.
_CHUNK = 2048
_HASHED_COLUMNS = ("id", "question", "answer", "constants", "tier")


@dataclass(frozen=True, slots=True)
class DatasetFingerprint:
    """Which data a run was scored against.

    :param ref: the path or hub id as given.
    :param kind: ``file``, ``directory`` (``save_to_disk``) or ``hub``.
    :param sha256: of the file's bytes (of every file, for a directory); ``None`` for the hub.
    :param revision: the hub commit the rows were loaded at; ``None`` for local data.
    :param content_sha256: of the rows' id, question, answer, constants and tier,
        in order, before any selection: equal for the same rows in any format.
    :param total_rows: rows in the dataset; ``rows``: rows the run selected.
    """

    ref: str
    kind: SourceKind
    sha256: str | None
    revision: str | None
    content_sha256: str
    total_rows: int
    rows: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DatasetFingerprint | None:
        """The fingerprint recorded in a provenance dict; ``None`` if absent or malformed."""
        try:
            return cls(**{k: data[k] for k in cls.__dataclass_fields__})
        except (KeyError, TypeError):
            return None

    def same_data(self, other: DatasetFingerprint) -> bool:
        return self.content_sha256 == other.content_sha256

    def describe(self) -> str:
        """One line naming the data: ``warp.parquet (sha256 3fa2…, 671 rows, content 9b1c…)``."""
        where = f"{self.ref}@{self.revision[:12]}" if self.revision else self.ref
        parts = [f"sha256 {self.sha256[:12]}"] if self.sha256 else []
        parts += [f"{self.total_rows} rows", f"content {self.content_sha256[:12]}"]
        return f"{where} ({', '.join(parts)})"


def content_sha256(frame: pl.DataFrame) -> str:
    """A digest of a validated benchmark frame's rows (see :class:`DatasetFingerprint`).

    Per column (id, question, answer, constants, tier, in that order): its name,
    the sha256 of every value's length in bytes (int64, little-endian) and the
    sha256 of the values' UTF-8 bytes back to back; a null is written as one
    NUL. The lengths make the split between values unambiguous. The bytes come
    straight from Arrow buffers, a slice of rows at a time: a Python string per
    row would be several times slower, and a whole column at once would cost
    its size again in memory (half a gigabyte for 100,000 synthetic rows).
    """
    import pyarrow as pa  # deferred, as polars: only a run or rescore fingerprints data
    import pyarrow.compute as pc

    digest = hashlib.sha256()
    for name in _HASHED_COLUMNS:
        column = frame.get_column(name)
        if column.null_count():
            column = column.fill_null("\x00")
        lengths, data = hashlib.sha256(), hashlib.sha256()
        for start in range(0, column.len(), _CHUNK):
            chunk = column.slice(start, _CHUNK).to_arrow()
            if isinstance(chunk, pa.ChunkedArray):
                chunk = chunk.combine_chunks()
            values = chunk.cast(pa.large_string())  # contiguous UTF-8, int64 offsets
            sizes = pc.binary_length(values).cast(pa.int64())
            lengths.update(memoryview(sizes.buffers()[1])[: 8 * len(sizes)])
            offsets = memoryview(values.buffers()[1]).cast("q")
            first, last = offsets[values.offset], offsets[values.offset + len(values)]
            data.update(memoryview(values.buffers()[2])[first:last])
        digest.update(name.encode() + b"\x1f" + lengths.digest() + data.digest())
    return digest.hexdigest()


def directory_sha256(path: Path) -> str:
    """Every file under ``path`` (relative name and bytes), in name order."""
    digest = hashlib.sha256()
    for item in sorted(p for p in path.rglob("*") if p.is_file()):
        digest.update(str(item.relative_to(path)).encode() + b"\x00")
        digest.update(file_sha256(item).encode())
    return digest.hexdigest()


def versions() -> dict[str, str | None]:
    """The software that produced a result (``None``: not installed)."""
    out: dict[str, str | None] = {}
    for name in ("aeval", "z3-solver", "openai", "polars"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    out["python"] = platform.python_version()
    return out


def _sha256_text(text: str | None) -> str | None:
    return None if text is None else hashlib.sha256(text.encode()).hexdigest()


_LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})
_PROBE_TIMEOUT_S = 3.0


async def probe_local_server(base_url: str | None, api_key: str | None) -> str | None:
    """Which synthetic responders answer at ``base_url``, if it is aeval's local server.

    Only a loopback endpoint is asked (one GET of ``/aeval/responders``, a few
    seconds at most; a real API is never asked), so a run sent to an ``aeval
    serve`` started by hand is labelled SYNTHETIC like the offline demo.
    ``None``: not aeval's server, unreachable, or answering only with replays of
    recorded model outputs.
    """
    parts = urlsplit(base_url or "")
    host = (parts.hostname or "").lower()
    try:
        loopback = host in _LOOPBACK_HOSTS or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        return None
    root = (base_url or "").rstrip("/").removesuffix("/v1")
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        async with httpx.AsyncClient(timeout=_PROBE_TIMEOUT_S) as client:
            response = await client.get(root + "/aeval/responders", headers=headers)
        doc = response.json() if response.status_code == 200 else {}
    except (httpx.HTTPError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("server") != "aeval-local" or not doc.get("synthetic"):
        return None
    return str(doc.get("responders") or "aeval local server")


class ScoredFile(TypedDict):
    path: str
    sha256: str | None  # None: the file was not there


class Provenance(TypedDict):
    """Where a run's or a rescore's numbers came from (``provenance`` in ``config.json``
    and ``summary.json``). ``None`` where it is not known (a rescore cannot know how
    the answers were generated)."""

    synthetic: bool | None  # answered by a synthetic responder, not a model
    offline: bool | None  # answered by the local server the run started
    responder: str | None  # which synthetic responder
    dataset: dict[str, Any] | None  # DatasetFingerprint.to_dict()
    instruction_sha256: str | None
    system_sha256: NotRequired[str | None]  # a run's
    protocol: str | None
    generation: dict[str, Any] | None  # GenerationSettings, as JSON
    scored_files: NotRequired[list[ScoredFile]]  # a rescore's
    versions: dict[str, str | None]


def run_provenance(
    config: RunConfig,
    fingerprint: DatasetFingerprint | None,
    *,
    offline: bool,
    synthetic: str | None,
) -> Provenance:
    """The provenance record of a run, as ``config.json`` and ``summary.json`` hold it.

    :param offline: the answers came from the local batch server the run started.
    :param synthetic: which synthetic responder answered (``None``: real models).
    """
    prompt = config.prompt
    return {
        "synthetic": synthetic is not None,
        "offline": offline,
        "responder": synthetic,
        "dataset": fingerprint.to_dict() if fingerprint is not None else None,
        "instruction_sha256": _sha256_text(prompt.instruction),
        "system_sha256": _sha256_text(prompt.system),
        "protocol": config.protocol or DEFAULT_PROTOCOL,
        "generation": json.loads(json.dumps(asdict(config.generation), default=str)),
        "versions": versions(),
    }


def rescore_provenance(fingerprint: DatasetFingerprint | None, files: list[Path]) -> Provenance:
    """What ``rescore`` knows: the data, the scored files and the software.

    Whether the answers were synthetic and how they were generated is not
    known from output files alone: those fields are ``None``.
    """
    return {
        "synthetic": None,
        "offline": None,
        "responder": None,
        "dataset": fingerprint.to_dict() if fingerprint is not None else None,
        "instruction_sha256": None,
        "protocol": None,
        "generation": None,
        "scored_files": [
            {"path": str(p), "sha256": file_sha256(p) if p.is_file() else None} for p in files
        ],
        "versions": versions(),
    }


def load_provenance(run_dir: Path) -> Provenance | None:
    """The provenance of a run or rescore directory (``summary.json``, else ``config.json``)."""
    layout = RunLayout(Path(run_dir))
    for path in (layout.summary, layout.config):
        try:
            doc = layout.read_json(path)
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict) and isinstance(doc.get(PROVENANCE_KEY), dict):
            return cast(Provenance, doc[PROVENANCE_KEY])  # as written by this module
    return None


def fingerprint_of(provenance: Mapping[str, Any] | None) -> DatasetFingerprint | None:
    data = (provenance or {}).get("dataset")
    return DatasetFingerprint.from_dict(data) if isinstance(data, Mapping) else None


def is_synthetic(provenance: Mapping[str, Any] | None) -> bool:
    return bool((provenance or {}).get("synthetic"))


def synthetic_label(provenance: Mapping[str, Any] | None) -> str:
    """``"SYNTHETIC "`` for a run answered by synthetic models (a title prefix), else ``""``."""
    return "SYNTHETIC " if is_synthetic(provenance) else ""


def check_same_data(
    run_dir: Path, recorded: Mapping[str, Any] | None, current: DatasetFingerprint
) -> None:
    """Refuse to go on with a run whose data changed since it started.

    Row ids are row positions unless the dataset has an ``id`` column: one row
    inserted at the top would score every answer against its neighbour's truth.

    :raises DatasetError: naming both fingerprints.
    """
    before = fingerprint_of(recorded)
    if before is None or before.same_data(current):
        return
    raise DatasetError(
        f"{run_dir}: refusing to resume against different data: the run started on "
        f"{before.describe()}, the dataset is now {current.describe()}; resume with the "
        "data the run started on, or start a new run"
    )


def provenance_lines(provenance: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """The provenance as (label, value) pairs, for every report format."""
    if not provenance:
        return [("Provenance", "not recorded (made before aeval recorded provenance)")]
    lines: list[tuple[str, str]] = []
    synthetic = provenance.get("synthetic")
    if synthetic:
        answered = f"SYNTHETIC: {provenance.get('responder') or 'synthetic responder'}"
    elif synthetic is None:
        answered = "unknown (rescored output files)"
    else:
        answered = "model API" + (" (offline local server)" if provenance.get("offline") else "")
    lines.append(("Answers", answered))
    fingerprint = fingerprint_of(provenance)
    dataset = provenance.get("dataset") or {}
    if fingerprint is not None:
        lines.append(("Dataset", f"{fingerprint.describe()}; {fingerprint.rows} rows selected"))
        if fingerprint.sha256:
            lines.append(("Dataset sha256", fingerprint.sha256))
        if fingerprint.revision:
            lines.append(("Hub revision", fingerprint.revision))
        lines.append(("Rows content sha256", fingerprint.content_sha256))
    else:
        lines.append(("Dataset", str(dataset.get("ref") or "not recorded")))
    if provenance.get("protocol") is not None:
        lines.append(("Protocol", str(provenance["protocol"])))
    if provenance.get("instruction_sha256"):
        lines.append(("Instruction sha256", str(provenance["instruction_sha256"])))
    generation = provenance.get("generation")
    if isinstance(generation, Mapping):
        sent = {k: v for k, v in generation.items() if v is not None}
        lines.append(
            (
                "Generation",
                ", ".join(f"{k}={v}" for k, v in sent.items()) or "none sent (the API defaults)",
            )
        )
    for scored in provenance.get("scored_files") or ():
        lines.append(("Scored file", f"{scored.get('path')} (sha256 {scored.get('sha256')})"))
    software = provenance.get("versions") or {}
    if software:
        lines.append(("Versions", ", ".join(f"{k} {v}" for k, v in software.items())))
    return lines
