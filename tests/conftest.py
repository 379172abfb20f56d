from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
BENCHMARK = SHARED_DATA / "warp-benchmark.parquet"


@pytest.fixture
def anyio_backend() -> str:
    # asyncio by default; tests that must also hold under trio parametrize it.
    return "asyncio"


@pytest.fixture(scope="session")
def benchmark_path() -> Path:
    """The real WARP benchmark beside the repo (CI clones with ../shared present).

    Without it, the tests that need it are skipped, saying so; the rest still run.
    """
    if not BENCHMARK.exists():
        pytest.skip(
            f"needs the real benchmark at {BENCHMARK} (../shared/data beside the repository)"
        )
    return BENCHMARK


@pytest.fixture(scope="session")
def dataset(benchmark_path: Path) -> pl.DataFrame:
    """The real benchmark as a frame (polars frames are immutable: safe to share)."""
    return pl.read_parquet(benchmark_path)
