from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
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


LoadedBy = Callable[[str, Sequence[str]], list[str]]


@pytest.fixture(scope="session")
def loaded_by() -> LoadedBy:
    """``loaded_by(code, modules)``: which of ``modules`` a fresh interpreter has imported
    once it has run ``code`` (Python statements; a failing one fails the test)."""

    def loaded(code: str, modules: Sequence[str]) -> list[str]:
        probe = (
            f"{code}\nimport sys\nprint(','.join(m for m in {list(modules)!r} if m in sys.modules))"
        )
        out = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, check=True
        )
        return [m for m in out.stdout.strip().split(",") if m]

    return loaded


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


@pytest.fixture(scope="module")
def ray_home() -> Iterator[Path]:
    """A home directory of the module's own for the Ray clusters its tests start.

    Ray 2.60 turns token authentication on for a new local cluster and keeps the token
    in ``~/.ray/auth_token`` (ray/_private/authentication/authentication_token_setup.py),
    which every later driver on the machine then reads: a test's clusters would see a
    token another test, or the user, made (and a two-node cluster then failed to find
    its actors). With a home of its own each module starts from Ray's defaults.
    """
    home = Path(tempfile.mkdtemp(prefix="aeval-ray-home-", dir="/tmp"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOME", str(home))
        yield home
    shutil.rmtree(home, ignore_errors=True)
