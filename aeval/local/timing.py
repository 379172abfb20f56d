"""How long a local batch takes, and the limits the real API enforces."""

from __future__ import annotations

from dataclasses import dataclass

from aeval.batch.providers.anthropic_limits import MAX_BATCH_BYTES, MAX_BATCH_REQUESTS
from aeval.errors import ConfigError

__all__ = ["DOCUMENTED", "Limits", "Timing", "demo_timing"]


@dataclass(frozen=True, slots=True)
class Timing:
    """Phase durations of a batch, in seconds; the default is zero-delay (tests).

    ``requests_per_second`` is each batch's own pace while ``in_progress`` (``None``: as
    fast as the machine goes). ``completion_window_s`` is the simulated "24h": a batch
    still running after it expires with partial results (``None``: never).
    """

    validating_s: float = 0.0
    requests_per_second: float | None = None
    finalizing_s: float = 0.0
    completion_window_s: float | None = None

    def __post_init__(self) -> None:
        if self.validating_s < 0 or self.finalizing_s < 0:
            raise ConfigError("Timing: phase durations must be >= 0")
        if self.requests_per_second is not None and self.requests_per_second <= 0:
            raise ConfigError("Timing: requests_per_second must be > 0 (or None for no limit)")


def demo_timing() -> Timing:
    """Looks like a real batch (phases, moving counts); a 100-row x 3-model run takes 15-30 s."""
    return Timing(validating_s=1.5, requests_per_second=12.0, finalizing_s=1.5)


@dataclass(frozen=True, slots=True)
class Limits:
    """The API's limits (the real ones by default).

    ``max_file_bytes`` and ``max_requests`` are one upload size and one request count per
    batch for every provider (a test's); ``None``: each provider's documented ones
    (:data:`DOCUMENTED`). ``enqueued_tokens`` is the per-model enqueued-token limit: a batch
    whose input tokens, added to those of its model's running batches, go over it fails
    with ``token_limit_exceeded`` (``None``: no limit). ``json_body_bytes`` is the server's
    own limit on the JSON body of every route that is not an upload or a create call with a
    documented limit of its own (no provider documents one for its other routes): far above
    any request a client sends there, far below what would let four clients exhaust memory.
    """

    max_file_bytes: int | None = None
    max_requests: int | None = None
    enqueued_tokens: int | None = None
    json_body_bytes: int = 16 * 1024 * 1024

    def file_bytes(self, provider: str) -> int:
        """The largest upload ``provider``'s Files API takes here."""
        own = self.max_file_bytes  # 0 is a limit too, not "unset"
        return DOCUMENTED.get(provider, DOCUMENTED["openai"])[0] if own is None else own

    def requests(self, provider: str) -> int:
        """The most requests one of ``provider``'s batches holds here."""
        own = self.max_requests  # 0 is a limit too, not "unset"
        return DOCUMENTED.get(provider, DOCUMENTED["openai"])[1] if own is None else own


# Each provider's documented limits on one batch: (input bytes, requests), as in
# tests/conformance/<provider>/limits.json. Gemini documents no request count: OpenAI's.
DOCUMENTED: dict[str, tuple[int, int]] = {
    "openai": (200_000_000, 50_000),  # openai 3.57.0, BatchCreateParams.input_file_id
    "groq": (100_000_000, 50_000),  # groq 1.7.0 BatchCreateParams; console.groq.com/docs/batch
    "together": (100_000_000, 50_000),  # docs.together.ai/docs/batch-inference
    "google": (2_000_000_000, 50_000),  # ai.google.dev/gemini-api/docs/batch-mode (Files API)
    "mistral": (512_000_000, 100_000),  # docs.mistral.ai/resources/known-limitations
    "anthropic": (MAX_BATCH_BYTES, MAX_BATCH_REQUESTS),  # the Message Batches guide
    "xai": (48_000_000, 100_000),  # aeval.batch.providers.xai_limits
    "azure": (200_000_000, 100_000),  # aeval.batch.providers.azure_limits
}
