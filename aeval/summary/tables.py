"""A summary's tables, built once from a summary dict and rendered to Rich,
markdown or html: the reports' and the live display's final table alike.

Tables read only the summary (see :func:`aeval.summary.aggregate.summarize`), never
the verdicts, so the terminal, markdown, csv and html reports cannot disagree with
``summary.json``. Each table is a :class:`Grid` of plain strings; the renderers
only lay it out.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from rich.table import Table
from rich.text import Text

from aeval.cost import usd as dollars
from aeval.store.provenance import synthetic_label
from aeval.store.summary_record import Summary

__all__ = [
    "Grid",
    "fmt_interval",
    "fmt_pct",
    "fmt_reasoning",
    "fmt_signed_pts",
    "grid_markdown",
    "grid_rich",
    "reasoning_counted",
    "sampling_grid",
    "sampling_tier_grid",
    "signed_interval",
    "status_grid",
    "status_table",
    "summary_grid",
    "summary_table",
    "tier_grid",
    "tier_table",
    "trial_grid",
    "trial_table",
]


@dataclass(frozen=True, slots=True)
class Grid:
    """A titled table of strings; ``right`` says which columns hold numbers."""

    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    right: frozenset[int] = frozenset()
    alert: frozenset[int] = frozenset()  # columns shown in red when not "0"


def fmt_pct(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{100 * value:.{digits}f}%"


def fmt_interval(rate: dict[str, Any]) -> str:
    """``62.3% [58.5, 66.0]``: a rate with its 95 % interval, in percent."""
    if rate["value"] is None:
        return "—"
    return f"{fmt_pct(rate['value'])} [{100 * rate['low']:.1f}, {100 * rate['high']:.1f}]"


def fmt_signed_pts(value: float | None) -> str:
    """``+3.2``: a difference of two rates, in points."""
    return "—" if value is None else f"{100 * value:+.1f}"


def signed_interval(diff: dict[str, Any] | None) -> str:
    """``+3.2 [-1.0, +7.4]``: a difference and its interval, in points."""
    if diff is None or diff["value"] is None:
        return "—"
    text = fmt_signed_pts(diff["value"])
    if diff["low"] is not None:
        text += f" [{100 * diff['low']:+.1f}, {100 * diff['high']:+.1f}]"
    return text


def fmt_published(group: dict[str, Any]) -> str:
    """The published reading's accuracy; "—" when it was off (or the summary predates it)."""
    return fmt_pct((group.get("published_accuracy") or {}).get("value"))


def fmt_mean_std(across: dict[str, Any]) -> str:
    if across["mean"] is None:
        return "—"
    k = across["trials"]
    if across["std"] is None:
        return f"{fmt_pct(across['mean'])} (k={k})"
    return f"{fmt_pct(across['mean'])} ± {100 * across['std']:.1f} (k={k})"


def fmt_tokens(n: int) -> str:
    if n >= 1_000_000:
        return f"{n / 1_000_000:.2f}M"
    if n >= 10_000:
        return f"{n / 1000:.1f}k"
    return str(n)


def fmt_cost(usd: float | None) -> str:
    """`` $1.23`` after a token count (Batch API price); nothing when the price is unknown."""
    return "" if usd is None else f" {dollars(usd)}"


def reasoning_counted(groups: Iterable[Mapping[str, Any]]) -> bool:
    """Whether any group used reasoning tokens (their column is shown only then: a chat
    model that says ``reasoning_tokens: 0`` on every answer would fill it with zeros)."""
    return any((g["tokens"].get("reasoning") or 0) > 0 for g in groups)


def summary_grid(summary: Mapping[str, Any]) -> Grid:
    # Synthetic answers cost nothing: a price beside their token counts would mislead.
    synthetic = bool(synthetic_label(summary.get("provenance")))
    reasoning = reasoning_counted(summary["models"])
    rows = tuple(
        (
            m["model"],
            fmt_interval(m["accuracy"]),
            fmt_pct(m["strict_accuracy"]["value"]),
            fmt_published(m),
            fmt_mean_std(m["across_trials"]),
            f"{m['correct']}/{m['scored']}",
            str(m["model_failures"]),
            str(m["infra_failures"]),
            fmt_tokens(m["tokens"]["total"]) + ("" if synthetic else fmt_cost(m.get("cost_usd"))),
            *((fmt_reasoning(m["tokens"]),) if reasoning else ()),
        )
        for m in summary["models"]
    )

    return Grid(
        synthetic_label(summary.get("provenance"))
        + "Accuracy per model (95% interval clustered by item over trials; "
        "infrastructure failures not scored"
        + ("; reasoning tokens are part of the tokens)" if reasoning else ")"),
        (
            "Model",
            "Accuracy [95% CI]",
            "Strict",
            "Published",
            "Trials mean ± std",
            "Correct/scored",
            "Model fail",
            "Infra fail",
            "Tokens",
            *(("Reasoning",) if reasoning else ()),
        ),
        rows,
        right=frozenset(range(1, 10 if reasoning else 9)),
        alert=frozenset({7}),
    )


def fmt_reasoning(tokens: Mapping[str, Any]) -> str:
    """A group's reasoning tokens ("—" when its answers did not say)."""
    reasoning = tokens.get("reasoning")
    return "—" if reasoning is None else fmt_tokens(int(reasoning))


def group_heads(label: str) -> tuple[str, ...]:
    """The columns of a row per model and group (a trial, a tier, a value of any column)."""
    return (
        "Model",
        label,
        "Accuracy [95% CI]",
        "Strict",
        "Published",
        "Correct/scored",
        "Infra fail",
    )


def group_cells(g: dict[str, Any], group: str, accuracy: str) -> tuple[str, ...]:
    """The cells under :func:`group_heads` of a group's summary ``g``."""
    return (
        g["model"],
        group,
        accuracy,
        fmt_pct(g["strict_accuracy"]["value"]),
        fmt_published(g),
        f"{g['correct']}/{g['scored']}",
        str(g["infra_failures"]),
    )


def _breakdown_grid(
    summary: Mapping[str, Any], key: str, label: str, cell: Callable[[dict[str, Any]], str]
) -> Grid:
    """One row per model and ``label`` (a trial or a tier) from ``summary[key]``."""
    rows = tuple(group_cells(t, cell(t), fmt_interval(t["accuracy"])) for t in summary[key])
    return Grid(
        f"Per {label.lower()}",
        group_heads(label),
        rows,
        # trial numbers align right with the figures; tier names stay left
        right=frozenset(range(1 if key == "trials" else 2, 7)),
        alert=frozenset({6}),
    )


def trial_grid(summary: Mapping[str, Any]) -> Grid:
    return _breakdown_grid(summary, "trials", "Trial", lambda t: str(t["trial"]))


def tier_grid(summary: Mapping[str, Any]) -> Grid:
    return _breakdown_grid(
        summary, "tiers", "Tier", lambda t: t["tier"] if t["tier"] is not None else "(none)"
    )


def status_grid(summary: Mapping[str, Any], *, categories: bool = False) -> Grid:
    """Counts per verdict status (rows) and model (columns); unused statuses left out.

    ``categories``: then the study's categories of the published reading, one row
    each (``published: error_syntax``), when the reading is there.
    """
    overall = summary["overall"] or {"statuses": {}}
    used = [s for s, count in overall["statuses"].items() if count]
    infra = set(summary.get("infra_statuses", ()))
    models = summary["models"]
    rows = tuple(
        (f"{s} (infra)" if s in infra else s, *(str(m["statuses"][s]) for m in models))
        for s in used
    )
    rated = bool((summary["overall"] or {}).get("published_accuracy", {}).get("n"))
    if categories and rated and all("published_categories" in m for m in models):
        names = [k for k in models[0]["published_categories"]]
        rows += tuple(
            (f"published: {k}", *(str(m["published_categories"][k]) for m in models))
            for k in names
            if k != "uncategorised" or any(m["published_categories"][k] for m in models)
        )
    return Grid(
        "Verdicts per status"
        + (", and per the study's category of the published reading" if categories else ""),
        ("Status", *(m["model"] for m in models)),
        rows,
        right=frozenset(range(1, len(models) + 1)),
    )


def shown_ks(n: int) -> list[int]:
    """The k of pass@k a table shows for n trials: all up to 5, then 10, 20, 50, … and n."""
    ks = [k for k in (1, 2, 3, 4, 5) if k <= n]
    step = 10
    while step < n:
        ks.append(step)
        step = step * 5 // 2 if str(step).startswith("2") else step * 2
    if n > 5 and n not in ks:
        ks.append(n)
    return ks


def most_trials(summary: Mapping[str, Any]) -> int:
    """The most answers any item of any model got (the largest k of pass@k)."""
    return max((len(m.get("pass_at_k") or []) for m in summary["models"]), default=0)


def fmt_pass(group: dict[str, Any], k: int) -> str:
    entries = group.get("pass_at_k") or []
    return fmt_interval(entries[k - 1]) if 1 <= k <= len(entries) else "—"


def fmt_majority(group: dict[str, Any]) -> str:
    majority = group.get("majority")
    if not majority:
        return "—"
    return f"{fmt_interval(majority)} (n={majority['n']})"


def sampling_grid(summary: Mapping[str, Any]) -> Grid:
    """pass@k for each shown k and maj@n over Z3 equivalence classes, per model."""
    ks = shown_ks(most_trials(summary))
    rows = tuple(
        (
            m["model"],
            *(fmt_pass(m, k) for k in ks),
            fmt_majority(m),
            str((m.get("majority") or {}).get("ties", "—")),
            str((m.get("majority") or {}).get("no_votes", "—")),
        )
        for m in summary["models"]
    )
    return Grid(
        "pass@k (Chen et al. unbiased estimator) and maj@n (majority vote over Z3 "
        "equivalence classes of the answers), per model; 95% item-bootstrap intervals",
        ("Model", *(f"pass@{k} [95% CI]" for k in ks), "maj@n [95% CI]", "Ties", "No votes"),
        rows,
        right=frozenset(range(1, len(ks) + 4)),
    )


def _fmt_pass_at_n(group: dict[str, Any]) -> str:
    n = len(group.get("pass_at_k") or [])
    return f"{fmt_pass(group, n)} (k={n})" if n else "—"


def sampling_tier_grid(summary: Mapping[str, Any]) -> Grid:
    """pass@1, pass@n and maj@n per model × tier."""
    rows = tuple(
        (
            t["model"],
            t["tier"] if t["tier"] is not None else "(none)",
            fmt_pass(t, 1),
            _fmt_pass_at_n(t),
            fmt_majority(t),
        )
        for t in summary["tiers"]
    )
    return Grid(
        "pass@k and maj@n per tier",
        ("Model", "Tier", "pass@1 [95% CI]", "pass@n [95% CI]", "maj@n [95% CI]"),
        rows,
        right=frozenset(range(2, 5)),
    )


def grid_rich(grid: Grid, *, title: str | None = None) -> Table:
    table = Table(title=title or grid.title, title_justify="left", header_style="bold")
    for i, name in enumerate(grid.columns):
        # fold, never "…": two models must not both read "gpt-4o…" on a narrow terminal,
        # nor an accuracy "66.…"
        table.add_column(
            name, justify="right" if i in grid.right else "left", style=None, overflow="fold"
        )
    for row in grid.rows:
        cells: list[Text | str] = []
        for i, cell in enumerate(row):
            if i == 0:
                cells.append(Text(cell, style="bold"))
            elif i in grid.alert:
                cells.append(Text(cell, style="bold red" if cell != "0" else "dim"))
            else:
                cells.append(cell)
        table.add_row(*cells)
    if not grid.rows:
        table.add_row("(no verdicts)", *[""] * (len(grid.columns) - 1))
    return table


def _md_cell(cell: str) -> str:
    return cell.replace("|", "\\|").replace("\n", " ")


def grid_markdown(grid: Grid, level: int = 2) -> str:
    head = "| " + " | ".join(_md_cell(c) for c in grid.columns) + " |"
    rule = "|" + "|".join("---:" if i in grid.right else "---" for i in range(len(grid.columns)))
    lines = [f"{'#' * level} {grid.title}", "", head, rule + "|"]
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in grid.rows]
    return "\n".join(lines) + "\n"


def grid_html(grid: Grid, css_class: str = "grid") -> str:
    esc = html.escape
    out = [f'<table class="{css_class}">', f"<caption>{esc(grid.title)}</caption>", "<thead><tr>"]
    out += [f"<th>{esc(c)}</th>" for c in grid.columns]
    out.append("</tr></thead><tbody>")
    for row in grid.rows:
        cells = []
        for i, cell in enumerate(row):
            cls = "num" if i in grid.right else ""
            if i in grid.alert and cell != "0":
                cls += " alert"
            attr = f' class="{cls.strip()}"' if cls.strip() else ""
            cells.append(f"<td{attr}>{esc(cell)}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def summary_table(summary: Summary, *, title: str | None = "aeval summary") -> Table:
    """The per-model table ``run`` and ``rescore`` print at the end: accuracy with its
    95 % interval (clustered by item over trials), strict accuracy, published accuracy,
    mean ± std across trials, correct / scored, model failures, infrastructure failures
    and tokens.
    """
    if title is not None:
        title = synthetic_label(summary.get("provenance")) + title
    return grid_rich(summary_grid(summary), title=title)


def trial_table(summary: Summary) -> Table:
    return grid_rich(trial_grid(summary))


def tier_table(summary: Summary) -> Table:
    return grid_rich(tier_grid(summary))


def status_table(summary: Summary) -> Table:
    return grid_rich(status_grid(summary))
