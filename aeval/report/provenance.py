"""The provenance of a result in every report format, and the SYNTHETIC label.

The record itself is :mod:`aeval.store.provenance`'s; here it is only laid out: as
(label, value) lines (:func:`provenance_lines`), a table (terminal, markdown), a
header block (html) and columns (csv). A run whose answers came from synthetic
models carries a banner in every format.
"""

from __future__ import annotations

import csv
import html
import io
from collections.abc import Mapping
from typing import Any

from aeval.store.provenance import fingerprint_of, is_synthetic
from aeval.summary.tables import Grid

__all__ = [
    "SYNTHETIC_BANNER",
    "provenance_grid",
    "provenance_html",
    "provenance_lines",
    "provenance_markdown",
    "with_provenance_columns",
]

SYNTHETIC_BANNER = (
    "SYNTHETIC: these answers were written by aeval's synthetic models (a local test "
    "server, e.g. the offline demo), not by the named models; the numbers measure nothing "
    "about them."
)

# The provenance fields a csv row carries, each as one column.
_CSV_FIELDS = ("synthetic", "dataset", "dataset_sha256", "hub_revision", "content_sha256")


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


def provenance_grid(provenance: Mapping[str, Any] | None) -> Grid:
    title = ("SYNTHETIC run: " if is_synthetic(provenance) else "") + "Provenance"
    return Grid(title, ("Field", "Value"), tuple(provenance_lines(provenance)))


def provenance_markdown(provenance: Mapping[str, Any] | None) -> str:
    banner = f"> **{SYNTHETIC_BANNER}**\n\n" if is_synthetic(provenance) else ""
    rows = "\n".join(f"- **{k}**: `{v}`" for k, v in provenance_lines(provenance))
    return f"{banner}## Provenance\n\n{rows}\n"


def provenance_html(provenance: Mapping[str, Any] | None) -> str:
    """The page header's block: a banner for a synthetic run, then every provenance field."""
    esc = html.escape
    banner = (
        '<p class="synthetic" style="background:#b00;color:#fff;padding:.5em .8em;'
        f'font-weight:700">{esc(SYNTHETIC_BANNER)}</p>'
        if is_synthetic(provenance)
        else ""
    )
    items = "".join(
        f"<dt>{esc(k)}</dt><dd><code>{esc(v)}</code></dd>" for k, v in provenance_lines(provenance)
    )
    style = "display:grid;grid-template-columns:max-content auto;gap:.1em 1em;font-size:13px"
    return f'{banner}<dl class="provenance" style="{style}">{items}</dl>'


def with_provenance_columns(
    table: str, provenance: Mapping[str, Any] | None, *, prefix: str = ""
) -> str:
    """A csv with the provenance's identifying fields appended to every row
    (their column names after ``prefix``: ``a_``, ``b_`` for a comparison)."""
    prov = provenance or {}
    data = prov.get("dataset") or {}
    values = [
        "" if prov.get("synthetic") is None else str(bool(prov.get("synthetic"))).lower(),
        str(data.get("ref") or ""),
        str(data.get("sha256") or ""),
        str(data.get("revision") or ""),
        str(data.get("content_sha256") or ""),
    ]
    rows = list(csv.reader(io.StringIO(table)))
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for i, row in enumerate(rows):
        writer.writerow(row + ([prefix + f for f in _CSV_FIELDS] if i == 0 else values))
    return out.getvalue()
