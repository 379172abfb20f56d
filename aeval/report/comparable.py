"""Which results may be read together: the check ``report A B`` and ``leaderboard``
share.

Two results are comparable when they were scored on the same data (the rows'
content digest of their :class:`~aeval.dataset.fingerprint.DatasetFingerprint`),
asked the same way (the generation protocol, the instruction and the system
message, by their sha256 in the provenance) and judged the same way (the
verifier's limits, every one of which can turn a verdict into ``timeout`` or
``too_large``, and whether the published reading came from the z3 binary). A
``rescore`` output records only its data: what it does not record cannot be
checked, and is said.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aeval.errors import ConfigError
from aeval.json_values import JsonObject
from aeval.store.layout import RunLayout
from aeval.store.provenance import DEFAULT_PROTOCOL, fingerprint_of, load_provenance

__all__ = [
    "DataCheck",
    "RunSource",
    "check_same_data",
    "check_same_settings",
    "read_sources",
]


@dataclass(frozen=True, slots=True)
class RunSource:
    """One result directory as the comparisons read it.

    :param label: its name in tables and messages: the directory's name, made
        unique among the sources by its parent's name where two share one.
    :param config: the run's ``config.json``; ``None`` for a ``rescore`` output.
    """

    path: Path
    label: str
    provenance: Mapping[str, Any] | None
    config: JsonObject | None

    @property
    def api(self) -> str:
        """``batch``, ``direct``, or ``rescore`` (answers read from files)."""
        if self.config is None:
            return "rescore"
        return str(self.config.get("api") or "batch")


def read_sources(paths: Sequence[Path]) -> list[RunSource]:
    """The provenance and configuration of each result directory.

    :raises RunDirError: a configuration file is there but cannot be read.
    """
    names = [p.name or str(p) for p in paths]
    labels = [
        f"{p.parent.name}/{name}" if names.count(name) > 1 and p.parent.name else name
        for p, name in zip(paths, names, strict=True)
    ]
    labels = [
        label if labels.count(label) == 1 else str(p)
        for p, label in zip(paths, labels, strict=True)
    ]
    return [
        RunSource(p, label, load_provenance(p), RunLayout(p).read_config())
        for p, label in zip(paths, labels, strict=True)
    ]


@dataclass(frozen=True, slots=True)
class DataCheck:
    """What :func:`check_same_data` found: the warning banner when different data was
    allowed, and the results that recorded no fingerprint (not checked)."""

    banner: str | None
    unchecked: tuple[str, ...]


def check_same_data(
    labels: Sequence[str],
    provenances: Sequence[Mapping[str, Any] | None],
    *,
    allow: bool,
    verb: str = "compare",
) -> DataCheck:
    """Refuse results scored on different data, unless ``allow`` (then a banner).

    :param verb: what the command does with them (``compare``, ``combine``), for
        the message.
    :raises ConfigError: one line naming each result and the data it used.
    """
    fingerprints = [fingerprint_of(p) for p in provenances]
    unchecked = tuple(label for label, f in zip(labels, fingerprints, strict=True) if f is None)
    groups: dict[str, tuple[str, list[str]]] = {}
    for label, f in zip(labels, fingerprints, strict=True):
        if f is not None:
            groups.setdefault(f.content_sha256, (f.describe(), []))[1].append(label)
    if len(groups) <= 1:
        return DataCheck(None, unchecked)
    used = "; ".join(f"{', '.join(names)} used {what}" for what, names in groups.values())
    if not allow:
        raise ConfigError(
            f"refusing to {verb} runs scored on different datasets: {used}; pass "
            f"--allow-different-datasets to {verb} them anyway"
        )
    banner = (
        f"WARNING: different datasets: {used}; paired figures cover only the items the runs "
        "share, and an item id may not name the same question in each"
    )
    return DataCheck(banner, unchecked)


def _settings(source: RunSource) -> dict[str, Any]:
    """The recorded settings that change what is asked or what a verdict is; all
    ``None`` for a ``rescore`` output, which records none of them."""
    if source.config is None:
        return dict.fromkeys(_SETTINGS)
    prov = source.provenance
    asked: tuple[Any, ...] = (
        (
            prov.get("protocol") or DEFAULT_PROTOCOL,
            prov.get("instruction_sha256") or "none",
            prov.get("system_sha256") or "none",
        )
        if prov is not None
        else (None, None, None)  # made before aeval recorded provenance: not known
    )
    judged = (source.config.get("limits"), bool(source.config.get("published_binary")))
    return dict(zip(_SETTINGS, (*asked, *judged), strict=True))


_SETTINGS = (
    "protocol",
    "instruction",
    "system message",
    "verifier limits",
    "published reading from the z3 binary",
)


def _shown(value: Any) -> str:
    if isinstance(value, str) and len(value) == 64:  # a sha256
        return value[:12] + "…"
    if isinstance(value, Mapping):
        return ", ".join(f"{k}={v}" for k, v in sorted(value.items()))
    return str(value)


def check_same_settings(sources: Sequence[RunSource], *, verb: str = "combine") -> list[str]:
    """Refuse results asked or judged differently; the notes of what could not be checked.

    A setting a result does not record (a ``rescore`` output records no protocol,
    instruction or verifier limits; a system message is recorded only when a run
    sends one) is not held against the others: the notes name those results.

    :raises ConfigError: one line naming, for each setting that differs, the
        results and their values.
    """
    recorded = [_settings(s) for s in sources]
    differ: list[str] = []
    for name in _SETTINGS:
        groups: dict[str, list[str]] = {}
        for source, settings in zip(sources, recorded, strict=True):
            value = settings[name]
            if value is not None:
                groups.setdefault(_shown(value), []).append(source.label)
        if len(groups) > 1:
            differ.append(
                f"{name} ("
                + "; ".join(f"{', '.join(labels)}: {value}" for value, labels in groups.items())
                + ")"
            )
    if differ:
        raise ConfigError(
            f"refusing to {verb} runs that differ in {' and '.join(differ)}: their verdicts "
            "do not measure the same thing"
        )
    notes = []
    rescored = [s.label for s in sources if s.config is None]
    if rescored and len(rescored) < len(sources):
        notes.append(
            f"{', '.join(rescored)}: rescored from files, which record no protocol, "
            "instruction or verifier limits; taken to match the runs'"
        )
    old = [s.label for s in sources if s.config is not None and s.provenance is None]
    if old:
        notes.append(
            f"{', '.join(old)}: made before aeval recorded provenance; its protocol and "
            "instruction cannot be checked"
        )
    return notes
