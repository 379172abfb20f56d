"""Repair rounds in every report: the formats of ``report``, ``report A B``, the
leaderboard, the LaTeX paper, the figures, the viewer's conversation, and every
consumer that reads round 1 only (``--wrong``, maj@n's answer classes).

The run directories are laid out as ``aeval run --rounds K`` writes one
(aeval.feedback's round ids ``ITEM_rR``, config.json's ``rounds`` / ``feedback`` /
``feedback_template``, one verdict per round asked); each round's answers in their
own shard's output file.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from test_report_paper import compile_latex
from viewer_helpers import answer_text, truth, write_dataset

from aeval.cli import main
from aeval.feedback import render_feedback, round_custom_id
from aeval.report.comparable import read_sources
from aeval.report.leaderboard import combine_runs, leaderboard, leaderboard_csv
from aeval.report.samples import load_samples, round_settings
from aeval.report.viewer import viewer_data
from aeval.scoring.answer_classes import keys_needing_text
from aeval.store import shard_stem
from aeval.summary.aggregate import load_run, summarize
from aeval.verdicts import Status, Verdict, verdicts_frame

E, W, P = Status.EQUIVALENT, Status.NOT_EQUIVALENT, Status.PARSE_ERROR
MODELS = ("gpt-4o-mini", "o3-mini")  # priced models: the costs are numbers
Histories = dict[tuple[str, int, str], Sequence[Status]]


def histories(trials: int = 2, items: int = 12) -> Histories:
    """gpt-4o-mini repairs well, o3-mini less; item 12 is never solved."""
    out: Histories = {}
    for j, model in enumerate(MODELS):
        for trial in range(1, trials + 1):
            for i in range(1, items + 1):
                if i == items:
                    out[(model, trial, str(i))] = [W, P, W]
                elif (i + trial + j) % 3 == 0:
                    out[(model, trial, str(i))] = [E]
                elif (i + j) % 3 == 1:
                    out[(model, trial, str(i))] = [W, E]
                elif j == 0:
                    out[(model, trial, str(i))] = [P, W, E]
                else:
                    out[(model, trial, str(i))] = [W, W, W]
    return out


def _content(item: str, status: Status, r: int) -> str:
    if status is E:
        return answer_text(truth(item), draft=f"round {r}: the loop runs n times.")
    if status is P:
        return answer_text(f"(assert (<= n {item}", draft=f"round {r}: unbalanced")
    return answer_text(truth("99"), draft=f"round {r}: guessed a bound")


def _line(model: str, cid: str, content: str) -> dict[str, Any]:
    return {
        "id": f"req-{cid}",
        "custom_id": cid,
        "response": {
            "status_code": 200,
            "body": {
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 300, "completion_tokens": 60},
            },
        },
        "error": None,
    }


def write_rounds_run(
    run_dir: Path,
    history: Histories,
    *,
    rounds: int = 3,
    config: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The run directory; returns the summary it holds."""
    dataset = write_dataset(run_dir.parent / f"{run_dir.name}-bench.jsonl")
    for sub in ("requests", "outputs"):
        (run_dir / sub).mkdir(parents=True, exist_ok=True)
    settings = {"rounds": rounds, "feedback": "counterexample"} if rounds > 1 else {}
    conf = {"dataset": str(dataset), "run_id": run_dir.name, **settings, **(config or {})}
    (run_dir / "config.json").write_text(json.dumps(conf))
    shards: dict[str, Any] = {}
    lines: dict[tuple[str, int, int], list[dict[str, Any]]] = {}
    verdicts = []
    for (model, trial, item), statuses in history.items():
        for r, status in enumerate(statuses, start=1):
            cid = round_custom_id(item, r)
            lines.setdefault((model, trial, r), []).append(
                _line(model, cid, _content(item, status, r))
            )
            wrong = status is W
            verdicts.append(
                Verdict(
                    model=model,
                    trial=trial,
                    custom_id=cid,
                    round=r,
                    status=status,
                    reason="" if status is E else f"round {r} reason for {item}",
                    direction="too_weak" if wrong else None,
                    counterexample={"n": str(int(item) + 1)} if wrong else None,
                    tier="small" if int(item) <= 6 else "medium",
                    finish_reason="stop",
                    prompt_tokens=300 * r,
                    completion_tokens=60,
                    correct_published=status is E,
                )
            )
    for (model, trial, r), out in lines.items():
        stem = shard_stem(model, trial, r - 1)  # each round its own shard
        key = f"{model}|t{trial}|s{r - 1}"
        shards[key] = {
            "key": key,
            "model": model,
            "trial": trial,
            "shard": r - 1,
            "requests": len(out),
            "input_path": f"requests/{stem}.jsonl",
            "sha256": "",
            "bytes": 0,
            "round": 0,
        }
        (run_dir / "requests" / f"{stem}.jsonl").write_text("")
        path = run_dir / "outputs" / f"{stem}-a0.output.jsonl"
        path.write_text("".join(json.dumps(line) + "\n" for line in out))
    manifest = {"version": 1, "run_id": run_dir.name, "created": 0, "shards": shards}
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    (run_dir / "verdicts.jsonl").write_text(
        "".join(json.dumps(v.to_record()) + "\n" for v in verdicts)
    )
    frame = verdicts_frame(verdicts)
    frame.write_parquet(run_dir / "verdicts.parquet")
    summary = summarize(frame, rounds=rounds)
    (run_dir / "summary.json").write_text(json.dumps(summary))
    return dict(summary)


def first_only(history: Histories) -> Histories:
    return {key: statuses[:1] for key, statuses in history.items()}


def solved_by(history: Histories, model: str, k: int) -> float:
    mine = [ss for (m, _, _), ss in history.items() if m == model]
    return sum(E in ss[:k] for ss in mine) / len(mine)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("rounds")
    write_rounds_run(root / "repair", histories())
    write_rounds_run(root / "once", first_only(histories()), rounds=1)
    return {"repair": root / "repair", "once": root / "once"}


def _report(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    capsys.readouterr()
    assert main(["report", *argv]) == 0
    return capsys.readouterr().out


def test_json_report_has_the_rounds_and_round_one_is_the_one_round_run(
    runs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    repair = json.loads(_report(capsys, str(runs["repair"]), "-f", "json"))
    once = json.loads(_report(capsys, str(runs["once"]), "-f", "json"))
    history = histories()
    for m, o in zip(repair["models"], once["models"], strict=True):
        r = m.pop("rounds")
        assert r["accuracy_by_round"] == pytest.approx(
            [solved_by(history, m["model"], k) for k in (1, 2, 3)]
        )
        assert m == o  # every number of round 1 is the one-round run's
    assert repair["tiers"] == once["tiers"]
    assert repair["study"] == once["study"]
    assert "rounds" not in json.dumps(once)


def test_table_markdown_csv_and_html_show_accuracy_by_round(
    runs: dict[str, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    summary = json.loads((runs["repair"] / "summary.json").read_text())
    model = summary["models"][0]
    r = model["rounds"]
    table = _report(capsys, str(runs["repair"]))
    assert "Repair rounds (K = 3)" in table and "acc@3" in table
    assert "k repair rounds against k independent trials" in table
    md = _report(capsys, str(runs["repair"]), "-f", "md")
    section = md[md.index("## Repair rounds (K = 3)") :]
    row = next(line for line in section.splitlines() if line.startswith("| gpt-4o-mini |"))
    assert f"{100 * r['accuracy_by_round'][2]:.1f}%" in row
    assert f"({r['repaired']}/{r['first_wrong']})" in row
    assert "Repair rounds: an answer that was not equivalent" in md
    assert "| gpt-4o-mini | 3 |" in md  # the per-round table
    rows = list(csv.DictReader(io.StringIO(_report(capsys, str(runs["repair"]), "-f", "csv"))))
    first = next(x for x in rows if x["level"] == "model" and x["model"] == "gpt-4o-mini")
    assert float(first["accuracy_at_3"]) == pytest.approx(r["accuracy_by_round"][2])
    assert float(first["repair_rate"]) == pytest.approx(r["repair_rate"]["value"])
    assert float(first["cost_per_solved_usd"]) == pytest.approx(r["cost_per_solved_usd"])
    assert int(first["round_2_asked"]) == r["asked"][1]
    per_trial = [x for x in rows if x["level"] == "trial" and x["model"] == "gpt-4o-mini"]
    assert [x["accuracy_at_1"] != "" for x in per_trial] == [True, True]
    page = tmp_path / "report.html"
    assert main(["report", str(runs["repair"]), "-f", "html", "-o", str(page)]) == 0
    html = page.read_text()
    assert 'id="chart-rounds"' in html and 'id="chart-rounds-vs-trials"' in html
    assert "Repair rounds (K = 3)" in html
    # a one-round run: none of it
    for fmt in ("table", "md", "csv"):
        text = _report(capsys, str(runs["once"]), "-f", fmt)
        assert "acc@" not in text and "accuracy_at_" not in text and "Repair" not in text


def test_latex_tables_and_the_rounds_figures_compile(runs: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "paper"
    assert main(["report", str(runs["repair"]), "-f", "latex", "-o", str(out)]) == 0
    tables = sorted(out.glob("tab-*.tex"))
    names = {t.name for t in tables}
    assert {"tab-rounds.tex", "tab-rounds-vs-trials.tex"} <= names
    for fmt in ("pdf", "svg"):
        assert (out / f"fig-rounds.{fmt}").is_file()
        assert (out / f"fig-rounds-vs-trials.{fmt}").is_file()
    svg = (out / "fig-rounds.svg").read_text()
    for model in MODELS:
        assert f'id="{model}"' in svg and f'id="ci|{model}"' in svg
    vs = (out / "fig-rounds-vs-trials.svg").read_text()
    assert 'id="rounds|gpt-4o-mini"' in vs and 'id="trials|gpt-4o-mini"' in vs
    body = "\n".join(f"\\input{{{t.stem}}}" for t in tables)
    body += "\n\\includegraphics[width=\\linewidth]{fig-rounds.pdf}"
    for t in tables:
        (tmp_path / t.name).write_text(t.read_text())
    (tmp_path / "fig-rounds.pdf").write_bytes((out / "fig-rounds.pdf").read_bytes())
    assert compile_latex(tmp_path, body) >= 1


def test_figure_points_are_the_summarys_accuracy_by_round(runs: dict[str, Path]) -> None:
    from aeval.report import figures

    summary = json.loads((runs["repair"] / "summary.json").read_text())
    fig = figures.rounds_figure(summary)
    (ax,) = fig.axes
    lines = {line.get_gid(): line for line in ax.get_lines() if line.get_gid()}
    for m in summary["models"]:
        assert list(lines[m["model"]].get_ydata()) == pytest.approx(
            m["rounds"]["accuracy_by_round"]
        )
        assert list(lines[m["model"]].get_xdata()) == [1, 2, 3]


def test_report_a_b_compares_accuracy_at_k_paired_over_items(
    runs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    out = json.loads(_report(capsys, str(runs["once"]), str(runs["repair"]), "-f", "json"))
    history = histories()
    for e in out["models"]:
        # round 1 of the repair run is the one-round run: no difference there
        assert e["diff"]["value"] == pytest.approx(0.0)
        assert e["paired"]["gained"] == e["paired"]["lost"] == 0
        d = e["rounds_diff"]
        assert (d["k_a"], d["k_b"]) == (1, 3)
        expected = solved_by(history, e["model"], 3) - solved_by(history, e["model"], 1)
        assert d["diff"]["value"] == pytest.approx(expected)
        assert d["diff"]["low"] <= expected <= d["diff"]["high"]
        assert d["test"] == "paired-items"  # two trials: per-item means
        assert d["items"] == 12
    gpt = next(e for e in out["models"] if e["model"] == "gpt-4o-mini")
    assert gpt["rounds_diff"]["significant"] is True
    md = _report(capsys, str(runs["once"]), str(runs["repair"]), "-f", "md")
    assert "accuracy@K of each run" in md and "acc@3:" in md
    rows = list(
        csv.DictReader(
            io.StringIO(_report(capsys, str(runs["once"]), str(runs["repair"]), "-f", "csv"))
        )
    )
    assert float(rows[0]["rounds_diff"]) == pytest.approx(gpt["rounds_diff"]["diff"]["value"])
    # two one-round runs: no rounds columns
    same = _report(capsys, str(runs["once"]), str(runs["once"]), "-f", "csv")
    assert "rounds_diff" not in same


def test_leaderboard_rows_carry_their_rounds_on_the_shared_items(
    runs: dict[str, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    combined = combine_runs(read_sources([runs["repair"], runs["once"]]))
    assert combined.items == 12  # ITEM_rR is item ITEM: no round id counts as an item
    board = leaderboard(combined)
    with_rounds = [r for r in board["rows"] if r.get("rounds")]
    assert {r["model"] for r in with_rounds} == set(MODELS)
    summary = json.loads((runs["repair"] / "summary.json").read_text())
    by_model = {m["model"]: m for m in summary["models"]}
    for row in with_rounds:
        mine = by_model[row["model"]]
        assert row["accuracy"] == mine["accuracy"]  # round 1, not every round pooled
        assert row["rounds"]["accuracy_by_round"] == mine["rounds"]["accuracy_by_round"]
        assert row["rounds"]["cost_per_solved_usd"] == pytest.approx(
            mine["rounds"]["cost_per_solved_usd"]
        )
    # the paired matrix is of round 1: each repair row ties with its one-round twin
    twins = [p for p in board["pairs"] if p["a"].split(" (")[0] == p["b"].split(" (")[0]]
    assert twins and all(p["diff"]["value"] == pytest.approx(0.0) for p in twins)
    rows = list(csv.DictReader(io.StringIO(leaderboard_csv(board))))
    repair_row = next(x for x in rows if x["rounds"] == "3")
    assert repair_row["accuracy_at_3"] != "" and repair_row["repair_rate"] != ""
    capsys.readouterr()
    assert main(["leaderboard", str(runs["repair"]), str(runs["once"]), "-f", "md"]) == 0
    md = capsys.readouterr().out
    assert "Repair rounds per row" in md
    out = tmp_path / "board"
    assert main(["leaderboard", str(runs["repair"]), "-f", "latex", "-o", str(out)]) == 0
    assert (out / "tab-leaderboard-rounds.tex").is_file()
    assert (out / "fig-leaderboard-rounds.pdf").is_file()
    # one-round runs only: no rounds anywhere
    plain = leaderboard(combine_runs(read_sources([runs["once"]])))
    assert "accuracy_at_" not in leaderboard_csv(plain)


def test_the_viewer_shows_each_answers_conversation_round_by_round(
    runs: dict[str, Path],
) -> None:
    samples = load_samples(runs["repair"])
    meta, index, blocks = viewer_data(samples, title="rounds")
    details = [d for block in blocks for d in block]
    history = histories()
    assert meta["rounds"] == 3
    assert len(index["i"]) == len(history)  # one row per answer: its round 1
    assert not any("_r" in i for i in index["i"])
    frame = load_run(runs["repair"])
    for k, (cid, m, t) in enumerate(zip(index["i"], index["m"], index["t"], strict=True)):
        model = index["dict"]["model"][m]
        statuses = history[(model, t, cid)]
        assert index["rd"][k] == len(statuses)
        assert index["sr"][k] == (statuses.index(E) + 1 if E in statuses else -1)
        conv = details[k].get("conv", [])
        assert [turn["r"] for turn in conv] == list(range(2, len(statuses) + 1))
        previous = frame.filter(
            (pl.col("model") == model) & (pl.col("trial") == t) & (pl.col("custom_id") == cid)
        ).row(0, named=True)
        for turn, status in zip(conv, statuses[1:], strict=True):
            assert turn["s"] == status.value
            assert turn["res"] == _content(cid, status, turn["r"])  # the round's own answer
            # the feedback the engine sent: rebuilt from the previous round's verdict
            ce = json.loads(previous["counterexample"]) if previous["counterexample"] else None
            assert turn["fb"] == render_feedback(
                "counterexample",
                status=previous["status"],
                reason=previous["reason"],
                direction=previous["direction"],
                counterexample=ce,
            )
            previous = frame.filter(
                (pl.col("model") == model)
                & (pl.col("trial") == t)
                & (pl.col("custom_id") == round_custom_id(cid, turn["r"]))
            ).row(0, named=True)
    wrong_twice = next(d for d in details if len(d.get("conv", [])) == 2)
    assert "A counterexample: with n = " in wrong_twice["conv"][1]["fb"] or (
        "could not parse" in wrong_twice["conv"][0]["fb"]
    )


def test_the_viewer_rebuilds_feedback_with_the_runs_own_level_and_template(
    tmp_path: Path,
) -> None:
    template = "Wrong ({verdict}){reason} -- try once more."
    run = tmp_path / "custom"
    write_rounds_run(
        run,
        {("gpt-4o-mini", 1, "3"): [W, E]},
        rounds=2,
        config={"feedback": "reason", "feedback_template": template},
    )
    samples = load_samples(run)
    assert round_settings({"feedback": "reason"}).feedback == "reason"
    _, _, blocks = viewer_data(samples, title="t")
    (detail,) = next(blocks)
    (turn,) = detail["conv"]
    assert turn["fb"].startswith("Wrong (Your answer is not correct.)\nWhat the solver found: ")
    assert "counterexample" not in turn["fb"].lower()  # the reason level reveals none
    assert turn["fb"].endswith(" -- try once more.")


def test_round_settings_read_a_config_defensively() -> None:
    assert round_settings({}).rounds == 1
    assert round_settings({"rounds": 3}).rounds == 3
    for bad in (0, -2, "3", True, None, 2.5):
        assert round_settings({"rounds": bad}).rounds == 1
    assert round_settings({"feedback": "shout"}).feedback == "counterexample"
    assert round_settings({"feedback_template": 7}).template == round_settings({}).template
    # a template that does not render leaves the feedback out, never fails the page
    broken = round_settings({"feedback_template": "{nope}"})
    assert broken.feedback_after({"status": "not_equivalent"}) is None


def test_wrong_answers_and_answer_classes_read_round_one(
    runs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert main(["report", str(runs["repair"]), "--wrong", "gpt-4o-mini", "-f", "json"]) == 0
    wrong = json.loads(capsys.readouterr().out)
    history = histories()
    expected = {
        (t, i) for (m, t, i), ss in history.items() if m == "gpt-4o-mini" and ss[0] is not E
    }
    assert {(w["trial"], w["custom_id"]) for w in wrong} == expected
    assert all(w["answer"] for w in wrong if w["status"] == "not_equivalent")
    frame = load_run(runs["repair"])
    keys = keys_needing_text(frame)
    assert keys and all(not re.search(r"_r\d+$", cid) for _, _, cid in keys)
    assert keys == keys_needing_text(frame.filter(pl.col("round") == 1))


def test_by_a_dataset_column_every_round_takes_its_items_value(
    runs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """--by a column only the dataset has: a round's verdict (ITEM_rR) is joined to its
    item's row, so accuracy@K within the group is the run's, and the groups are of round 1."""
    repair, once = str(runs["repair"]), str(runs["once"])
    one = json.loads(_report(capsys, repair, "--by", "constants", "-f", "json"))
    plain = json.loads(_report(capsys, once, "--by", "constants", "-f", "json"))
    assert [g["accuracy"] for g in one["groups"]] == [g["accuracy"] for g in plain["groups"]]
    both = json.loads(_report(capsys, once, repair, "--by", "constants", "-f", "json"))
    whole = json.loads(_report(capsys, once, repair, "-f", "json"))
    (group,) = both["groups"]
    assert group["group"] == "(declare-const n Int)"
    for in_group, overall in zip(group["models"], whole["models"], strict=True):
        assert in_group["rounds_diff"]["diff"] == overall["rounds_diff"]["diff"]
