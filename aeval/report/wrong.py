"""The wrong answers of one model: which items, in which direction, the
counterexample Z3 confirmed, and the answer beside the truth.
"""

from __future__ import annotations

import json
import re

import polars as pl
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from aeval.errors import ConfigError
from aeval.report.samples import Samples, extracted_answer
from aeval.summary.aggregate import INFRA_STATUS_VALUES
from aeval.summary.order import item_sort_key
from aeval.summary.rounds import first_round
from aeval.summary.tables import Grid
from aeval.verdicts import Status

__all__ = [
    "WRONG_COLUMNS",
    "normalise_smt",
    "shorten_at_difference",
    "with_answers",
    "wrong_answers",
    "wrong_blocks",
    "wrong_grid",
]

WRONG_COLUMNS = (
    "trial",
    "custom_id",
    "tier",
    "status",
    "direction",
    "counterexample",
    "repaired",
    "reason",
)

_SMT_TOKEN = re.compile(r"\(|\)|[^\s()]+")


def wrong_answers(
    verdicts: pl.DataFrame, model: str, *, include_infra: bool = False
) -> pl.DataFrame:
    """Every verdict of ``model`` that is not ``equivalent`` (infrastructure failures
    only with ``include_infra``), ordered by trial and item (2 before 10). With repair
    rounds, the round-1 verdicts: the answers the run's accuracy counts wrong (the
    viewer shows each one's later rounds).

    :raises ConfigError: the model has no verdicts here (the message lists those that do).
    """
    rows = first_round(verdicts).filter(pl.col("model") == model)
    if rows.is_empty():
        known = ", ".join(verdicts["model"].unique(maintain_order=True).to_list()) or "none"
        raise ConfigError(f"no verdicts for model {model!r} (models in this run: {known})")
    wrong = pl.col("status") != Status.EQUIVALENT.value
    if not include_infra:
        wrong &= ~pl.col("status").is_in(INFRA_STATUS_VALUES)
    rows = rows.filter(wrong).select(WRONG_COLUMNS)
    keys = [
        (trial, item_sort_key(custom_id))
        for trial, custom_id in zip(rows["trial"], rows["custom_id"], strict=True)
    ]
    order = sorted(range(rows.height), key=keys.__getitem__)
    return rows[order] if order else rows


def with_answers(wrong: pl.DataFrame, samples: Samples, model: str) -> pl.DataFrame:
    """``wrong`` with two more columns: the ``answer`` the checker read (empty when
    there was none) and the item's ground ``truth`` (empty when the dataset is not
    available), both in full."""
    answers, truths = [], []
    for trial, custom_id in zip(wrong["trial"], wrong["custom_id"], strict=True):
        text, _ = extracted_answer(samples.response(model, trial, custom_id))
        answers.append(text if text is not None else "")
        item = samples.item(custom_id)
        truths.append(item.truth if item is not None else "")
    return wrong.with_columns(
        pl.Series("answer", answers, dtype=pl.String), pl.Series("truth", truths, dtype=pl.String)
    )


def normalise_smt(text: str) -> str:
    """SMT-LIB with its spacing made canonical (``( >  x 0)`` → ``(> x 0)``), so that the
    first difference between two constraints is a difference in content."""
    out: list[str] = []
    for token in _SMT_TOKEN.findall(text):
        if out and token != ")" and out[-1] != "(":
            out.append(" ")
        out.append(token)
    return "".join(out)


def shorten_at_difference(answer: str, truth: str, width: int) -> tuple[str, str, int]:
    """Both texts cut to about ``width`` characters around their first difference.

    Returns the two excerpts and the column at which they first differ (the same in
    both: what comes before it is common), or -1 when they do not differ.
    """
    a, t = normalise_smt(answer), normalise_smt(truth)
    at = next((i for i, (x, y) in enumerate(zip(a, t, strict=False)) if x != y), None)
    if at is None:
        at = min(len(a), len(t)) if len(a) != len(t) else -1
    width = max(width, 12)
    start = 0 if at < 0 else max(0, at - width // 3)

    def cut(s: str) -> str:
        head = "…" if start > 0 else ""
        body = s[start : start + width - len(head)]
        tail = "…" if start + width - len(head) < len(s) else ""
        return head + body[: len(body) - len(tail)] + tail

    column = -1 if at < 0 else at - start + (1 if start > 0 else 0)
    return cut(a), cut(t), column


def _counterexample(text: str | None, limit: int | None = None) -> str:
    if not text:
        return ""
    try:
        values = json.loads(text)
        shown = ", ".join(f"{k}={v}" for k, v in values.items())
    except (ValueError, AttributeError):
        shown = text
    return shown if limit is None or len(shown) <= limit else shown[: limit - 1] + "…"


def _status(row: dict[str, object]) -> str:
    return str(row["status"]) + (f" ({row['repaired']})" if row["repaired"] else "")


def wrong_grid(wrong: pl.DataFrame, model: str, *, width: int = 60, text_width: int = 120) -> Grid:
    """The listing as a table (markdown and html); reasons in full, long
    counterexamples cut to ``width``, answer and truth shortened to ``text_width``
    around their first difference when ``wrong`` has them (:func:`with_answers`)."""
    has_text = "answer" in wrong.columns
    rows = []
    for r in wrong.iter_rows(named=True):
        cells = [
            str(r["trial"]),
            r["custom_id"],
            r["tier"] or "",
            _status(r),
            r["direction"] or "",
            _counterexample(r["counterexample"], width),
            r["reason"] or "",
        ]
        if has_text:
            answer, truth, _ = shorten_at_difference(r["answer"], r["truth"], text_width)
            cells += [answer if r["answer"] else "—", truth if r["truth"] else "—"]
        rows.append(tuple(cells))
    columns = ("Trial", "Item", "Tier", "Status", "Direction", "Counterexample", "Reason")
    return Grid(
        f"Wrong answers of {model} ({len(rows)})",
        columns + (("Answer", "Truth") if has_text else ()),
        tuple(rows),
        right=frozenset({0}),
    )


def wrong_blocks(wrong: pl.DataFrame, model: str, *, width: int = 100) -> RenderableType:
    """The listing for a terminal ``width`` columns wide: one block per answer, reasons
    and counterexamples wrapped (never cut), the answer over the truth from just
    before their first difference, which is marked."""
    has_text = "answer" in wrong.columns
    parts: list[RenderableType] = [Text(f"Wrong answers of {model} ({wrong.height})", style="bold")]
    label_width = len("counterexample")
    text_width = max(24, width - label_width - 4)
    for r in wrong.iter_rows(named=True):
        head = Text()
        head.append(f"trial {r['trial']} · item {r['custom_id']}", style="bold")
        if r["tier"]:
            head.append(f" · {r['tier']}")
        head.append(f" · {_status(r)}", style="red")
        if r["direction"]:
            head.append(f" · {r['direction']}")
        grid = Table.grid(padding=(0, 2), pad_edge=True)
        grid.add_column(style="dim", no_wrap=True, min_width=label_width)
        grid.add_column(overflow="fold")
        if r["reason"]:
            grid.add_row("reason", r["reason"])
        if r["counterexample"]:
            grid.add_row("counterexample", _counterexample(r["counterexample"]))
        if has_text:
            _answer_rows(grid, r["answer"], r["truth"], text_width)
        parts += [Text(""), head, grid]
    if wrong.is_empty():
        parts.append(Text("(none)"))
    return Group(*parts)


def _answer_rows(grid: Table, answer: str, truth: str, width: int) -> None:
    if not answer or not truth:
        grid.add_row("answer", _one_line(answer, width) if answer else Text("—", style="dim"))
        grid.add_row("truth", _one_line(truth, width) if truth else Text("— (dataset not loaded)"))
        return
    a, t, column = shorten_at_difference(answer, truth, width)
    grid.add_row("answer", _marked(a, column))
    grid.add_row("truth", _marked(t, column))
    if column >= 0:
        grid.add_row("", Text(" " * column + "^ first difference", style="dim"))
    else:
        grid.add_row("", Text("(the same text once spaces are normalised)", style="dim"))


def _one_line(text: str, width: int) -> Text:
    flat = normalise_smt(text)
    return Text(flat if len(flat) <= width else flat[: width - 1] + "…", no_wrap=True)


def _marked(text: str, column: int) -> Text:
    out = Text(no_wrap=True, overflow="ellipsis")
    if column < 0:
        out.append(text)
        return out
    out.append(text[:column], style="dim")
    out.append(text[column:], style="bold")
    return out
