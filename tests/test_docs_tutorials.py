"""Every tutorial's commands run offline as written (docs/tutorials/*.md).

A tutorial page's ``bash`` and ``python`` blocks are run in order, in one fresh
directory per page, with no provider key, endpoint or token in the environment (so
every ``python -m aeval run`` is the offline demo) and this checkout's Python first on
``PATH`` (``python``, ``inspect``). Blocks fenced ``shell`` need a key, a GPU or a
cluster and are only shown (docs/tooling.md). One test per page, so xdist spreads them.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TUTORIALS = sorted((ROOT / "docs" / "tutorials").glob("*.md"))
_BLOCK = re.compile(r"^```(bash|python)\n(.*?)^```$", re.S | re.M)
_SCRUBBED = ("_API_KEY", "_KEY", "_BASE_URL", "_ENDPOINT", "_TOKEN")


def blocks(page: Path) -> list[tuple[str, str]]:
    """``(language, text)`` of each runnable block of ``page``, in order."""
    return [(m.group(1), m.group(2)) for m in _BLOCK.finditer(page.read_text())]


def offline_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith(_SCRUBBED)}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    # No PYTHONPATH at the checkout: Inspect would find the in-tree aeval.egg-info first,
    # which lacks the entry point's metadata, and not resolve `aeval/warp` (docs/inspect.md).
    env.pop("PYTHONPATH", None)
    env["HF_HUB_OFFLINE"] = "1"
    env["MPLBACKEND"] = "Agg"
    return env


def run_block(language: str, text: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    argv = ["bash", "-euo", "pipefail", "-c", text] if language == "bash" else [sys.executable]
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE if language == "python" else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        env=offline_env(),
        start_new_session=True,  # its own process group, stopped by that id below
    )
    try:
        out, err = proc.communicate(text if language == "python" else None, timeout=300)
    finally:
        # whatever the block started and left behind (a server, Ray), by its group id
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def test_every_tutorial_has_runnable_blocks() -> None:
    assert len(TUTORIALS) >= 7
    for page in TUTORIALS:
        assert blocks(page), f"{page.name} has no bash or python block to run"


@pytest.mark.parametrize("page", TUTORIALS, ids=[p.stem for p in TUTORIALS])
def test_tutorial_runs_offline_as_written(page: Path, tmp_path: Path) -> None:
    for language, text in blocks(page):
        proc = run_block(language, text, tmp_path)
        assert proc.returncode == 0, (
            f"{page.name}:\n{text}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
        )
        assert "Traceback" not in proc.stderr, proc.stderr
