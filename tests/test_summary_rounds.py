"""Repair rounds in the summary: accuracy by round, the repair rate, their cost, and
round 1 read as a one-round run (aeval.summary.rounds)."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aeval.cost import actual_cost
from aeval.feedback import round_custom_id
from aeval.report import summarize
from aeval.store.results import write_results
from aeval.summary.aggregate import grouped_by, summarize_file
from aeval.summary.rounds import first_round, item_id, rounds_in
from aeval.verdicts import INFRA_STATUSES, Status, Verdict, verdicts_frame

E, W = Status.EQUIVALENT, Status.NOT_EQUIVALENT
PRICED = "gpt-4o-mini"  # a model aeval.cost knows the price of


def conversation(
    model: str, trial: int, item: str, statuses: Sequence[Status], *, tier: str = "small"
) -> list[Verdict]:
    """The verdicts of one (model, trial, item) over its rounds, as a run writes them."""
    return [
        Verdict(
            model=model,
            trial=trial,
            custom_id=round_custom_id(item, r),
            round=r,
            status=s,
            tier=tier,
            direction="too_weak" if s is W else None,
            prompt_tokens=None if s in INFRA_STATUSES else 100 * r,
            completion_tokens=None if s in INFRA_STATUSES else 10,
        )
        for r, s in enumerate(statuses, start=1)
    ]


def frame_of(histories: dict[tuple[str, int, str], Sequence[Status]]) -> pl.DataFrame:
    rows = [v for (m, t, i), ss in histories.items() for v in conversation(m, t, i, ss)]
    return verdicts_frame(rows)


EXAMPLE = {
    ("m", 1, "1"): [E],
    ("m", 1, "2"): [W, E],
    ("m", 1, "3"): [Status.PARSE_ERROR, W, E],
    ("m", 1, "4"): [W, W, W],
    ("m", 1, "5"): [Status.API_ERROR],  # never scored: not in the denominator
    ("m", 1, "6"): [Status.TIMEOUT],  # first wrong, never asked again
}


def test_accuracy_by_round_repair_rate_and_rounds_to_solve() -> None:
    (m,) = summarize(frame_of(EXAMPLE), rounds=3)["models"]
    r = m["rounds"]
    assert r["rounds"] == 3
    assert r["items"] == 5
    assert r["asked"] == [6, 3, 2]
    assert r["infra_failures"] == [1, 0, 0]
    assert r["solved"] == [1, 1, 1]
    assert r["solved_by"] == [1, 2, 3]
    assert r["accuracy_by_round"] == pytest.approx([1 / 5, 2 / 5, 3 / 5])
    assert [a["k"] for a in r["accuracy_at_k"]] == [1, 2, 3]
    assert [a["successes"] for a in r["accuracy_at_k"]] == [1, 2, 3]
    assert r["first_wrong"] == 4
    assert r["repaired"] == 2
    assert r["repair_rate"]["value"] == pytest.approx(2 / 4)
    assert r["repair_rate"]["low"] < 0.5 < r["repair_rate"]["high"]
    assert r["mean_rounds_to_solve"] == pytest.approx((1 + 2 + 3) / 3)
    # round 1 of the rounds is the model's accuracy (the same answers)
    assert r["accuracy_at_k"][0] == {"k": 1, **m["accuracy"]}
    assert [t["prompt"] for t in r["tokens"]] == [500, 600, 600]
    assert r["tokens_per_solved"] == pytest.approx((550 + 630 + 620) / 3)


def test_round_one_reads_as_a_one_round_run() -> None:
    """Every number a one-round run has is the same for the round-1 verdicts of a
    K-round run: no later round counts twice, in any group."""
    rounds = frame_of(EXAMPLE)
    only_first = rounds.filter(pl.col("round") == 1)
    with_rounds = summarize(rounds, rounds=3)
    one_round = summarize(only_first)
    for level in ("models", "trials"):
        for group in with_rounds[level]:
            assert "rounds" in group
            del group["rounds"]
    assert json.dumps(with_rounds, sort_keys=True) == json.dumps(one_round, sort_keys=True)
    assert "rounds" not in json.dumps(one_round)
    # the same for the per-group records of report --by
    assert grouped_by(rounds, "tier") == grouped_by(only_first, "tier")


def test_a_one_round_summary_has_no_rounds_key_and_old_records_read_as_round_one() -> None:
    rows = [v.to_record() for v in conversation("m", 1, "1", [E])]
    rows += [v.to_record() for v in conversation("m", 1, "2", [W])]
    old = [{k: val for k, val in rec.items() if k != "round"} for rec in rows]
    new, before = summarize(verdicts_frame(rows)), summarize(verdicts_frame(old))
    assert json.dumps(new) == json.dumps(before)
    assert all("rounds" not in g for g in (*new["models"], *new["trials"]))
    # K = 1 from the config: still no rounds record
    assert json.dumps(summarize(verdicts_frame(rows), rounds=1)) == json.dumps(new)


def test_rounds_from_the_config_when_every_item_was_solved_at_once() -> None:
    """K = 3 with every answer right in round 1: later rounds asked nothing."""
    frame = frame_of({("m", 1, "1"): [E], ("m", 1, "2"): [E]})
    assert "rounds" not in summarize(frame)["models"][0]  # K read from the verdicts: 1
    r = summarize(frame, rounds=3)["models"][0]["rounds"]
    assert r["accuracy_by_round"] == [1.0, 1.0, 1.0]
    assert r["asked"] == [2, 0, 0]
    assert r["first_wrong"] == 0
    assert r["repair_rate"]["value"] is None
    assert r["mean_rounds_to_solve"] == 1.0


def test_an_infrastructure_failure_in_a_later_round_leaves_the_item_unsolved() -> None:
    frame = frame_of({("m", 1, "1"): [W, Status.API_ERROR], ("m", 1, "2"): [W, E]})
    r = summarize(frame)["models"][0]["rounds"]
    assert r["items"] == 2
    assert r["infra_failures"] == [0, 1]
    assert r["accuracy_by_round"] == [0.0, 0.5]
    assert r["repair_rate"]["value"] == 0.5


def test_cost_per_round_and_per_solved_item() -> None:
    histories = {(PRICED, 1, str(i)): [W, E] if i % 2 else [E] for i in range(1, 7)}
    (m,) = summarize(frame_of(histories))["models"]
    r = m["rounds"]
    assert r["cost_usd"][0] == m["cost_usd"]  # round 1 is the group's cost
    expected = actual_cost(PRICED, r["tokens"][1], requests=3, batch=True)
    assert r["cost_usd"][1] == expected and expected is not None and expected > 0
    assert r["cumulative_cost_usd"] == pytest.approx(
        [r["cost_usd"][0], r["cost_usd"][0] + r["cost_usd"][1]]
    )
    assert r["cost_per_solved_usd"] == pytest.approx(r["cumulative_cost_usd"][-1] / 6)
    # direct mode pays list price
    direct = summarize(frame_of(histories), batch_prices=False)["models"][0]["rounds"]
    assert direct["cost_usd"][1] > r["cost_usd"][1]
    # a model without a known price: no cost, tokens still counted
    unknown = summarize(frame_of({("no-such-model", 1, "1"): [W, E]}))["models"][0]["rounds"]
    assert unknown["cost_usd"] == [None, None]
    assert unknown["cost_per_solved_usd"] is None
    assert unknown["tokens_per_solved"] == 110 + 210


def test_per_trial_records_and_rounds_beside_trials() -> None:
    histories = {
        (PRICED, 1, "1"): [W, E],
        (PRICED, 1, "2"): [W, W],
        (PRICED, 2, "1"): [E],
        (PRICED, 2, "2"): [W, E],
    }
    s = summarize(frame_of(histories))
    t1, t2 = s["trials"]
    assert t1["rounds"]["accuracy_by_round"] == [0.0, 0.5]
    assert t2["rounds"]["accuracy_by_round"] == [0.5, 1.0]
    assert "versus_trials" not in t1["rounds"]
    (m,) = s["models"]
    assert m["rounds"]["accuracy_by_round"] == [0.25, 0.75]
    vs = m["rounds"]["versus_trials"]
    assert [v["k"] for v in vs] == [1, 2]
    assert vs[1]["accuracy_at_k"] == 0.75
    assert vs[1]["pass_at_k"] == m["pass_at_k"][1]["value"] == pytest.approx(0.5)
    # k rounds cost rounds 1..k of an answer; k trials, k round-1 answers
    assert vs[1]["rounds_cost_per_item"] == pytest.approx(m["rounds"]["cumulative_cost_usd"][1] / 4)
    assert vs[1]["trials_cost_per_item"] == pytest.approx(2 * m["cost_usd"] / 4)
    assert vs[0]["rounds_tokens_per_item"] == vs[0]["trials_tokens_per_item"] == 110
    # the model's interval is clustered by item over its trials
    assert m["rounds"]["accuracy_at_k"][1]["design_effect"] is not None


def test_item_ids_and_first_round_of_a_frame() -> None:
    frame = frame_of({("m", 1, "7_r2"): [W, E], ("m", 1, "x"): [E]})
    # an item id that itself ends like a round suffix keeps it in round 1
    assert frame.select(item_id()).get_column("item").to_list() == ["7_r2", "7_r2", "x"]
    assert first_round(frame).height == 2
    assert rounds_in(frame) == 2
    assert first_round(frame.drop("round")).height == 3
    assert rounds_in(frame.drop("round")) == 1


STATUSES = list(Status)
REPAIRABLE_OR_DONE = st.sampled_from(STATUSES)


@st.composite
def histories(draw: st.DrawFn) -> tuple[int, dict[tuple[str, int, str], list[Status]]]:
    """Random round histories: each answer stops at its first equivalent, or at any
    non-repairable status, or at K."""
    k = draw(st.integers(1, 4))
    out: dict[tuple[str, int, str], list[Status]] = {}
    for model in draw(st.lists(st.sampled_from(["a", "b"]), min_size=1, max_size=2, unique=True)):
        trials = draw(st.integers(1, 3))
        for trial in range(1, trials + 1):
            for item in range(draw(st.integers(1, 6))):
                statuses = [draw(REPAIRABLE_OR_DONE)]
                while statuses[-1] is not E and len(statuses) < k and draw(st.booleans()):
                    statuses.append(draw(REPAIRABLE_OR_DONE))
                out[(model, trial, str(item))] = statuses
    return k, out


def recount(
    histories: dict[tuple[str, int, str], list[Status]], model: str, k: int
) -> float | None:
    """accuracy@k by hand from the round histories."""
    mine = [ss for (m, _, _), ss in histories.items() if m == model]
    scored = [ss for ss in mine if ss[0] not in INFRA_STATUSES]
    solved = [ss for ss in scored if E in ss[:k]]
    return len(solved) / len(scored) if scored else None


@settings(max_examples=60, deadline=None)
@given(histories())
def test_accuracy_by_round_is_non_decreasing_and_a_recount(
    drawn: tuple[int, dict[tuple[str, int, str], list[Status]]],
) -> None:
    k, history = drawn
    summary = summarize(frame_of(history), rounds=k, items=False)
    for m in summary["models"]:
        if k == 1:
            assert "rounds" not in m
            continue
        r: dict[str, Any] = dict(m["rounds"])
        acc = r["accuracy_by_round"]
        assert len(acc) == k
        assert acc == [recount(history, m["model"], j) for j in range(1, k + 1)]
        known = [a for a in acc if a is not None]
        assert known == sorted(known)
        assert acc[0] == m["accuracy"]["value"]
        assert r["solved_by"][-1] == sum(r["solved"])
        if r["first_wrong"] and acc[0] is not None:
            rate = r["repair_rate"]["value"]
            assert acc[-1] == pytest.approx(acc[0] + (1 - acc[0]) * rate)
        trials = [t for t in summary["trials"] if t["model"] == m["model"]]
        assert sum(t["rounds"]["solved_by"][-1] for t in trials) == r["solved_by"][-1]


@settings(max_examples=40, deadline=None)
@given(histories(), st.booleans())
def test_the_summary_of_the_verdict_file_is_the_summary_of_the_frame(
    drawn: tuple[int, dict[tuple[str, int, str], list[Status]]], priced: bool
) -> None:
    """The run's end summarises from the verdict file it has just written, the frame let
    go (#44's memory target): every byte of summary.json must be what summarize() of the
    whole frame gives, the rounds block, pass@k and the item levels included."""
    k, history = drawn
    if priced:  # costs per round and per solved item, with a model whose price is known
        history = {(PRICED if m == "a" else m, t, i): ss for (m, t, i), ss in history.items()}
    frame = frame_of(history)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        write_results(out, frame, None)
        from_file = summarize_file(out / "verdicts.parquet", rounds=k)
    from_frame = summarize(frame, rounds=k)
    assert json.dumps(from_file, sort_keys=True) == json.dumps(from_frame, sort_keys=True)
    assert ("rounds" in from_file["models"][0]) == (k > 1)


def test_the_summary_of_an_old_verdict_file_conforms_it_as_the_frame_is() -> None:
    """A file written before ``round`` and ``published_category`` existed reads as round 1,
    its categories from its reasons: the same summary as its frame's."""
    frame = frame_of(EXAMPLE).with_columns(
        pl.lit("Constraints are logically equivalent.").alias("published_reason")
    )
    old = frame.filter(pl.col("round") == 1).drop("round", "published_category")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "verdicts.parquet"
        old.write_parquet(path)
        from_file = summarize_file(path)
    assert from_file == summarize(old)
    assert "rounds" not in from_file["models"][0]
    assert from_file["overall"]["published_categories"]["correct"] == old.height
