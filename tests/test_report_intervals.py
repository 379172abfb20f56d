"""Item-clustered intervals: k trials of the same items are not k independent samples."""

from __future__ import annotations

import dataclasses
import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy import stats

from aeval.report import summarize, wilson_interval
from aeval.report.compare import compare_runs, newcombe_interval
from aeval.report.paired import mcnemar_p, paired_matrix
from aeval.summary.intervals import (
    ClusterSums,
    clustered_interval,
    item_correlation,
    paired_difference_interval,
    wilson_bounds,
)
from aeval.verdicts import Status, Verdict, verdicts_frame

E, W, T = Status.EQUIVALENT, Status.NOT_EQUIVALENT, Status.TIMEOUT
ITEMS = 200
DATA = Path(__file__).parent / "data"


def run(model: str, trials: list[list[bool]], *, repaired_every: int = 0) -> list[Verdict]:
    """Verdicts of ``model``: ``trials[t][i]`` says whether item i was right in trial t + 1."""
    return [
        Verdict(
            model=model,
            trial=t + 1,
            custom_id=f"item-{i}",
            status=E if ok else W,
            tier="small" if i % 4 else "large",
            repaired="code_fence" if ok and repaired_every and i % repaired_every == 0 else None,
            correct_published=ok,
        )
        for t, column in enumerate(trials)
        for i, ok in enumerate(column)
    ]


def interval(rate: dict) -> tuple[float, float]:
    return rate["low"], rate["high"]


def width(rate: dict) -> float:
    return rate["high"] - rate["low"]


def first_trial() -> list[bool]:
    return [i % 5 < 3 for i in range(ITEMS)]  # 60 % right


def test_one_trial_is_plain_wilson() -> None:
    trial = first_trial()
    sums = ClusterSums.of((int(ok), 1) for ok in trial)
    low, high, deff = clustered_interval(sums)
    assert (low, high) == wilson_interval(sum(trial), ITEMS)
    assert deff == 1.0
    (m,) = summarize(verdicts_frame(run("m", [trial])))["models"]
    assert interval(m["accuracy"]) == wilson_interval(120, ITEMS)


def test_two_identical_trials_are_as_wide_as_one() -> None:
    trial = first_trial()
    one = summarize(verdicts_frame(run("m", [trial], repaired_every=3)))
    two = summarize(verdicts_frame(run("m", [trial, trial], repaired_every=3)))
    for key in ("accuracy", "strict_accuracy", "published_accuracy"):
        m1, m2 = one["models"][0][key], two["models"][0][key]
        assert m2["value"] == m1["value"] and m2["n"] == 2 * m1["n"]
        assert interval(m2) == pytest.approx(interval(m1), abs=1e-12)
        assert m2["design_effect"] == pytest.approx(2.0)
        # Pooling 400 answers as independent would have been narrower: what we refuse.
        pooled = wilson_interval(m2["successes"], m2["n"])
        assert pooled[1] - pooled[0] < width(m2) - 0.02
    for t1, t2 in zip(one["tiers"], two["tiers"], strict=True):
        assert t1["tier"] == t2["tier"]
        assert interval(t2["accuracy"]) == pytest.approx(interval(t1["accuracy"]), abs=1e-12)
    assert interval(two["overall"]["accuracy"]) == pytest.approx(
        interval(one["overall"]["accuracy"]), abs=1e-12
    )
    # Each trial on its own is still a single Wilson interval.
    for t in two["trials"]:
        assert interval(t["accuracy"]) == wilson_interval(120, ITEMS)


def test_independent_looking_trials_earn_the_pooled_width() -> None:
    # Every combination of (right, wrong) over two trials on 50 items: no item effect.
    t1 = [i % 2 == 0 for i in range(ITEMS)]
    t2 = [(i // 2) % 2 == 0 for i in range(ITEMS)]
    (m,) = summarize(verdicts_frame(run("m", [t1, t2])))["models"]
    assert m["accuracy"]["design_effect"] == pytest.approx(1.0)
    assert interval(m["accuracy"]) == pytest.approx(wilson_interval(200, 400), abs=1e-12)
    # Perfectly correlated trials at the same accuracy: only the items count.
    (c,) = summarize(verdicts_frame(run("m", [t1, t1])))["models"]
    assert interval(c["accuracy"]) == pytest.approx(wilson_interval(100, 200), abs=1e-12)
    assert width(c["accuracy"]) > width(m["accuracy"]) * 1.3


def test_anti_correlated_trials_never_beat_pooling() -> None:
    t1 = [i % 2 == 0 for i in range(ITEMS)]
    t2 = [not ok for ok in t1]  # every item right exactly once: zero item-level spread
    (m,) = summarize(verdicts_frame(run("m", [t1, t2])))["models"]
    assert m["accuracy"]["design_effect"] == 1.0
    assert interval(m["accuracy"]) == pytest.approx(wilson_interval(200, 400), abs=1e-12)


def test_all_right_counts_each_item_once() -> None:
    trial = [True] * 20
    (m,) = summarize(verdicts_frame(run("m", [trial, trial, trial])))["models"]
    assert interval(m["accuracy"]) == pytest.approx(wilson_interval(20, 20), abs=1e-12)
    assert m["accuracy"]["high"] == 1.0


def test_infra_failures_shrink_their_item_not_the_others() -> None:
    trial = first_trial()
    rows = run("m", [trial, trial])
    # Trial 2 of item 0 timed out at the API: the item is scored once, not twice.
    rows[ITEMS] = Verdict(model="m", trial=2, custom_id="item-0", status=Status.API_ERROR)
    (m,) = summarize(verdicts_frame(rows))["models"]
    assert m["scored"] == 2 * ITEMS - 1
    assert 0 < m["accuracy"]["low"] < m["accuracy"]["value"] < m["accuracy"]["high"] < 1
    sums = ClusterSums.of([(2 if ok else 0, 2) for ok in trial[1:]] + [(1, 1)])
    assert interval(m["accuracy"]) == pytest.approx(clustered_interval(sums)[:2], abs=1e-12)


def test_intervals_are_deterministic_and_order_free() -> None:
    rng = random.Random(7)
    rows = run("m", [[rng.random() < 0.4 for _ in range(ITEMS)] for _ in range(3)])
    rows += run("n", [[rng.random() < 0.7 for _ in range(ITEMS)] for _ in range(3)])
    first = summarize(verdicts_frame(rows))
    assert summarize(verdicts_frame(rows)) == first
    shuffled = rows[:]
    rng.shuffle(shuffled)
    again = summarize(verdicts_frame(shuffled))
    for a in first["models"]:
        b = next(m for m in again["models"] if m["model"] == a["model"])
        assert interval(b["accuracy"]) == pytest.approx(interval(a["accuracy"]), abs=1e-12)
        assert interval(b["strict_accuracy"]) == pytest.approx(interval(a["strict_accuracy"]))


def test_newcombe_paired_known_value() -> None:
    # Fagerland, Lydersen & Laake, "Statistical Analysis of Contingency Tables", ch. 8
    # (Cavo et al. 2012): 59 both, 6 only B, 16 only A, 80 neither →
    # −0.0621, 95 % CI −0.1186 to −0.0046 (Newcombe square-and-add, paired).
    items = [(1, 1, 1, 1)] * 59 + [(0, 1, 1, 1)] * 6 + [(1, 1, 0, 1)] * 16 + [(0, 1, 0, 1)] * 80
    a = ClusterSums.of((ya, ma) for ya, ma, _, _ in items)
    b = ClusterSums.of((yb, mb) for _, _, yb, mb in items)
    ia, ib = clustered_interval(a), clustered_interval(b)
    pa, pb = a.successes / a.n, b.successes / b.n
    low, high = paired_difference_interval(
        (pa, *ia[:2]), (pb, *ib[:2]), item_correlation(a, b, items)
    )
    assert pb - pa == pytest.approx(-0.0621, abs=1e-4)
    assert (low, high) == pytest.approx((-0.1186, -0.0046), abs=1e-4)


def flip(trial: list[bool], gained: int, lost: int) -> list[bool]:
    """``trial`` with ``gained`` wrong items made right and ``lost`` right items made wrong."""
    out = trial[:]
    wrong = [i for i, ok in enumerate(trial) if not ok]
    right = [i for i, ok in enumerate(trial) if ok]
    for i in wrong[:gained]:
        out[i] = True
    for i in right[:lost]:
        out[i] = False
    return out


def diff(a: list[Verdict], b: list[Verdict]) -> dict:
    (entry,) = compare_runs(verdicts_frame(a), verdicts_frame(b))["models"]
    return entry


def test_paired_difference_of_identical_runs_is_zero_and_narrow() -> None:
    trial = first_trial()
    d = diff(run("m", [trial]), run("m", [trial]))["diff"]
    assert d["value"] == 0.0
    assert d["low"] < 0 < d["high"]
    assert d["high"] - d["low"] < 0.03
    # Treating the runs as independent samples would claim far less.
    rate = summarize(verdicts_frame(run("m", [trial])))["models"][0]["accuracy"]
    lo, hi = newcombe_interval(rate, rate)
    assert hi - lo > 0.15


def test_paired_width_grows_with_item_level_disagreement() -> None:
    trial = first_trial()
    widths = []
    for changed in (0, 5, 20, 40):
        d = diff(run("m", [trial]), run("m", [flip(trial, changed, changed)]))["diff"]
        assert d["value"] == pytest.approx(0.0)
        assert d["low"] < 0 < d["high"]
        widths.append(d["high"] - d["low"])
    assert widths == sorted(widths) and widths[0] * 3 < widths[-1]
    # 40 gained, 40 lost of 200: about McNemar's ± 1.96·√80/200.
    assert widths[-1] == pytest.approx(2 * 1.96 * 80**0.5 / 200, rel=0.15)


def test_paired_difference_over_repeated_trials_is_not_overconfident() -> None:
    trial = first_trial()
    better = flip(trial, 30, 0)
    one = diff(run("m", [trial]), run("m", [better]))
    three = diff(run("m", [trial] * 3), run("m", [better] * 3))
    assert three["diff"]["value"] == pytest.approx(one["diff"]["value"])
    # Three copies of the same answers carry the information of one.
    assert (three["diff"]["low"], three["diff"]["high"]) == pytest.approx(
        (one["diff"]["low"], one["diff"]["high"]), abs=1e-9
    )
    assert one["diff"]["low"] > 0  # 30 items gained, none lost: a real improvement
    assert three["paired"]["gained"] == 90 and three["paired"]["lost"] == 0
    assert three["strict_diff_interval"]["value"] == pytest.approx(three["strict_diff"])


def test_compare_items_missing_from_one_run() -> None:
    trial = first_trial()
    a = run("m", [trial])
    b = [v for v in run("m", [trial]) if v.custom_id != "item-0"] + [
        Verdict(model="m", trial=1, custom_id="extra", status=T)  # an item only B scored
    ]
    d = diff(a, b)["diff"]
    frame_b = summarize(verdicts_frame(b))["models"][0]["accuracy"]
    assert d["value"] == pytest.approx(frame_b["value"] - 0.6)
    assert d["low"] < d["value"] < d["high"]
    assert pl.Series([d["low"], d["high"]]).is_between(-1, 1).all()


def test_the_published_reading_gets_its_own_paired_difference() -> None:
    trial = first_trial()
    better = [ok or i % 5 == 3 for i, ok in enumerate(trial)]  # 20 % more items right
    entry = diff(run("m", [trial]), run("m", [better]))
    assert entry["published_diff"]["value"] == pytest.approx(0.2)
    assert entry["published_diff"]["low"] < 0.2 < entry["published_diff"]["high"]
    # A run scored without the published reading has no published difference to give.
    off = [dataclasses.replace(v, correct_published=None) for v in run("m", [better])]
    assert diff(run("m", [trial]), off)["published_diff"]["value"] is None


# --- the statistics did not change when scipy took them over -------------------------


def _golden_verdicts(model: str, trials: int, rate: float, seed: int) -> list[Verdict]:
    """60 items of varying ease, answered ``trials`` times at about ``rate``."""
    rng = random.Random(seed)
    easy = [rng.random() for _ in range(60)]
    out = []
    for t in range(trials):
        for i in range(60):
            ok = rng.random() < (rate + 0.5 * (easy[i] - 0.5))
            out.append(
                Verdict(
                    model=model,
                    trial=t + 1,
                    custom_id=f"item-{i}",
                    status=E if ok else W,
                    tier="small" if i % 3 else "large",
                    repaired="code_fence" if ok and i % 7 == 0 else None,
                    correct_published=ok and i % 5 != 0,
                )
            )
    return out


_STATISTICS = ("low", "high", "p", "value", "design_effect", "correlation")


def _numbers(obj: object, prefix: str = "") -> dict[str, float]:
    """Every float under a key in ``_STATISTICS``, by its path in ``obj``."""
    out: dict[str, float] = {}
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.update(_numbers(v, f"{prefix}/{k}"))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out.update(_numbers(v, f"{prefix}/{i}"))
    elif isinstance(obj, float) and prefix.split("/")[-1] in _STATISTICS:
        out[prefix] = obj
    return out


def test_report_numbers_are_those_before_scipy() -> None:
    """Summaries (one and three trials), a comparison of two runs, a paired matrix
    (McNemar and the per-item test), McNemar's p at both forms and Wilson intervals:
    each number as the hand-written formulas gave it before scipy computed them
    (tests/data/report-numbers-before-scipy.json), to far below any rounding."""
    one = verdicts_frame(_golden_verdicts("a", 1, 0.6, 1) + _golden_verdicts("b", 1, 0.45, 2))
    three = verdicts_frame(_golden_verdicts("a", 3, 0.6, 3) + _golden_verdicts("b", 3, 0.5, 4))
    now: dict[str, float] = {}
    for name, frame in (("one", one), ("three", three)):
        now.update(_numbers(summarize(frame), f"summary-{name}"))
    compared = compare_runs(
        verdicts_frame(_golden_verdicts("a", 2, 0.5, 5)),
        verdicts_frame(_golden_verdicts("a", 2, 0.6, 6)),
    )
    now.update(_numbers(compared, "compare"))
    for name, trials in (("one", 1), ("three", 3)):
        rng = np.random.default_rng(trials)
        m = np.full((80, 3), trials)
        y = rng.binomial(trials, [0.3, 0.5, 0.55], size=(80, 3))
        now.update(_numbers(paired_matrix(["x", "y", "z"], y, m), f"paired-{name}"))
    for b, c in ((1, 9), (3, 4), (0, 12), (10, 30), (40, 20), (12, 12)):
        now[f"mcnemar/{b}/{c}"] = mcnemar_p(b, c)[0]
    for k, n in ((0, 20), (1, 29), (15, 148), (81, 263), (20, 20), (7, 9)):
        now[f"wilson/{k}/{n}/low"], now[f"wilson/{k}/{n}/high"] = wilson_interval(k, n)
    before = json.loads((DATA / "report-numbers-before-scipy.json").read_text())
    assert set(now) == set(before)
    assert len(before) > 600
    for key, value in before.items():
        assert now[key] == pytest.approx(value, abs=1e-9), key


def test_wilson_interval_is_scipys_and_newcombes_published_values() -> None:
    # Newcombe (1998), "Two-sided confidence intervals for the single proportion",
    # Statistics in Medicine 17:857-872, Table I, method 3 (Wilson score, no
    # continuity correction), to the four places it prints.
    published = {
        (81, 263): (0.2553, 0.3662),
        (15, 148): (0.0624, 0.1605),
        (0, 20): (0.0, 0.1611),
        (1, 29): (0.0061, 0.1718),
    }
    for (k, n), bounds in published.items():
        assert wilson_interval(k, n) == pytest.approx(bounds, abs=1e-4), (k, n)
        ci = stats.binomtest(k, n).proportion_ci(method="wilson")
        assert wilson_interval(k, n) == pytest.approx((ci.low, ci.high), abs=1e-12)
    assert wilson_interval(0, 0) is None
    assert wilson_interval(20, 20)[1] == 1.0 and wilson_interval(0, 20)[0] == 0.0


def test_wilson_interval_is_scipys_to_the_last_bit() -> None:
    """Computed without scipy.stats (#44's memory target), every bound is the float
    scipy's binomtest gives (summary.json stays byte-equal), at every count up to 50,
    at large n, and at other confidence levels."""
    cases = [(k, n) for n in range(1, 51) for k in range(n + 1)]
    cases += [(k, n) for n in (1_000, 4_321, 50_000, 200_000) for k in (0, 1, 7, n // 3, n - 1, n)]
    for k, n in cases:
        ci = stats.binomtest(k, n).proportion_ci(method="wilson")
        low = 0.0 if k == 0 else max(0.0, float(ci.low))
        high = 1.0 if k == n else min(1.0, float(ci.high))
        assert wilson_interval(k, n) == (low, high), (k, n)
    for confidence in (0.5, 0.9, 0.99, 0.999):
        for k, n in ((3, 17), (81, 263), (999, 1000)):
            ci = stats.binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
            assert wilson_interval(k, n, confidence) == (float(ci.low), float(ci.high))


def test_the_summary_does_not_load_scipy_stats() -> None:
    """scipy.stats stayed resident at the end of every large run (+48 MB over
    scipy.special at 4 x 50,000 with three rounds): the summary's intervals do without."""
    code = (
        "import sys; from aeval.summary.aggregate import summarize; "
        "from aeval.verdicts import Status, Verdict, verdicts_frame; "
        "vs = [Verdict(model='m', trial=t, custom_id=str(i), status=Status.EQUIVALENT "
        "if (i + t) % 3 else Status.TIMEOUT) for t in (0, 1) for i in range(30)]; "
        "s = summarize(verdicts_frame(vs)); assert s['models'][0]['accuracy']['low'] > 0; "
        "print(sorted(m for m in sys.modules if m.startswith('scipy.stats')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "[]", out.stdout


def test_wilson_bounds_at_whole_n_are_scipys() -> None:
    """The hand-written bounds (for a fractional effective n) are scipy's at every whole n."""
    for n in (1, 2, 5, 17, 80, 263, 1000):
        for k in sorted({0, 1, n // 3, n // 2, n - 1, n}):
            ci = stats.binomtest(k, n).proportion_ci(method="wilson")
            low, high = wilson_bounds(k / n, n)
            assert (low, high) == pytest.approx((ci.low, ci.high), abs=1e-12), (k, n)
    # between two whole n, the width lies between theirs
    width = [wilson_bounds(0.4, n)[1] - wilson_bounds(0.4, n)[0] for n in (50, 50.5, 51)]
    assert width[0] > width[1] > width[2]
