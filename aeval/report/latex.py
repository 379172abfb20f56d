"""The report's tables as LaTeX (booktabs), for a paper: ``report --format latex``.

Each table is a ``table`` float holding a ``tabular`` with ``\\toprule``,
``\\midrule`` and ``\\bottomrule``, so a document needs only
``\\usepackage{booktabs}`` to ``\\input`` it. The cells are the report's own
strings (the same formatters as the terminal, markdown and html tables), escaped
for LaTeX: a model name is text, never markup, whatever it holds.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from typing import Any

from aeval.report.group_tables import fmt_compact
from aeval.summary.round_tables import rounds_grid, rounds_vs_trials_grid
from aeval.summary.tables import Grid, most_trials, reasoning_counted, sampling_grid

__all__ = [
    "PREAMBLE",
    "escape",
    "grid_latex",
    "paper_grids",
    "readings_grid",
]

PREAMBLE = "\\usepackage{booktabs}"

# The ten characters TeX gives a meaning, and three that the default (OT1)
# font encoding prints as other glyphs.
_SPECIAL = {
    "\\": r"\textbackslash{}",
    "{": r"\{",
    "}": r"\}",
    "$": r"\ensuremath{\$}",  # text \$ at \small is a bitmap font TeX would have to make
    "&": r"\&",
    "#": r"\#",
    "%": r"\%",
    "_": r"\_",
    "^": r"\textasciicircum{}",
    "~": r"\textasciitilde{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    "|": r"\textbar{}",
    '"': r"{\ttfamily\char34}",  # \textquotedbl is not in the default encoding
}
# What the report's own strings use beyond ASCII, in plain LaTeX.
_SYMBOLS = {
    "—": "---",
    "–": "--",
    "−": r"\ensuremath{-}",
    "Δ": r"\ensuremath{\Delta}",
    "×": r"\ensuremath{\times}",
    "±": r"\ensuremath{\pm}",
    "≤": r"\ensuremath{\leq}",
    "≥": r"\ensuremath{\geq}",
    "≈": r"\ensuremath{\approx}",
    "·": r"\ensuremath{\cdot}",
    "…": r"\ldots{}",
    "‘": "`",
    "’": "'",
    "“": "``",
    "”": "''",
    "\u00a0": "~",
}


def escape(text: str) -> str:
    """``text`` as LaTeX that prints it. Characters pdfLaTeX cannot set without a
    package (other scripts, emoji) are written as ``[U+XXXX]``, accented letters
    without their accent, so the document compiles whatever the input holds."""
    out = []
    for ch in text:
        if ch in _SPECIAL:
            out.append(_SPECIAL[ch])
        elif ch in _SYMBOLS:
            out.append(_SYMBOLS[ch])
        elif " " <= ch <= "~":
            out.append(ch)
        elif ch in "\t\n\r\v\f":
            out.append(" ")
        else:
            base = unicodedata.normalize("NFKD", ch).encode("ascii", "ignore").decode()
            if base and all(" " <= c <= "~" for c in base):
                out.append(escape(base))
            elif unicodedata.category(ch).startswith("C"):
                out.append(" ")  # a control or unassigned character prints nothing
            else:
                out.append(f"[U+{ord(ch):04X}]")
    return "".join(out)


def grid_latex(grid: Grid, label: str, *, group_rules: bool = False) -> str:
    """One table as a booktabs ``table`` float labelled ``tab:aeval-<label>``.

    ``group_rules``: rows sharing their first cell (a model's tiers) are one block:
    the cell printed once, a ``\\midrule`` between blocks.
    """
    align = "".join("r" if i in grid.right else "l" for i in range(len(grid.columns)))
    lines = [
        "% written by aeval report --format latex; needs \\usepackage{booktabs}",
        "\\begin{table}[tbp]",
        "\\centering",
        "\\small",
        f"\\caption{{{escape(grid.title)}}}",
        f"\\label{{tab:aeval-{label}}}",
        f"\\begin{{tabular}}{{{align}}}",
        "\\toprule",
        " & ".join(escape(c) for c in grid.columns) + " \\\\",
        "\\midrule",
    ]
    previous: str | None = None
    for row in grid.rows:
        cells = [escape(c) for c in row]
        if group_rules:
            if previous is not None and row[0] != previous:
                lines.append("\\midrule")
            elif previous is not None:
                cells[0] = ""
            previous = row[0]
        lines.append(" & ".join(cells) + " \\\\")
    if not grid.rows:
        lines.append(f"\\multicolumn{{{len(grid.columns)}}}{{l}}{{(no verdicts)}} \\\\")
    lines += ["\\bottomrule", "\\end{tabular}", "\\end{table}", ""]
    return "\n".join(lines)


_READINGS = ("Lenient", "Strict", "Published")


def _readings(group: Mapping[str, Any]) -> tuple[str, ...]:
    empty = {"value": None}
    return (
        fmt_compact(group["accuracy"]),
        fmt_compact(group["strict_accuracy"]),
        fmt_compact(group.get("published_accuracy") or empty),
        f"{group['correct']}/{group['scored']}",
    )


def readings_grid(
    groups: list[dict[str, Any]],
    key: str | None,
    label: str,
    title: str,
    *,
    reasoning: bool = False,
) -> Grid:
    """One row per model (and value of ``key``, e.g. its tiers): the three readings,
    each with its 95 % interval, and correct / scored (``reasoning``: and the mean
    reasoning tokens per answer)."""
    heads = ("Model", *((label,) if key else ()), *_READINGS, "Correct/scored")
    heads += ("Reasoning tokens/answer",) if reasoning else ()
    rows = tuple(
        (
            str(g["model"]),
            *(("(none)" if g.get(key) is None else str(g[key]),) if key else ()),
            *_readings(g),
            *((_reasoning_per_answer(g),) if reasoning else ()),
        )
        for g in groups
    )
    first = 2 if key else 1
    return Grid(title, heads, rows, right=frozenset(range(first, len(heads))))


def _reasoning_per_answer(group: Mapping[str, Any]) -> str:
    """Mean reasoning tokens over the group's answers (those not lost to infrastructure)."""
    reasoning, answered = group["tokens"].get("reasoning"), group["scored"]
    return "—" if reasoning is None or not answered else f"{reasoning / answered:,.0f}"


_WHY = (
    "accuracy in % [95\u00a0% interval, clustered by item over trials]: lenient "
    "(repaired answers count), strict (no repair), and the WARP study's published "
    "reading; infrastructure failures not scored"
)


def paper_grids(summary: Mapping[str, Any]) -> list[tuple[str, Grid, bool]]:
    """A single run's tables for a paper, as (file name, table, block rows by model):
    the readings per model, per tier, per program and per extrapolation distance
    (those the summary has), pass@k with maj@n when some item was answered
    more than once, and accuracy by repair round (with rounds against trials at
    their cost) when the run had rounds."""
    models = summary["models"]
    per_model = readings_grid(
        models, None, "", f"Per model: {_WHY}.", reasoning=reasoning_counted(models)
    )
    out = [
        ("accuracy", per_model, False),
        ("tiers", readings_grid(summary["tiers"], "tier", "Tier", f"Per tier: {_WHY}."), True),
    ]
    levels = (("programs", "program", "Program"), ("distances", "distance", "Distance"))
    for level, key, label in levels:
        if summary.get(level):
            title = f"Per {label.lower()}: {_WHY}."
            out.append((level, readings_grid(summary[level], key, label, title), True))
    if most_trials(summary) > 1:
        out.append(("pass-at-k", sampling_grid(summary), False))
    if any(m.get("rounds") for m in models):  # a run with repair rounds
        out.append(("rounds", rounds_grid(summary, brief=True), False))
        versus = rounds_vs_trials_grid(summary)
        if versus.rows:
            out.append(("rounds-vs-trials", versus, True))
    return out
