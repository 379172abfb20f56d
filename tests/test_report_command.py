from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from aeval.cli import main
from aeval.report import summarize, wilson_interval
from aeval.report.compare import compare_runs, newcombe_interval
from aeval.verdicts import Status, Verdict, verdicts_frame

E, W, M = Status.EQUIVALENT, Status.NOT_EQUIVALENT, Status.MISSING


def write_run(run_dir: Path, statuses: dict[str, list[Status]], *, parquet: bool = True) -> None:
    verdicts = [
        Verdict(
            model=model, trial=1, custom_id=f"item-{k}", status=s,
            tier="small",
            direction="too_strong" if s is W else None,
            counterexample={"in0": "7", "in1": "-2"} if s is W else None,
            reason="answer rejects a worst-case input" if s is W else "",
        )
        for model, column in statuses.items()
        for k, s in enumerate(column)
    ]  # fmt: skip
    run_dir.mkdir(parents=True)
    frame = verdicts_frame(verdicts)
    if parquet:
        frame.write_parquet(run_dir / "verdicts.parquet")
        (run_dir / "summary.json").write_text(json.dumps(summarize(frame)))
    else:
        lines = [json.dumps(v.to_record()) for v in verdicts]
        (run_dir / "verdicts.jsonl").write_text("\n".join(lines) + "\n")


def test_table_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_run(tmp_path / "r", {"alpha": [E, E, W, M], "beta": [W, W, E, E]})
    assert main(["report", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    alpha = next(line for line in out.splitlines() if "alpha" in line)
    assert "66.7%" in alpha and "2/3" in alpha  # the missing row is not scored
    assert "Per tier" in out and "missing (infra)" in out


def test_json_report_is_summary_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_run(tmp_path / "r", {"alpha": [E, W, M]})
    assert main(["report", str(tmp_path / "r"), "-f", "json"]) == 0
    on_disk = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert json.loads(capsys.readouterr().out) == on_disk


def test_csv_and_markdown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_run(tmp_path / "r", {"alpha": [E, E, W, M], "beta": [W]})
    assert main(["report", str(tmp_path / "r"), "-f", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    alpha = next(r for r in rows if r["level"] == "model" and r["model"] == "alpha")
    assert float(alpha["accuracy"]) == pytest.approx(2 / 3)
    assert float(alpha["accuracy_low"]) == pytest.approx(wilson_interval(2, 3)[0])
    assert (alpha["infra_failures"], alpha["missing"], alpha["scored"]) == ("1", "1", "3")
    assert {r["level"] for r in rows} == {"model", "trial", "tier"}
    assert main(["report", str(tmp_path / "r"), "-f", "md"]) == 0
    md = capsys.readouterr().out
    assert md.startswith("# aeval report: r\n")
    assert "| alpha | 66.7% [20.8, 93.9] |" in md


def test_interrupted_run_is_reported_from_jsonl(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_run(tmp_path / "r", {"alpha": [E, W]}, parquet=False)
    assert main(["report", str(tmp_path / "r"), "-f", "md"]) == 0
    out = capsys.readouterr().out
    assert "(partial: run not finished)" in out and "| alpha | 50.0%" in out


def test_wrong_answers_listing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_run(tmp_path / "r", {"alpha": [E, W, M, W]})
    assert main(["report", str(tmp_path / "r"), "--wrong", "alpha", "-f", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["custom_id"] for r in rows] == ["item-1", "item-3"]  # missing is infra
    assert rows[0]["direction"] == "too_strong"
    assert json.loads(rows[0]["counterexample"]) == {"in0": "7", "in1": "-2"}
    assert main(["report", str(tmp_path / "r"), "--wrong", "alpha", "--include-infra"]) == 0
    out = capsys.readouterr().out
    assert "item-2" in out and "in0=7, in1=-2" in out and "too_strong" in out


def test_compare_two_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_run(tmp_path / "a", {"alpha": [E, E, W, W], "gone": [E]})
    write_run(tmp_path / "b", {"alpha": [E, W, E, E], "new": [W]})
    assert main(["report", str(tmp_path / "a"), str(tmp_path / "b"), "-f", "json"]) == 0
    models = {m["model"]: m for m in json.loads(capsys.readouterr().out)["models"]}
    alpha = models["alpha"]
    assert alpha["diff"]["value"] == pytest.approx(0.25)
    # item-1 lost, items 2 and 3 gained, over the 4 items both runs scored.
    assert alpha["paired"] == {"items": 4, "gained": 2, "lost": 1}
    assert alpha["diff"]["low"] < 0.25 < alpha["diff"]["high"]
    assert models["gone"]["b"] is None and models["new"]["a"] is None
    assert main(["report", str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    assert "alpha" in capsys.readouterr().out


def test_newcombe_interval_known_value() -> None:
    # Newcombe (1998) example: 56/70 vs 48/80 → difference 0.2, 95% CI [0.0524, 0.3339].
    a = summarize(
        verdicts_frame(
            [
                Verdict(model="m", trial=1, custom_id=f"i{k}", status=E if k < 48 else W)
                for k in range(80)
            ]
        )
    )
    b = summarize(
        verdicts_frame(
            [
                Verdict(model="m", trial=1, custom_id=f"i{k}", status=E if k < 56 else W)
                for k in range(70)
            ]
        )
    )
    low, high = newcombe_interval(a["models"][0]["accuracy"], b["models"][0]["accuracy"])
    assert (low, high) == pytest.approx((0.0524, 0.3339), abs=1e-4)
    cmp = compare_runs(
        verdicts_frame([Verdict(model="m", trial=1, custom_id="i", status=E)]),
        verdicts_frame([Verdict(model="m", trial=1, custom_id="i", status=W)]),
    )
    assert cmp["models"][0]["paired"] == {"items": 1, "gained": 0, "lost": 1}


def test_bad_inputs_are_clear_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(tmp_path / "nowhere")]) == 2
    assert "not a directory" in capsys.readouterr().err
    write_run(tmp_path / "r", {"alpha": [E]})
    assert main(["report", str(tmp_path / "r"), "--wrong", "zeta"]) == 2
    assert "models in this run: alpha" in capsys.readouterr().err
    r = str(tmp_path / "r")
    assert main(["report", r, r, r]) == 2
    assert "two to compare" in capsys.readouterr().err


def test_a_stale_summary_json_is_flagged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_run(tmp_path / "r", {"alpha": [E, W]})
    assert main(["report", str(tmp_path / "r"), "-f", "json"]) == 0
    assert "warning" not in capsys.readouterr().err
    doctored = json.loads((tmp_path / "r" / "summary.json").read_text())
    doctored["models"][0]["correct"] = 2
    (tmp_path / "r" / "summary.json").write_text(json.dumps(doctored))
    assert main(["report", str(tmp_path / "r"), "-f", "json"]) == 0
    captured = capsys.readouterr()
    assert "does not match the run's verdicts" in captured.err
    assert json.loads(captured.out)["models"][0]["correct"] == 1  # the verdicts win


def test_wrong_answers_as_html_page(tmp_path: Path) -> None:
    write_run(tmp_path / "r", {"alpha": [E, W, W]})
    assert main(["report", str(tmp_path / "r"), "--wrong", "alpha", "-f", "html"]) == 0
    page = (tmp_path / "r" / "wrong-alpha.html").read_text()
    assert page.count("too_strong") == 2 and "in0=7, in1=-2" in page
    assert "<script" not in page and "http" not in page
