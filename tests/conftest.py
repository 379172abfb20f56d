from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

# The real benchmark and its program mapping, kept in the repository with their licence
# (tests/data/README.md) so that a clone alone runs every test.
TEST_DATA = Path(__file__).resolve().parent / "data"
BENCHMARK = TEST_DATA / "warp-benchmark.parquet"
PROGRAMS = TEST_DATA / "warp-programs.csv"


@pytest.fixture
def anyio_backend() -> str:
    # asyncio by default; tests that must also hold under trio parametrize it.
    return "asyncio"


@pytest.fixture(scope="session")
def benchmark_path() -> Path:
    """The real WARP benchmark (671 rows), from tests/data."""
    return BENCHMARK


@pytest.fixture(scope="session")
def programs_path() -> Path:
    """The released row → WARP program mapping of the benchmark, from tests/data."""
    return PROGRAMS


@pytest.fixture(scope="session")
def dataset(benchmark_path: Path) -> pl.DataFrame:
    """The real benchmark as a frame (polars frames are immutable: safe to share)."""
    return pl.read_parquet(benchmark_path)


@pytest.fixture(scope="session", autouse=True)
def machine_pool_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The tests' own directory for the machine-wide reward pool (``aeval.reward.node_pool``),
    so they never share one with other test sessions; its servers are stopped by their PIDs."""
    import psutil

    # Short: a Unix socket's path has a 108-byte limit.
    path = Path(tempfile.mkdtemp(prefix="aeval-pool-"))
    os.environ["AEVAL_POOL_DIR"] = str(path)
    yield path
    for process in psutil.process_iter(["pid", "cmdline"]):
        cmdline = process.info["cmdline"] or []
        if any("aeval.reward.node_pool" in a for a in cmdline) and str(path) in " ".join(cmdline):
            process.kill()
            process.wait(10)
    shutil.rmtree(path, ignore_errors=True)
