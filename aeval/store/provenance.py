"""The provenance record: what a result was made from (the data, the prompt, the
settings, the software), as a run directory keeps it.

A run writes :func:`run_provenance` into ``config.json`` (key ``provenance``)
when it starts and carries it into ``summary.json``; ``rescore`` writes what it
knows into its ``summary.json``; :func:`load_provenance` reads it back from
either. Every report shows it (laid out by :mod:`aeval.report.provenance`), and
labels a run whose answers came from the local server's synthetic models
**SYNTHETIC**, so a demo can never pass for a measurement.

The data is named by its :class:`~aeval.store.dataset_fingerprint.DatasetFingerprint`.
Two runs are over the same data when their content digests agree, whatever
format or source the rows came from; ``resume`` and ``report A B`` refuse
otherwise (:func:`check_same_data`).
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import platform
from collections.abc import Mapping
from dataclasses import asdict
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlsplit

import httpx

from aeval.api_settings import server_root
from aeval.errors import DatasetError
from aeval.store.atomic_files import file_sha256
from aeval.store.dataset_fingerprint import DatasetFingerprint
from aeval.store.layout import RunLayout
from aeval.store.summary_record import Provenance, ScoredFile

if TYPE_CHECKING:
    from aeval.config import RunConfig

__all__ = [
    "DEFAULT_PROTOCOL",
    "PROVENANCE_KEY",
    "Provenance",
    "ScoredFile",
    "check_same_data",
    "fingerprint_of",
    "is_synthetic",
    "load_provenance",
    "probe_local_server",
    "rescore_provenance",
    "run_provenance",
    "synthetic_label",
    "versions",
]

PROVENANCE_KEY = "provenance"
# The generation protocol of a config that does not name one (the seed instruction,
# appended after the question). Read from the config's ``protocol`` when it has one.
DEFAULT_PROTOCOL = "default"


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
    root = server_root(base_url or "")
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
