"""Running the local server: in the background (tests, the engine's offline default) or
in the foreground (``python -m aeval serve``), on :class:`aeval.uvicorn_thread.BackgroundServer`;
in a child process (:func:`serve_process`), and reading its counters from outside."""

from __future__ import annotations

import contextlib
import select
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
import polars as pl
from starlette.types import ASGIApp

from aeval.errors import AevalError
from aeval.http_guard import is_loopback
from aeval.local.app import COUNTERS_PATH, build_app
from aeval.local.context import ServerContext
from aeval.local.direct import DirectCounters, DirectState, Serving
from aeval.local.faults import FaultInjector, FaultPlan
from aeval.local.models import ModelRouter, ModelSpec
from aeval.local.simulated_batch import BatchRunner
from aeval.local.state import Counters, Store
from aeval.local.timing import Limits, Timing
from aeval.uvicorn_thread import BackgroundServer, Bounds

__all__ = ["LocalBatchServer", "fetch_counters", "fetch_direct_counters", "serve_process"]

_START_TIMEOUT_S = 30.0


class LocalBatchServer(BackgroundServer):
    """An OpenAI-compatible Files + Batches API on loopback.

    :param dataset: benchmark rows (columns ``question``, ``answer``, ``constants``, optional
        ``id``, ``tier``) the responders answer from.
    :param models: model name or glob → :class:`ModelSpec`; default: every model answers with the
        ``reference`` responder.
    :param faults: the seeded faults to inject (default: none).
    :param timing: phase durations and pace (default: zero delay).
    :param limits: file size and request count limits (default: the API's).
    :param serving: latency and concurrency cap of the completion routes (default: instant,
        unbounded; see :mod:`aeval.local.direct`).
    :param state_dir: where files (and batch state) live; given, the state is persistent and a
        server restarted on the same directory keeps its files and batches and finishes unfinished
        batches. Default: a temporary directory removed on exit.
    :param api_key: when set, requests need ``Authorization: Bearer <api_key>``.
    :param bounds: deadlines and connection limits (:class:`aeval.uvicorn_thread.Bounds`).

    Use as ``async with`` (asyncio or trio) or ``with``; :attr:`base_url` is the value for the
    SDK's ``base_url``.
    """

    def __init__(
        self,
        *,
        dataset: pl.DataFrame | None = None,
        models: Mapping[str, ModelSpec] | None = None,
        faults: FaultPlan | None = None,
        timing: Timing | None = None,
        limits: Limits | None = None,
        serving: Serving | None = None,
        state_dir: Path | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        api_key: str | None = None,
        log_level: str = "warning",
        bounds: Bounds | None = None,
    ) -> None:
        super().__init__("the local batch server", "aeval-local-server", host=host, port=port,
                         log_level=log_level, start_timeout_s=_START_TIMEOUT_S,
                         lifespan="on", bounds=bounds)  # fmt: skip
        self._router = ModelRouter(models, dataset)  # a bad dataset or model map fails here
        self._faults, self._timing, self._limits = faults, timing or Timing(), limits or Limits()
        self._serving, self._state_dir, self._api_key = serving, state_dir, api_key
        self._tempdir: tempfile.TemporaryDirectory[str] | None = None
        self._ctx: ServerContext | None = None
        self.base_url = ""

    def counters(self) -> Counters:
        """Batches and files created so far, per metadata item and file name."""
        if self._ctx is None:
            return Counters()
        return self._ctx.store.counters(self._ctx.faults.injected())

    def direct_counters(self) -> DirectCounters:
        """Requests the completion routes accepted, per (model, custom_id)."""
        return self._ctx.direct.counters() if self._ctx is not None else DirectCounters()

    @property
    def state_dir(self) -> Path | None:
        return self._ctx.store.root if self._ctx else None

    def _app(self) -> ASGIApp:
        if self._state_dir is not None:
            store = Store(Path(self._state_dir), persistent=True)
        else:
            self._tempdir = tempfile.TemporaryDirectory(prefix="aeval-local-")
            store = Store(Path(self._tempdir.name), persistent=False)
        faults = FaultInjector(self._faults)
        runner = BatchRunner(store, self._router, faults, self._timing, self._limits)
        self._ctx = ServerContext(store, self._router, faults, runner, self._limits,
                                  self._api_key, loopback=is_loopback(self._host),
                                  body_timeout_s=self.bounds.body_timeout_s,
                                  direct=DirectState(self._serving))  # fmt: skip
        return build_app(self._ctx)

    def _bound(self, root: str) -> str:
        self.base_url = f"{root}/v1"
        return self.base_url

    def _cleanup(self) -> None:
        if self._tempdir is not None:
            self._tempdir.cleanup()
            self._tempdir = None


@contextlib.contextmanager
def serve_process(args: Sequence[str] = (), *, timeout: float = _START_TIMEOUT_S) -> Iterator[str]:
    """Run ``python -m aeval serve --port 0 ARGS`` in a child process; yield its base URL.

    For tests where the server must outlive (or be killed apart from) the
    process that uses it. The child is terminated (SIGTERM, then SIGKILL) on exit.
    """
    command = [sys.executable, "-m", "aeval", "serve", "--port", "0", "--log-level", "warning"]
    proc = subprocess.Popen([*command, *args], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        # The URL is the first line, printed whole and flushed: once readable, it is there.
        readable, _, _ = select.select([proc.stdout], [], [], timeout)
        line = proc.stdout.readline() if readable else ""
        if not line.startswith("http"):
            raise AevalError(
                f"'python -m aeval serve' did not start (exit code {proc.poll()}, output {line!r})"
            )
        yield line.strip()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _fetch(base_url: str, api_key: str | None) -> dict[str, Any]:
    root = base_url.rstrip("/").removesuffix("/v1")
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    response = httpx.get(root + COUNTERS_PATH, headers=headers, timeout=10)
    response.raise_for_status()
    counted: dict[str, Any] = response.json()
    return counted


def fetch_counters(base_url: str, api_key: str | None = None) -> Counters:
    """The counters of a server in another process, given its ``base_url`` (``…/v1``)."""
    return Counters.from_json(_fetch(base_url, api_key))


def fetch_direct_counters(base_url: str, api_key: str | None = None) -> DirectCounters:
    """The direct-route counters of a server in another process, given its ``base_url``."""
    return DirectCounters.from_json(_fetch(base_url, api_key)["direct"])
