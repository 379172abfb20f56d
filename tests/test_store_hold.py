"""The submit hold as a live run sees it: the one watch both drivers share waits here."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from aeval.store.hold import hold_submissions, lift_hold, submission_hold, wait_for_hold
from aeval.store.layout import RunLayout


@pytest.mark.anyio
async def test_wait_for_hold_returns_at_once_for_a_directory_already_held(tmp_path: Path) -> None:
    hold_submissions(tmp_path, "dry-run")
    with anyio.fail_after(30):  # a bound on a hang, not a timing assertion
        assert await wait_for_hold(tmp_path) == "dry-run"
    # An unreadable hold is read the safe way: do not pay.
    RunLayout(tmp_path).hold.write_text("{torn")
    with anyio.fail_after(30):
        assert await wait_for_hold(tmp_path) == "cancelled"


@pytest.mark.anyio
async def test_wait_for_hold_waits_until_cancel_holds_the_directory(tmp_path: Path) -> None:
    seen: list[str] = []

    async def watch() -> None:
        seen.append(await wait_for_hold(tmp_path))

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch)
            await anyio.sleep(0.05)
            assert seen == []  # no hold yet: still watching
            hold_submissions(tmp_path, "cancelled")
    assert seen == ["cancelled"]
    lift_hold(tmp_path)
    assert submission_hold(tmp_path) is None
