from __future__ import annotations

import json
import shutil
from pathlib import Path

from viewer_helpers import HOSTILE, answer_text, make_run, truth

from aeval.report import load_run
from aeval.report.samples import answer_span, load_samples, think_spans
from aeval.store import write_results
from aeval.summary.order import item_sort_key


def test_items_sort_naturally() -> None:
    ids = ["12", "1", "100", "2", "item-10", "item-2", "b", "a"]
    assert sorted(ids, key=item_sort_key) == ["1", "2", "12", "100", "a", "b", "item-2", "item-10"]


def test_think_spans_cover_the_drafts() -> None:
    text = "<think>a</think>mid<THINK>b</think>end"
    assert [text[a:b] for a, b in think_spans(text)] == ["<think>a</think>", "<THINK>b</think>"]
    # A chat template opened <think> in the prompt: everything before </think> is draft.
    assert think_spans("draft</think>answer") == [(0, len("draft</think>"))]
    assert think_spans("ok<think>never closed") == [(2, len("ok<think>never closed"))]
    assert think_spans("no drafts") == []


def test_answer_span_finds_the_extracted_answer() -> None:
    text = answer_text(truth("3"))
    a, b = answer_span(text, truth("3")) or (0, 0)
    assert text[a:b] == truth("3")
    # A fenced answer is not a substring once the fence is stripped: the block is shown.
    fenced = "<answer>(assert ```\n x)```</answer>"
    a, b = answer_span(fenced, "(assert   \n x)") or (0, 0)
    assert fenced[a:b] == "(assert ```\n x)```"
    assert answer_span("nothing here", None) is None


def test_a_run_joins_verdicts_responses_and_items(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run")
    samples = load_samples(run)
    assert samples.notes == []
    assert samples.verdicts.height == 12 + 6 + 5
    assert samples.items["3"].truth == truth("3")
    assert samples.items["3"].question.startswith("Question 3")
    hostile = samples.response("beta", 1, "3")
    assert hostile is not None and HOSTILE in (hostile.content or "")
    error = samples.response("beta", 1, "10")
    assert error is not None and error.error_code == "batch_expired"
    assert samples.response("alpha", 2, "6") is not None
    assert samples.response("alpha", 2, "7") is None  # trial 2 only answered items 1-6


def test_a_missing_dataset_is_a_note_not_an_error(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run")
    (tmp_path / "bench.jsonl").unlink()
    samples = load_samples(run)
    assert samples.items == {} and samples.responses
    assert any("questions and ground truths not shown" in n for n in samples.notes)


def test_a_rescore_directory_takes_its_files_again(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run")
    out = tmp_path / "rescored"
    out.mkdir()
    write_results(out, load_run(run), None)
    bare = load_samples(out)
    assert bare.responses == {} and bare.items == {}
    assert any("--responses" in n for n in bare.notes)
    assert any("--dataset" in n for n in bare.notes)

    # Files copied out of the run (as a user would have them): the model comes
    # from each response, the trial from the order given, as rescore numbers them.
    files = []
    for path in sorted((run / "outputs").glob("*alpha*t1*")) + sorted(
        (run / "outputs").glob("*beta*")
    ):
        files.append(tmp_path / path.name.replace("-", "_"))
        shutil.copy(path, files[-1])
    given = load_samples(out, dataset=str(tmp_path / "bench.jsonl"), responses=files)
    assert given.items["12"].truth == truth("12")
    assert (given.response("alpha", 1, "12") or None) is not None
    assert (given.response("beta", 1, "2") or None) is not None
    assert given.response("beta", 1, "10") is not None  # the error file's line, by pairing


def test_a_rescore_directory_finds_what_its_provenance_names(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run")
    out = tmp_path / "rescored"
    out.mkdir()
    files = [*sorted((run / "outputs").glob("*beta*")), tmp_path / "moved.jsonl"]
    provenance = {
        "synthetic": None,
        "dataset": {"ref": str(tmp_path / "bench.jsonl")},
        "scored_files": [{"path": str(p), "sha256": None} for p in files],
    }
    write_results(out, load_run(run), {"models": [], "provenance": provenance})
    samples = load_samples(out)
    assert samples.items["3"].truth == truth("3")
    assert samples.response("beta", 1, "3") is not None
    assert samples.response("alpha", 1, "3") is None  # alpha's files were not scored
    assert samples.notes == [
        "1 of the 3 file(s) this rescore scored are no longer where it read them: "
        "give them with --responses"
    ]


def test_a_synthetic_run_says_so(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run")
    config = json.loads((run / "config.json").read_text())
    (run / "config.json").write_text(json.dumps({**config, "provenance": {"synthetic": True}}))
    assert load_samples(run).synthetic
    assert not load_samples(make_run(tmp_path / "real")).synthetic
