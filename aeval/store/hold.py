"""A run directory that must not create batches (paid work) on its own.

Two things put a hold on a run directory: ``run --dry-run`` (nothing was ever
meant to be sent) and ``cancel`` (the user stopped paying). A hold is the file
``submit-hold.json``, written atomically, naming the reason. While it is
there, a resumed run only reattaches to batches that exist and collects their
results; ``resume --submit`` (``Run.resume(..., submit=Submit.CREATE)``) lifts it. A
run that is live when ``cancel`` holds its directory sees the file within a
second (:func:`wait_for_hold`) and stops creating batches too.

Whether a run may create batches (pay) is one :class:`Submit` policy.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from enum import StrEnum
from pathlib import Path
from typing import Literal

import anyio

from aeval.store.atomic_files import atomic_write_text
from aeval.store.layout import RunLayout

__all__ = [
    "HOLD_CHECK_S",
    "HoldReason",
    "Submit",
    "hold_submissions",
    "lift_hold",
    "submission_hold",
    "wait_for_hold",
]

HoldReason = Literal["dry-run", "cancelled"]

# How often a live run looks for a hold put by 'cancel' (one stat each time).
HOLD_CHECK_S = 1.0


class Submit(StrEnum):
    """May a run create batches (the paid work)?"""

    CREATE = "create"  # yes; a hold on the directory is lifted (``resume --submit``)
    AS_HELD = "as-held"  # yes, unless the directory is on hold: then COLLECT
    COLLECT = "collect"  # no: only reattach to batches that exist and collect them


def hold_submissions(run_dir: Path, reason: HoldReason) -> None:
    """Put (or keep) a hold on ``run_dir`` for ``reason`` (the latest reason is kept)."""
    path = RunLayout(Path(run_dir)).hold
    if submission_hold(run_dir) == reason:
        return
    doc = {"reason": reason, "at": time.time(), "pid": os.getpid()}
    atomic_write_text(path, json.dumps(doc))


def submission_hold(run_dir: Path) -> HoldReason | None:
    """Why ``run_dir`` must not create batches, or ``None`` when it may."""
    path = RunLayout(Path(run_dir)).hold
    try:
        reason = json.loads(path.read_text(encoding="utf-8")).get("reason")
    except FileNotFoundError:
        return None
    except (OSError, ValueError, AttributeError):
        return "cancelled"  # unreadable: the safe reading is "do not pay"
    return "dry-run" if reason == "dry-run" else "cancelled"


async def wait_for_hold(run_dir: Path) -> HoldReason:
    """Return once ``run_dir`` is on hold (at once when it already is), with why;
    looks every :data:`HOLD_CHECK_S` seconds."""
    while (reason := submission_hold(run_dir)) is None:
        await anyio.sleep(HOLD_CHECK_S)
    return reason


def lift_hold(run_dir: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        RunLayout(Path(run_dir)).hold.unlink()
