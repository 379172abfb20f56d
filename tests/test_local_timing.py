"""Timing and limits: checked values, and a demo pace that looks real yet finishes quickly."""

from __future__ import annotations

import pytest

from aeval.errors import ConfigError
from aeval.local import Limits, Timing, demo_timing


def test_timing_rejects_impossible_values() -> None:
    with pytest.raises(ConfigError):
        Timing(validating_s=-1)
    with pytest.raises(ConfigError):
        Timing(requests_per_second=0)
    assert Timing() == Timing(0.0, None, 0.0, None)  # zero delay by default


def test_demo_timing_fits_a_hundred_row_run_in_under_thirty_seconds() -> None:
    demo = demo_timing()
    assert demo.requests_per_second is not None
    server_seconds = demo.validating_s + 100 / demo.requests_per_second + demo.finalizing_s
    assert 5 < server_seconds < 20  # phases visible, room left for polling and verification
    assert demo.validating_s > 0 and demo.finalizing_s > 0


def test_limits_default_to_the_real_api() -> None:
    limits = Limits()
    assert limits.requests("openai") == 50_000 and limits.requests("mistral") == 100_000
    assert Limits(max_requests=5).requests("anthropic") == 5  # a test's own wins
    assert Limits(max_requests=0, max_file_bytes=0).requests("mistral") == 0  # 0 is a limit
    assert Limits(max_file_bytes=0).file_bytes("openai") == 0
    # each provider's documented upload size (tests/conformance/<provider>/limits.json)
    assert limits.file_bytes("openai") == 200_000_000
    assert limits.file_bytes("groq") == limits.file_bytes("together") == 100_000_000
    assert Limits(max_file_bytes=1000).file_bytes("groq") == 1000  # a test's own wins
