from __future__ import annotations

import json
import random
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from aeval.cli import main
from aeval.report import summarize
from aeval.report.tables import fmt_interval, fmt_pct
from aeval.verdicts import Status, Verdict, verdicts_frame

MODELS = ("gpt-4o-mini", "o3-mini", 'model <&> "quoted"')


def write_run(run_dir: Path, seed: int = 7) -> dict:
    """A finished run directory as the engine leaves it: verdicts.parquet + summary.json."""
    rnd = random.Random(seed)
    verdicts = []
    for i, model in enumerate(MODELS):
        for trial in (1, 2):
            for k in range(120):
                p = 0.3 + 0.25 * i
                status = (
                    Status.EQUIVALENT
                    if rnd.random() < p
                    else rnd.choice([s for s in Status if s is not Status.EQUIVALENT])
                )
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
    frame = verdicts_frame(verdicts)
    run_dir.mkdir(parents=True)
    frame.write_parquet(run_dir / "verdicts.parquet")
    summary = summarize(frame)
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary


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
    # accuracy, verdict mix, tiers, and pass@k (the run has two trials)
    assert len(root.findall(".//svg")) == 4
    lowered = page.lower()
    for needle in ("http:", "https:", "<script", "<link", "@import", "url(", "src=", "//cdn"):
        assert needle not in lowered, needle
    # Model names are escaped, not injected.
    assert "model &lt;&amp;&gt; &quot;quoted&quot;" in page


def test_accuracy_chart_matches_summary_json(html_page: tuple[str, dict]) -> None:
    page, summary = html_page
    bars = parse(page).findall(".//svg[@id='chart-accuracy']/g[@class='bar']")
    assert [b.get("data-model") for b in bars] == [m["model"] for m in summary["models"]]
    for bar, m in zip(bars, summary["models"], strict=True):
        assert float(bar.get("data-accuracy")) == m["accuracy"]["value"]
        assert float(bar.get("data-low")) == m["accuracy"]["low"]
        assert float(bar.get("data-high")) == m["accuracy"]["high"]
        assert float(bar.get("data-strict")) == m["strict_accuracy"]["value"]
        # The bar is drawn to scale: width / plot width is the accuracy.
        rect = bar.find("rect")
        assert float(rect.get("width")) == pytest.approx(600 * m["accuracy"]["value"], abs=0.06)


def test_verdict_mix_and_tier_charts_match_summary_json(html_page: tuple[str, dict]) -> None:
    page, summary = html_page
    root = parse(page)
    segs = root.findall(".//svg[@id='chart-mix']/rect[@class='seg']")
    counts = {(s.get("data-model"), s.get("data-status")): int(s.get("data-count")) for s in segs}
    for m in summary["models"]:
        for status, n in m["statuses"].items():
            assert counts.get((m["model"], status), 0) == n
        assert sum(v for (model, _), v in counts.items() if model == m["model"]) == m["n"]
    tiers = root.findall(".//svg[@id='chart-tiers']/g[@class='tierbar']")
    assert len(tiers) == len(summary["tiers"])
    by_key = {(t["model"], t["tier"]): t for t in summary["tiers"]}
    for g in tiers:
        t = by_key[(g.get("data-model"), g.get("data-tier"))]
        assert float(g.get("data-accuracy")) == t["accuracy"]["value"]
        assert float(g.get("data-high")) == t["accuracy"]["high"]
    # Tiers read from small to large, not alphabetically.
    labels = [t.text for t in root.findall(".//svg[@id='chart-tiers']/text")]
    assert [x for x in labels if x in ("small", "medium", "large")] == ["small", "medium", "large"]


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
    assert re.search(r"<svg[^>]*id=\"chart-mix\"", (tmp_path / "run" / "report.html").read_text())


def test_compare_html_has_both_runs(tmp_path: Path) -> None:
    write_run(tmp_path / "a", seed=1)
    write_run(tmp_path / "b", seed=2)
    out = tmp_path / "cmp.html"
    assert (
        main(["report", str(tmp_path / "a"), str(tmp_path / "b"), "-f", "html", "-o", str(out)])
        == 0
    )
    bars = parse(out.read_text()).findall(".//svg[@id='chart-accuracy']/g[@class='bar']")
    assert len(bars) == 2 * len(MODELS)
    assert {b.get("data-series") for b in bars} == {str(tmp_path / "a"), str(tmp_path / "b")}
