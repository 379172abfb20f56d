"""xAI's and Azure's prices (issue #45 item 6): genai-prices' ``x-ai`` and ``azure`` entries, at
the source's batch rate where it has one and at half the list price (each provider's
documented batch discount, aeval.cost.BATCH_DISCOUNTS) where it has not."""

from __future__ import annotations

import pytest

from aeval.cost import BATCH_DISCOUNTS, CostEstimate, azure_priced_as, batch_rate_from, price_of


def test_xai_models_are_priced_from_the_x_ai_entries() -> None:
    listed, batch = price_of("xai/grok-4"), price_of("xai/grok-4", batch=True)
    assert listed is not None and batch is not None
    assert batch_rate_from("xai/grok-4") == "aeval"  # no batch rate in the source: half
    assert BATCH_DISCOUNTS["xai"] == 0.5
    assert batch.input == pytest.approx(listed.input / 2)
    assert batch.output == pytest.approx(listed.output / 2)
    assert listed.input > 0 and listed.output > listed.input


def test_an_xai_model_with_the_sources_batch_rate_is_priced_at_it() -> None:
    assert batch_rate_from("xai/grok-4.3") == "genai-prices"
    listed, batch = price_of("xai/grok-4.3"), price_of("xai/grok-4.3", batch=True)
    assert listed is not None and batch is not None and batch.input < listed.input


def test_an_azure_deployment_is_priced_as_the_model_it_is_named_after() -> None:
    deployment = price_of("azure/gpt-4o-batch", batch=True)
    model = price_of("azure/gpt-4o", batch=True)
    assert deployment is not None and deployment == model
    assert price_of("azure/gpt-4o-mini-2024-07-18-batch") == price_of("azure/gpt-4o-mini")
    assert price_of("azure/our-team-deployment") is None  # unknown, not guessed
    assert BATCH_DISCOUNTS["azure"] == 0.5


def test_an_estimate_says_which_model_a_deployment_was_priced_as() -> None:
    assert azure_priced_as("azure/gpt-4o-batch") == "gpt-4o"
    assert azure_priced_as("xai/grok-4") is None
    estimate = CostEstimate("azure/gpt-4o-batch", 10, 10_000, None, "unknown", "characters", None)
    assert "priced as gpt-4o (the deployment's name)" in estimate.describe()
