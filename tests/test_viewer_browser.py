"""The sample viewer in a real headless Chromium: load, filter, search, open an
item from its permalink, hostile answers shown as text, and the layout.

Needs Debian's ``chromium`` (``.ci/run`` installs it when it can); without it
these tests are skipped, saying so.
"""

from __future__ import annotations

import base64
import html
import re
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from chromium_helpers import CHROMIUM, SKIP_REASON, WINDOW, DevTools, run_chromium
from viewer_helpers import HOSTILE, Answer, E, answer_text, make_run, truth

from aeval.report.samples import load_samples
from aeval.report.viewer import viewer_html

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason=SKIP_REASON)


def chromium(tmp_path: Path, *args: str) -> str:
    return run_chromium(tmp_path / "chromium-profile", *args)


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
    # The first token where the answer departs from the truth is marked in both.
    assert re.search(r'<pre class="answer">[^<]*<span class="diff"[^>]*>4</span>', dom)
    assert re.search(r'<pre class="truth">[^<]*<span class="diff"[^>]*>3</span>', dom)
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


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevTools]:
    """One headless Chromium for the tests that press keys, click and measure."""
    devtools = DevTools(tmp_path_factory.mktemp("devtools") / "profile")
    try:
        yield devtools
    finally:
        devtools.close()


ROWS = (
    "[...document.querySelectorAll('#rows .row')].map(r => r.querySelector('.c-item').textContent)"
)
COUNT = "Number(document.getElementById('count').dataset.shown)"
SHOWN = "document.getElementById('detail').dataset.shown"


def test_search_by_item_ids_and_ranges(page: Path, browser: DevTools) -> None:
    browser.open(page.resolve().as_uri() + "#q=2%2C10-11")
    # alpha trial 1: 2, 10, 11; alpha trial 2: 2; beta: 2, 10, 11.
    assert browser.evaluate(ROWS) == ["2", "10", "11", "2", "2", "10", "11"]
    assert browser.evaluate(COUNT) == 7
    assert browser.evaluate("document.getElementById('f-q').value") == "2,10-11"
    # A permalink followed inside the page (the fragment changes, no reload).
    browser.evaluate("location.hash = '#repair=code_fence'")
    assert browser.wait_for(f"{COUNT} === 1")
    assert browser.evaluate(ROWS) == ["2"]
    assert browser.evaluate("document.getElementById('f-repair').value") == "code_fence"


def test_many_verdicts_draw_only_the_visible_rows_and_lay_out(
    tmp_path: Path, browser: DevTools
) -> None:
    answers = [Answer(str(i), E, answer_text(truth(str(i)))) for i in range(1, 3001)]
    run = make_run(tmp_path / "run", {("m", 1): answers})
    page = tmp_path / "big.html"
    page.write_text(viewer_html(load_samples(run), title="3000 verdicts"))
    browser.open(page.resolve().as_uri() + "#open=m/1/2500")
    assert browser.wait_for(f"{SHOWN} === 'm/1/2500'")
    assert browser.evaluate(COUNT) == 3000
    rows = browser.evaluate(ROWS)
    # The list is as tall as the window allows (about 28 rows of 26 px) plus a
    # few drawn beyond each edge, scrolled to the open item: never 3000 elements.
    assert 20 <= len(rows) <= 60 and "2500" in rows
    assert browser.evaluate("document.getElementById('spacer').style.height") == "78000px"
    # Scrolling to the end draws the last rows (and only those).
    browser.evaluate("(() => { const l = document.getElementById('list'); l.scrollTop = 1e9; })()")
    assert browser.wait_for(f"{ROWS}.includes('3000')")
    assert len(browser.evaluate(ROWS)) <= 60
    # Layout: the list and the open verdict side by side, filling the window.
    boxes = browser.evaluate(
        "['side', 'detail', 'list'].map(id => { const r = document.getElementById(id)"
        ".getBoundingClientRect(); return [r.left, r.top, r.width, r.height]; })"
    )
    (side, detail, listing) = boxes
    assert side[0] == 0 and detail[0] >= side[0] + side[2] - 1
    assert side[2] >= 460 and detail[2] >= 500 and side[2] + detail[2] >= WINDOW[0] - 30
    assert listing[3] >= 500  # the list takes the height left under the filters

    shot = base64.b64decode(browser.call("Page.captureScreenshot", {"format": "png"})["data"])
    browser.open("about:blank")
    blank = base64.b64decode(browser.call("Page.captureScreenshot", {"format": "png"})["data"])
    assert _png_size(shot) == _png_size(blank) and _png_size(shot)[0] >= 1000
    # A drawn page (text, rows, colours) compresses far worse than an empty one.
    assert len(shot) > 10 * len(blank)


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_keys_and_clicks_move_through_the_answers(page: Path, browser: DevTools) -> None:
    browser.open(page.resolve().as_uri() + "#model=alpha&trial=1")
    shown = SHOWN
    assert browser.evaluate(shown) is None  # nothing open yet: the help is shown
    browser.press("j", "KeyJ", 74, "j")
    assert browser.wait_for(shown) == "alpha/1/1"
    for _ in range(3):
        browser.press("ArrowDown", "ArrowDown", 40)
    assert browser.wait_for(f"{shown} === 'alpha/1/4' && {shown}")
    browser.press("k", "KeyK", 75, "k")
    assert browser.wait_for(f"{shown} === 'alpha/1/3' && {shown}")
    browser.press("End", "End", 35)
    assert browser.wait_for(f"{shown} === 'alpha/1/12' && {shown}")
    # The address bar holds the permalink of what is shown.
    assert browser.evaluate("location.hash") == "#model=alpha&trial=1&open=alpha/1/12"
    # "/" goes to the item search; typing ids and Enter filters the list.
    browser.press("/", "Slash", 191, "/")
    assert browser.evaluate("document.activeElement.id") == "f-q"
    browser.type_text("5,7-8")
    browser.press("Enter", "Enter", 13, "\r")
    assert browser.wait_for("document.getElementById('count').dataset.shown === '3'")
    rows = "[...document.querySelectorAll('#rows .c-item')].map(e => e.textContent)"
    assert browser.evaluate(rows) == ["5", "7", "8"]
    # A click opens a row; Escape leaves the search box and the keys work again.
    browser.click("#rows .row[data-at='2']")
    assert browser.wait_for(f"{shown} === 'alpha/1/8' && {shown}")
    browser.press("k", "KeyK", 75, "k")
    assert browser.wait_for(f"{shown} === 'alpha/1/7' && {shown}")
    # A filter chosen in its menu applies at once and goes into the permalink.
    browser.evaluate(
        "(() => { const s = document.getElementById('f-status'); s.value = 'wrong';"
        " s.dispatchEvent(new Event('change')); })()"
    )
    assert browser.wait_for("document.getElementById('count').dataset.shown === '0'")
    assert "status=wrong" in browser.evaluate("location.hash")


def test_a_repair_runs_answer_opens_as_its_conversation(tmp_path: Path) -> None:
    """An answer of a 3-round run: its round 1 above, then each later round's feedback
    (as the engine sent it), answer and verdict; the rounds filter counts answers."""
    from test_report_rounds import histories, write_rounds_run

    run = tmp_path / "repair"
    write_rounds_run(run, histories())
    page = tmp_path / "rounds.html"
    page.write_text(viewer_html(load_samples(run), title="rounds"))
    dom = dump(tmp_path, page, "#open=gpt-4o-mini/1/3")
    assert '<main id="detail" tabindex="-1" data-shown="gpt-4o-mini/1/3">' in dom
    assert re.findall(r'<section class="round" data-round="(\d+)">', dom) == ["2", "3"]
    feedback = texts(dom, "pre", "feedback")
    assert len(feedback) == 2
    assert "could not parse your answer (round 1 reason for 3)" in feedback[0]
    assert "A counterexample: with n = 4, yours holds there" in feedback[1]
    assert "solved in round 3 of 3" in html.unescape(dom)
    repaired = sum(1 for statuses in histories().values() if statuses[0] is not E and E in statuses)
    assert shown(dump(tmp_path, page, "#rounds=repaired")) == repaired
