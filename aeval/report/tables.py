"""Rich tables rendered from a summary dict (see :func:`aeval.report.summarize`).

Tables read only the summary, never the verdicts, so the terminal, markdown,
csv and html reports cannot disagree with ``summary.json``.
"""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text

__all__ = [
    "fmt_interval",
    "fmt_pct",
    "status_table",
    "summary_table",
    "tier_table",
    "trial_table",
]


def fmt_pct(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{100 * value:.{digits}f}%"


def fmt_interval(rate: dict[str, Any]) -> str:
    """``62.3% [58.5, 66.0]``: a rate with its 95 % Wilson interval, in percent."""
    if rate["value"] is None:
        return "—"
    return f"{fmt_pct(rate['value'])} [{100 * rate['low']:.1f}, {100 * rate['high']:.1f}]"


def fmt_mean_std(across: dict[str, Any]) -> str:
    if across["mean"] is None:
        return "—"
    if across["std"] is None:
        return fmt_pct(across["mean"])
    return f"{fmt_pct(across['mean'])} ± {100 * across['std']:.1f}"


def fmt_tokens(n: int) -> str:
    if n >= 1_000_000:
        return f"{n / 1_000_000:.2f}M"
    if n >= 10_000:
        return f"{n / 1000:.1f}k"
    return str(n)


def summary_table(summary: dict[str, Any], *, title: str | None = "aeval summary") -> Table:
    """One row per model: accuracy with its 95 % interval, strict accuracy, mean ± std
    across trials, correct / scored, model failures, infrastructure failures, tokens.
    """
    table = Table(title=title, title_justify="left", header_style="bold")
    table.add_column("Model", style="bold")
    table.add_column("Accuracy [95% CI]", justify="right")
    table.add_column("Strict", justify="right")
    table.add_column("Trials mean ± std", justify="right")
    table.add_column("Correct/scored", justify="right")
    table.add_column("Model fail", justify="right")
    table.add_column("Infra fail", justify="right")
    table.add_column("Tokens", justify="right")
    for m in summary["models"]:
        infra = m["infra_failures"]
        table.add_row(
            m["model"],
            fmt_interval(m["accuracy"]),
            fmt_pct(m["strict_accuracy"]["value"]),
            fmt_mean_std(m["across_trials"]) + f" (k={m['across_trials']['trials']})",
            f"{m['correct']}/{m['scored']}",
            str(m["model_failures"]),
            Text(str(infra), style="bold red" if infra else "dim"),
            fmt_tokens(m["tokens"]["total"]),
        )
    if not summary["models"]:
        table.add_row("(no verdicts)", *[""] * 7)
    return table


def trial_table(summary: dict[str, Any]) -> Table:
    table = Table(title="Per trial", title_justify="left", header_style="bold")
    for name in ("Model", "Trial", "Accuracy [95% CI]", "Strict", "Correct/scored", "Infra"):
        table.add_column(name, justify="left" if name == "Model" else "right")
    for t in summary["trials"]:
        table.add_row(
            t["model"],
            str(t["trial"]),
            fmt_interval(t["accuracy"]),
            fmt_pct(t["strict_accuracy"]["value"]),
            f"{t['correct']}/{t['scored']}",
            str(t["infra_failures"]),
        )
    return table


def tier_table(summary: dict[str, Any]) -> Table:
    table = Table(title="Per tier", title_justify="left", header_style="bold")
    for name in ("Model", "Tier", "Accuracy [95% CI]", "Strict", "Correct/scored", "Infra"):
        table.add_column(name, justify="left" if name in ("Model", "Tier") else "right")
    for t in summary["tiers"]:
        table.add_row(
            t["model"],
            t["tier"] if t["tier"] is not None else "(none)",
            fmt_interval(t["accuracy"]),
            fmt_pct(t["strict_accuracy"]["value"]),
            f"{t['correct']}/{t['scored']}",
            str(t["infra_failures"]),
        )
    return table


def status_table(summary: dict[str, Any]) -> Table:
    """Counts per verdict status (rows) and model (columns); unused statuses left out.

    Infrastructure statuses are marked so they are not read as the model's doing.
    """
    overall = summary["overall"] or {"statuses": {}}
    used = [s for s, count in overall["statuses"].items() if count]
    infra = set(summary.get("infra_statuses", ()))
    table = Table(title="Verdicts per status", title_justify="left", header_style="bold")
    table.add_column("Status")
    for m in summary["models"]:
        table.add_column(m["model"], justify="right")
    for s in used:
        label = Text(f"{s} (infra)", style="red") if s in infra else Text(s)
        table.add_row(label, *[str(m["statuses"][s]) for m in summary["models"]])
    return table
