from __future__ import annotations

import base64
import json
import random
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from aeval.cli import main
from aeval.report import summarize
from aeval.summary.tables import fmt_interval, fmt_pct
from aeval.verdicts import Status, Verdict, verdicts_frame

MODELS = ("gpt-4o-mini", "o3-mini", 'model <&> "quoted"')


def drawn_status(rnd: random.Random, p: float) -> Status:
    """Equivalent with probability ``p``, else any other status alike."""
    if rnd.random() < p:
        return Status.EQUIVALENT
    return rnd.choice([s for s in Status if s is not Status.EQUIVALENT])


def write_finished_run(run_dir: Path, verdicts: list[Verdict], **dump: Any) -> dict:
    """``verdicts`` as the engine leaves a finished run: verdicts.parquet + summary.json
    (``json.dumps(summary, **dump)``); the summary."""
    frame = verdicts_frame(verdicts)
    run_dir.mkdir(parents=True)
    frame.write_parquet(run_dir / "verdicts.parquet")
    summary = summarize(frame)
    (run_dir / "summary.json").write_text(json.dumps(summary, **dump))
    return summary


def write_run(run_dir: Path, seed: int = 7) -> dict:
    """A finished run directory as the engine leaves it: verdicts.parquet + summary.json."""
    rnd = random.Random(seed)
    verdicts = []
    for i, model in enumerate(MODELS):
        for trial in (1, 2):
            for k in range(120):
                status = drawn_status(rnd, 0.3 + 0.25 * i)
                verdicts.append(
                    Verdict(
                        model=model, trial=trial, custom_id=f"warp-{k}", status=status,
                        tier=("small", "medium", "large")[k % 3],
                        repaired="code_fence" if rnd.random() < 0.1 else None,
                        direction="too_weak" if status is Status.NOT_EQUIVALENT else None,
                        counterexample={"in0": "3"} if status is Status.NOT_EQUIVALENT else None,
                        prompt_tokens=500, completion_tokens=rnd.randint(10, 900),
                    )
                )  # fmt: skip
    return write_finished_run(run_dir, verdicts, indent=2)


@pytest.fixture
def html_page(tmp_path: Path) -> tuple[str, dict]:
    write_run(tmp_path / "run")
    out = tmp_path / "page.html"
    assert main(["report", str(tmp_path / "run"), "--format", "html", "-o", str(out)]) == 0
    # Compare with the summary.json on disk, as a reader of the run would.
    return out.read_text(), json.loads((tmp_path / "run" / "summary.json").read_text())


def parse(page: str) -> ET.Element:
    assert page.startswith("<!DOCTYPE html>")
    return ET.fromstring(page.removeprefix("<!DOCTYPE html>"))  # well-formed, or raises


def test_html_is_well_formed_and_self_contained(html_page: tuple[str, dict]) -> None:
    page, _ = html_page
    root = parse(page)
    assert root.tag == "html"
    # accuracy, verdict mix, tiers, and pass@k (the run has two trials): the report's
    # figures (aeval.report.figures) as inline PNGs, nothing to fetch
    assert len(root.findall(".//figure/img")) == 4
    assert all(i.get("src", "").startswith("data:image/png;base64,") for i in root.iter("img"))
    lowered = page.lower()
    for needle in ("http:", "https:", "<script", "<link", "@import", "url(", "//cdn"):
        assert needle not in lowered, needle
    # Model names are escaped, not injected.
    assert "model &lt;&amp;&gt; &quot;quoted&quot;" in page


def test_charts_are_the_figures_of_the_summary(html_page: tuple[str, dict]) -> None:
    from aeval.report import figures

    page, summary = html_page
    root = parse(page)
    shown = {f.get("id"): f.find("img") for f in root.iter("figure")}
    assert set(shown) == {"chart-accuracy", "chart-mix", "chart-tiers", "chart-passk"}
    # the page's PNG is the figure drawn from summary.json, byte for byte
    want = figures.render(figures.verdict_mix_figure(summary), "png")
    assert shown["chart-mix"].get("src") == (
        "data:image/png;base64," + base64.b64encode(want).decode()
    )
    fig = figures.verdict_mix_figure(summary)
    drawn = {a.get_gid(): a for a in fig.findobj(lambda a: a.get_gid() is not None)}
    for m in summary["models"]:
        shares = [drawn[f"{m['model']}|{s}"].get_width() for s, n in m["statuses"].items() if n]
        assert shares == pytest.approx([n / m["n"] for n in m["statuses"].values() if n])


def test_html_tables_show_the_summary_numbers(html_page: tuple[str, dict]) -> None:
    page, summary = html_page
    root = parse(page)
    first = root.find(".//table[@class='grid']")
    rows = [[td.text for td in tr.findall("td")] for tr in first.findall("tbody/tr")]
    for row, m in zip(rows, summary["models"], strict=True):
        assert row[0] == m["model"]
        assert row[1] == fmt_interval(m["accuracy"])
        assert row[3] == fmt_pct(m["published_accuracy"]["value"])
        assert row[5] == f"{m['correct']}/{m['scored']}"
        assert row[7] == str(m["infra_failures"])


def test_html_defaults_to_the_run_directory(tmp_path: Path) -> None:
    write_run(tmp_path / "run")
    assert main(["report", str(tmp_path / "run"), "-f", "html"]) == 0
    assert 'id="chart-mix"' in (tmp_path / "run" / "report.html").read_text()


def test_compare_html_has_both_runs(tmp_path: Path) -> None:
    write_run(tmp_path / "a", seed=1)
    write_run(tmp_path / "b", seed=2)
    out = tmp_path / "cmp.html"
    assert (
        main(["report", str(tmp_path / "a"), str(tmp_path / "b"), "-f", "html", "-o", str(out)])
        == 0
    )
    [img] = parse(out.read_text()).findall(".//figure[@id='chart-accuracy']/img")
    assert img.get("src", "").startswith("data:image/png;base64,")
