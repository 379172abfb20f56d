from __future__ import annotations

from aeval.verdicts import CheckResult, Status, Verdict, verdicts_frame


def test_verdict_round_trips_through_its_record() -> None:
    check = CheckResult(
        Status.NOT_EQUIVALENT, "too weak", direction="too_weak", counterexample={"x": "3"}
    )
    v = Verdict.from_check(check, model="m", trial=1, custom_id="7", tier="small")
    rec = v.to_record()
    assert rec["status"] == "not_equivalent" and rec["correct"] is False
    assert Verdict.from_record(rec) == v


def test_verdicts_frame_has_the_canonical_schema() -> None:
    ok = Verdict(model="m", trial=1, custom_id="0", status=Status.EQUIVALENT)
    bad = Verdict(
        model="m", trial=1, custom_id="1", status=Status.NOT_EQUIVALENT, counterexample={"a": "1"}
    )
    df = verdicts_frame([ok, bad])
    assert df["correct"].to_list() == [True, False]
    assert df["counterexample"].to_list() == [None, '{"a": "1"}']
    assert verdicts_frame([]).height == 0


def test_record_is_the_dataclass_form_and_does_not_share_the_counterexample() -> None:
    import dataclasses

    v = Verdict(
        model="m",
        trial=2,
        custom_id="9",
        status=Status.NOT_EQUIVALENT,
        reason="r",
        repaired="code_fence",
        direction="both",
        counterexample={"x": "1"},
        tier="large",
    )
    rec = v.to_record()
    expected = {
        **dataclasses.asdict(v),
        "status": "not_equivalent",
        "correct": False,
        "published_category": None,
    }
    assert rec == expected and list(rec) == list(expected)
    rec["counterexample"]["x"] = "changed"
    assert v.counterexample == {"x": "1"}
