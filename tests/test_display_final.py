"""The summary printed at the end of a run fits the terminal (Issue 21 §3); the same
table in a real terminal is checked by tests/test_display_fit.py's tmux test."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from aeval.display.final import final_summary
from aeval.report import summarize
from aeval.verdicts import Status, Verdict, verdicts_frame

MODELS = ["gpt-4o-2024-11-20", "gpt-4o-mini-2024-07-18", "gpt-3.5-turbo-0125"]


def summary_of(trials: int) -> dict[str, object]:
    verdicts = [
        Verdict(
            model=m,
            trial=t,
            custom_id=str(i),
            status=Status.EQUIVALENT if (i + t + j) % 3 else Status.NOT_EQUIVALENT,
            tier="small",
            prompt_tokens=400_000,
            completion_tokens=451_400,
        )
        for j, m in enumerate(MODELS)
        for t in range(1, trials + 1)
        for i in range(30)
    ]
    return summarize(verdicts_frame(verdicts))


def printed(summary: dict[str, object], width: int) -> list[str]:
    console = Console(width=width, file=io.StringIO(), color_system=None)
    console.print(final_summary(summary, run_dir="results/r1"))
    return console.file.getvalue().splitlines()  # type: ignore[attr-defined]


def rows(lines: list[str]) -> list[list[str]]:
    return [[c.strip() for c in line.split("│")[1:-1]] for line in lines if line.startswith("│")]


@pytest.mark.parametrize("width", [60, 80, 100, 120])
@pytest.mark.parametrize("trials", [1, 3])
def test_one_line_per_model_and_what_was_dropped_is_named(width: int, trials: int) -> None:
    lines = printed(summary_of(trials), width)
    assert all(len(line) <= width for line in lines), "\n".join(lines)
    table = rows(lines)
    assert len(table) == len(MODELS)  # no cell folded onto a second line
    shown = {r[0] for r in table}
    assert len(shown) == len(MODELS)  # names shortened, never made alike
    for r in table:
        assert re.fullmatch(r"\d+\.\d% \[\d+\.\d, \d+\.\d\]", r[1]), r  # never cut
        assert all("…" not in cell for cell in r[1:]), r  # numbers are never elided
    header = next(line for line in lines if line.startswith("┃"))
    text = "\n".join(lines)
    if header.count("┃") - 1 < 9:
        assert f"Not shown at {width} columns:" in text
        assert "Every column: python -m aeval report results/r1" in text
    else:
        assert "Not shown" not in text


def test_the_least_telling_columns_go_first_at_80_columns() -> None:
    text = "\n".join(printed(summary_of(1), 80))
    dropped = re.search(r"Not shown at 80 columns: (.*)\.", text)
    assert dropped is not None, text
    # one trial: "mean ± std" says nothing the accuracy does not, so it goes first
    assert dropped.group(1).split(", ")[0] == "Trials mean ± std"
    assert "Infra f" in text and "Strict" in text  # kept: they say whether to trust it


def test_wide_enough_shows_every_column_as_the_report_does() -> None:
    lines = printed(summary_of(2), 200)
    header = next(line for line in lines if line.startswith("┃"))
    for name in ("Accuracy [95% CI]", "Published", "Trials mean ± std", "Tokens", "Infra fail"):
        assert name in header
    assert "gpt-4o-mini-2024-07-18" in "\n".join(lines)


def test_a_run_with_repair_rounds_shows_its_repair_curve_under_the_table() -> None:
    """The final table is round 1's; a K-round run also shows accuracy@1…@K (#44)."""
    from rich.console import Console

    from aeval.display.final import final_summary
    from aeval.summary.aggregate import summarize
    from aeval.verdicts import Status, Verdict, verdicts_frame

    rows = []
    for item in range(4):  # items 0-1 right at once, 2 repaired in round 2, 3 never
        rounds = {0: 1, 1: 1, 2: 2, 3: 3}[item]
        for r in range(1, rounds + 1):
            right = r == rounds and item != 3
            rows.append(
                Verdict(
                    model="m",
                    trial=1,
                    custom_id=str(item) if r == 1 else f"{item}_r{r}",
                    round=r,
                    status=Status.EQUIVALENT if right else Status.NOT_EQUIVALENT,
                )
            )
    summary = summarize(verdicts_frame(rows), rounds=3)
    console = Console(width=160, record=True)
    console.print(final_summary(summary))
    text = console.export_text()
    assert "repair rounds" in text and "acc@3" in text
    assert "50.0%" in text and "75.0%" in text  # acc@1 = 2/4, acc@2 = acc@3 = 3/4
    one_round = summarize(verdicts_frame([v for v in rows if v.round == 1]))
    console = Console(width=160, record=True)
    console.print(final_summary(one_round))
    assert "repair rounds" not in console.export_text()
