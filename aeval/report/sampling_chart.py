"""The html report's pass@k chart: pass@k against k per model, maj@n beside it.

Hand-written SVG like the other charts (see :mod:`aeval.report.html`): every
mark carries its exact number in ``data-*`` attributes and a ``<title>``.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["pass_at_k_chart"]

esc = html.escape


def _num(value: float | None) -> str:
    return "" if value is None else repr(value)


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def pass_at_k_chart(summary: Mapping[str, Any], colors: Sequence[str] = ("#0072B2",)) -> str:
    """One line per model through pass@1 … pass@n with 95 % whiskers; maj@n as a
    hollow diamond at k = n."""
    models = [m for m in summary["models"] if m.get("pass_at_k")]
    top = max((len(m["pass_at_k"]) for m in models), default=0)
    if top < 1:
        return ""
    left, plot_w, plot_h, top_pad = 60, 560, 240, 15
    width, bottom = left + plot_w + 40, top_pad + plot_h
    step = plot_w / max(1, top - 1) if top > 1 else 0.0

    def x(k: int) -> float:
        return left + (k - 1) * step if top > 1 else left + plot_w / 2

    def y(value: float) -> float:
        return bottom - plot_h * value

    parts = [
        f'<svg class="chart" id="chart-passk" width="{width}" height="{bottom + 55}" '
        'role="img" aria-label="pass@k against k per model">'
    ]
    for pct in range(0, 101, 20):
        yy = y(pct / 100)
        parts.append(
            f'<line class="grid" x1="{left}" y1="{yy:.1f}" x2="{left + plot_w}" y2="{yy:.1f}"/>'
            f'<text x="{left - 6}" y="{yy + 4:.1f}" text-anchor="end">{pct}%</text>'
        )
    for k in range(1, top + 1):
        if top <= 12 or k in (1, top) or k % max(1, top // 10) == 0:
            parts.append(f'<text x="{x(k):.1f}" y="{bottom + 18}" text-anchor="middle">{k}</text>')
    parts.append(
        f'<text x="{left + plot_w / 2:.1f}" y="{bottom + 42}" text-anchor="middle">'
        "k (answers drawn per item)</text>"
        f'<text x="14" y="{top_pad + plot_h / 2:.1f}" text-anchor="middle" '
        f'transform="rotate(-90 14 {top_pad + plot_h / 2:.1f})">pass@k</text>'
    )
    for j, m in enumerate(models):
        color = colors[j % len(colors)]
        points = m["pass_at_k"]
        path = " ".join(f"{x(p['k']):.1f},{y(p['value']):.1f}" for p in points)
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{path}"/>')
        for p in points:
            tip = (
                f"{m['model']}: pass@{p['k']} {_pct(p['value'])} "
                f"[{_pct(p['low'])}, {_pct(p['high'])}] over {p['items']} items"
            )
            cx = x(p["k"])
            whisker = (
                f'<line class="ci" x1="{cx:.1f}" y1="{y(p["low"]):.1f}" x2="{cx:.1f}" '
                f'y2="{y(p["high"]):.1f}"/>'
                if p["low"] is not None
                else ""
            )
            parts.append(
                f'<g class="passk" data-model="{esc(m["model"])}" data-k="{p["k"]}" '
                f'data-value="{_num(p["value"])}" data-low="{_num(p["low"])}" '
                f'data-high="{_num(p["high"])}"><title>{esc(tip)}</title>{whisker}'
                f'<circle cx="{cx:.1f}" cy="{y(p["value"]):.1f}" r="3.5" fill="{color}"/></g>'
            )
        majority = m.get("majority")
        if majority and majority["value"] is not None:
            cx, cy = x(len(points)) + 10, y(majority["value"])
            tip = (
                f"{m['model']}: maj@{majority['n']} {_pct(majority['value'])} "
                f"[{_pct(majority['low'])}, {_pct(majority['high'])}], "
                f"{majority['ties']} tie(s), {majority['no_votes']} item(s) without a vote"
            )
            parts.append(
                f'<g class="majority" data-model="{esc(m["model"])}" '
                f'data-value="{_num(majority["value"])}" data-low="{_num(majority["low"])}" '
                f'data-high="{_num(majority["high"])}"><title>{esc(tip)}</title>'
                f'<path d="M{cx:.1f},{cy - 6:.1f} l6,6 l-6,6 l-6,-6 z" fill="#fff" '
                f'stroke="{color}" stroke-width="2"/></g>'
            )
    parts.append(
        f'<line class="axis" x1="{left}" y1="{bottom}" x2="{left + plot_w}" y2="{bottom}"/>'
        f'<line class="axis" x1="{left}" y1="{top_pad}" x2="{left}" y2="{bottom}"/></svg>'
    )
    legend = "".join(
        f'<span style="--c:{colors[j % len(colors)]}">{esc(m["model"])}</span>'
        for j, m in enumerate(models)
    )
    return (
        "".join(parts)
        + f'<div class="legend">{legend}</div>'
        + '<p class="note">Dots: pass@k with 95% item-bootstrap whiskers; hollow diamond: '
        "maj@n, the majority vote over Z3 equivalence classes of the n answers.</p>"
    )
