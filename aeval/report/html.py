"""A self-contained html report: inline CSS and SVG charts, no script, no fetch.

Written by hand rather than with a plotting library because the page must open
offline, from a mail attachment or an archived run directory, with nothing to
load: a few small charts (accuracy with its interval, verdict mix, accuracy by
tier, accuracy against extrapolation distance and answer size) are a few dozen
SVG rectangles and lines, which no dependency does more simply.
Every mark carries its exact number in ``data-*`` attributes and a ``<title>``
tooltip, taken from the summary dict, so the page can be checked against
``summary.json``.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from aeval.report.compare import compare_sampling_grid
from aeval.report.contents import report_grids
from aeval.report.order import tier_key
from aeval.report.provenance import provenance_html
from aeval.report.sampling_chart import pass_at_k_chart
from aeval.report.tables import (
    Grid,
    fmt_interval,
    fmt_pct,
    grid_html,
    most_trials,
    summary_grid,
)
from aeval.report.text import SAMPLING_NOTE

__all__ = [
    "STATUS_COLORS",
    "group_line_chart",
    "html_compare",
    "html_report",
    "html_table_page",
]

# Okabe–Ito based, readable by colour-blind people; infrastructure statuses in greys.
STATUS_COLORS: dict[str, str] = {
    "equivalent": "#009E73",
    "not_equivalent": "#D55E00",
    "unknown": "#CC79A7",
    "timeout": "#E69F00",
    "no_answer": "#F0E442",
    "parse_error": "#56B4E9",
    "unknown_symbol": "#0072B2",
    "forbidden_command": "#882255",
    "too_large": "#AA4499",
    "resource_limit": "#332288",
    "bad_ground_truth": "#BBBBBB",
    "api_error": "#888888",
    "missing": "#DDDDDD",
}
SERIES_COLORS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#332288")

CSS = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
  color: #222; max-width: 1100px; margin: 2em auto; padding: 0 1em; }
h1 { font-size: 1.6em; margin-bottom: .2em; } h2 { margin-top: 1.8em; font-size: 1.25em; }
.meta { color: #666; margin-top: 0; }
table.grid { border-collapse: collapse; margin: .8em 0 1.4em; font-variant-numeric: tabular-nums; }
table.grid caption { text-align: left; font-weight: 600; padding-bottom: .3em; }
table.grid th, table.grid td { padding: .25em .7em; border-bottom: 1px solid #ddd; }
table.grid th { background: #f4f4f4; text-align: left; }
table.grid td.num { text-align: right; } table.grid td.alert { color: #b00; font-weight: 600; }
svg { display: block; margin: .5em 0 1em; font-family: inherit; }
svg text { font-size: 13px; fill: #222; } svg .axis { stroke: #999; stroke-width: 1; }
svg .grid { stroke: #e5e5e5; stroke-width: 1; } svg .ci { stroke: #222; stroke-width: 1.6; }
.legend { display: flex; flex-wrap: wrap; gap: .3em 1.2em; font-size: 13px; margin: .2em 0 1em; }
.legend span::before { content: ""; display: inline-block; width: .9em; height: .9em;
  margin-right: .35em; vertical-align: -.1em; background: var(--c); border: 1px solid #0003; }
.note { color: #555; font-size: 13px; }
"""

esc = html.escape


def _num(value: float | int | None) -> str:
    """An exact number for a data attribute (``repr``, as ``json.dumps`` writes it)."""
    return "" if value is None else repr(value)


def _x_axis(x0: float, width: float, y_top: float, y_bottom: float) -> list[str]:
    out = []
    for pct in range(0, 101, 20):
        x = x0 + width * pct / 100
        out.append(f'<line class="grid" x1="{x:.1f}" y1="{y_top}" x2="{x:.1f}" y2="{y_bottom}"/>')
        out.append(f'<text x="{x:.1f}" y="{y_bottom + 16}" text-anchor="middle">{pct}%</text>')
    return out


def accuracy_chart(series: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    """Horizontal bars of accuracy per model with the 95 % interval as a whisker and
    strict accuracy as a tick; one bar per series (run) when comparing runs.
    """
    by_model = [{m["model"]: m for m in summary["models"]} for _, summary in series]
    models = list(dict.fromkeys(model for runs in by_model for model in runs))
    bar_h, gap, label_w, plot_w = 18, 14, 190, 600
    group_h = bar_h * len(series) + gap
    height = 20 + group_h * len(models) + 30
    parts = [
        f'<svg class="chart" id="chart-accuracy" width="{label_w + plot_w + 170}" '
        f'height="{height}" role="img" aria-label="Accuracy per model with 95% interval">'
    ]
    parts += _x_axis(label_w, plot_w, 10, height - 30)
    for i, model in enumerate(models):
        y0 = 20 + i * group_h
        parts.append(
            f'<text x="{label_w - 8}" y="{y0 + bar_h * len(series) / 2 + 5:.1f}" '
            f'text-anchor="end">{esc(model)}</text>'
        )
        for j, (label, _) in enumerate(series):
            m = by_model[j].get(model)
            if m is None or m["accuracy"]["value"] is None:
                continue
            acc, strict = m["accuracy"], m["strict_accuracy"]
            y = y0 + j * bar_h
            w = plot_w * acc["value"]
            lo, hi = label_w + plot_w * acc["low"], label_w + plot_w * acc["high"]
            sx = label_w + plot_w * strict["value"]
            # One run: the model's own colour (as in the tier chart); two: the run's.
            k = j if len(series) > 1 else i
            color = SERIES_COLORS[k % len(SERIES_COLORS)]
            tip = (
                f"{model}{f' ({label})' if len(series) > 1 else ''}: accuracy "
                f"{fmt_pct(acc['value'])} [{fmt_pct(acc['low'])}, {fmt_pct(acc['high'])}], "
                f"strict {fmt_pct(strict['value'])}, {m['correct']}/{m['scored']} scored"
            )
            parts.append(
                f'<g class="bar" data-model="{esc(model)}" data-series="{esc(label)}" '
                f'data-accuracy="{_num(acc["value"])}" data-low="{_num(acc["low"])}" '
                f'data-high="{_num(acc["high"])}" data-strict="{_num(strict["value"])}">'
                f"<title>{esc(tip)}</title>"
                f'<rect x="{label_w}" y="{y + 2}" width="{w:.1f}" height="{bar_h - 4}" '
                f'fill="{color}" fill-opacity="0.8"/>'
                f'<line class="ci" x1="{lo:.1f}" y1="{y + bar_h / 2}" x2="{hi:.1f}" '
                f'y2="{y + bar_h / 2}"/>'
                f'<line class="ci" x1="{lo:.1f}" y1="{y + 4}" x2="{lo:.1f}" y2="{y + bar_h - 4}"/>'
                f'<line class="ci" x1="{hi:.1f}" y1="{y + 4}" x2="{hi:.1f}" y2="{y + bar_h - 4}"/>'
                f'<line x1="{sx:.1f}" y1="{y}" x2="{sx:.1f}" y2="{y + bar_h}" stroke="#000" '
                f'stroke-width="2.5" stroke-dasharray="3 2"/>'
                f'<text x="{max(hi, label_w + w) + 6:.1f}" y="{y + bar_h / 2 + 5}">'
                f"{fmt_interval(acc)}</text></g>"
            )
    parts.append(
        f'<line class="axis" x1="{label_w}" y1="10" x2="{label_w}" y2="{height - 30}"/></svg>'
    )
    return "".join(parts)


def verdict_mix_chart(summary: Mapping[str, Any]) -> str:
    """One stacked bar per model: the share of each verdict status among all its verdicts."""
    bar_h, label_w, plot_w = 24, 190, 600
    models = summary["models"]
    height = 20 + (bar_h + 10) * len(models) + 30
    parts = [
        f'<svg class="chart" id="chart-mix" width="{label_w + plot_w + 40}" height="{height}" '
        'role="img" aria-label="Verdict mix per model">'
    ]
    parts += _x_axis(label_w, plot_w, 10, height - 30)
    for i, m in enumerate(models):
        y = 20 + i * (bar_h + 10)
        parts.append(
            f'<text x="{label_w - 8}" y="{y + bar_h / 2 + 5}" text-anchor="end">'
            f"{esc(m['model'])}</text>"
        )
        x = float(label_w)
        for status, count in m["statuses"].items():
            if not count:
                continue
            w = plot_w * count / m["n"]
            tip = f"{m['model']}: {status} {count} of {m['n']} ({fmt_pct(count / m['n'])})"
            parts.append(
                f'<rect class="seg" data-model="{esc(m["model"])}" data-status="{status}" '
                f'data-count="{count}" x="{x:.2f}" y="{y}" width="{w:.2f}" height="{bar_h}" '
                f'fill="{STATUS_COLORS.get(status, "#777")}"><title>{esc(tip)}</title></rect>'
            )
            x += w
    parts.append("</svg>")
    used = [s for s in STATUS_COLORS if any(m["statuses"].get(s) for m in models)]
    infra = set(summary.get("infra_statuses", ()))
    legend = "".join(
        f'<span style="--c:{STATUS_COLORS[s]}">{esc(s)}{" (infra)" if s in infra else ""}</span>'
        for s in used
    )
    return "".join(parts) + f'<div class="legend">{legend}</div>'


def tier_chart(summary: Mapping[str, Any]) -> str:
    """Grouped vertical bars: accuracy per tier, one bar per model, with 95 % whiskers."""
    tiers = sorted({t["tier"] for t in summary["tiers"]}, key=tier_key)
    models = [m["model"] for m in summary["models"]]
    if not tiers or not models:
        return '<p class="note">No tiers in this run.</p>'
    bar_w, gap, plot_h, left = 26, 30, 260, 50
    group_w = bar_w * len(models) + gap
    width = left + group_w * len(tiers) + 20
    bottom = 15 + plot_h
    parts = [
        f'<svg class="chart" id="chart-tiers" width="{width}" height="{bottom + 40}" '
        'role="img" aria-label="Accuracy by tier">'
    ]
    for pct in range(0, 101, 20):
        y = bottom - plot_h * pct / 100
        parts.append(f'<line class="grid" x1="{left}" y1="{y:.1f}" x2="{width}" y2="{y:.1f}"/>')
        parts.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{pct}%</text>')
    by_key = {(t["model"], t["tier"]): t for t in summary["tiers"]}
    for i, tier in enumerate(tiers):
        x0 = left + gap / 2 + i * group_w
        parts.append(
            f'<text x="{x0 + bar_w * len(models) / 2:.1f}" y="{bottom + 20}" '
            f'text-anchor="middle">{esc(tier if tier is not None else "(none)")}</text>'
        )
        for j, model in enumerate(models):
            t = by_key.get((model, tier))
            if t is None or t["accuracy"]["value"] is None:
                continue
            acc = t["accuracy"]
            x = x0 + j * bar_w
            h = plot_h * acc["value"]
            ylo, yhi = bottom - plot_h * acc["low"], bottom - plot_h * acc["high"]
            cx = x + bar_w / 2
            tip = (
                f"{model}, tier {tier}: {fmt_pct(acc['value'])} "
                f"[{fmt_pct(acc['low'])}, {fmt_pct(acc['high'])}], {t['correct']}/{t['scored']}"
            )
            parts.append(
                f'<g class="tierbar" data-model="{esc(model)}" data-tier="{esc(str(tier))}" '
                f'data-accuracy="{_num(acc["value"])}" data-low="{_num(acc["low"])}" '
                f'data-high="{_num(acc["high"])}"><title>{esc(tip)}</title>'
                f'<rect x="{x + 2:.1f}" y="{bottom - h:.1f}" width="{bar_w - 4}" '
                f'height="{h:.1f}" fill="{SERIES_COLORS[j % len(SERIES_COLORS)]}" '
                f'fill-opacity="0.85"/>'
                f'<line class="ci" x1="{cx:.1f}" y1="{ylo:.1f}" x2="{cx:.1f}" y2="{yhi:.1f}"/>'
                f'<line class="ci" x1="{cx - 5:.1f}" y1="{yhi:.1f}" x2="{cx + 5:.1f}" '
                f'y2="{yhi:.1f}"/><line class="ci" x1="{cx - 5:.1f}" y1="{ylo:.1f}" '
                f'x2="{cx + 5:.1f}" y2="{ylo:.1f}"/></g>'
            )
    parts.append(f'<line class="axis" x1="{left}" y1="{bottom}" x2="{width}" y2="{bottom}"/></svg>')
    legend = "".join(
        f'<span style="--c:{SERIES_COLORS[j % len(SERIES_COLORS)]}">{esc(m)}</span>'
        for j, m in enumerate(models)
    )
    return "".join(parts) + f'<div class="legend">{legend}</div>'


def _page(title: str, body: list[str]) -> str:
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"/>'
        '<meta name="viewport" content="width=device-width, initial-scale=1"/>'
        f"<title>{esc(title)}</title><style>{CSS}</style></head><body>"
        f'<h1>{esc(title)}</h1><p class="meta">Generated by aeval on {stamp}.</p>'
        + "".join(body)
        + "</body></html>\n"
    )


CHART_KEY = (
    '<p class="note">Bar: accuracy (lenient) · dashed tick: strict accuracy · '
    "whisker: 95% interval, clustered by item over trials.</p>"
)

NOTE = (
    '<p class="note">Accuracy counts only <code>equivalent</code> verdicts, over scored '
    "answers: infrastructure failures ({infra}) are reported apart and not scored. "
    "Bars are lenient accuracy (repaired answers count); the dashed tick is strict accuracy "
    "(no repair needed); whiskers are 95% intervals: Wilson for one trial, and over "
    "several trials Wilson on the item-clustered effective sample size, so repeated "
    "trials of the same items are not counted as independent answers. "
    "The Published column is the WARP study's own evaluator, counted over every verdict "
    "as the study did.</p>"
)


def html_report(summary: Mapping[str, Any], *, title: str) -> str:
    """The single-run page: the three charts, then every table of the report."""
    overall = summary["overall"] or {"n": 0}
    infra = ", ".join(f"<code>{esc(s)}</code>" for s in summary.get("infra_statuses", ()))
    body = [
        provenance_html(summary.get("provenance")),
        f'<p class="meta">{overall["n"]} verdicts, {len(summary["models"])} model(s).</p>',
        NOTE.format(infra=infra),
        "<h2>Accuracy per model</h2>",
        accuracy_chart([("run", summary)]),
        CHART_KEY,
        "<h2>Verdict mix per model</h2>",
        verdict_mix_chart(summary),
        "<h2>Accuracy by tier</h2>",
        tier_chart(summary),
        *_items_section(summary),
        *_sampling_section(summary),
        "<h2>Tables</h2>",
        *(grid_html(g) for g in report_grids(summary)),
    ]
    return _page(title, body)


def _sampling_section(summary: Mapping[str, Any]) -> list[str]:
    """pass@k against k per model, when some model answered an item more than once."""
    if most_trials(summary) < 2:
        return []
    return [
        "<h2>pass@k and maj@n per model</h2>",
        pass_at_k_chart(summary, SERIES_COLORS),
        f'<p class="note">{esc(SAMPLING_NOTE)}</p>',
    ]


def html_compare(comparison: dict[str, Any], grid: Grid, *, title: str) -> str:
    """Two runs side by side: paired accuracy bars and the per-model differences."""
    a, b = comparison["a"], comparison["b"]
    series = [(a, comparison["summary_a"]), (b, comparison["summary_b"])]
    legend = "".join(
        f'<span style="--c:{SERIES_COLORS[j]}">{esc(label)}</span>'
        for j, (label, _) in enumerate(series)
    )
    body = [
        *_compare_header(comparison),
        "<h2>Accuracy per model, both runs</h2>",
        accuracy_chart(series),
        f'<div class="legend">{legend}</div>',
        CHART_KEY,
        grid_html(grid),
        *(grid_html(g) for g in (compare_sampling_grid(comparison),) if g.rows),
        "<h2>Run A</h2>",
        grid_html(summary_grid(comparison["summary_a"])),
        "<h2>Run B</h2>",
        grid_html(summary_grid(comparison["summary_b"])),
    ]
    return _page(title, body)


def _compare_header(comparison: dict[str, Any]) -> list[str]:
    """The --allow-different-datasets banner, then each run's provenance."""
    provenance = comparison.get("provenance") or {}
    banner = comparison.get("banner")
    out = (
        [f'<p class="synthetic" style="color:#b00;font-weight:700">{esc(banner)}</p>']
        if banner
        else []
    )
    for side in ("a", "b"):
        if side in provenance:
            out += [f"<h2>Run {side.upper()}: provenance</h2>", provenance_html(provenance[side])]
    return out


def html_table_page(grid: Grid, *, title: str, header: str = "") -> str:
    """A page holding one table (e.g. the wrong answers of a model), under ``header``."""
    return _page(title, [header, grid_html(grid)])


def group_line_chart(groups: list[dict[str, Any]], key: str, *, chart_id: str, label: str) -> str:
    """Accuracy against an ordered grouping (extrapolation distance, answer size):
    one line per model through its groups' accuracies, each point with its 95 %
    whisker; groups evenly spaced in their order (a distance with no item leaves
    no gap)."""
    values = list(dict.fromkeys(g[key] for g in groups))
    models = list(dict.fromkeys(g["model"] for g in groups))
    if not values or not models:
        return '<p class="note">Nothing to show.</p>'
    longest = max(len("(none)" if v is None else str(v)) for v in values)
    step = max(34, 8 * longest + 14, min(80, 760 // len(values)))
    left, top, plot_h = 50, 15, 260
    width = left + step * len(values) + 30
    bottom = top + plot_h
    parts = [
        f'<svg class="chart" id="{esc(chart_id)}" width="{width}" height="{bottom + 50}" '
        f'role="img" aria-label="Accuracy against {esc(label)}">'
    ]
    for pct in range(0, 101, 20):
        y = bottom - plot_h * pct / 100
        parts.append(f'<line class="grid" x1="{left}" y1="{y:.1f}" x2="{width}" y2="{y:.1f}"/>')
        parts.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{pct}%</text>')
    xs = {v: left + step * (i + 0.5) for i, v in enumerate(values)}
    for v, x in xs.items():
        parts.append(
            f'<text x="{x:.1f}" y="{bottom + 18}" text-anchor="middle">'
            f"{esc('(none)' if v is None else str(v))}</text>"
        )
    parts.append(
        f'<text x="{left + step * len(values) / 2:.1f}" y="{bottom + 40}" '
        f'text-anchor="middle">{esc(label)}</text>'
    )
    by_key = {(g["model"], g[key]): g for g in groups}
    spread = min(10.0, step / (len(models) + 1))
    for j, model in enumerate(models):
        color = SERIES_COLORS[j % len(SERIES_COLORS)]
        dx = (j - (len(models) - 1) / 2) * spread  # models side by side: whiskers apart
        points = []
        marks = []
        for v in values:
            g = by_key.get((model, v))
            if g is None or g["accuracy"]["value"] is None:
                continue
            acc = g["accuracy"]
            x = xs[v] + dx
            y = bottom - plot_h * acc["value"]
            ylo, yhi = bottom - plot_h * acc["low"], bottom - plot_h * acc["high"]
            points.append(f"{x:.1f},{y:.1f}")
            tip = (
                f"{model}, {label} {v}: {fmt_pct(acc['value'])} "
                f"[{fmt_pct(acc['low'])}, {fmt_pct(acc['high'])}], {g['correct']}/{g['scored']}"
            )
            marks.append(
                f'<g class="point" data-model="{esc(model)}" data-group="{esc(str(v))}" '
                f'data-accuracy="{_num(acc["value"])}" data-low="{_num(acc["low"])}" '
                f'data-high="{_num(acc["high"])}" data-n="{g["scored"]}"><title>{esc(tip)}</title>'
                f'<line x1="{x:.1f}" y1="{ylo:.1f}" x2="{x:.1f}" y2="{yhi:.1f}" stroke="{color}" '
                f'stroke-width="1.5" stroke-opacity="0.45"/>'
                f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{color}"/></g>'
            )
        if len(points) > 1:
            parts.append(
                f'<polyline points="{" ".join(points)}" fill="none" stroke="{color}" '
                f'stroke-width="2" stroke-opacity="0.85"/>'
            )
        parts += marks
    parts.append(f'<line class="axis" x1="{left}" y1="{bottom}" x2="{width}" y2="{bottom}"/></svg>')
    legend = "".join(
        f'<span style="--c:{SERIES_COLORS[j % len(SERIES_COLORS)]}">{esc(m)}</span>'
        for j, m in enumerate(models)
    )
    return "".join(parts) + f'<div class="legend">{legend}</div>'


def _items_section(summary: Mapping[str, Any]) -> list[str]:
    """Accuracy against extrapolation distance and answer size, when the verdicts know them."""
    out = []
    if summary.get("distances"):
        out += [
            "<h2>Accuracy against extrapolation distance</h2>",
            group_line_chart(
                summary["distances"],
                "distance",
                chart_id="chart-distance",
                label="distance (target N − largest example N)",
            ),
            '<p class="note">Each point: a model’s accuracy over the items at that distance, '
            "with its 95% interval clustered by item over trials (few items: wide).</p>",
        ]
    if summary.get("sizes"):
        out += [
            "<h2>Accuracy against answer size</h2>",
            group_line_chart(
                summary["sizes"],
                "size",
                chart_id="chart-size",
                label="ground truth size (characters)",
            ),
        ]
    return out
