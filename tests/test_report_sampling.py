"""pass@k (Chen et al.'s estimator), maj@n over answer classes, and their reports."""

from __future__ import annotations

import csv
import io
import itertools
import json
import random
from fractions import Fraction
from math import comb
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy import stats

from aeval.cli import main
from aeval.report import summarize
from aeval.report.compare import compare_runs, compare_sampling_grid
from aeval.report.contents import report_grids
from aeval.report.html import html_compare, html_report
from aeval.report.text import markdown_report, summary_csv
from aeval.summary.bootstrap import item_bootstrap, percentile_interval
from aeval.summary.sampling import (
    ItemCounts,
    item_counts,
    majority_block,
    majority_vote,
    pass_at_k,
    pass_at_k_block,
)
from aeval.summary.tables import grid_markdown, sampling_grid, sampling_tier_grid
from aeval.verdicts import verdicts_frame


def brute_force_pass_at_k(n: int, c: int, k: int) -> Fraction:
    """The share of all k-subsets of n answers (c of them correct) holding a correct one."""
    answers = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return Fraction(sum(any(answers[i] for i in s) for s in subsets), len(subsets))


def test_pass_at_k_hand_computed_values() -> None:
    # n=5, c=2: pass@1 = 2/5; pass@2 = 1 - C(3,2)/C(5,2) = 1 - 3/10; pass@3 = 1 - 1/10
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4)
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7)
    assert pass_at_k(5, 2, 3) == pytest.approx(0.9)
    # n - c < k: every draw holds a correct answer
    assert pass_at_k(5, 2, 4) == 1.0 and pass_at_k(5, 2, 5) == 1.0
    # the textbook example of Chen et al.: n=10, c=1, pass@1 = 0.1, pass@10 = 1
    assert pass_at_k(10, 1, 1) == pytest.approx(0.1)
    assert pass_at_k(10, 1, 10) == 1.0


@pytest.mark.parametrize("n", range(1, 8))
def test_pass_at_k_equals_brute_force_enumeration(n: int) -> None:
    for c in range(n + 1):
        for k in range(1, n + 1):
            assert pass_at_k(n, c, k) == pytest.approx(float(brute_force_pass_at_k(n, c, k)))


def test_pass_at_k_edge_cases() -> None:
    for n in (1, 3, 10):
        for c in range(n + 1):
            assert pass_at_k(n, c, 1) == pytest.approx(c / n)  # k=1: the item's accuracy
            assert pass_at_k(n, c, n) == (1.0 if c else 0.0)  # k=n: any correct answer
    assert pass_at_k(200, 1, 100) == pytest.approx(0.5)  # large n stays exact
    for bad in ((3, 4, 1), (3, 1, 0), (3, 1, 4), (3, -1, 1)):
        with pytest.raises(ValueError):
            pass_at_k(*bad)


def test_pass_at_k_block_averages_items_and_skips_k_beyond_an_items_answers() -> None:
    items = [ItemCounts("a", 3, 1, None), ItemCounts("b", 3, 3, None), ItemCounts("c", 2, 0, None)]
    block = pass_at_k_block(items)
    assert [p["k"] for p in block] == [1, 2, 3]
    assert block[0]["value"] == pytest.approx((1 / 3 + 1 + 0) / 3)
    assert block[1]["value"] == pytest.approx((2 / 3 + 1 + 0) / 3)
    # item c has only 2 answers: pass@3 is over the two items with 3
    assert block[2]["items"] == 2 and block[2]["value"] == pytest.approx(1.0)
    for p in block:
        assert p["low"] <= p["value"] <= p["high"]


def test_bootstrap_is_seeded_and_matches_plain_resampling() -> None:
    rng = np.random.default_rng(7)
    values = [(float(v),) for v in rng.integers(0, 2, size=300)]
    first = item_bootstrap(values)
    assert np.array_equal(first, item_bootstrap(values))  # same report every time
    low, high = percentile_interval(first[:, 0])  # type: ignore[misc]
    # the resampled means' spread is that of resampling items one by one: scipy's
    # percentile bootstrap of the mean, on the items themselves
    reference = stats.bootstrap(
        (np.array(values)[:, 0],),
        np.mean,
        n_resamples=4000,
        method="percentile",
        random_state=np.random.default_rng(1),
    ).confidence_interval
    assert low == pytest.approx(reference.low, abs=0.015)
    assert high == pytest.approx(reference.high, abs=0.015)
    assert percentile_interval(item_bootstrap([(1.0,), (1.0,)])[:, 0]) == (1.0, 1.0)
    assert percentile_interval(np.array([np.nan])) is None
    assert item_bootstrap([]).shape == (2000, 0)


def test_majority_vote_rules() -> None:
    assert majority_vote([0, 0, 1]) == (1.0, False, False)
    assert majority_vote([1, 1, 0]) == (0.0, False, False)
    assert majority_vote([0, 1, 2]) == (pytest.approx(1 / 3), True, False)  # 3-way tie
    assert majority_vote([1, 2, 1, 2]) == (0.0, True, False)  # tie without the truth
    assert majority_vote([0, -1, -1, -1]) == (1.0, False, False)  # non-answers do not vote
    assert majority_vote([-1, -1]) == (0.0, False, True)
    assert majority_vote([2, 1, 1, 0, 0, 0]) == (1.0, False, False)


def _verdicts(rows: list[tuple[str, int, str, str, int | None]]) -> pl.DataFrame:
    return verdicts_frame(
        [
            {
                "model": m,
                "trial": t,
                "custom_id": cid,
                "status": status,
                "tier": "small" if cid < "5" else "medium",
                "answer_class": cls,
            }
            for m, t, cid, status, cls in rows
        ]
    )


EQ, NE, NA, API = "equivalent", "not_equivalent", "no_answer", "api_error"

# model m: item 1 right 1/3 but its two wrong answers are one class; item 2 right twice;
# item 3 a tie between the truth and a wrong class (one no_answer); item 7 all wrong.
RUN = [
    ("m", 1, "1", EQ, 0), ("m", 2, "1", NE, 1), ("m", 3, "1", NE, 1),
    ("m", 1, "2", EQ, 0), ("m", 2, "2", NE, 1), ("m", 3, "2", EQ, 0),
    ("m", 1, "3", EQ, 0), ("m", 2, "3", NE, 1), ("m", 3, "3", NA, -1),
    ("m", 1, "7", NE, 1), ("m", 2, "7", NE, 2), ("m", 3, "7", API, -1),
]  # fmt: skip


def test_summary_has_pass_at_k_and_majority_per_model_and_tier() -> None:
    summary = summarize(_verdicts(RUN))
    m = summary["models"][0]
    passk = m["pass_at_k"]
    assert [p["k"] for p in passk] == [1, 2, 3]
    # per item (n, c): (3,1), (3,2), (3,1), (2,0): item 7 has 2 scored answers
    assert passk[0]["value"] == pytest.approx((1 / 3 + 2 / 3 + 1 / 3 + 0) / 4)
    assert passk[1]["value"] == pytest.approx((2 / 3 + 1 + 2 / 3 + 0) / 4)
    assert passk[2]["items"] == 3 and passk[2]["value"] == pytest.approx(1.0 * 3 / 3)
    maj = m["majority"]
    # item 1: wrong class wins; 2: truth; 3: tie (1/2); 7: wrong
    assert maj["value"] == pytest.approx((0 + 1 + 0.5 + 0) / 4)
    assert maj["correct"] == pytest.approx(1.5)
    assert (maj["ties"], maj["no_votes"], maj["items"], maj["n"]) == (2, 0, 4, 3)
    assert maj["low"] <= maj["value"] <= maj["high"]
    tiers = {t["tier"]: t for t in summary["tiers"]}
    assert tiers["small"]["majority"]["value"] == pytest.approx(1.5 / 3)
    assert tiers["medium"]["majority"]["value"] == 0.0
    json.dumps(summary)  # JSON-ready
    # the same numbers again: the bootstrap is seeded
    assert summarize(_verdicts(RUN))["models"][0]["majority"] == maj


def _many_items(seed: int, models: int = 3) -> list[tuple[str, int, str, str, int | None]]:
    rng = random.Random(seed)
    rows: list[tuple[str, int, str, str, int | None]] = []
    for model in (f"m{i}" for i in range(1, models + 1)):
        for item in range(60):
            for trial in (1, 2, 3):
                ok = rng.random() < 0.5
                rows.append((model, trial, str(item), EQ if ok else NE, 0 if ok else 1))
    return rows


@pytest.mark.parametrize("split_item", [False, True])
def test_a_models_sampling_equals_its_own_pass_over_the_items(split_item: bool) -> None:
    """A model's pass@k and maj@n come from its tiers' items put together; they must be
    what one pass over the model's items gives, also when the verdicts put one item
    under two tiers (then the model's own pass is taken)."""
    frame = _verdicts(_many_items(5))
    if split_item:
        moved = (pl.col("custom_id") == "0") & (pl.col("trial") == 1)
        frame = frame.with_columns(
            pl.when(moved).then(pl.lit("large")).otherwise(pl.col("tier")).alias("tier")
        )
    summary = summarize(frame)
    own = item_counts(frame, ["model"])
    for m in summary["models"]:
        items = own[(m["model"],)]
        assert len(items) == 60  # one record per item, however its tiers are labelled
        assert m["pass_at_k"] == pass_at_k_block(items)
        assert m["majority"] == majority_block(items)


def test_the_summary_does_not_depend_on_the_order_of_the_verdicts() -> None:
    """Ties in the separating items' ranking stay ties (the spread is summed exactly),
    and the same verdicts in another order (models still first seen in the same order:
    that order is the report's) give the same summary, to the last bit."""
    frame = _verdicts(_many_items(11, models=7))  # seven models: many equal spreads
    first = json.dumps(summarize(frame), sort_keys=True)
    for seed in (1, 2, 3):
        shuffled = frame.sample(fraction=1.0, shuffle=True, seed=seed).sort(
            "model", maintain_order=True
        )
        assert json.dumps(summarize(shuffled), sort_keys=True) == first


def test_majority_is_none_until_classes_are_computed() -> None:
    rows = [(m, t, c, s, None) for m, t, c, s, _ in RUN]
    m = summarize(_verdicts(rows))["models"][0]
    assert m["majority"] is None
    assert m["pass_at_k"][0]["value"] is not None  # pass@k needs no classes


def test_every_report_format_shows_pass_at_k_and_majority() -> None:
    summary = summarize(_verdicts(RUN))
    grids = report_grids(summary)
    assert sampling_grid(summary) in grids
    grid = sampling_grid(summary)
    assert grid.columns[1:4] == ("pass@1 [95% CI]", "pass@2 [95% CI]", "pass@3 [95% CI]")
    assert grid.rows[0][4].startswith("37.5% [") and grid.rows[0][4].endswith("(n=3)")
    md = markdown_report(summary, title="t")
    assert "pass@3 [95% CI]" in md and "maj@n" in md and "Z3 proves equivalent" in md
    rows = list(csv.DictReader(io.StringIO(summary_csv(summary))))
    model_row = next(r for r in rows if r["level"] == "model")
    assert float(model_row["maj_at_n"]) == pytest.approx(0.375)
    assert float(model_row["pass_at_2"]) == pytest.approx(
        summary["models"][0]["pass_at_k"][1]["value"]
    )
    assert model_row["maj_ties"] == "2"
    trial_row = next(r for r in rows if r["level"] == "trial")
    assert trial_row["pass_at_1"] == "" and trial_row["maj_at_n"] == ""
    page = html_report(summary, title="t")
    assert 'id="chart-passk"' in page and "pass@3 [95% CI]" in page


def test_one_trial_reports_leave_the_sampling_tables_out() -> None:
    one = [r for r in RUN if r[1] == 1]
    summary = summarize(_verdicts(one))
    assert summary["models"][0]["pass_at_k"][0]["value"] == pytest.approx(0.75)
    assert all("pass@" not in g.title for g in report_grids(summary))
    assert 'id="chart-passk"' not in html_report(summary, title="t")


def test_compare_shows_pass_at_k_and_majority_differences() -> None:
    # B gets item 1 right by majority and item 7 right twice
    better = [
        r if (r[2], r[1]) not in {("1", 2), ("7", 1), ("7", 2)} else (r[0], r[1], r[2], EQ, 0)
        for r in RUN
    ]
    comparison = compare_runs(_verdicts(RUN), _verdicts(better))
    entry = comparison["models"][0]
    sa, sb = comparison["summary_a"]["models"][0], comparison["summary_b"]["models"][0]
    assert entry["majority_diff"]["value"] == pytest.approx(
        sb["majority"]["value"] - sa["majority"]["value"]
    )
    assert entry["majority_diff"]["value"] == pytest.approx((1 + 0 + 0 + 1) / 4)
    assert entry["majority_diff"]["low"] <= entry["majority_diff"]["value"]
    assert [d["k"] for d in entry["pass_at_k_diff"]] == [1, 2, 3]
    for d, k in zip(entry["pass_at_k_diff"], range(3), strict=True):
        assert d["value"] == pytest.approx(
            sb["pass_at_k"][k]["value"] - sa["pass_at_k"][k]["value"]
        )
        assert d["low"] <= d["value"] <= d["high"]
    grid = compare_sampling_grid(comparison)
    stats = [row[1] for row in grid.rows]
    assert stats == ["pass@1", "pass@2", "pass@3", "maj@n"]
    assert grid.rows[-1][4].startswith("+50.0 [")
    assert "maj@n" in grid_markdown(grid)
    page = html_compare(comparison, grid, title="t")
    assert "+50.0 [" in page
    # identical runs: no difference, and a zero-width paired interval
    same = compare_runs(_verdicts(RUN), _verdicts(RUN))["models"][0]
    assert same["majority_diff"] == {"value": 0.0, "low": 0.0, "high": 0.0}


def test_compare_without_classes_in_one_run_leaves_majority_out() -> None:
    plain = [(m, t, c, s, None) for m, t, c, s, _ in RUN]
    entry = compare_runs(_verdicts(RUN), _verdicts(plain))["models"][0]
    assert entry["majority_diff"] is None
    assert entry["pass_at_k_diff"][0]["value"] == pytest.approx(0.0)


def test_pass_at_k_of_uniform_items_is_the_closed_form() -> None:
    # every item 2 of 4 right: pass@k = 1 - C(2,k)/C(4,k) exactly, with no spread
    items = [ItemCounts(str(i), 4, 2, None) for i in range(20)]
    for p in pass_at_k_block(items):
        want = 1 - comb(2, p["k"]) / comb(4, p["k"])
        assert p["value"] == pytest.approx(want)
        assert p["low"] == pytest.approx(want) and p["high"] == pytest.approx(want)


def test_pass_at_k_chart_matches_the_summary() -> None:
    from aeval.report import figures

    summary = summarize(_verdicts(RUN))
    m = summary["models"][0]
    fig = figures.pass_at_k_figure(summary)
    drawn = {a.get_gid(): a for a in fig.findobj(lambda a: a.get_gid() is not None)}
    assert list(drawn["m"].get_xdata()) == [1, 2, 3]
    assert list(drawn["m"].get_ydata()) == pytest.approx([p["value"] for p in m["pass_at_k"]])
    lows = [min(s[:, 1]) for s in drawn["ci|m"].get_segments()]
    assert lows == pytest.approx([p["low"] for p in m["pass_at_k"]])
    assert list(drawn["maj|m"].get_ydata()) == [0.375]  # maj@n's hollow diamond
    assert fig.axes[0].get_xlabel().startswith("k (answers drawn per item)")


def test_report_command_shows_them_in_every_format(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    better = [r if (r[2], r[1]) != ("1", 2) else (r[0], r[1], r[2], EQ, 0) for r in RUN]
    for name, rows in (("a", RUN), ("b", better)):
        (tmp_path / name).mkdir()
        _verdicts(rows).write_parquet(tmp_path / name / "verdicts.parquet")
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    assert main(["report", a, "--format", "json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["models"][0]["majority"]["value"] == pytest.approx(0.375)
    assert main(["report", a]) == 0
    assert "maj@n" in capsys.readouterr().out
    assert main(["report", a, b, "--format", "md"]) == 0
    md = capsys.readouterr().out
    assert "| m | maj@n |" in md and "+25.0 [" in md
    assert main(["report", a, b, "--format", "csv"]) == 0
    (row,) = csv.DictReader(io.StringIO(capsys.readouterr().out))  # one row per model
    assert row["Model"] == "m" and float(row["maj_at_n_diff"]) == pytest.approx(0.25)
    assert float(row["maj_at_n_a"]) == pytest.approx(0.375)
    assert float(row["pass_at_1_diff"]) == pytest.approx(1 / 12)
    assert float(row["maj_at_n_diff_low"]) <= 0.25 <= float(row["maj_at_n_diff_high"])
    assert main(["report", a, b, "--format", "json"]) == 0
    entry = json.loads(capsys.readouterr().out)["models"][0]
    assert entry["majority_diff"]["value"] == pytest.approx(0.25)
    assert main(["report", a, b]) == 0
    assert "pass@3" in capsys.readouterr().out


def test_no_votes_and_a_tier_lost_to_infrastructure() -> None:
    rows = [
        *RUN,
        ("m", 1, "4", NA, -1), ("m", 2, "4", "parse_error", -1), ("m", 3, "4", NA, -1),
        ("m", 1, "8", API, -1), ("m", 2, "8", API, -1), ("m", 3, "8", "missing", -1),
    ]  # fmt: skip
    summary = summarize(_verdicts(rows))
    maj = summary["models"][0]["majority"]
    # item 4 had answers but none voted: counted, incorrect; item 8 was never scored
    assert (maj["items"], maj["no_votes"]) == (5, 1)
    assert maj["value"] == pytest.approx(1.5 / 5)
    medium = {t["tier"]: t for t in summary["tiers"]}["medium"]
    assert medium["pass_at_k"][0]["items"] == 1  # item 7 only: item 8 is all infrastructure
    only_infra = summarize(_verdicts([r for r in rows if r[2] == "8"]))
    tier = only_infra["tiers"][0]
    assert tier["pass_at_k"] == [] and tier["majority"] is None
    assert only_infra["models"][0]["majority"] is None
    grid = sampling_tier_grid(only_infra)
    assert grid.rows[0][2:] == ("—", "—", "—")
