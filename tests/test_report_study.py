"""The study's lens: its categories of the published reading, results per program,
extrapolation distance and answer size, any grouping, and the items that separate
models, from a real rescore of constructed answers to the real benchmark."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from aeval.cli import main
from aeval.report import load_run, summarize
from aeval.summary.aggregate import grouped_by
from aeval.summary.groups import item_classes, separating_items
from aeval.verdicts import Status, Verdict, verdicts_frame

ROWS = 14
MODELS = ("model-x", "model-y")

# Each kind of answer, the study's category of the published reading it gets, and
# the published reason behind it.
KINDS: list[tuple[str, str | None]] = [
    ("truth", "correct"),  # "Constraints are logically equivalent."
    ("<answer>(assert true)</answer>", "error_semantics"),  # generated does not imply original
    ("<answer>(assert false)</answer>", "error_semantics"),  # original does not imply generated
    ("<answer>(assert (and x</answer>", "error_syntax"),  # "Could not parse results correctly."
    ("I cannot tell.", "error_output_formatting"),  # "Failed to extract response."
    ("error", "error_output_formatting"),  # no answer at all: incorrect, as the study counted
    ('<answer>(echo "unsat")</answer>', None),  # refused by aeval: in none of the study's
]


def line(model: str, custom_id: str, content: str) -> str:
    if content == "error":
        error = {"code": "batch_expired", "message": "not executed before the deadline"}
        return json.dumps({"custom_id": custom_id, "response": None, "error": error})
    body = {
        "model": model,
        "choices": [
            {"message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5},
    }
    response = {"status_code": 200, "body": body}
    return json.dumps({"custom_id": custom_id, "response": response, "error": None})


def kind_of(model: str, row: int) -> int:
    return (row + (0 if model == MODELS[0] else 3)) % len(KINDS)


@pytest.fixture(scope="module")
def rescored(benchmark_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One rescore of both models' answers to the first rows of the real benchmark."""
    tmp = tmp_path_factory.mktemp("study")
    rows = pl.read_parquet(benchmark_path).head(ROWS)["answer"].to_list()
    files = []
    for model in MODELS:
        path = tmp / f"{model}.jsonl"
        lines = []
        for i, truth in enumerate(rows):
            content = KINDS[kind_of(model, i)][0]
            lines.append(
                line(model, str(i), f"<answer>{truth}</answer>" if content == "truth" else content)
            )
        path.write_text("\n".join(lines) + "\n")
        files.append(path)
    out = tmp / "out"
    assert (
        main(["rescore", "--dataset", str(benchmark_path), "--out", str(out), *map(str, files)])
        == 0
    )
    return out


@pytest.fixture(scope="module")
def programs(benchmark_path: Path) -> dict[str, str]:
    from aeval.dataset import load_dataset

    frame = load_dataset(benchmark_path)
    return dict(zip(frame["id"], frame["program"], strict=True))


def test_every_verdict_has_its_program_and_the_studys_category(
    rescored: Path, programs: dict[str, str]
) -> None:
    frame = pl.read_parquet(rescored / "verdicts.parquet")
    assert frame.height == ROWS * len(MODELS)
    for r in frame.iter_rows(named=True):
        assert r["program"] == programs[r["custom_id"]]
        assert r["published_category"] == KINDS[kind_of(r["model"], int(r["custom_id"]))][1]
        assert r["distance"] is not None and r["answer_chars"] > 0


def expected_counts(model: str, rows: range) -> dict[str, int]:
    counts = dict.fromkeys(
        ("correct", "error_syntax", "error_semantics", "error_output_formatting"), 0
    )
    for i in rows:
        category = KINDS[kind_of(model, i)][1]
        if category is not None:
            counts[category] += 1
    return counts


def test_the_studys_three_tables_compare_cell_for_cell(
    rescored: Path, programs: dict[str, str]
) -> None:
    summary = json.loads((rescored / "summary.json").read_text())
    study = summary["study"]
    for model in MODELS:
        want = expected_counts(model, range(ROWS))
        assert study["model_summary"][model] == want  # openai_model_summary.json's shape
        tiers = study["model_tier_summary"][model]  # openai_model_tier_summary.json's
        assert tiers == {"small": want, "overall": want}
        # openai_model_problem_stats.json: the categories that occur, and total_attempts;
        # a reason the study never gave counts as its "unknown"
        stats = study["model_problem_stats"][model]
        for program in set(programs[str(i)] for i in range(ROWS)):
            rows = [i for i in range(ROWS) if programs[str(i)] == program]
            cell: dict[str, int] = {}
            for i in rows:
                category = KINDS[kind_of(model, i)][1] or "unknown"
                cell[category] = cell.get(category, 0) + 1
            assert stats[program] == {**cell, "total_attempts": len(rows)}
    model = summary["models"][0]
    assert model["published_categories"] == {
        **expected_counts(MODELS[0], range(ROWS)),
        "uncategorised": 2,
    }


def test_every_report_format_carries_the_categories_and_the_groupings(
    rescored: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def report(*args: str) -> str:
        assert main(["report", str(rescored), *args]) == 0
        return capsys.readouterr().out

    md = report("-f", "md")
    for title in ("per model (", "per tier", "per program"):
        assert f"Published reading by the study's categories, {title}" in md
    assert "Accuracy by extrapolation distance" in md and "Items that separate models" in md
    rows = list(csv.DictReader(io.StringIO(report("-f", "csv"))))
    program_rows = [r for r in rows if r["level"] == "program"]
    assert {r["program"] for r in program_rows} and all(r["published_correct"] for r in rows)
    assert sum(int(r["published_error_syntax"]) for r in program_rows) == sum(
        expected_counts(m, range(ROWS))["error_syntax"] for m in MODELS
    )
    # the terminal: the categories per model as rows of the status table, the rest
    # with --by (which carries the categories per group)
    table = report()
    assert "published: error_syntax" in table and "Items that separate models" in table
    by_tier = report("--by", "tier", "-f", "csv")
    assert "published_error_output_formatting" in by_tier.splitlines()[0]
    summary = json.loads(report("-f", "json"))
    html = (rescored / "report.html").read_text() if report("-f", "html") == "" else ""
    # the chart of accuracy against distance draws each model × distance figure exactly
    from aeval.report import figures

    fig = figures.group_figure(summary["distances"], "distance", label="d")
    drawn = {a.get_gid(): a for a in fig.findobj(lambda a: a.get_gid() is not None)}
    for model in {d["model"] for d in summary["distances"]}:
        want = [d["accuracy"]["value"] for d in summary["distances"] if d["model"] == model]
        assert list(drawn[model].get_ydata()) == want
    assert 'id="chart-distance"' in html
    assert 'id="chart-size"' in html


def test_report_by_any_grouping(
    rescored: Path, benchmark_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    summary = summarize(load_run(rescored))
    assert main(["report", str(rescored), "--by", "program", "-f", "json"]) == 0
    by = json.loads(capsys.readouterr().out)
    assert [(g["model"], g["group"], g["correct"], g["scored"]) for g in by["groups"]] == [
        (p["model"], p["program"], p["correct"], p["scored"]) for p in summary["programs"]
    ]
    assert main(["report", str(rescored), "--by", "size", "-f", "csv"]) == 0
    sizes = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert {r["size"] for r in sizes} == {s["size"] for s in summary["sizes"]}
    # a column of the dataset, joined by item id (another benchmark's own grouping)
    data = pl.read_parquet(benchmark_path).with_columns(
        parity=pl.when(pl.int_range(pl.len()) % 2 == 0)
        .then(pl.lit("even"))
        .otherwise(pl.lit("odd"))
    )
    data.write_parquet(tmp_path / "with-parity.parquet")
    args = [
        "report",
        str(rescored),
        "--by",
        "parity",
        "--dataset",
        str(tmp_path / "with-parity.parquet"),
    ]
    assert main([*args, "-f", "json"]) == 0
    groups = json.loads(capsys.readouterr().out)["groups"]
    frame = load_run(rescored)
    for g in groups:
        odd = g["group"] == "odd"
        mine = frame.filter(
            (pl.col("model") == g["model"]) & ((pl.col("custom_id").cast(pl.Int64) % 2 == 1) == odd)
        )
        assert g["n"] == mine.height
        assert g["correct"] == mine.filter(pl.col("status") == Status.EQUIVALENT.value).height
    # an unknown grouping: one clear line, exit 2
    assert main([*args[:3], "nothing", "--dataset", args[-1]]) == 2
    err = capsys.readouterr().err
    assert "--by nothing" in err and "parity" in err and len(err.strip().splitlines()) == 1


def test_report_a_b_by_program_pairs_within_each_group(
    rescored: Path, benchmark_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # B: the same verdicts with model-x right on every even item
    frame = load_run(rescored)
    better = frame.with_columns(
        status=pl.when(
            (pl.col("model") == MODELS[0]) & (pl.col("custom_id").cast(pl.Int64) % 2 == 0)
        )
        .then(pl.lit("equivalent"))
        .otherwise(pl.col("status"))
    )
    (tmp_path / "b").mkdir()
    better.write_parquet(tmp_path / "b" / "verdicts.parquet")
    assert (
        main(["report", str(rescored), str(tmp_path / "b"), "--by", "program", "-f", "json"]) == 0
    )
    out = json.loads(capsys.readouterr().out)
    a_groups = {(g["model"], g["group"]): g for g in grouped_by(frame, "program")}
    b_groups = {(g["model"], g["group"]): g for g in grouped_by(better, "program")}
    assert out["by"] == "program" and out["groups"]
    for group in out["groups"]:
        for e in group["models"]:
            key = (e["model"], group["group"])
            a, b = a_groups[key]["accuracy"]["value"], b_groups[key]["accuracy"]["value"]
            if a is None:  # the model's only answers in this program were lost (api_error)
                assert b is None and e["diff"]["value"] is None
                continue
            assert e["diff"]["value"] == pytest.approx(b - a)
            assert e["diff"]["low"] <= b - a <= e["diff"]["high"]
            if e["model"] == MODELS[1]:
                assert e["paired"]["gained"] == e["paired"]["lost"] == 0


def verdict(model: str, trial: int, item: str, ok: bool) -> Verdict:
    status = Status.EQUIVALENT if ok else Status.NOT_EQUIVALENT
    return Verdict(
        model=model,
        trial=trial,
        custom_id=item,
        status=status,
        tier="small",
        program="P",
        distance=2,
    )


def test_the_items_that_separate_models() -> None:
    solved: dict[str, dict[str, tuple[bool, bool]]] = {
        "none": {"m1": (False, False), "m2": (False, False), "m3": (False, False)},
        "all": {"m1": (True, True), "m2": (True, True), "m3": (True, True)},
        "split": {"m1": (True, True), "m2": (False, False), "m3": (False, False)},
        "half": {"m1": (True, False), "m2": (True, False), "m3": (True, True)},
    }
    frame = verdicts_frame(
        [
            verdict(m, t + 1, item, oks[t])
            for item, by_model in solved.items()
            for m, oks in by_model.items()
            for t in range(2)
        ]
        + [
            Verdict(model="m1", trial=1, custom_id="lost", status=Status.API_ERROR)
        ]  # an outage separates nothing
    )
    sep = separating_items(frame)
    assert sep["items"] == 4 and sep["models"] == 3
    assert sep["unsolved"] == {"count": 1, "ids": ["none"]}
    assert (sep["solved_by_all"], sep["split"]) == (1, 1)
    top = sep["most_disagreed"]
    assert [t["custom_id"] for t in top] == ["split", "half"]
    assert top[0]["per_model"] == {
        "m1": {"solved": 2, "trials": 2},
        "m2": {"solved": 0, "trials": 2},
        "m3": {"solved": 0, "trials": 2},
    }
    assert (top[0]["models_solving"], top[0]["trials_solved"], top[0]["program"]) == (1, 2, "P")
    assert item_classes(frame) == {
        "none": "unsolved",
        "all": "solved",
        "split": "split",
        "half": "mixed",
    }
    summary: dict[str, Any] = summarize(frame)
    assert summary["separating"] == sep


def test_the_viewer_filters_by_program_distance_standing_and_a_grouping(
    rescored: Path, tmp_path: Path
) -> None:
    from chromium_helpers import CHROMIUM, run_chromium

    page = tmp_path / "samples.html"
    assert main(["view", str(rescored), "--by", "size", "-o", str(page)]) == 0
    text = page.read_text()
    index = json.loads(text.split("id='aeval-index'>", 1)[1].split("</script>", 1)[0])
    frame = load_run(rescored)
    assert set(index["dict"]["program"]) == set(frame["program"].to_list())
    assert index["by"] == "Answer size" and index["dict"]["group"]
    assert sorted(set(index["ds"])) == sorted(set(frame["distance"].to_list()))
    standing = item_classes(frame)
    codes = index["dict"]["standing"]
    assert {index["i"][k]: codes[c] for k, c in enumerate(index["sx"])} == standing
    if CHROMIUM is None:
        pytest.skip("headless Chromium is not installed: the filter itself needs a browser")
    program = frame["program"][0]
    want = frame.filter(
        (pl.col("program") == program)
        & pl.col("custom_id").is_in([i for i, s in standing.items() if s == "split"])
    ).height
    assert want > 0
    url = page.resolve().as_uri() + f"#standing=split&program={program}"
    dom = run_chromium(tmp_path / "profile", "--virtual-time-budget=10000", "--dump-dom", url)
    assert f'data-shown="{want}"' in dom


def test_view_by_a_column_the_viewer_always_filters_adds_no_second_filter(
    rescored: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "samples.html"
    assert main(["view", str(rescored), "--by", "distance", "-o", str(page)]) == 0
    assert "the viewer always filters by distance" in capsys.readouterr().err
    text = page.read_text()
    index = json.loads(text.split("id='aeval-index'>", 1)[1].split("</script>", 1)[0])
    assert index["by"] is None and index["dict"]["group"] == []
    assert sorted(set(index["ds"])) == sorted(set(load_run(rescored)["distance"].to_list()))
