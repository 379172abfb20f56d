"""The sample viewer: one self-contained HTML page with every answer of a run.

The page embeds its data and draws only the rows in view, so it stays quick
at 100,000 verdicts (under a second to open in headless Chromium, see
``bench/viewer.py``):

- ``aeval-index``: one compact column per verdict field the list and the
  filters need (model, trial, item, tier, status, repair, direction, published
  reading, finish reason, tokens, program, extrapolation distance, the item's
  standing among the models, a ``--by`` group), strings replaced by indexes
  into small dictionaries. Parsed when the page opens.
- ``aeval-d-<n>``: the heavy text (full response, reason, counterexample, where
  the draft and the extracted answer sit), ``CHUNK`` verdicts per block,
  gzip-compressed in base64, decoded only when one of its verdicts is opened.
- ``aeval-items``: question, ground truth and declarations per item, compressed
  the same way, decoded when the first verdict is opened.

Every string from the run (answers are hostile input) reaches the page as data
(JSON with ``</`` and ``<!`` escaped, or base64), and the script puts it into
the document with ``textContent`` only. A Content-Security-Policy forbids the
page any network access.
"""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from html import escape
from importlib import resources
from typing import Any

import polars as pl

from aeval.report.group_tables import BY_LABELS
from aeval.report.samples import Samples, answer_span, extracted_answer, think_spans
from aeval.summary.groups import group_column, group_sort_key, item_classes
from aeval.summary.order import item_sort_key
from aeval.summary.rounds import first_round, item_id
from aeval.verdicts import INFRA_STATUSES, Status

__all__ = ["CHUNK", "VIEWER_FILTERS", "viewer_data", "viewer_html"]

CHUNK = 256  # verdicts per detail block: one block decodes in a few milliseconds
# An item's standing among the models (aeval.summary.groups.item_classes).
STANDINGS = ("unsolved", "split", "mixed", "solved")
_GZIP_LEVEL = 6

_CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"


def _asset(name: str) -> str:
    return resources.files("aeval.report").joinpath("assets", name).read_text(encoding="utf-8")


def _json(value: Any) -> str:
    """JSON safe inside a ``<script>`` element: nothing in it can end the element
    (``</``) or switch the parser into its escaped states (``<!--``).

    Only those two pairs are escaped (as ``<\\/`` and ``<\\u0021``, the same string
    to JSON.parse), not every ``<``: SMT-LIB is full of ``<=``.
    """
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text.replace("</", "<\\/").replace("<!", "<\\u0021")


def _packed(value: Any) -> str:
    """JSON, gzip-compressed, in base64: SMT-LIB answers shrink about tenfold, and
    the browser has less to read when the page opens (``DecompressionStream``
    inflates a block when it is first needed)."""
    raw = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
    return base64.b64encode(gzip.compress(raw, compresslevel=_GZIP_LEVEL, mtime=0)).decode()


def _utf16(text: str, offsets: list[int]) -> list[int]:
    """Python offsets (code points) as JavaScript's (UTF-16 code units)."""
    if text.isascii() or all(ord(c) <= 0xFFFF for c in text):
        return offsets
    return [len(text[:o].encode("utf-16-le")) // 2 for o in offsets]


class _Codes:
    """A string dictionary: each distinct value once, rows keep its index (-1: none)."""

    def __init__(self, first: tuple[str, ...] = ()) -> None:
        self.values: list[str] = list(first)
        self._index = {v: i for i, v in enumerate(first)}

    def __call__(self, value: str | None) -> int:
        if value is None:
            return -1
        code = self._index.get(value)
        if code is None:
            code = self._index[value] = len(self.values)
            self.values.append(value)
        return code


def _detail(
    row: dict[str, Any], samples: Samples, later: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """One list row's heavy text; with repair rounds, ``later`` are the same answer's
    verdicts of rounds 2, 3, … (``conv``: each with the feedback sent before it)."""
    out = _answer_detail(row, samples)
    if later:
        turns = []
        previous = row
        for verdict in later:
            turn = _answer_detail(verdict, samples)
            turn["r"] = verdict["round"]
            turn["s"] = verdict["status"]
            if verdict["repaired"]:
                turn["rep"] = verdict["repaired"]
            if verdict["direction"]:
                turn["dir"] = verdict["direction"]
            feedback = samples.rounds.feedback_after(previous)
            if feedback is not None:
                turn["fb"] = feedback
            turns.append(turn)
            previous = verdict
        out["conv"] = turns
    return out


def _answer_detail(row: dict[str, Any], samples: Samples) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if row["reason"]:
        out["why"] = row["reason"]
    if row["counterexample"]:
        try:
            out["ce"] = json.loads(row["counterexample"])
        except ValueError:
            out["ce"] = {"?": row["counterexample"]}
    if row["published_reason"]:
        out["pw"] = row["published_reason"]
    if row["elapsed_ms"]:
        out["ms"] = round(row["elapsed_ms"], 1)
    response = samples.response(row["model"], row["trial"], row["custom_id"])
    if response is None:
        out["xw"] = "no response line found" if samples.responses else ""
        return out
    if response.is_error:
        out["err"] = f"{response.error_code}: {response.error_message or ''}".rstrip(": ")
        return out
    text = response.content or ""
    out["res"] = text
    extracted, why = extracted_answer(response)
    if extracted is None:
        out["xw"] = why
    else:
        out["x"] = extracted
    spans = think_spans(text)
    if spans:
        flat = _utf16(text, [o for span in spans for o in span])
        out["th"] = [flat[i : i + 2] for i in range(0, len(flat), 2)]
    span = answer_span(text, extracted)
    if span is not None:
        out["an"] = _utf16(text, list(span))
    return out


# the columns the page always offers a filter for (``view --by`` one of them adds nothing)
VIEWER_FILTERS = frozenset({"model", "trial", "tier", "program", "distance"})


def viewer_data(
    samples: Samples, *, title: str, by: str | None = None
) -> tuple[dict[str, Any], dict[str, Any], Iterator[list[dict[str, Any]]]]:
    """The page's data: meta and index (parsed on open), and the detail blocks.

    Verdicts are ordered by model, trial and item (natural order: 2 before 10).

    :param by: a grouping (:data:`aeval.summary.groups.GROUPINGS`, or a column the
        verdicts carry, e.g. a dataset column joined by ``view --by``) offered as
        one more filter.
    """
    # One row per answer: its round-1 verdict, as every count of the run reads it; the
    # later rounds of a repair run are the conversation its detail shows.
    frame = first_round(samples.verdicts)
    later = _later_rounds(samples.verdicts)
    standing = item_classes(frame)
    groups: _Codes | None = None
    if by is not None:
        frame = group_column(frame, by)
        present = frame.get_column("group").unique().to_list()
        groups = _Codes(
            tuple(sorted((v for v in present if v is not None), key=group_sort_key(by)))
        )
    programs, standings = _Codes(), _Codes(STANDINGS)
    rows = sorted(
        frame.iter_rows(named=True),
        key=lambda r: (r["model"], r["trial"], item_sort_key(r["custom_id"])),
    )
    models, tiers = _Codes(), _Codes(("small", "medium", "large"))
    statuses = _Codes(tuple(s.value for s in Status))
    repairs, directions, finishes = _Codes(), _Codes(("too_strong", "too_weak", "both")), _Codes()
    columns: dict[str, list[Any]] = {k: [] for k in ("m", "t", "i", "g", "s", "r", "d", "p", "f")}
    columns |= {"pt": [], "ct": [], "rt": [], "pg": [], "ds": [], "sx": [], "gv": []}
    columns |= {"rd": [], "sr": []}  # rounds asked, first equivalent round (-1: never)
    for r in rows:
        turns = later.get((r["model"], r["trial"], r["custom_id"]), [])
        columns["rd"].append(1 + len(turns))
        solved = [1] if r["status"] == Status.EQUIVALENT.value else []
        solved += [t["round"] for t in turns if t["status"] == Status.EQUIVALENT.value]
        columns["sr"].append(min(solved) if solved else -1)
        columns["pg"].append(programs(r.get("program")))
        distance = r.get("distance")
        columns["ds"].append(-1 if distance is None else distance)
        columns["sx"].append(standings(standing.get(r["custom_id"])))
        columns["gv"].append(groups(r.get("group")) if groups is not None else -1)
        columns["m"].append(models(r["model"]))
        columns["t"].append(r["trial"])
        columns["i"].append(r["custom_id"])
        columns["g"].append(tiers(r["tier"]))
        columns["s"].append(statuses(r["status"]))
        columns["r"].append(repairs(r["repaired"]))
        columns["d"].append(directions(r["direction"]))
        published = r["correct_published"]
        columns["p"].append(-1 if published is None else int(published))
        columns["f"].append(finishes(r["finish_reason"]))
        columns["pt"].append(-1 if r["prompt_tokens"] is None else r["prompt_tokens"])
        columns["ct"].append(-1 if r["completion_tokens"] is None else r["completion_tokens"])
        columns["rt"].append(-1 if r["reasoning_tokens"] is None else r["reasoning_tokens"])
    index = {
        "chunk": CHUNK,
        "dict": {
            "model": models.values,
            "tier": tiers.values,
            "status": statuses.values,
            "repaired": repairs.values,
            "direction": directions.values,
            "finish": finishes.values,
            "program": programs.values,
            "standing": standings.values,
            "group": groups.values if groups is not None else [],
        },
        "by": BY_LABELS.get(by, by) if by is not None else None,
        **columns,
    }
    meta = {
        "title": title,
        "dataset": samples.dataset,
        "notes": samples.notes,
        "generated": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "infra": sorted(s.value for s in INFRA_STATUSES),
        "responses": bool(samples.responses),
        "items": len(samples.items),
        "rounds": max(samples.rounds.rounds, max(columns["rd"], default=1)),
    }

    def blocks() -> Iterator[list[dict[str, Any]]]:
        for start in range(0, len(rows), CHUNK):
            yield [
                _detail(r, samples, later.get((r["model"], r["trial"], r["custom_id"])))
                for r in rows[start : start + CHUNK]
            ]

    return meta, index, blocks()


def _later_rounds(frame: pl.DataFrame) -> dict[tuple[str, int, str], list[dict[str, Any]]]:
    """The verdicts of rounds 2, 3, … by (model, trial, item id), in round order."""
    if "round" not in frame.columns:
        return {}
    rest = frame.filter(pl.col("round").fill_null(1) > 1)
    out: dict[tuple[str, int, str], list[dict[str, Any]]] = {}
    if rest.is_empty():
        return out
    rest = rest.with_columns(item_id()).sort("round")
    for r in rest.iter_rows(named=True):
        out.setdefault((r["model"], r["trial"], r["item"]), []).append(r)
    return out


def _items(samples: Samples) -> dict[str, list[str]]:
    wanted = set(samples.verdicts.get_column("custom_id").to_list())
    return {
        i: [item.question, item.truth, item.constants]
        for i, item in samples.items.items()
        if i in wanted
    }


def _packed_script(name: str, value: Any) -> str:
    return (
        f"<script type='application/octet-stream' data-encoding='gzip+base64' id='{name}'>"
        f"{_packed(value)}</script>\n"
    )


def viewer_html(samples: Samples, *, title: str, by: str | None = None) -> str:
    """The whole page as one string: no file or network access when it is opened.

    :param by: one more filter, by this grouping (see :func:`viewer_data`).
    """
    meta, index, blocks = viewer_data(samples, title=title, by=by)
    parts = [
        "<!doctype html>\n<html lang='en'><head><meta charset='utf-8'>",
        f"<meta http-equiv='Content-Security-Policy' content=\"{_CSP}\">",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<title>{escape(title)}</title><style>{_asset('viewer.css')}</style></head>\n<body>",
        _asset("viewer-body.html"),
        f"<script type='application/json' id='aeval-meta'>{_json(meta)}</script>\n",
        f"<script type='application/json' id='aeval-index'>{_json(index)}</script>\n",
        _packed_script("aeval-items", _items(samples)),
    ]
    parts += [_packed_script(f"aeval-d-{n}", block) for n, block in enumerate(blocks)]
    parts.append(f"<script>{_asset('viewer.js')}</script>\n</body></html>\n")
    return "".join(parts)
