"""Every provider's batch API behind one protocol.

:mod:`~aeval.batch.providers.base` is the protocol and its values,
:mod:`~aeval.model_names` reads ``provider/model`` names,
:mod:`~aeval.batch.providers.registry` knows each provider (its spec module,
``<name>_spec.py``) and opens its adapter (``<name>_api.py``, over the
provider's SDK), and :mod:`~aeval.batch.providers.lines` writes every provider's
results as the one answer format. docs/engine.md, "Providers", tells how the
pieces fit; docs/providers.md gives each provider's recipe.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aeval._lazy import lazy_exports
from aeval.model_names import KNOWN_PROVIDERS, ModelName, parse_model, provider_of

# The protocol's values and the registry load on first use (PEP 562): a report reads a
# model's provider from its name (``names``) and must not import the registry, the run
# configuration and the adapters' shared code for it.
_LAZY: dict[str, str] = {
    "TransientApiError": "aeval.batch.transient",
    **dict.fromkeys(
        (
            "TERMINAL_STATUSES",
            "BatchInput",
            "BatchProvider",
            "BatchTag",
            "ForeignBatchError",
            "RemoteBatch",
            "RemoteBatchError",
        ),
        "aeval.batch.providers.base",
    ),
    **dict.fromkeys(
        (
            "ProviderSet",
            "ProviderSpec",
            "open_providers",
            "provider_spec",
            "providers_of",
            "run_credentials",
        ),
        "aeval.batch.providers.registry",
    ),
}

__all__ = [
    "KNOWN_PROVIDERS",
    "TERMINAL_STATUSES",
    "BatchInput",
    "BatchProvider",
    "BatchTag",
    "ForeignBatchError",
    "ModelName",
    "ProviderSet",
    "ProviderSpec",
    "RemoteBatch",
    "RemoteBatchError",
    "TransientApiError",
    "open_providers",
    "parse_model",
    "provider_of",
    "provider_spec",
    "providers_of",
    "run_credentials",
]


if not TYPE_CHECKING:  # the checker reads the typed imports below, never `Any`
    __getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY)


if TYPE_CHECKING:  # static checkers and IDEs see the real names
    from aeval.batch.providers.base import (
        TERMINAL_STATUSES,
        BatchInput,
        BatchProvider,
        BatchTag,
        ForeignBatchError,
        RemoteBatch,
        RemoteBatchError,
    )
    from aeval.batch.providers.registry import (
        ProviderSet,
        ProviderSpec,
        open_providers,
        provider_spec,
        providers_of,
        run_credentials,
    )
    from aeval.batch.transient import TransientApiError
