"""The stand-ins' shared job table (aeval/cloud_standins/job_table.py) on its own: phases by
age, a job's lifecycle (stop or cancel, done, the expire fault), jobs kept across a restart,
a listing's pages. The stand-ins themselves are driven through boto3 and google-genai in
tests/test_cloud_batches.py."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from aeval.cloud_standins.job_table import JobShape, JobTable, jsonl_values, page, phase_at

_SHAPE = JobShape(
    key="id", state="state", stamp="updated", terminal=("DONE", "HALTED", "EXPIRED"),
    ending="HALTING", ended="HALTED", done="DONE", expired="EXPIRED", hidden=("secret",),
)  # fmt: skip


class _Table(JobTable):
    """Two phases of 10 s each; a job ends with the share of its requests it answered."""

    def phase(self, elapsed: float) -> str:
        return phase_at(elapsed, (("QUEUED", 10.0), ("RUNNING", 10.0)), "DONE")

    def finish(self, job: dict[str, Any], state: str, *, share: float) -> None:
        job.update(state=state, share=share)
        self.save(job)


def _table(root: Path, *, expire: bool = False, errors: int = 0) -> _Table:
    return _Table(root, _SHAPE, create_errors=errors, create_delay_s=0.0, expire=expire)


def _new(job_id: str, age_s: float) -> tuple[dict[str, Any], bool]:
    created = time.time() - age_s
    return {"id": f"jobs/{job_id}", "state": "QUEUED", "secret": 1, "_created": created}, True


def test_phase_at_walks_the_phases_by_their_lengths() -> None:
    phases = (("A", 1.0), ("B", 2.0))
    assert [phase_at(t, phases, "END") for t in (0.0, 0.99, 1.0, 2.99, 3.0)] == [
        "A", "A", "B", "B", "END",
    ]  # fmt: skip


@pytest.mark.anyio
async def test_a_job_moves_by_its_age_and_ends_done_or_expired(tmp_path: Path) -> None:
    table = _table(tmp_path)
    await table.create(lambda: _new("a", 0.0))
    await table.create(lambda: _new("b", 12.0))
    await table.create(lambda: _new("c", 25.0))
    states = [(await table.read(f"jobs/{n}") or {}).get("state") for n in "abc"]
    assert states == ["QUEUED", "RUNNING", "DONE"]
    assert table.jobs["jobs/c"]["share"] == 1.0
    expiring = _table(tmp_path / "x", expire=True)
    await expiring.create(lambda: _new("d", 25.0))
    ended = await expiring.read("jobs/d")
    assert ended is not None and (ended["state"], ended["share"]) == ("EXPIRED", 0.5)


@pytest.mark.anyio
async def test_a_stop_ends_the_job_when_next_read_and_an_ended_one_refuses(
    tmp_path: Path,
) -> None:
    table = _table(tmp_path)
    await table.create(lambda: _new("a", 0.0))
    stopping = await table.read("jobs/a", end=True)
    assert stopping is not None and stopping["state"] == "HALTING"
    stopped = await table.read("jobs/a")
    assert stopped is not None and (stopped["state"], stopped["share"]) == ("HALTED", 0.5)
    with pytest.raises(ValueError, match="HALTED"):
        await table.read("jobs/a", end=True)
    assert await table.read("jobs/none") is None


@pytest.mark.anyio
async def test_injected_create_errors_count_new_jobs_only_and_jobs_survive_a_restart(
    tmp_path: Path,
) -> None:
    table = _table(tmp_path, errors=1)
    job, fail = await table.create(lambda: _new("a", 5.0))
    assert fail
    again, fail_again = await table.create(lambda: (job, False))
    assert again is job and not fail_again
    _, fail_next = await table.create(lambda: _new("b", 1.0))
    assert not fail_next
    restarted = _table(tmp_path)
    assert sorted(restarted.jobs) == ["jobs/a", "jobs/b"]
    listed = await restarted.listed(lambda j: True)
    assert [j["id"] for j in listed] == ["jobs/b", "jobs/a"]  # newest first
    assert all("secret" not in j and "_created" not in j and "updated" in j for j in listed)


def test_a_page_says_where_the_next_one_starts() -> None:
    found = list(range(5))
    assert page(found, 0, 2, "items", "next") == {"items": [0, 1], "next": "2"}
    assert page(found, 4, 2, "items", "next") == {"items": [4]}


def test_jsonl_values_keep_unreadable_lines_as_none() -> None:
    assert jsonl_values(b'{"a": 1}\n\nnot json\n[2]\n') == [{"a": 1}, None, [2]]
