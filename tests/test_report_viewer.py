from __future__ import annotations

import base64
import gzip
import json
import re
from pathlib import Path

import pytest
from viewer_helpers import HOSTILE, Answer, E, answer_text, make_run, truth

from aeval.cli import main
from aeval.report.samples import load_samples
from aeval.report.viewer import CHUNK, viewer_html


def blocks(page: str) -> dict[str, object]:
    """The page's data blocks by id, decoded as the page's script decodes them."""
    plain = re.findall(r"<script type='application/json' id='([\w-]+)'>(.*?)</script>", page, re.S)
    packed = re.findall(
        r"<script type='application/octet-stream' data-encoding='gzip\+base64' "
        r"id='([\w-]+)'>(.*?)</script>",
        page,
        re.S,
    )
    out = {name: json.loads(text) for name, text in plain}
    for name, text in packed:
        out[name] = json.loads(gzip.decompress(base64.b64decode(text)))
    return out


def details(data: dict[str, object]) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    n = 0
    while f"aeval-d-{n}" in data:
        out += data[f"aeval-d-{n}"]  # type: ignore[arg-type]
        n += 1
    return out


def test_view_writes_one_self_contained_page(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = make_run(tmp_path / "run")
    assert main(["view", str(run)]) == 0
    assert "wrote" in capsys.readouterr().err
    page = (run / "samples.html").read_text()
    assert "default-src 'none'" in page  # the page may fetch nothing
    assert not re.search(r"(src|href)=['\"]?(https?:)?//", page)
    assert "<link" not in page
    data = blocks(page)
    index = data["aeval-index"]
    assert isinstance(index, dict)
    assert len(index["i"]) == 23
    assert index["rt"] == [-1] * 23  # reasoning tokens per answer: none said here
    models = index["dict"]["model"]
    listed = [(models[m], t, i) for m, t, i in zip(index["m"], index["t"], index["i"], strict=True)]
    assert listed[:12] == [("alpha", 1, str(i)) for i in range(1, 13)]  # 2 before 10
    assert [d for d in data if d.startswith("aeval-d-")] == ["aeval-d-0"]
    assert set(data["aeval-items"]) == {str(i) for i in range(1, 13)}


def test_the_heavy_text_says_where_the_draft_and_the_answer_are(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run")
    data = blocks(viewer_html(load_samples(run), title="t"))
    index, rows = data["aeval-index"], details(data)
    assert isinstance(index, dict)
    keys = zip(index["m"], index["t"], index["i"], strict=True)
    at = {(index["dict"]["model"][m], t, i): k for k, (m, t, i) in enumerate(keys)}
    hostile = rows[at[("beta", 1, "3")]]
    text = hostile["res"]
    assert HOSTILE in text  # shown as the model wrote it (as text: see the browser tests)
    a, b = hostile["an"]
    assert text[a:b] == hostile["x"] == truth("4") + HOSTILE
    [(t0, t1)] = hostile["th"]
    assert text[t0:t1] == "<think>I reason about the loop.</think>"
    assert hostile["ce"] == {"n": "7"} and hostile["why"] == "reason for item 3"
    assert rows[at[("beta", 1, "10")]]["err"].startswith("batch_expired")
    assert rows[at[("beta", 1, "11")]]["xw"] == "no <answer> block in the response"
    repaired = index["dict"]["repaired"][index["r"][at[("beta", 1, "2")]]]
    assert repaired == "code_fence+untagged_answer"
    assert index["p"][at[("beta", 1, "3")]] == 1  # published reading disagrees: kept as is


def test_offsets_count_as_javascript_does(tmp_path: Path) -> None:
    # An emoji is one code point in Python and two UTF-16 units in JavaScript.
    content = answer_text(truth("1"), draft="🙂 " * 3)
    run = make_run(tmp_path / "run", {("m", 1): [Answer("1", E, content)]})
    [row] = details(blocks(viewer_html(load_samples(run), title="t")))
    units = row["res"].encode("utf-16-le")
    a, b = row["an"]
    assert units[2 * a : 2 * b].decode("utf-16-le") == truth("1")


def test_many_verdicts_are_split_into_blocks(tmp_path: Path) -> None:
    answers = [Answer(str(i), E, answer_text(truth("1"))) for i in range(1, CHUNK + 11)]
    run = make_run(tmp_path / "run", {("m", 1): answers})
    data = blocks(viewer_html(load_samples(run), title="t"))
    assert [len(data[f"aeval-d-{n}"]) for n in (0, 1)] == [CHUNK, 10]  # type: ignore[arg-type]


def test_a_rescore_directory_is_viewed_with_its_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = make_run(tmp_path / "run")
    out = tmp_path / "rescored"
    out.mkdir()
    (out / "verdicts.jsonl").write_text((run / "verdicts.jsonl").read_text())
    assert main(["view", str(out), "-o", str(tmp_path / "bare.html")]) == 0
    assert "give the files it scored with --responses" in capsys.readouterr().err
    files = [str(p) for p in sorted((run / "outputs").glob("*beta*"))]
    dataset = str(tmp_path / "bench.jsonl")
    assert main(["view", str(out), "--dataset", dataset, "--responses", *files]) == 0
    rows = details(blocks((out / "samples.html").read_text()))
    assert sum("res" in r for r in rows) == 4  # beta's four answers; alpha's files not given


def test_bad_input_is_one_clear_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["view", str(tmp_path / "nowhere")]) == 2
    assert "not a directory" in capsys.readouterr().err
    run = make_run(tmp_path / "run")
    assert main(["view", str(run), "--responses", str(tmp_path / "gone.jsonl")]) == 2
    assert "gone.jsonl: no such file" in capsys.readouterr().err


def test_plain_blocks_cannot_end_their_script_element() -> None:
    from aeval.report.viewer import _json

    text = _json({"model": "</script><!-- <b>", "ok": "(<= x 1)"})
    assert "</" not in text and "<!" not in text and "(<= x 1)" in text
    assert json.loads(text) == {"model": "</script><!-- <b>", "ok": "(<= x 1)"}


def test_open_hands_the_page_to_the_browser(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[str] = []
    monkeypatch.setattr("webbrowser.open", lambda url: opened.append(url) or True)
    run = make_run(tmp_path / "run")
    assert main(["view", str(run), "--open", "-o", str(tmp_path / "page.html")]) == 0
    assert opened == [(tmp_path / "page.html").resolve().as_uri()]


def test_a_synthetic_run_is_labelled_in_the_title(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run")
    config = json.loads((run / "config.json").read_text())
    (run / "config.json").write_text(json.dumps({**config, "provenance": {"synthetic": True}}))
    assert main(["view", str(run)]) == 0
    meta = blocks((run / "samples.html").read_text())["aeval-meta"]
    assert isinstance(meta, dict) and meta["title"].startswith("SYNTHETIC aeval samples: run")


def test_view_replaces_a_link_at_the_page_never_writing_through_it(tmp_path: Path) -> None:
    # Issue #46: a samples.html that is a link (planted in a shared run directory) was
    # written through, overwriting whatever it pointed at.
    run = make_run(tmp_path / "run")
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    (run / "samples.html").symlink_to(victim)
    assert main(["view", str(run)]) == 0
    assert victim.read_text() == "keep me"
    page = run / "samples.html"
    assert not page.is_symlink() and "default-src 'none'" in page.read_text()
    assert [p.name for p in run.iterdir() if p.name.startswith(".samples")] == []  # no leftovers
