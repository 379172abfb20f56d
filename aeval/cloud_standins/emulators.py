"""The storage emulators the Bedrock and Vertex AI stand-ins run over: real S3 and GCS servers
on loopback, each in a child process started here and stopped by its PID.

- **S3**: moto's server (``python -m moto.server -H 127.0.0.1 -p PORT``, from
  ``moto[server]``), which implements S3's REST API and keeps objects in memory.
- **GCS**: gcp-storage-emulator (``python -m gcp_storage_emulator start``), which
  implements the JSON API google-cloud-storage speaks and keeps objects on disk under
  ``STORAGE_BASE`` (a directory of the caller's: a restarted emulator finds them again).

Each is given a free port on 127.0.0.1, waited for until it answers HTTP (a bounded wait),
and stopped with SIGTERM, then SIGKILL, by the PID it was started with. They are
optional dependencies (the test extra, and ``aeval[emulators]`` for the offline demo): a
missing one is one line naming the package.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

import httpx

from aeval.errors import AevalError, ConfigError

__all__ = ["EmulatorProcess", "GcsEmulator", "S3Emulator", "free_port"]

_START_TIMEOUT_S = 30.0


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now (the child binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class EmulatorProcess:
    """One emulator in a child process; ``url`` once started. Use as a context manager."""

    what = "an emulator"
    module = ""
    package = ""

    def __init__(self, *, state_dir: Path | None = None, host: str = "127.0.0.1") -> None:
        self.host, self.port = host, 0
        self.state_dir = state_dir
        self.url = ""
        self.pid: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    def _command(self) -> Sequence[str]:
        raise NotImplementedError

    def _env(self) -> dict[str, str]:
        return dict(os.environ)

    def start(self) -> None:
        """Start the child and wait until it answers HTTP.

        :raises ConfigError: the emulator's package is not installed.
        :raises AevalError: it did not answer within the start-up timeout (it is stopped).
        """
        if importlib.util.find_spec(self.module) is None:
            raise ConfigError(
                f"{self.what} needs the {self.package} package: pip install "
                f"'aeval[emulators]' (or pip install '{self.package}')"
            )
        self.port = free_port(self.host)
        self.url = f"http://{self.host}:{self.port}"
        self._proc = subprocess.Popen(
            [sys.executable, *self._command()],
            env=self._env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            cwd=str(self.state_dir) if self.state_dir else None,
        )
        self.pid = self._proc.pid
        deadline = time.monotonic() + _START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                break
            try:
                httpx.get(self.url, timeout=1.0)
                return
            except httpx.HTTPError:
                time.sleep(0.05)
        code = self._proc.poll()
        self.stop()
        raise AevalError(f"{self.what} did not start on {self.url} (exit code {code})")

    def stop(self) -> None:
        """Stop the child by its PID: SIGTERM, then SIGKILL after 5 s."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


class S3Emulator(EmulatorProcess):
    """moto's server: S3 (and every other AWS API moto has) on ``url``."""

    what = "the S3 emulator (moto)"
    module = "moto.server"
    package = "moto[server]"

    def _command(self) -> Sequence[str]:
        return ["-m", "moto.server", "-H", self.host, "-p", str(self.port)]


class GcsEmulator(EmulatorProcess):
    """gcp-storage-emulator: Cloud Storage's JSON API on ``url``, objects kept under
    ``state_dir`` (in memory without one)."""

    what = "the Cloud Storage emulator (gcp-storage-emulator)"
    module = "gcp_storage_emulator"
    package = "gcp-storage-emulator"

    def _command(self) -> Sequence[str]:
        command = ["-m", "gcp_storage_emulator", "start", "-H", self.host,
                   "--port", str(self.port), "-q"]  # fmt: skip
        return command if self.state_dir else [*command, "--in-memory"]

    def _env(self) -> dict[str, str]:
        env = super()._env()
        if self.state_dir is not None:
            self.state_dir.mkdir(parents=True, exist_ok=True)
            env["STORAGE_BASE"] = str(self.state_dir)
        return env
