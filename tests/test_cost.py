"""Cost up front and after: token estimates, the price table, batch at half price."""

from __future__ import annotations

import json
import math
from pathlib import Path

import polars as pl
import pytest

from aeval import cost
from aeval.cost import (
    BATCH_DISCOUNT,
    CHARS_PER_TOKEN,
    actual_cost,
    estimate_cost,
    price_of,
    token_counter,
)
from aeval.dataset import parse_id_spec, select_rows
from aeval.errors import DatasetError
from aeval.report import summarize
from aeval.store.results import previous_output_per_request
from aeval.verdicts import Status, Verdict, verdicts_frame

PROMPT = [{"role": "user", "content": "x" * 200}]


@pytest.fixture
def characters(monkeypatch: pytest.MonkeyPatch) -> None:
    """As on a machine where tiktoken's encoding file cannot be fetched."""
    monkeypatch.setattr(cost, "_encoder", lambda model: None)


def test_batch_is_half_the_list_price() -> None:
    price = price_of("gpt-4o-mini-2024-07-18")
    assert price is not None
    tokens = {"prompt": 1_000_000, "completion": 1_000_000}
    assert actual_cost("gpt-4o-mini-2024-07-18", tokens) == pytest.approx(
        BATCH_DISCOUNT * (price.input + price.output)
    )
    assert actual_cost("gpt-4o-mini-2024-07-18", tokens, batch=False) == pytest.approx(
        price.input + price.output
    )
    assert actual_cost("my-finetune", tokens) is None  # unknown price, not a guess


def test_an_unknown_model_has_an_unknown_price(characters: None) -> None:
    e = estimate_cost("my-finetune", [PROMPT], max_output_tokens=10)
    assert e.usd is None and "unknown price" in e.describe()
    assert price_of("gpt-4o-audio-preview") is None  # no prefix guessing


def test_the_character_fallback_is_counted_and_labelled(characters: None) -> None:
    count, method = token_counter("gpt-4o-2024-11-20")
    assert method == "characters" and count("x" * 200) == math.ceil(200 / CHARS_PER_TOKEN)
    e = estimate_cost("gpt-4o-2024-11-20", [PROMPT] * 3, trials=2, max_output_tokens=50)
    per_request = 3 + 3 + math.ceil(200 / CHARS_PER_TOKEN)  # reply priming, message framing
    assert e.requests == 6 and e.input_tokens == 6 * per_request
    assert e.output_tokens == 300 and e.output_basis.startswith("--max-tokens")
    assert e.usd == pytest.approx(0.5 * (6 * per_request * 2.5 + 300 * 10.0) / 1e6)
    assert f"~{CHARS_PER_TOKEN:g} chars/token" in e.describe()
    assert "~$" in e.describe()  # approximate input: not an upper bound


def test_without_a_bound_output_comes_from_a_previous_run(tmp_path: Path, characters: None) -> None:
    old = tmp_path / "20250101-000000-aaaa"
    old.mkdir()
    model = {"model": "gpt-4o-mini", "n": 10, "infra_failures": 2, "tokens": {"completion": 4000}}
    (old / "summary.json").write_text(json.dumps({"models": [model]}))
    assert previous_output_per_request(tmp_path, "gpt-4o-mini") == 500.0
    assert previous_output_per_request(tmp_path, "gpt-4o") is None
    e = estimate_cost("gpt-4o-mini", [PROMPT] * 2, output_per_request=500.0)
    assert e.output_tokens == 1000 and e.output_basis == "previous run"
    unknown = estimate_cost("gpt-4o-mini", [PROMPT])
    assert unknown.output_tokens is None and unknown.usd is None
    assert "plus the output" in unknown.describe()  # the input's cost is still given


def test_summary_carries_actual_cost() -> None:
    def verdict(model: str, i: int) -> Verdict:
        return Verdict(
            model=model,
            trial=1,
            custom_id=f"x-{i}",
            status=Status.EQUIVALENT,
            prompt_tokens=1000,
            completion_tokens=500,
        )

    frame = verdicts_frame([verdict("gpt-4o-mini", i) for i in range(4)])
    summary = summarize(frame)
    expected = actual_cost("gpt-4o-mini", {"prompt": 4000, "completion": 2000})
    assert summary["models"][0]["cost_usd"] == expected
    assert summary["overall"]["cost_usd"] == expected
    both = summarize(verdicts_frame([verdict("gpt-4o-mini", 0), verdict("mystery", 1)]))
    assert [m["cost_usd"] is None for m in both["models"]] == [False, True]
    assert both["overall"]["cost_usd"] is None  # a total would hide the unknown part


@pytest.mark.parametrize(
    ("spec", "ids"),
    [
        ("5,7,10-12", ("5", "7", "10", "11", "12")),
        (" 3 , 3,1-2", ("3", "1", "2")),
        ("abc-1,x", ("abc-1", "x")),  # not two integers: an id as written
    ],
)
def test_id_specs(spec: str, ids: tuple[str, ...]) -> None:
    assert parse_id_spec(spec) == ids


@pytest.mark.parametrize("spec", ["", "1,,2", "9-3"])
def test_bad_id_specs(spec: str) -> None:
    with pytest.raises(DatasetError, match="--sample-id"):
        parse_id_spec(spec)


def test_ids_come_before_tier_sample_and_limit() -> None:
    frame = pl.DataFrame(
        {"id": [str(i) for i in range(20)], "tier": ["small", "large"] * 10},
    )
    kept = select_rows(frame, ids="1-10", tier="large", limit=3)
    assert kept["id"].to_list() == ["1", "3", "5"]
    # a range may name ids that do not exist; a single id must exist
    assert select_rows(frame, ids="15-99")["id"].to_list() == [str(i) for i in range(15, 20)]
    with pytest.raises(DatasetError, match="no row with id 42"):
        select_rows(frame, ids="1,42")
