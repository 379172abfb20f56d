from __future__ import annotations

import json
import math
from pathlib import Path

import polars as pl
import pytest

from aeval.errors import RunDirError
from aeval.report import load_run, summarize, wilson_interval
from aeval.verdicts import Status, Verdict, verdicts_frame


def v(model: str, trial: int, item: int, status: Status, **kw: object) -> Verdict:
    return Verdict(model=model, trial=trial, custom_id=f"item-{item}", status=status, **kw)


def test_wilson_matches_textbook_values() -> None:
    # Wilson 95 % for 8/10 is [0.4902, 0.9433] (Newcombe 1998, table I).
    low, high = wilson_interval(8, 10)
    assert low == pytest.approx(0.4902, abs=1e-4)
    assert high == pytest.approx(0.9433, abs=1e-4)
    # Stays inside [0, 1] at the edges, where the normal approximation does not.
    assert wilson_interval(0, 5)[0] == 0.0
    assert wilson_interval(5, 5)[1] == 1.0
    assert wilson_interval(0, 0) is None


def test_infra_failures_are_not_counted_against_the_model() -> None:
    rows = [
        v("m", 1, 0, Status.EQUIVALENT),
        v("m", 1, 1, Status.EQUIVALENT, repaired="code_fence"),
        v("m", 1, 2, Status.NOT_EQUIVALENT, direction="too_weak"),
        v("m", 1, 3, Status.API_ERROR),
        v("m", 1, 4, Status.MISSING),
        v("m", 1, 5, Status.BAD_GROUND_TRUTH),
    ]
    s = summarize(verdicts_frame(rows))
    (m,) = s["models"]
    assert m["n"] == 6
    assert m["scored"] == 3
    assert m["infra_failures"] == 3
    assert m["model_failures"] == 1
    assert m["accuracy"]["value"] == pytest.approx(2 / 3)
    assert m["strict_accuracy"]["value"] == pytest.approx(1 / 3)
    assert (m["accuracy"]["low"], m["accuracy"]["high"]) == pytest.approx(wilson_interval(2, 3))
    assert m["statuses"]["api_error"] == 1
    assert m["statuses"]["timeout"] == 0
    assert m["directions"]["too_weak"] == 1
    assert m["repaired"] == 1


def test_per_trial_tier_and_mean_std_across_trials() -> None:
    rows = []
    # trial 1: 3/4 correct, trial 2: 1/4 correct; tiers alternate.
    for trial, n_correct in ((1, 3), (2, 1)):
        for i in range(4):
            status = Status.EQUIVALENT if i < n_correct else Status.PARSE_ERROR
            rows.append(
                v(
                    "b-model",
                    trial,
                    i,
                    status,
                    tier="easy" if i % 2 else "hard",
                    prompt_tokens=10,
                    completion_tokens=5,
                )
            )
    rows.append(v("a-model", 1, 0, Status.EQUIVALENT))
    s = summarize(verdicts_frame(rows))
    # Models keep the order in which they first appear (the run's order).
    assert [m["model"] for m in s["models"]] == ["b-model", "a-model"]
    b = s["models"][0]
    assert b["across_trials"]["trials"] == 2
    assert b["across_trials"]["mean"] == pytest.approx(0.5)
    assert b["across_trials"]["std"] == pytest.approx(math.sqrt(0.125))  # sample std of .75, .25
    assert s["models"][1]["across_trials"]["std"] is None
    trials = [(t["model"], t["trial"], t["correct"]) for t in s["trials"]]
    assert trials == [("b-model", 1, 3), ("b-model", 2, 1), ("a-model", 1, 1)]
    tiers = {(t["model"], t["tier"]): t["correct"] for t in s["tiers"]}
    assert tiers == {("b-model", "easy"): 1, ("b-model", "hard"): 3, ("a-model", None): 1}
    assert b["tokens"] == {"prompt": 80, "completion": 40, "total": 120, "reasoning": None}
    assert s["overall"]["n"] == 9
    json.dumps(s)  # summary.json must serialise as is


def test_empty_frame_summarizes_to_no_models() -> None:
    s = summarize(verdicts_frame([]))
    assert s["models"] == [] and s["overall"] is None


def test_load_run_prefers_parquet(tmp_path: Path) -> None:
    verdicts_frame([v("m", 1, 0, Status.EQUIVALENT)]).write_parquet(tmp_path / "verdicts.parquet")
    (tmp_path / "verdicts.jsonl").write_text("garbage\n")
    frame = load_run(tmp_path)
    assert frame["status"].to_list() == ["equivalent"]


def test_load_run_reads_interrupted_jsonl(tmp_path: Path) -> None:
    lines = [json.dumps(v("m", 1, i, Status.TIMEOUT).to_record()) for i in range(3)]
    # A resumed run re-verified item-1: the later line wins.
    lines.append(json.dumps(v("m", 1, 1, Status.EQUIVALENT).to_record()))
    torn = json.dumps(v("m", 1, 9, Status.EQUIVALENT).to_record())[:40]
    (tmp_path / "verdicts.jsonl").write_text("\n".join([*lines, torn]))
    frame = load_run(tmp_path)
    assert frame.height == 3
    statuses = dict(zip(frame["custom_id"], frame["status"], strict=True))
    assert statuses == {"item-0": "timeout", "item-1": "equivalent", "item-2": "timeout"}
    assert frame.schema["trial"] == pl.Int64


def test_load_run_names_the_bad_line(tmp_path: Path) -> None:
    good = json.dumps(v("m", 1, 0, Status.TIMEOUT).to_record())
    (tmp_path / "verdicts.jsonl").write_text(f"{good}\n{{not json}}\n{good}\n")
    with pytest.raises(RunDirError, match=r"verdicts\.jsonl:2"):
        load_run(tmp_path)


def test_load_run_rejects_a_directory_without_verdicts(tmp_path: Path) -> None:
    with pytest.raises(RunDirError, match=r"no verdicts\.parquet"):
        load_run(tmp_path)
    with pytest.raises(RunDirError, match="not a directory"):
        load_run(tmp_path / "nope")


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ('{"model": "m", "trial": "one", "custom_id": "a", "status": "timeout"}', "integer"),
        ('{"model": "m", "trial": 1, "custom_id": "a", "status": "great"}', "great"),
        ('{"model": "m", "trial": 1, "status": "timeout"}', "custom_id"),
        ('["not", "an", "object"]', "not a JSON object"),
    ],
)
def test_load_run_rejects_hostile_lines_by_line_number(tmp_path: Path, line: str, why: str) -> None:
    good = json.dumps(v("m", 1, 0, Status.TIMEOUT).to_record())
    (tmp_path / "verdicts.jsonl").write_text(f"{good}\n{line}\n{good}\n")
    with pytest.raises(RunDirError, match=rf"verdicts\.jsonl:2: .*{why}"):
        load_run(tmp_path)


def _reasoning_summary(reasoning: list[int | None]) -> dict:  # type: ignore[type-arg]
    rows = [
        Verdict(model=f"m{i % 2}", trial=1, custom_id=str(i), status=Status.EQUIVALENT,
                prompt_tokens=10, completion_tokens=50, reasoning_tokens=r)
        for i, r in enumerate(reasoning)
    ]  # fmt: skip
    return summarize(verdicts_frame(rows))  # type: ignore[return-value]


def test_a_reasoning_column_is_in_every_format_where_a_run_has_reasoning_tokens() -> None:
    from aeval.report.html import html_report
    from aeval.report.latex import paper_grids
    from aeval.report.text import markdown_report, summary_csv
    from aeval.summary.tables import summary_grid

    with_ = _reasoning_summary([40, None, 20, None])  # m0 reasoned; m1's answers said nothing
    assert [m["tokens"]["reasoning"] for m in with_["models"]] == [60, None]
    grid = summary_grid(with_)
    assert grid.columns[-1] == "Reasoning" and [r[-1] for r in grid.rows] == ["60", "—"]
    assert "| Reasoning |" in markdown_report(with_, title="t")
    assert ">Reasoning<" in html_report(with_, title="t")
    (_, accuracy, _), *_ = paper_grids(with_)
    assert accuracy.columns[-1] == "Reasoning tokens/answer"
    assert [r[-1] for r in accuracy.rows] == ["30", "—"]  # 60 tokens over 2 answers
    head, *rows = summary_csv(with_).splitlines()
    at = head.split(",").index("reasoning_tokens")
    assert [r.split(",")[at] for r in rows[:2]] == ["60", ""]
    # a run without reasoning (or whose models all say 0) shows no such column
    for without in (_reasoning_summary([None] * 4), _reasoning_summary([0] * 4)):
        assert "Reasoning" not in summary_grid(without).columns
        assert "| Reasoning |" not in markdown_report(without, title="t")
        assert "Reasoning tokens/answer" not in paper_grids(without)[0][1].columns
