"""The sample viewer in a real headless Chromium: load, filter, search, open an
item from its permalink, hostile answers shown as text, and the layout.

Needs Debian's ``chromium`` (``.ci/run`` installs it when it can); without it
these tests are skipped, saying so.
"""

from __future__ import annotations

import html
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from viewer_helpers import HOSTILE, Answer, E, answer_text, make_run, truth

from aeval.report.samples import load_samples
from aeval.report.viewer import viewer_html

CHROMIUM = next(
    (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None
)
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="headless Chromium is not installed (apt-get install chromium): "
    "the viewer's browser tests need a real browser",
)
WINDOW = (1400, 900)


def chromium(tmp_path: Path, *args: str) -> str:
    assert CHROMIUM is not None
    profile = tmp_path / "chromium-profile"
    command = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={profile}",
        f"--window-size={WINDOW[0]},{WINDOW[1]}",
        *args,
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)
    return done.stdout


def dump(tmp_path: Path, page: Path, fragment: str = "") -> str:
    """The document after the page's script ran, as Chromium serialises it."""
    # Virtual time lets the page finish its asynchronous work (decoding the
    # opened verdict's block) before the dump, however loaded the machine is.
    url = page.resolve().as_uri() + fragment
    dom = chromium(tmp_path, "--virtual-time-budget=10000", "--dump-dom", url)
    assert "data-ready=" in dom, "the page's script did not finish"
    return dom


def texts(dom: str, tag: str, cls: str) -> list[str]:
    found = re.findall(rf"<{tag} class=\"{cls}\"[^>]*>(.*?)</{tag}>", dom, re.S)
    return [html.unescape(re.sub(r"<[^>]+>", "", t)) for t in found]


def listed(dom: str) -> list[tuple[str, str]]:
    """(status, item) of each row the list drew."""
    row = r'<div class="row[^"]*" data-k="\d+" data-at="\d+" data-status="(\w+)">'
    item = r'<span class="dot [\w-]+"></span><span class="c-item">([^<]*)<'
    rows = re.findall(row + item, dom)
    return [(s, html.unescape(i)) for s, i in rows]


def shown(dom: str) -> int:
    match = re.search(r'id="count"[^>]*data-shown="(\d+)"', dom)
    assert match, "no count"
    return int(match[1])


@pytest.fixture
def page(tmp_path: Path) -> Path:
    run = make_run(tmp_path / "run")
    path = tmp_path / "samples.html"
    path.write_text(viewer_html(load_samples(run), title="viewer test"))
    return path


def test_a_permalink_opens_a_filtered_list_and_one_answer(tmp_path: Path, page: Path) -> None:
    dom = dump(tmp_path, page, "#model=beta&status=wrong&open=beta/1/3")
    # beta's model failures: item 3 (not_equivalent) and item 11 (no_answer); the
    # API error on item 10 is not the model's.
    assert shown(dom) == 2
    assert listed(dom) == [("not_equivalent", "3"), ("no_answer", "11")]
    assert re.search(r'class="row sel" data-k="\d+" data-at="0"', dom)
    assert '<main id="detail" tabindex="-1" data-shown="beta/1/3">' in dom
    assert "<h2>Item 3<" in dom
    assert texts(dom, "pre", "truth") == [truth("3")]
    assert texts(dom, "pre", "question")[0].startswith("Question 3")
    # The hostile answer is marked as the extracted answer, and stays text.
    [response] = texts(dom, "pre", "response")
    assert HOSTILE in response and response.startswith("<think>")
    marked = re.findall(r"<mark>(.*?)</mark>", dom, re.S)
    assert [html.unescape(m) for m in marked] == [truth("4") + HOSTILE]
    assert "pwned" not in dom.split("<title>")[1].split("</title>")[0]
    assert "<img" not in dom.split('<main id="detail"')[1]
    readings = dict(re.findall(r'data-reading="(\w+)">\w+ (.)<', dom))
    assert readings == {"strict": "✗", "lenient": "✗", "published": "✓"}
    assert "prompt 120 · completion 45" in dom and '<dd data-fact="direction">too_weak<' in dom


def test_search_by_item_ids_and_ranges(tmp_path: Path, page: Path) -> None:
    dom = dump(tmp_path, page, "#q=2%2C10-11")
    items = [item for _, item in listed(dom)]
    # alpha trial 1: 2, 10, 11; alpha trial 2: 2; beta: 2, 10, 11.
    assert items == ["2", "10", "11", "2", "2", "10", "11"] and shown(dom) == 7
    assert "7 of 23 verdicts" in dom
    dom = dump(tmp_path, page, "#repair=code_fence")
    assert listed(dom) == [("equivalent", "2")]


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_many_verdicts_draw_only_the_visible_rows_and_lay_out(tmp_path: Path) -> None:
    answers = [Answer(str(i), E, answer_text(truth(str(i)))) for i in range(1, 3001)]
    run = make_run(tmp_path / "run", {("m", 1): answers})
    page = tmp_path / "big.html"
    page.write_text(viewer_html(load_samples(run), title="3000 verdicts"))
    dom = dump(tmp_path, page, "#open=m/1/2500")
    rows = listed(dom)
    assert shown(dom) == 3000
    # The list is as tall as the window allows (about 28 rows of 26 px) plus a
    # few drawn beyond each edge, scrolled to the open item: never 3000 elements.
    assert 20 <= len(rows) <= 60 and ("equivalent", "2500") in rows
    assert re.search(r'id="spacer" style="height: 78000px;"', dom)

    shot = tmp_path / "shot.png"
    chromium(tmp_path, f"--screenshot={shot}", page.resolve().as_uri() + "#open=m/1/2500")
    blank = tmp_path / "blank.png"
    chromium(tmp_path, f"--screenshot={blank}", "about:blank")
    assert _png_size(shot) == WINDOW
    # A drawn page (text, rows, colours) compresses far worse than an empty one.
    assert shot.stat().st_size > 10 * blank.stat().st_size
