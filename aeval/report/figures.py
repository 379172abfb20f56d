"""The report's figures, drawn once with matplotlib and written as PDF and SVG
(for a paper) or PNG (for the html report and a notebook): the one way aeval
draws a chart.

Each ``*_figure`` function reads only the summary dict (like every table, see
:mod:`aeval.summary.tables`), so a figure cannot disagree with ``summary.json``;
it returns a :class:`matplotlib.figure.Figure` built without pyplot (no global
state, safe in threads). :func:`render` writes it with fixed fonts and
metadata, so the same summary gives the same bytes.

matplotlib is the ``aeval[plots]`` extra, imported only when a figure is drawn:
``import aeval.report.figures`` costs nothing until then, and without the
extra :func:`require` raises :class:`PlotsMissing`, whose message says how to
get the figures.
"""

from __future__ import annotations

import importlib.util
import io
import itertools
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal

from aeval.summary.order import tier_key

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "FIGURE_FORMATS",
    "PLOTS_HINT",
    "SERIES_COLORS",
    "STATUS_COLORS",
    "PaperFigure",
    "PlotsMissing",
    "accuracy_figure",
    "available",
    "compare_figures",
    "group_figure",
    "pass_at_k_figure",
    "png_size",
    "render",
    "require",
    "rounds_figure",
    "rounds_figures",
    "rounds_vs_trials_figure",
    "run_figures",
    "tier_figure",
    "verdict_mix_figure",
]

PaperFigure = tuple[str, Callable[[], "Figure"]]  # a file name and what draws it
FigureFormat = Literal["pdf", "svg", "png"]
FIGURE_FORMATS: tuple[FigureFormat, ...] = ("pdf", "svg", "png")
PLOTS_HINT = "figures need matplotlib: pip install 'aeval[plots]'"

# Okabe–Ito, readable by colour-blind people; infrastructure statuses in greys.
SERIES_COLORS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#332288")
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

_METADATA: dict[FigureFormat, dict[str, Any]] = {
    "pdf": {"Creator": "aeval", "Producer": None, "CreationDate": None},
    "svg": {"Creator": "aeval", "Date": None},
    "png": {"Software": "aeval"},
}
PNG_DPI = 110  # the html page's pixels: sharp at 100 % zoom, small files


class PlotsMissing(ImportError):
    """matplotlib (the ``aeval[plots]`` extra) is not installed."""

    def __init__(self) -> None:
        super().__init__(PLOTS_HINT)


def available() -> bool:
    """Whether matplotlib is installed (without importing it: that is what costs)."""
    try:
        return importlib.util.find_spec("matplotlib") is not None
    except (ImportError, ValueError):  # blocked: sys.modules["matplotlib"] is None
        return False


def png_size(png: bytes) -> tuple[int, int]:
    """A PNG's width and height in pixels, from its header."""
    if png[:8] != b"\x89PNG\r\n\x1a\n" or png[12:16] != b"IHDR":
        raise ValueError("not a PNG file")
    return int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")


def require() -> None:
    """Import matplotlib now, or raise :class:`PlotsMissing`.

    No backend is chosen globally (``matplotlib.use`` would change a notebook's
    own plotting): each figure gets its own Agg canvas, see :func:`_new`."""
    try:
        import matplotlib  # noqa: F401  (whether it imports is the question)
    except ImportError as err:  # not installed, or blocked (sys.modules entry None)
        raise PlotsMissing() from err


@contextmanager
def _style() -> Iterator[None]:
    require()
    import matplotlib

    # Fixed so that a figure's bytes depend on the summary only: the font matplotlib
    # ships (no system font lookup), Type 42 fonts in the PDF (what publishers ask
    # for: text stays text), a fixed SVG id salt, no dates in the metadata.
    with (
        matplotlib.rc_context(
            {
                "font.family": "DejaVu Sans",
                "font.size": 9,
                "axes.titlesize": 10,
                "axes.spines.top": False,
                "axes.spines.right": False,
                "axes.grid": True,
                "grid.color": "#e5e5e5",
                "grid.linewidth": 0.8,
                "axes.axisbelow": True,
                "legend.frameon": False,
                "pdf.fonttype": 42,
                "svg.fonttype": "path",
                "svg.hashsalt": "aeval",
                # a model name is text: "$x$" in it is not mathematics
                "text.parse_math": False,
            }
        ),
        warnings.catch_warnings(),
    ):
        # a name in a script DejaVu Sans lacks gets a box per glyph, said once per
        # glyph and draw: the tables spell it, and the terminal has no use for it
        warnings.filterwarnings("ignore", message=r"Glyph \d+ .* missing from font")
        yield


def _new(width: float, height: float) -> Figure:
    """A figure outside pyplot (no global state, safe in threads) on an Agg canvas,
    the raster backend; PDF and SVG are written by their own backends."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def render(fig: Figure, fmt: FigureFormat) -> bytes:
    """The figure as a PDF, SVG or PNG file's bytes (fixed fonts, no dates)."""
    out = io.BytesIO()
    with _style():
        fig.savefig(out, format=fmt, metadata=_METADATA[fmt], dpi=PNG_DPI)
    return out.getvalue()


def _pct_axis(ax: Axes, axis: Literal["x", "y"]) -> None:
    from matplotlib.ticker import PercentFormatter

    getattr(ax, f"set_{axis}lim")(0, 1)
    getattr(ax, f"{axis}axis").set_major_formatter(PercentFormatter(1.0, decimals=0))


def _whisker(rate: Mapping[str, Any]) -> tuple[float, float]:
    """The distances from a rate down to its interval's low end and up to its high end."""
    return (rate["value"] - rate["low"], rate["high"] - rate["value"])


def _line_with_intervals(
    ax: Axes, points: Sequence[Mapping[str, Any]], color: str, model: str
) -> None:
    """One model's rates against k as a line with each point's interval (none where it
    has no interval), the line's ``gid`` the model and its intervals' ``ci|model``."""
    errs = [_whisker(p) if p["low"] is not None else (0.0, 0.0) for p in points]
    line = ax.errorbar(
        [p["k"] for p in points],
        [p["value"] for p in points],
        yerr=[[e[0] for e in errs], [e[1] for e in errs]],
        color=color,
        marker="o",
        markersize=3.5,
        linewidth=1.5,
        elinewidth=1,
        capsize=2,
        label=model,
    )
    line.lines[0].set_gid(model)
    line.lines[2][0].set_gid(f"ci|{model}")


def _finish_k_axes(ax: Axes, xlabel: str, ylabel: str) -> None:
    """The axes of a rate against k: whole numbers along x, percentages up y."""
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    _pct_axis(ax, "y")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)


def _interval_bar(
    ax: Axes, at: float, rate: Mapping[str, Any], gid: str, *, horizontal: bool
) -> None:
    """A bar's interval as a whisker at ``at`` (its row, or its column), named ``gid`` so
    that tests and readers of the SVG find it."""
    whisker = [[v] for v in _whisker(rate)]
    style: dict[str, Any] = {"fmt": "none", "ecolor": "#222", "elinewidth": 1, "capsize": 2.5}
    if horizontal:
        ci = ax.errorbar(rate["value"], at, xerr=whisker, **style)
    else:
        ci = ax.errorbar(at, rate["value"], yerr=whisker, **style)
    ci.lines[2][0].set_gid(gid)


def _label(value: object) -> str:
    return "(none)" if value is None else str(value)


def accuracy_figure(series: Sequence[tuple[str, Mapping[str, Any]]]) -> Figure:
    """Horizontal bars of lenient accuracy per model with its 95 % interval, strict
    accuracy as a black tick; one bar per series (run) when comparing runs.

    Each bar's ``gid`` is ``model|series`` and its interval's ``ci|model|series``,
    for whoever reads the figure back (the tests do).
    """
    by_model = [{m["model"]: m for m in summary["models"]} for _, summary in series]
    models = list(dict.fromkeys(model for runs in by_model for model in runs))
    with _style():
        fig = _new(6.4, 0.9 + 0.32 * max(1, len(models)) * len(series))
        ax = fig.add_subplot()
        height = 0.8 / len(series)
        for j, (label, _) in enumerate(series):
            for i, model in enumerate(models):
                m = by_model[j].get(model)
                if m is None or m["accuracy"]["value"] is None:
                    continue
                acc, strict = m["accuracy"], m["strict_accuracy"]
                # one run: each model its own colour (as in the tier figure); two: each run's
                color = SERIES_COLORS[(j if len(series) > 1 else i) % len(SERIES_COLORS)]
                y = i - 0.4 + height * (j + 0.5)
                (bar,) = ax.barh(
                    y,
                    acc["value"],
                    height=height * 0.85,
                    color=color,
                    alpha=0.85,
                    label=label if len(series) > 1 and i == 0 else None,
                )
                bar.set_gid(f"{model}|{label}")
                if acc["low"] is not None:
                    _interval_bar(ax, y, acc, f"ci|{model}|{label}", horizontal=True)
                if strict["value"] is not None:
                    ax.plot(
                        [strict["value"]] * 2, [y - height * 0.42, y + height * 0.42], "k-", lw=2
                    )
        ax.set_yticks(range(len(models)), [str(m) for m in models])
        ax.invert_yaxis()
        _pct_axis(ax, "x")
        ax.grid(axis="y", visible=False)
        ax.set_xlabel("accuracy (bar: lenient, 95% interval; black tick: strict)")
        _legend_below(ax, fig, len(series) if len(series) > 1 else 0)
    return fig


def tier_figure(summary: Mapping[str, Any]) -> Figure:
    """Grouped vertical bars: lenient accuracy per tier, one bar per model, with its
    95 % interval. Each bar's ``gid`` is ``model|tier``, its interval's ``ci|model|tier``."""
    tiers = sorted({t["tier"] for t in summary["tiers"]}, key=tier_key)
    models = [m["model"] for m in summary["models"]]
    by_key = {(t["model"], t["tier"]): t for t in summary["tiers"]}
    with _style():
        fig = _new(6.4, 3.2)
        ax = fig.add_subplot()
        width = 0.8 / max(1, len(models))
        for j, model in enumerate(models):
            for i, tier in enumerate(tiers):
                t = by_key.get((model, tier))
                if t is None or t["accuracy"]["value"] is None:
                    continue
                acc = t["accuracy"]
                x = i - 0.4 + width * (j + 0.5)
                (bar,) = ax.bar(
                    x,
                    acc["value"],
                    width=width * 0.9,
                    color=SERIES_COLORS[j % len(SERIES_COLORS)],
                    alpha=0.85,
                    label=str(model) if i == 0 or (model, tiers[0]) not in by_key else None,
                )
                bar.set_gid(f"{model}|{_label(tier)}")
                if acc["low"] is not None:
                    _interval_bar(ax, x, acc, f"ci|{model}|{_label(tier)}", horizontal=False)
        ax.set_xticks(range(len(tiers)), [_label(t) for t in tiers])
        ax.grid(axis="x", visible=False)
        _pct_axis(ax, "y")
        ax.set_xlabel("tier")
        ax.set_ylabel("accuracy (lenient, 95% interval)")
        _legend_below(ax, fig, len(models))
    return fig


_LEGEND_CHARS = 96  # characters of 8-point text across a 6.4-inch figure


def _legend_below(ax: Axes, fig: Figure, entries: int, columns: int = 4) -> None:
    """The legend under the axes, ``columns`` entries a row (a figure keeps its width)."""
    if entries:
        handles, labels = ax.get_legend_handles_labels()
        unique = dict(zip(labels, handles, strict=True))
        # a row of long names (provider/model) would run off the figure's sides
        longest = max((len(label) for label in unique), default=0)
        columns = max(1, min(columns, _LEGEND_CHARS // (longest + 6)))
        fig.legend(
            unique.values(),
            unique.keys(),
            loc="outside lower center",
            ncols=min(columns, entries),
            fontsize=8,
        )


def verdict_mix_figure(summary: Mapping[str, Any]) -> Figure:
    """One stacked bar per model: the share of each verdict status among its verdicts.
    Each segment's ``gid`` is ``model|status``."""
    models = summary["models"]
    infra = set(summary.get("infra_statuses", ()))
    used = [s for s in STATUS_COLORS if any(m["statuses"].get(s) for m in models)]
    used += sorted({s for m in models for s, c in m["statuses"].items() if c} - set(used))
    with _style():
        fig = _new(6.4, 1.0 + 0.32 * max(1, len(models)) + 0.2 * -(-len(used) // 3))
        ax = fig.add_subplot()
        left = [0.0] * len(models)
        for status in used:
            counts = [m["statuses"].get(status, 0) for m in models]
            shares = [c / m["n"] if m["n"] else 0.0 for c, m in zip(counts, models, strict=True)]
            bars = ax.barh(
                range(len(models)),
                shares,
                left=left,
                height=0.7,
                color=STATUS_COLORS.get(status, "#777777"),
                label=f"{status} (infra)" if status in infra else status,
            )
            for bar, m in zip(bars, models, strict=True):
                bar.set_gid(f"{m['model']}|{status}")
            left = [a + b for a, b in zip(left, shares, strict=True)]
        ax.set_yticks(range(len(models)), [str(m["model"]) for m in models])
        ax.invert_yaxis()
        _pct_axis(ax, "x")
        ax.grid(axis="y", visible=False)
        ax.set_xlabel("share of verdicts")
        _legend_below(ax, fig, len(used), columns=3)
    return fig


def _numeric(values: Sequence[object]) -> list[float] | None:
    """The groups as numbers when every one is a number (a distance is written as
    its digits in the summary), else None."""
    try:
        return [float(str(v)) for v in values] if values else None
    except ValueError:
        return None


def group_figure(groups: Sequence[Mapping[str, Any]], key: str, *, label: str) -> Figure:
    """Accuracy against an ordered grouping (extrapolation distance, answer size,
    any ``--by``): one line per model through its groups, each point with its 95 %
    interval. Numeric groups (distances) sit at their values, so a distance no item
    has leaves its gap; others are evenly spaced in their order. Each line's ``gid``
    is the model, its intervals' ``ci|model``."""
    values = list(dict.fromkeys(g[key] for g in groups))
    numbers = _numeric(values)
    at = numbers or [float(i) for i in range(len(values))]
    step = min((b - a for a, b in itertools.pairwise(sorted(at))), default=1.0) or 1.0
    models = list(dict.fromkeys(g["model"] for g in groups))
    by_key = {(g["model"], g[key]): g for g in groups}
    longest = max((len(_label(v)) for v in values), default=0)
    slanted = numbers is None and (len(values) > 12 or longest > 6)
    with _style():
        # slanted group names (programs) take height, not the plot's: the figure grows
        fig = _new(max(6.4, min(12.0, 0.3 * len(values))), 3.2 + 0.06 * min(longest, 40) * slanted)
        ax = fig.add_subplot()
        spread = step * min(0.12, 0.6 / (len(models) + 1))
        for j, model in enumerate(models):
            dx = (j - (len(models) - 1) / 2) * spread  # models side by side: whiskers apart
            xs, ys, lows, highs = [], [], [], []
            for i, v in enumerate(values):
                g = by_key.get((model, v))
                if g is None or g["accuracy"]["value"] is None:
                    continue
                acc = g["accuracy"]
                xs.append(at[i] + dx)
                ys.append(acc["value"])
                low, high = _whisker(acc) if acc["low"] is not None else (0.0, 0.0)
                lows.append(low)
                highs.append(high)
            color = SERIES_COLORS[j % len(SERIES_COLORS)]
            line = ax.errorbar(
                xs,
                ys,
                yerr=[lows, highs],
                color=color,
                marker="o",
                markersize=3.5,
                linewidth=1.5,
                elinewidth=1,
                ecolor=color,
                capsize=0,
                alpha=0.9,
                label=str(model),
            )
            line.lines[0].set_gid(str(model))
            line.lines[2][0].set_gid(f"ci|{model}")
        ax.set_xticks(at, [_label(v) for v in values])
        if slanted:
            for tick in ax.get_xticklabels():
                tick.set(rotation=45, horizontalalignment="right", rotation_mode="anchor")
        _pct_axis(ax, "y")
        ax.set_xlabel(label)
        ax.set_ylabel("accuracy (lenient, 95% interval)")
        _legend_below(ax, fig, len(models))
    return fig


def pass_at_k_figure(summary: Mapping[str, Any]) -> Figure:
    """pass@k against k per model with 95 % item-bootstrap intervals; maj@n as a
    hollow diamond at k = n (``gid`` ``maj|model``). Each line's ``gid`` is the
    model, its intervals' ``ci|model``."""
    models = [m for m in summary["models"] if m.get("pass_at_k")]
    with _style():
        fig = _new(6.4, 3.4)
        ax = fig.add_subplot()
        for j, m in enumerate(models):
            color = SERIES_COLORS[j % len(SERIES_COLORS)]
            points = m["pass_at_k"]
            ks = [p["k"] for p in points]
            _line_with_intervals(ax, points, color, str(m["model"]))
            majority = m.get("majority")
            if majority and majority["value"] is not None:
                (mark,) = ax.plot(
                    [ks[-1] + 0.15],
                    [majority["value"]],
                    marker="D",
                    markersize=6,
                    markerfacecolor="white",
                    markeredgecolor=color,
                    markeredgewidth=1.5,
                    linestyle="none",
                )
                mark.set_gid(f"maj|{m['model']}")
        _finish_k_axes(
            ax,
            "k (answers drawn per item); hollow diamond: maj@n",
            "pass@k (95% item-bootstrap interval)",
        )
        _legend_below(ax, fig, len(models))
    return fig


def rounds_figure(summary: Mapping[str, Any]) -> Figure:
    """accuracy@k against repair round k, one line per model, each point with its 95 %
    interval (clustered by item over trials). Each line's ``gid`` is the model, its
    intervals' ``ci|model``."""
    models = [m for m in summary["models"] if m.get("rounds")]
    with _style():
        fig = _new(6.4, 3.4)
        ax = fig.add_subplot()
        for j, m in enumerate(models):
            color = SERIES_COLORS[j % len(SERIES_COLORS)]
            points = [p for p in m["rounds"]["accuracy_at_k"] if p["value"] is not None]
            _line_with_intervals(ax, points, color, str(m["model"]))
        _finish_k_axes(
            ax,
            "repair round k (feedback from the verifier after each wrong answer)",
            "accuracy@k: solved by round k (95% interval)",
        )
        _legend_below(ax, fig, len(models))
    return fig


def _versus_axis(models: Sequence[Mapping[str, Any]], synthetic: bool) -> tuple[str, str, str]:
    """Which cost the rounds-against-trials figure puts on its x axis: USD when every
    model's is known (and the answers were not synthetic), else tokens."""
    priced = not synthetic and all(
        v["rounds_cost_per_item"] is not None
        for m in models
        for v in m["rounds"]["versus_trials"]
        if v["accuracy_at_k"] is not None
    )
    if priced:
        return "rounds_cost_per_item", "trials_cost_per_item", "USD per item (Batch API price)"
    return "rounds_tokens_per_item", "trials_tokens_per_item", "tokens per item"


def rounds_vs_trials_figure(summary: Mapping[str, Any], *, synthetic: bool = False) -> Figure:
    """Accuracy against cost per item: per model, accuracy@k of k repair rounds (solid,
    ``gid`` ``rounds|model``) and pass@k of k independent trials (dashed, ``gid``
    ``trials|model``), k = 1, 2, … along each line. A line above the other at the
    same cost buys more for that money."""
    models = [m for m in summary["models"] if (m.get("rounds") or {}).get("versus_trials")]
    rounds_x, trials_x, label = _versus_axis(models, synthetic)
    with _style():
        fig = _new(6.4, 3.6)
        ax = fig.add_subplot()
        for j, m in enumerate(models):
            color = SERIES_COLORS[j % len(SERIES_COLORS)]
            points = m["rounds"]["versus_trials"]
            for kind, x, y, style in (
                ("rounds", rounds_x, "accuracy_at_k", "-"),
                ("trials", trials_x, "pass_at_k", "--"),
            ):
                shown = [p for p in points if p[y] is not None and p[x] is not None]
                (line,) = ax.plot(
                    [p[x] for p in shown],
                    [p[y] for p in shown],
                    linestyle=style,
                    marker="o" if kind == "rounds" else "s",
                    markersize=3.5,
                    color=color,
                    label=f"{m['model']} ({kind})",
                )
                line.set_gid(f"{kind}|{m['model']}")
        from matplotlib.ticker import FuncFormatter

        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: _compact_number(v)))
        _pct_axis(ax, "y")
        ax.set_xlabel(f"{label}; solid: k repair rounds, dashed: k independent trials")
        ax.set_ylabel("accuracy@k (rounds) / pass@k (trials)")
        _legend_below(ax, fig, 2 * len(models))
    return fig


DISTANCE_LABEL = "extrapolation distance (target N − largest example N)"


def run_figures(summary: Mapping[str, Any]) -> list[PaperFigure]:
    """A run's figures for a paper, by file name: accuracy per model and per tier,
    against extrapolation distance (when the verdicts know it), pass@k (when
    some item was answered more than once) and accuracy by repair round (when the
    run had rounds). Drawn only when called."""
    out: list[PaperFigure] = [
        ("accuracy", lambda: accuracy_figure([("run", summary)])),
        ("tiers", lambda: tier_figure(summary)),
    ]
    if summary.get("distances"):
        out.append(
            (
                "distance",
                lambda: group_figure(summary["distances"], "distance", label=DISTANCE_LABEL),
            )
        )
    if any(len(m.get("pass_at_k") or []) > 1 for m in summary["models"]):
        out.append(("pass-at-k", lambda: pass_at_k_figure(summary)))
    out += rounds_figures(summary)
    return out


def rounds_figures(summary: Mapping[str, Any]) -> list[PaperFigure]:
    """A run's figures of its repair rounds (none without): accuracy by round, and
    rounds against trials at their cost when a model had several trials."""
    if not any(m.get("rounds") for m in summary["models"]):
        return []
    synthetic = bool((summary.get("provenance") or {}).get("synthetic"))
    out: list[PaperFigure] = [("rounds", lambda: rounds_figure(summary))]
    if any((m.get("rounds") or {}).get("versus_trials") for m in summary["models"]):
        out.append(
            ("rounds-vs-trials", lambda: rounds_vs_trials_figure(summary, synthetic=synthetic))
        )
    return out


def compare_figures(comparison: Mapping[str, Any]) -> list[PaperFigure]:
    """Two runs' figure for a paper: accuracy per model, one bar per run."""
    series = [
        (comparison["a"], comparison["summary_a"]),
        (comparison["b"], comparison["summary_b"]),
    ]
    return [("compare-accuracy", lambda: accuracy_figure(series))]


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """The indices of the points no other point beats on both cost (lower ``x``) and
    accuracy (higher ``y``), by increasing cost: each is more accurate than every
    cheaper one."""
    order = sorted(range(len(points)), key=lambda i: (points[i][0], -points[i][1]))
    front: list[int] = []
    for i in order:
        if not front or points[i][1] > points[front[-1]][1]:
            front.append(i)
    return front


_NAMED_POINTS = 15  # a scatter names every point up to this many


def cost_figure(rows: Sequence[Mapping[str, Any]], *, per: str, label: str) -> Figure:
    """Accuracy (95 % interval) against cost, one point per model, the Pareto front
    drawn through the models no other beats on both.

    :param per: the key of each row's cost on the x axis (``cost_per_1000`` or
        ``tokens_per_1000``); rows without it are left out.
    :param label: the x axis' label (what the cost is, and in what).
    Each point's ``gid`` is the model's row, the front's ``pareto``.
    """
    shown = [r for r in rows if r.get(per) and r["accuracy"]["value"] is not None]
    points = [(float(r[per]), float(r["accuracy"]["value"])) for r in shown]
    with _style():
        fig = _new(6.4, 4.0)
        ax = fig.add_subplot()
        for j, (r, (x, y)) in enumerate(zip(shown, points, strict=True)):
            color = SERIES_COLORS[j % len(SERIES_COLORS)]
            low, high = _whisker(r["accuracy"]) if r["accuracy"]["low"] is not None else (0, 0)
            drawn = ax.errorbar(
                [x], [y], yerr=[[low], [high]], fmt="o", color=color, ecolor=color,
                markersize=5, elinewidth=1, capsize=2,
            )  # fmt: skip
            drawn.lines[0].set_gid(str(r["row"]))
        front = pareto_front(points)
        # every name when few; else the front's and the most accurate (a cloud of names
        # is read by nobody). Above and below their points in turn, left to right.
        named = set(range(len(points)))
        if len(points) > _NAMED_POINTS:
            best = sorted(range(len(points)), key=lambda i: -points[i][1])[:5]
            named = {*front, *best}
        for k, i in enumerate(sorted(named, key=lambda i: points[i])):
            ax.annotate(
                str(shown[i]["row"]),
                points[i],
                xytext=(5, 5 if k % 2 == 0 else -11),
                textcoords="offset points",
                fontsize=7,
            )
        if front:
            xs = [points[i][0] for i in front]
            ys = [points[i][1] for i in front]
            (line,) = ax.step(
                xs, ys, where="post", color="#444", linestyle="--", linewidth=1,
                label="Pareto front (no model both cheaper and more accurate)",
            )  # fmt: skip
            line.set_gid("pareto")
        if len(points) > 1 and max(p[0] for p in points) > 10 * min(p[0] for p in points):
            ax.set_xscale("log")
        from matplotlib.ticker import FuncFormatter

        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: _compact_number(v)))
        _pct_axis(ax, "y")
        ax.set_xlabel(label)
        ax.set_ylabel("accuracy (lenient, 95% interval)")
        _legend_below(ax, fig, 1 if front else 0)
    return fig


def reasoning_figure(rows: Sequence[Mapping[str, Any]]) -> Figure:
    """Accuracy against reasoning tokens per answer for the rows that recorded them;
    the reasoning variants of one model (``gpt-5@low``, ``gpt-5@high``) joined by a
    line. Each line's ``gid`` is the base model."""
    shown = [
        r
        for r in rows
        if r["tokens"].get("reasoning") is not None and r["n"] and r["accuracy"]["value"]
    ]
    bases = list(dict.fromkeys(str(r["model"]).split("@")[0] for r in shown))
    with _style():
        fig = _new(6.4, 3.6)
        ax = fig.add_subplot()
        for j, base in enumerate(bases):
            mine = sorted(
                (r for r in shown if str(r["model"]).split("@")[0] == base),
                key=lambda r: r["tokens"]["reasoning"] / r["n"],
            )
            xs = [r["tokens"]["reasoning"] / r["n"] for r in mine]
            ys = [r["accuracy"]["value"] for r in mine]
            color = SERIES_COLORS[j % len(SERIES_COLORS)]
            (line,) = ax.plot(xs, ys, marker="o", color=color, label=base)
            line.set_gid(base)
            if len(shown) <= _NAMED_POINTS:
                for r, x, y in zip(mine, xs, ys, strict=True):
                    # the legend names the model: a variant's point needs only its setting
                    row = str(r["row"])
                    text = row[len(base) :] if row.startswith(base + "@") else row
                    ax.annotate(text, (x, y), xytext=(5, 4), textcoords="offset points", fontsize=7)
        _pct_axis(ax, "y")
        ax.set_xlabel("reasoning tokens per answer (as the provider counted them)")
        ax.set_ylabel("accuracy (lenient)")
        # a legend of one entry per model helps up to a few models, then only hides the plot
        _legend_below(ax, fig, len(bases) if len(bases) <= 2 * len(SERIES_COLORS) else 0)
    return fig


def _compact_number(value: float) -> str:
    """``1.5M``, ``20k``, ``0.35``: an axis tick without matplotlib's offset text."""
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:g}{suffix}"
    return f"{value:g}"


COST_LABEL = "USD per 1,000 answers (Batch API price)"


def leaderboard_figures(board: Mapping[str, Any], *, top: int = 5) -> list[PaperFigure]:
    """A leaderboard's figures by file name: accuracy per model (best first), accuracy
    against cost, against reasoning tokens (when some row recorded them), by repair
    round (when some row had rounds) and per tier for the ``top`` models."""
    rows = board["rows"]
    as_models = {"models": [{**r, "model": r["row"]} for r in rows]}
    priced = all(r.get("cost_per_1000") for r in rows) and not any(
        p.get("synthetic") for r in rows for p in r["provenance"]
    )
    if priced:
        per, label = "cost_per_1000", COST_LABEL
    else:
        unpriced = [r["row"] for r in rows if not r.get("cost_per_1000")]
        why = (
            "synthetic answers cost nothing"
            if not unpriced
            else "no price known for " + ", ".join(unpriced)
            if len(unpriced) <= 2
            else f"no price known for {len(unpriced)} models"
        )
        per, label = "tokens_per_1000", f"tokens per 1,000 answers (not USD: {why})"
    best = {r["row"] for r in rows[:top]}
    tiers = {
        "models": [{"model": r["row"]} for r in rows[:top]],
        "tiers": [{**t, "model": t["row"]} for t in board["tiers"] if t["row"] in best],
    }
    out: list[PaperFigure] = [
        ("leaderboard-accuracy", lambda: accuracy_figure([("run", as_models)])),
        ("leaderboard-cost", lambda: cost_figure(rows, per=per, label=label)),
    ]
    if any((r["tokens"].get("reasoning") or 0) > 0 for r in rows):  # a run that reasoned
        out.append(("leaderboard-reasoning", lambda: reasoning_figure(rows)))
    if any(r.get("rounds") for r in rows):  # a row with repair rounds
        out.append(("leaderboard-rounds", lambda: rounds_figure(as_models)))
    out.append(("leaderboard-tiers", lambda: tier_figure(tiers)))
    return out
