"""Model names → responders: parsing ``--models``, routing by name and pattern, demo models."""

from __future__ import annotations

from pathlib import Path

import pytest

from aeval.errors import ConfigError, InputFileError
from aeval.local import Intent, LocalBatchServer, ModelSpec, demo_models, parse_models
from aeval.local.models import ModelRouter
from aeval.local.responders import ReferenceResponder
from aeval.local.synthetic import SyntheticResponder


def test_models_parse_and_route() -> None:
    models = parse_models(
        [
            "gpt-4o*=synthetic:seed=3,accuracy=0.8,too_weak=2;gpt-3.5-turbo-0125=reference",
            "*=reference",
        ]
    )
    assert list(models) == ["gpt-4o*", "gpt-3.5-turbo-0125", "*"]
    assert models["gpt-4o*"] == ModelSpec(
        "synthetic", seed=3, accuracy=0.8, failure_mix={Intent.TOO_WEAK: 2.0}
    )
    router = ModelRouter({"gpt-4o-mini": ModelSpec(), **models}, None)
    assert isinstance(router.responder_for("gpt-4o-2024-11-20"), SyntheticResponder)
    assert isinstance(router.responder_for("gpt-4o-mini"), ReferenceResponder)
    assert router.responder_for("gpt-4o-2024-11-20") is router.responder_for("gpt-4o-x")
    assert ModelRouter({"gpt-*": ModelSpec()}, None).responder_for("llama") is None
    assert set(parse_models(["demo"])) == set(demo_models())
    for bad in ("gpt", "x=psychic", "x=synthetic:accuracy=2", "x=synthetic:colour=1", "x=replay"):
        with pytest.raises(ConfigError):
            parse_models([bad])


def test_demo_models_differ_in_accuracy() -> None:
    models = demo_models()
    assert set(models) == {"gpt-4o-mini-2024-07-18", "gpt-4o-2024-11-20", "gpt-3.5-turbo-0125"}
    assert len({spec.accuracy for spec in models.values()}) == 3
    assert len({spec.seed for spec in models.values()}) == 3


def test_a_synthetic_model_with_nothing_to_answer_is_a_config_error() -> None:
    spec = ModelSpec("synthetic", accuracy=0.0, failure_mix={Intent.TOO_WEAK: 0.0})
    with pytest.raises(ConfigError, match="nothing to answer"):
        ModelRouter({"*": spec}, None)


def test_an_unreadable_replay_file_fails_at_start_up(tmp_path: Path) -> None:
    with pytest.raises(InputFileError, match=r"missing\.jsonl"):
        LocalBatchServer(
            models={"*": ModelSpec("replay", replay=(tmp_path / "missing.jsonl",))}
        ).start()
