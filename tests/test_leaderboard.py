"""``aeval leaderboard``: the runs of a study in one table (Issue 38).

Three offline runs on the same rows, as a user makes them over weeks (OpenAI's
batch API; Anthropic's and Google's; an open model in direct mode), give one
leaderboard of all five models, each naming its run, with paired comparisons;
its LaTeX compiles with the accuracy-against-cost figure; a folder finds the
same runs; runs that do not measure the same thing are refused in one line.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from test_cli_options import DEMO, _env
from test_report_paper import compile_latex, pdf_pages

from aeval.cli import main
from aeval.cost import actual_cost
from aeval.report import figures
from aeval.report.comparable import read_sources
from aeval.report.leaderboard import combine_runs, leaderboard
from aeval.report.paired import mcnemar_p, paired_comparison
from aeval.store.layout import find_result_dirs
from aeval.summary.aggregate import load_run, scan_run

LIMIT = "5"
OPENAI = ("gpt-4o-2024-11-20", "gpt-4o-mini-2024-07-18")
OTHERS = ("anthropic/claude-sonnet-4-5", "google/gemini-2.5-flash")
OPEN = "Qwen2.5-7B-Instruct"
FIVE = {*OPENAI, *OTHERS, OPEN}


def _start(out: Path, run_id: str, *args: str) -> subprocess.Popen[str]:
    """An offline run (no key set: the local server answers), started in the background."""
    argv = [sys.executable, "-m", "aeval", "run", "--limit", LIMIT, "--out", str(out)]
    return subprocess.Popen(
        [*argv, "--run-id", run_id, "--quiet", *args],
        env=_env(),
        cwd=out,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(procs: list[subprocess.Popen[str]]) -> None:
    for proc in procs:
        try:
            out, err = proc.communicate(timeout=180)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 0, out + err


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The three runs of the issue's 'done when', in one folder."""
    root = tmp_path_factory.mktemp("study")
    _finish(
        [
            _start(root, "openai-batch", "--model", ",".join(OPENAI), "--trials", "2"),
            _start(root, "anthropic-google", "--model", ",".join(OTHERS), "--trials", "2"),
            _start(root, "open-direct", "--model", OPEN, "--api", "direct", "--trials", "2"),
        ]
    )
    return root


def _runs(root: Path) -> list[str]:
    return [str(root / name) for name in ("openai-batch", "anthropic-google", "open-direct")]


def _leaderboard(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["leaderboard", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _refused(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """The one line ``leaderboard ARGV`` ends with, exit 2, nothing on stdout."""
    capsys.readouterr()
    assert main(["leaderboard", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.strip().splitlines()
    return line


def test_three_runs_give_one_json_leaderboard_of_five_models(
    study: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _leaderboard(capsys, *_runs(study), "-f", "json")
    assert code == 0
    board = json.loads(out)
    rows = {r["row"]: r for r in board["rows"]}
    assert set(rows) == FIVE
    runs = {"openai-batch": OPENAI, "anthropic-google": OTHERS, "open-direct": (OPEN,)}
    for run, models in runs.items():
        for model in models:
            row = rows[model]
            assert row["runs"] == [run] and not row["pooled"]
            (prov,) = row["provenance"]
            assert prov["run"] == run and prov["aeval"] and prov["started"] and prov["synthetic"]
            assert prov["api"] == ("direct" if run == "open-direct" else "batch")
            # every row is its run's own report of that model: the same verdicts, the same numbers
            own = json.loads((study / run / "summary.json").read_text())
            mine = next(m for m in own["models"] if m["model"] == model)
            for key in ("accuracy", "strict_accuracy", "published_accuracy", "pass_at_k"):
                assert row[key] == mine[key], (model, key)
            assert row["tokens"] == mine["tokens"]  # reasoning tokens included
    # the local server's chat completions say 0 reasoning tokens; its Claude says nothing
    # of thinking; its Gemini 2.5 thinks (thoughtsTokenCount)
    reasoning = {model: rows[model]["tokens"]["reasoning"] for model in FIVE}
    assert reasoning.pop("anthropic/claude-sonnet-4-5") is None
    assert reasoning.pop("google/gemini-2.5-flash") > 0
    assert set(reasoning.values()) == {0}
    assert rows["anthropic/claude-sonnet-4-5"]["provenance"][0]["provider"] == "anthropic"
    # cost at the Batch API price for every row (aeval.cost), per 1,000 answers
    for row in rows.values():
        tokens = {k: row["tokens"][k] for k in ("prompt", "completion")}
        answered = row["n"] - row["infra_failures"]
        assert row["cost_usd"] == actual_cost(row["model"], tokens, requests=answered, batch=True)
        if row["cost_usd"] is not None:
            assert row["cost_per_1000"] == pytest.approx(1000 * row["cost_usd"] / row["n"])
    assert rows[OPEN]["cost_usd"] is None  # no price known: tokens instead
    assert rows[OPEN]["tokens_per_1000"] == pytest.approx(
        1000 * rows[OPEN]["tokens"]["total"] / rows[OPEN]["n"]
    )
    assert "direct" in rows[OPEN]["provenance"][0]["provider"]
    # ranked by lenient accuracy; every pair compared once on the 5 shared items
    values = [r["accuracy"]["value"] for r in board["rows"]]
    assert values == sorted(values, reverse=True) and board["items"] == int(LIMIT)
    assert len(board["pairs"]) == 10
    for pair in board["pairs"]:
        assert 0 < pair["items"] <= int(LIMIT) - pair["only_a"] - pair["only_b"]
        assert 0 <= pair["p"] <= 1 and pair["test"] == "paired-items"  # two trials each
        diff = pair["diff"]
        assert diff["low"] <= diff["value"] <= diff["high"]
    best = board["rows"][0]
    assert best["vs_best"] is None
    assert all(r["vs_best"]["a"] == best["row"] for r in board["rows"][1:])


def test_the_latex_compiles_with_the_cost_figure_and_the_html_embeds_the_figures(
    study: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paper = tmp_path / "paper"
    code, _, err = _leaderboard(capsys, *_runs(study), "-f", "latex", "-o", str(paper))
    assert code == 0, err
    tables = sorted(p.name for p in paper.glob("tab-*.tex"))
    assert tables == ["tab-leaderboard-paired.tex", "tab-leaderboard.tex"]
    cost = paper / "fig-leaderboard-cost.pdf"
    assert pdf_pages(cost.read_bytes()) == 1 and (paper / "fig-leaderboard-cost.svg").is_file()
    svg = (paper / "fig-leaderboard-cost.svg").read_text()
    assert 'id="pareto"' in svg and all(f'id="{m}"' in svg for m in FIVE)
    for item in paper.iterdir():
        (tmp_path / item.name).write_bytes(item.read_bytes())
    body = "\n".join(f"\\input{{{name}}}" for name in tables)
    body += "\n\\includegraphics[width=\\linewidth]{fig-leaderboard-cost.pdf}"
    assert compile_latex(tmp_path, body) >= 1
    table = (paper / "tab-leaderboard.tex").read_text()
    assert all(run in table for run in ("openai-batch", "anthropic-google", "open-direct"))
    assert "[U+" not in table  # every symbol the table uses (≈, ±, ≥) has its LaTeX

    page_path = tmp_path / "board.html"
    code, _, _ = _leaderboard(capsys, str(study), "-f", "html", "-o", str(page_path))
    page = page_path.read_text()
    assert code == 0 and "SYNTHETIC" in page
    # accuracy, cost, tiers, and reasoning (the Gemini row's thinking)
    assert page.count("data:image/png;base64,") == 4
    assert all(m in page for m in FIVE) and "Provenance of each row" in page
    assert "Paired differences" in page


def test_a_folder_finds_the_same_runs(study: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert sorted(map(str, find_result_dirs(study))) == sorted(_runs(study))
    _, by_name, _ = _leaderboard(capsys, *_runs(study), "-f", "csv")
    code, by_folder, _ = _leaderboard(capsys, str(study), "-f", "csv")
    assert code == 0 and by_folder == by_name
    assert len(by_folder.splitlines()) == 1 + len(FIVE)
    code, table, _ = _leaderboard(capsys, str(study))
    assert code == 0 and "open-direct" in table


def test_a_run_on_another_benchmark_is_refused_in_one_line(
    study: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "other.parquet"
    assert main(["synth", "--out", str(other), "--rows", "8", "--seed", "3"]) == 0
    _finish(
        [_start(tmp_path, "elsewhere", "--model", OPEN, "--api", "direct", "--dataset", str(other))]
    )
    line = _refused(capsys, str(study), str(tmp_path / "elsewhere"))
    assert "different datasets" in line and "elsewhere" in line and "open-direct" in line
    assert "--allow-different-datasets" in line
    # allowed: combined on the item ids the runs share, under a banner
    code, out, err = _leaderboard(
        capsys, str(study), str(tmp_path / "elsewhere"), "--allow-different-datasets", "-f", "json"
    )
    assert code == 0 and "WARNING: different datasets" in err
    board = json.loads(out)
    assert board["banner"].startswith("WARNING") and {r["row"] for r in board["rows"]} == FIVE


def test_another_protocol_is_refused_naming_it(
    study: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _finish(
        [
            _start(
                tmp_path,
                "study-prompt",
                "--model",
                OPEN,
                "--api",
                "direct",
                "--protocol",
                "warp-2025",
            )
        ]
    )
    line = _refused(capsys, str(study), str(tmp_path / "study-prompt"))
    assert "protocol (" in line and "warp-2025" in line and "study-prompt" in line
    assert "instruction (" in line  # the study's instruction is another text too


def test_a_rescored_copy_is_its_own_row_and_a_repeat_run_pools(
    study: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same model twice: a second run generated alike pools its trials into one
    row; a rescore of the first run's files (generation settings unknown) is a row of
    its own, labelled by its directory."""
    again = ("--model", OPEN, "--api", "direct", "--trials", "3", "--limit", "4")
    _finish([_start(tmp_path, "open-again", *again)])
    outputs = sorted((study / "open-direct" / "outputs").glob("*.jsonl"))
    rescored = tmp_path / "open-rescored"
    argv = ["rescore", "--dataset", DEMO, "--out", str(rescored), "-q", "--workers", "1"]
    assert main([*argv, *map(str, outputs)]) == 0
    capsys.readouterr()
    paths = [str(study / "open-direct"), str(tmp_path / "open-again"), str(rescored)]
    code, out, err = _leaderboard(capsys, *paths, "-f", "json")
    assert code == 0, err
    board = json.loads(out)
    rows = {r["row"]: r for r in board["rows"]}
    assert set(rows) == {f"{OPEN} (open-direct, open-again)", f"{OPEN} (open-rescored)"}
    pooled = rows[f"{OPEN} (open-direct, open-again)"]
    assert pooled["pooled"] and pooled["runs"] == ["open-direct", "open-again"]
    # on the 4 items all three scored (the second run took fewer rows, and says so)
    assert board["items"] == 4 and any("different rows" in n for n in board["notes"])
    assert pooled["across_trials"]["trials"] == 5 and pooled["n"] == 5 * 4
    assert len(pooled["pass_at_k"]) == 5
    assert any("pooled" in n for n in board["notes"])
    assert any("rescored from files" in n for n in board["notes"])
    copy = rows[f"{OPEN} (open-rescored)"]
    assert copy["provenance"][0]["api"] == "rescore"
    # the rescore of the same answers says what the run said, trial for trial
    run = load_run(study / "open-direct").sort("trial", "custom_id")
    again = load_run(rescored).sort("trial", "custom_id")
    assert again.height == run.height
    assert run.get_column("status").to_list() == again.get_column("status").to_list()


def test_by_tier_across_runs(study: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _leaderboard(capsys, str(study), "--by", "tier", "-f", "json")
    assert code == 0
    groups = json.loads(out)["groups"]
    assert {g["model"] for g in groups} == FIVE
    for model in FIVE:
        mine = [g for g in groups if g["model"] == model]
        assert sum(g["n"] for g in mine) == 2 * int(LIMIT)


def test_bad_arguments_are_one_line_errors(
    study: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = [
        ([str(tmp_path / "nowhere")], "not a directory"),
        ([str(tmp_path)], "no run or rescore output"),
        ([str(study), "-f", "latex"], "--out DIR"),
        ([str(study), "--dataset", DEMO], "--by"),
    ]
    for argv, words in cases:
        assert words in _refused(capsys, *argv)


def test_scan_run_reads_only_what_is_asked_and_fills_what_is_absent(study: Path) -> None:
    scan = scan_run(
        study / "open-direct",
        ["model", "status", "future_count"],
        types={"future_count": pl.Int64()},
    )
    assert isinstance(scan, pl.LazyFrame)
    frame = scan.collect()
    assert frame.columns == ["model", "status", "future_count"]
    assert (
        frame.schema["future_count"] == pl.Int64
        and frame["future_count"].null_count() == frame.height
    )


def test_reasoning_tokens_are_read_when_a_run_has_them(study: Path, tmp_path: Path) -> None:
    """A run made after verdicts gained ``reasoning_tokens`` (a reasoning variant is a
    model of its own): its rows carry the sum, and the reasoning figure is drawn."""
    run = tmp_path / "variants"
    run.mkdir()
    frame = load_run(study / "openai-batch")
    variants = pl.concat(
        [
            frame.with_columns(
                pl.col("model") + "@" + effort,
                pl.lit(tokens, dtype=pl.Int64).alias("reasoning_tokens"),
            )
            for effort, tokens in (("low", 100), ("high", 900))
        ]
    )
    variants.write_parquet(run / "verdicts.parquet")
    (run / "summary.json").write_text((study / "openai-batch" / "summary.json").read_text())
    board = leaderboard(combine_runs(read_sources([run])))
    rows = {r["row"]: r for r in board["rows"]}
    assert rows["gpt-4o-2024-11-20@high"]["tokens"]["reasoning"] == 900 * frame.height // 2
    drawn = dict(figures.leaderboard_figures(board))
    # no price for a variant's name, and synthetic answers besides: tokens, and said
    cost_axis = drawn["leaderboard-cost"]().axes[0].get_xlabel()
    assert cost_axis.startswith("tokens per 1,000 answers (not USD")
    names = list(drawn)
    assert "leaderboard-reasoning" in names
    fig = dict(figures.leaderboard_figures(board))["leaderboard-reasoning"]()
    svg = figures.render(fig, "svg").decode()
    assert 'id="gpt-4o-2024-11-20"' in svg and 'id="gpt-4o-mini-2024-07-18"' in svg


def test_mcnemar_exact_and_chi_square_forms() -> None:
    # 1 against 9 discordant items: 2 · (C(10,0) + C(10,1)) / 2^10
    assert mcnemar_p(1, 9) == (pytest.approx(22 / 1024), "exact")
    assert mcnemar_p(0, 0) == (1.0, "exact") and mcnemar_p(5, 5)[0] == 1.0
    # 10 against 30: (|10 − 30| − 1)² / 40 = 9.025 on one degree of freedom
    p, form = mcnemar_p(10, 30)
    assert form == "chi2" and p == pytest.approx(math.erfc(math.sqrt(9.025 / 2)))
    assert p == pytest.approx(0.002663, abs=1e-6)


def test_paired_comparison_one_trial_is_mcnemar_and_trials_are_per_item() -> None:
    rng = np.random.default_rng(4)
    a = (rng.random(200) < 0.7).astype(float)
    b = np.where(rng.random(200) < 0.8, a, 1 - a)
    ones = np.ones(200)
    one = paired_comparison(a, ones, b, ones)
    discordant = (int(((a == 1) & (b == 0)).sum()), int(((a == 0) & (b == 1)).sum()))
    assert one["test"] == "mcnemar" and (one["a_only_right"], one["b_only_right"]) == discordant
    assert one["p"] == mcnemar_p(*discordant)[0]
    assert one["diff"]["value"] == pytest.approx(a.mean() - b.mean())
    # the same answers given twice over: the item is the unit, so nothing changes but the test
    twice = paired_comparison(2 * a, 2 * ones, 2 * b, 2 * ones)
    assert twice["test"] == "paired-items" and twice["diff"]["value"] == pytest.approx(
        one["diff"]["value"]
    )
    assert twice["diff"]["low"] == pytest.approx(one["diff"]["low"], abs=0.01)
    # an item one model never got a scored answer for is left out, and said
    gap = ones.copy()
    gap[:3] = 0
    partial = paired_comparison(a, gap, b, ones)
    assert partial["items"] == 197 and partial["only_b"] == 3 and partial["only_a"] == 0


def test_pareto_front_keeps_models_nothing_beats() -> None:
    points = [(1.0, 0.5), (2.0, 0.4), (3.0, 0.7), (0.5, 0.2), (3.0, 0.6), (4.0, 0.7)]
    assert figures.pareto_front(points) == [3, 0, 2]


def test_an_inspect_log_rescored_is_a_row_like_any_run(
    study: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``inspect eval aeval/warp`` (mockllm answering the demo's items 1–5, two epochs),
    its .eval log rescored into a result directory, then combined with the runs."""
    from inspect_ai import eval as inspect_eval
    from inspect_ai.model import get_model
    from test_interop_inspect import ITEMS, mock_outputs

    from aeval.interop.inspect_task import warp

    model = get_model("mockllm/model", custom_outputs=mock_outputs())
    task = warp(dataset="demo", sample_ids=",".join(ITEMS))
    [log] = inspect_eval(
        task, model=model, log_dir=str(tmp_path / "logs"), display="none", epochs=2, score=False
    )
    assert log.status == "success", log.error
    (eval_file,) = (tmp_path / "logs").glob("*.eval")
    rescored = tmp_path / "inspect-mockllm"
    argv = ["rescore", "--dataset", DEMO, "--out", str(rescored), "-q", "--workers", "1"]
    assert main([*argv, str(eval_file)]) == 0
    verdicts = load_run(rescored)
    # each epoch a trial; the mock's answers read as test_interop_inspect's scorer reads them
    assert verdicts.height == 2 * len(ITEMS) and set(verdicts["trial"]) == {1, 2}
    status = {
        r["custom_id"]: r["status"]
        for r in verdicts.filter(pl.col("trial") == 1).iter_rows(named=True)
    }
    assert status == {
        "1": "equivalent",
        "2": "equivalent",
        "3": "unknown_symbol",
        "4": "no_answer",
        "5": "equivalent",
    }
    capsys.readouterr()
    code, out, err = _leaderboard(capsys, str(study), str(rescored), "-f", "json")
    assert code == 0, err
    board = json.loads(out)
    rows = {r["row"]: r for r in board["rows"]}
    assert set(rows) == {*FIVE, "mockllm/model"}
    mock = rows["mockllm/model"]
    assert mock["runs"] == ["inspect-mockllm"] and mock["provenance"][0]["api"] == "rescore"
    # the runs took rows 0–4, the log items 1–5: read on the 4 both have, and said
    assert board["items"] == 4 and any("different rows" in n for n in board["notes"])
    assert mock["n"] == 2 * 4 and mock["tokens"]["prompt"] == 100 * 2 * 4


def test_a_file_named_eval_that_is_no_inspect_log_is_a_problem_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = tmp_path / "run.eval"
    fake.write_text('{"custom_id": "1"}\n')
    argv = ["rescore", "--dataset", DEMO, "--out", str(tmp_path / "out"), "-q", "--workers", "1"]
    assert main([*argv, str(fake)]) == 1
    err = capsys.readouterr().err
    assert f"{fake}: not an Inspect eval log Inspect can read" in err


def test_lm_eval_samples_rescored_are_a_row_like_any_run(
    study: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """lm-evaluation-harness logged samples (the shape ``save_results_samples`` writes,
    ``lm_eval/loggers/evaluation_tracker.py``, lm-eval 0.4.13: ``doc_id`` first, the
    doc with aeval's ``id``, ``resps`` holding each repeat's raw answer), rescored,
    then combined with the runs; the model is ``model_name`` of the run's results file."""
    from test_interop_inspect import answers

    out = tmp_path / "lm-eval-out" / "hf-llama"
    out.mkdir(parents=True)
    date = "2026-06-20T10-00-00.000000"
    (out / f"results_{date}.json").write_text(json.dumps({"model_name": "llama-3.1-8b"}))
    lines = [
        {"doc_id": int(cid), "doc": {"id": cid}, "resps": [[text, "I cannot tell."]]}
        for cid, text in answers().items()
    ]
    samples = out / f"samples_warp_{date}.jsonl"
    samples.write_text("".join(json.dumps(line) + "\n" for line in lines))
    rescored = tmp_path / "harness-llama"
    argv = ["rescore", "--dataset", DEMO, "--out", str(rescored), "-q", "--workers", "1"]
    assert main([*argv, str(samples)]) == 0
    capsys.readouterr()
    code, out_text, err = _leaderboard(capsys, str(study), str(rescored), "-f", "json")
    assert code == 0, err
    rows = {r["row"]: r for r in json.loads(out_text)["rows"]}
    llama = rows["llama-3.1-8b"]
    assert set(rows) == {*FIVE, "llama-3.1-8b"} and llama["runs"] == ["harness-llama"]
    # items 1–4 shared with the runs: 1 and 2 right in repeat 1, nothing in repeat 2
    assert llama["n"] == 8 and llama["accuracy"]["successes"] == 2
    assert llama["across_trials"]["trials"] == 2


def test_a_run_still_going_is_read_from_its_jsonl_and_disjoint_runs_are_refused(
    study: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    going = tmp_path / "going"
    going.mkdir()
    for name in ("config.json", "verdicts.jsonl"):  # no verdicts.parquet yet
        (going / name).write_bytes((study / "open-direct" / name).read_bytes())
    code, out, err = _leaderboard(capsys, str(going), str(study / "openai-batch"), "-f", "json")
    assert code == 0, err
    rows = {r["row"]: r for r in json.loads(out)["rows"]}
    assert rows[OPEN]["runs"] == ["going"] and rows[OPEN]["n"] == 2 * int(LIMIT)
    # a run whose items are none of the others': nothing to compare, said in one line
    apart = tmp_path / "apart"
    apart.mkdir()
    frame = load_run(study / "open-direct").with_columns(pl.col("custom_id") + "-x")
    frame.write_parquet(apart / "verdicts.parquet")
    (apart / "config.json").write_bytes((study / "open-direct" / "config.json").read_bytes())
    line = _refused(capsys, str(apart), str(study / "openai-batch"))
    assert line.startswith("aeval: error: the runs share no item") and "apart has 5" in line


def test_verifier_limits_that_change_verdicts_are_refused_naming_them(
    study: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run checked under another time budget (``--check-timeout``): a timeout there may
    be an answer here, so its verdicts are not comparable."""
    copy = tmp_path / "short-budget"
    copy.mkdir()
    (copy / "verdicts.parquet").write_bytes(
        (study / "open-direct" / "verdicts.parquet").read_bytes()
    )
    config = json.loads((study / "open-direct" / "config.json").read_text())
    config["limits"]["timeout_s"] = 2.0
    (copy / "config.json").write_text(json.dumps(config))
    line = _refused(capsys, str(study), str(copy))
    assert "verifier limits (" in line and "timeout_s=2.0" in line and "timeout_s=10.0" in line
    assert "short-budget" in line and "protocol" not in line
