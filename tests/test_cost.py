"""Cost up front and after: token estimates, prices from genai-prices (its bundled data),
batch rates (the source's, or aeval's discount where it has none), reasoning as output."""

from __future__ import annotations

import json
import math
from pathlib import Path

import polars as pl
import pytest

from aeval import cost
from aeval.cost import (
    BATCH_DISCOUNTS,
    CHARS_PER_TOKEN,
    PRICE_SOURCE,
    actual_cost,
    batch_rate_from,
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
    assert price is not None and (price.input, price.output) == (0.15, 0.6)
    tokens = {"prompt": 1_000_000, "completion": 1_000_000}
    # the source's own batch rate for it (genai-prices: processing=batch)
    assert batch_rate_from("gpt-4o-mini-2024-07-18") == "genai-prices"
    assert actual_cost("gpt-4o-mini-2024-07-18", tokens, requests=1000) == pytest.approx(
        0.5 * (price.input + price.output)
    )
    assert actual_cost(
        "gpt-4o-mini-2024-07-18", tokens, requests=1000, batch=False
    ) == pytest.approx(price.input + price.output)
    assert actual_cost("my-finetune", tokens) is None  # unknown price, not a guess


def test_an_unknown_model_has_an_unknown_price(characters: None) -> None:
    e = estimate_cost("my-finetune", [PROMPT], max_output_tokens=10)
    assert e.usd is None and "unknown price" in e.describe()
    assert price_of("gpt-4o-foo") is None  # no prefix guessing
    assert price_of("claude-sonnet-4-5") is None  # a bare name is OpenAI's: no fall-back


# The models issue #37 names (the study's gpt-5 and o4-mini among them), priced by the
# source at its list and batch rates (genai-prices 0.2.3's bundled data, which the
# providers' price pages agree with: USD per million tokens, input and output).
LISTED = {
    "gpt-5-2025-08-07": (1.25, 10.0),
    "openai/gpt-5-mini": (0.25, 2.0),
    "gpt-5-nano": (0.05, 0.4),
    "o3": (2.0, 8.0),
    "o4-mini-2025-04-16": (1.1, 4.4),
    "anthropic/claude-sonnet-4-5": (3.0, 15.0),
    "anthropic/claude-haiku-4-5": (1.0, 5.0),
    "anthropic/claude-opus-4-1": (15.0, 75.0),
    "google/gemini-2.5-pro": (1.25, 10.0),
    "google/gemini-2.5-flash": (0.3, 2.5),
}


@pytest.mark.parametrize("model", sorted(LISTED))
def test_the_reasoning_models_are_priced(model: str) -> None:
    price = price_of(model)
    assert price is not None and (price.input, price.output) == pytest.approx(LISTED[model])
    batch = price_of(model, batch=True)
    assert batch is not None
    # Half, whether the source says so or aeval's own discount for the provider does.
    assert (batch.input, batch.output) == pytest.approx((price.input / 2, price.output / 2))


def test_aeval_discounts_only_where_the_source_has_no_batch_rate() -> None:
    assert batch_rate_from("anthropic/claude-sonnet-4-5") == "genai-prices"
    # Together's models carry no batch rate in the source: aeval's provider discount.
    together = "together/meta-llama/Llama-3.3-70B-Instruct-Turbo"
    assert batch_rate_from(together) == "aeval"
    listed, batch = price_of(together), price_of(together, batch=True)
    assert listed is not None and batch is not None
    assert batch.output == pytest.approx(listed.output * BATCH_DISCOUNTS["together"])
    assert batch_rate_from("my-finetune") is None


def test_a_long_prompt_tier_is_chosen_per_request() -> None:
    """Gemini 2.5 Pro bills prompts over 200k tokens at a higher rate (the source's tiers):
    the same tokens in one request cost more than in a thousand."""
    tokens = {"prompt": 1_000_000, "completion": 0}
    short = actual_cost("google/gemini-2.5-pro", tokens, requests=1000, batch=False)
    long = actual_cost("google/gemini-2.5-pro", tokens, requests=1, batch=False)
    assert short == pytest.approx(1.25) and long == pytest.approx(2.5)


def test_reasoning_tokens_are_priced_once_as_output() -> None:
    """A rescored gpt-5 line whose 900 completion tokens include 800 of reasoning costs
    900 output tokens: completion_tokens already holds the reasoning."""
    from aeval.scoring.responses import parse_batch_line, verdict_from_check
    from aeval.verdicts import CheckResult

    line = {
        "custom_id": "7",
        "response": {
            "status_code": 200,
            "body": {
                "object": "chat.completion",
                "model": "gpt-5-2025-08-07",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "x"},
                             "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 1000, "completion_tokens": 900, "total_tokens": 1900,
                          "completion_tokens_details": {"reasoning_tokens": 800}},
            },
        },
    }  # fmt: skip
    response = parse_batch_line(json.dumps(line))
    verdict = verdict_from_check(
        response, CheckResult(Status.EQUIVALENT), model="gpt-5-2025-08-07", trial=1
    )
    summary = summarize(verdicts_frame([verdict]))
    model = summary["models"][0]
    assert model["tokens"] == {"prompt": 1000, "completion": 900, "total": 1900, "reasoning": 800}
    # gpt-5 at batch price: $0.625 in, $5 out per million
    assert model["cost_usd"] == pytest.approx((1000 * 0.625 + 900 * 5.0) / 1e6)


def test_the_estimate_names_its_price_source() -> None:
    from aeval.commands.run import cost_lines
    from aeval.config import RunConfig

    lines = cost_lines(RunConfig(models=("gpt-5-2025-08-07",)), ["(declare-const x Int)"])
    assert PRICE_SOURCE in lines[0] and PRICE_SOURCE.startswith("genai-prices ")
    assert "unknown price" not in lines[1]


def test_prices_are_read_without_the_network() -> None:
    """The source's bundled data only: its auto-update (UpdatePrices) is never started,
    so no custom snapshot replaces the bundled one."""
    from genai_prices import data_snapshot

    assert price_of("o3") is not None
    assert data_snapshot.get_snapshot().from_auto_update is False


def test_the_character_fallback_is_counted_and_labelled(characters: None) -> None:
    count, method = token_counter("gpt-4o-2024-11-20")
    assert method == "characters" and count("x" * 200) == math.ceil(200 / CHARS_PER_TOKEN)
    e = estimate_cost("gpt-4o-2024-11-20", [PROMPT] * 3, trials=2, max_output_tokens=50)
    per_request = 3 + 3 + math.ceil(200 / CHARS_PER_TOKEN)  # reply priming, message framing
    assert e.requests == 6 and e.input_tokens == 6 * per_request
    assert e.output_tokens == 300 and e.output_basis.startswith("--max-tokens")
    assert e.usd == pytest.approx(0.5 * (6 * per_request * 2.5 + 300 * 10.0) / 1e6)  # gpt-4o
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
    expected = actual_cost("gpt-4o-mini", {"prompt": 4000, "completion": 2000}, requests=4)
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


def test_a_dry_run_prices_the_models_issue_37_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``run --dry-run`` prices the gpt-5 family, o3, o4-mini, Claude 4.x and Gemini 2.5
    (nothing is sent: no key is needed), naming the price source and its version."""
    from aeval.cli import main
    from aeval.dataset import demo_dataset_path

    for name in ("OPENAI_API_KEY", "OPENAI_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    models = [*LISTED, "anthropic/claude-sonnet-4-0", "anthropic/claude-opus-4-5"]
    args = ["run", "--dry-run", "--dataset", str(demo_dataset_path()), "--limit", "2",
            "--max-completion-tokens", "4000", "--out", str(tmp_path)]  # fmt: skip
    args += ["--model", ",".join(models)]
    assert main(args) == 0
    out = capsys.readouterr().out
    priced = [line for line in out.splitlines() if "requests," in line and "input tokens" in line]
    assert len(priced) == len(models)
    assert all("unknown price" not in line and "$" in line for line in priced), priced
    assert f"prices from {PRICE_SOURCE}" in out and "total: about $" in out


def test_warming_the_prices_never_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    import genai_prices.data_snapshot

    def broken() -> None:
        raise RuntimeError("price data unreadable")

    monkeypatch.setattr(genai_prices.data_snapshot, "get_snapshot", broken)
    cost.warm_prices()  # the run goes on; a lookup later meets (and handles) the error
    with pytest.raises(RuntimeError, match="unreadable"):
        genai_prices.data_snapshot.get_snapshot()
