"""How long a local batch takes, and the limits the real API enforces."""

from __future__ import annotations

from dataclasses import dataclass

from aeval.errors import ConfigError

__all__ = ["Limits", "Timing", "demo_timing"]


@dataclass(frozen=True, slots=True)
class Timing:
    """Phase durations of a batch, in seconds; the default is zero-delay (tests).

    ``requests_per_second`` is each batch's own pace while ``in_progress``
    (``None``: as fast as the machine goes). ``completion_window_s`` is the
    simulated "24h": a batch still running after it expires with partial
    results (``None``: never).
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
    """Looks like a real batch (visible phases, counts that move) yet a ~100-row x
    3-model run finishes in about 15-30 s."""
    return Timing(validating_s=1.5, requests_per_second=12.0, finalizing_s=1.5)


@dataclass(frozen=True, slots=True)
class Limits:
    """The API's limits (the real size limits by default).

    ``max_file_bytes`` is one size limit for every provider's uploads (a test's);
    ``None``: each provider's documented limit (:data:`DOCUMENTED_FILE_BYTES`, from
    tests/conformance/<provider>/limits.json and the sources named there).
    ``enqueued_tokens`` is the per-model enqueued-token limit: a batch whose
    input tokens, added to those of the model's batches already running, go
    over it fails with ``token_limit_exceeded`` (``None``: no limit).
    """

    max_file_bytes: int | None = None
    max_requests: int = 50_000
    enqueued_tokens: int | None = None

    def file_bytes(self, provider: str) -> int:
        """The largest upload ``provider``'s Files API takes here."""
        if self.max_file_bytes is not None:
            return self.max_file_bytes
        return DOCUMENTED_FILE_BYTES.get(provider, DOCUMENTED_FILE_BYTES["openai"])


# The documented size of one uploaded batch input file, per provider's API.
DOCUMENTED_FILE_BYTES: dict[str, int] = {
    "openai": 200_000_000,  # openai 3.57.0, BatchCreateParams.input_file_id
    "groq": 100_000_000,  # groq 1.7.0, BatchCreateParams.input_file_id
    "together": 100_000_000,  # docs.together.ai/docs/batch-inference
    "google": 2_000_000_000,  # ai.google.dev/gemini-api/docs/batch-mode (Files API)
    "mistral": 512_000_000,  # docs.mistral.ai/resources/known-limitations (batch file)
}
