"""What the Bedrock and Vertex AI adapters share (aeval/batch/providers/cloud_storage.py), and
the lost-create rule after a listing by name (``BatchTag.newest_unclaimed``).

The adapters' own tests (tests/test_provider_clouds.py, tests/test_cloud_batches.py) run
these pieces against the stand-ins over real storage emulators; here each is pinned on its
own: where a location is refused, which result a repeated id keeps, which requests an
early end reports, and which listed batch a lost create is found as.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aeval.batch.providers.base import CLOCK_SKEW_S, BatchTag, RemoteBatch
from aeval.batch.providers.cloud_storage import StoragePrefix, hex_id, result_lines, unhex_id
from aeval.errors import ApiError


def _s3(uri: str | None) -> StoragePrefix:
    return StoragePrefix("s3", "an S3 location", uri, "name one with --bedrock-s3")


@pytest.mark.parametrize("custom_id", ["r-1|t0", "éè_ü", "x" * 40])
def test_hex_ids_are_alphanumeric_lowercase_and_read_back(custom_id: str) -> None:
    value = hex_id(custom_id)
    assert value.isalnum() and value == value.lower()
    assert unhex_id(value) == custom_id


@pytest.mark.parametrize("foreign", ["3223593EFGH", "abc", "ff", None])
def test_an_id_aeval_did_not_write_reads_as_none(foreign: object) -> None:
    assert unhex_id(foreign) is None


def test_the_prefix_names_bucket_and_keys_without_stray_slashes() -> None:
    prefix = _s3("s3://bucket/runs/one/")
    assert prefix.root() == ("bucket", "runs/one")
    assert prefix.key("shard.jsonl") == ("bucket", "runs/one/shard.jsonl")
    assert _s3("s3://bucket").key("shard.jsonl") == ("bucket", "shard.jsonl")
    assert prefix.split("s3://other/a/b.jsonl") == ("other", "a/b.jsonl")


def test_a_missing_prefix_says_how_to_name_one() -> None:
    with pytest.raises(ApiError, match="name one with --bedrock-s3"):
        _s3(None).root()


@pytest.mark.parametrize("uri", ["gs://bucket/x", "s3:///x", "bucket/x", "s3://"])
def test_a_location_of_another_kind_is_refused_naming_the_kind(uri: str) -> None:
    with pytest.raises(ApiError, match=r"is not an S3 location \(s3://BUCKET/PREFIX\)"):
        _s3(None).split(uri)


def _parse(raw: bytes) -> tuple[str | None, str | None]:
    record = json.loads(raw)
    if "id" not in record:
        return None, None
    return record["id"], json.dumps({"custom_id": record["id"], "text": record["text"]})


def _asked_id(raw: bytes) -> str | None:
    return str(json.loads(raw)["id"])


def _write(path: Path, *records: object) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + "\n", encoding="utf-8")
    return path


def test_each_request_keeps_its_first_result_and_foreign_lines_are_dropped(
    tmp_path: Path,
) -> None:
    one = _write(tmp_path / "0.jsonl", {"id": "b", "text": "1"}, {"other": True})
    two = _write(tmp_path / "1.jsonl", {"id": "a", "text": "2"}, {"id": "b", "text": "3"})
    lines = [json.loads(line) for line in result_lines([one, two], _parse)]
    assert lines == [{"custom_id": "b", "text": "1"}, {"custom_id": "a", "text": "2"}]


def test_an_early_end_reports_each_unanswered_request_once(tmp_path: Path) -> None:
    out = _write(tmp_path / "0.jsonl", {"id": "a", "text": "ok"})
    asked = _write(tmp_path / "input.jsonl", {"id": "a"}, {"id": "b"}, [1], {"id": "b"})
    lines = list(
        result_lines(
            [out],
            _parse,
            asked=asked,
            asked_id=_asked_id,
            unfinished="batch_expired",
            why="the job expired before this record ran",
        )
    )
    assert len(lines) == 2
    error = json.loads(lines[1])
    assert error["custom_id"] == "b"
    assert error["error"]["code"] == "batch_expired"
    assert error["error"]["message"] == "the job expired before this record ran"


def test_a_finished_job_reads_no_input(tmp_path: Path) -> None:
    out = _write(tmp_path / "0.jsonl", {"id": "a", "text": "ok"})
    asked = _write(tmp_path / "input.jsonl", {"id": "b"})
    lines = list(result_lines([out], _parse, asked=asked, asked_id=_asked_id))
    assert [json.loads(line)["custom_id"] for line in lines] == ["a"]


def _batch(batch_id: str, created_at: float | None) -> RemoteBatch:
    return RemoteBatch(id=batch_id, status="in_progress", created_at=created_at)


def test_a_lost_create_is_the_newest_unclaimed_batch_since_the_intent() -> None:
    tag = BatchTag("run", "m|t0|s0", 0, intent_at=1000.0, claimed=frozenset({"claimed"}))
    listed = [
        _batch("older-run", 1000.0 - CLOCK_SKEW_S - 1),
        _batch("first", 1001.0),
        _batch("claimed", 1005.0),
        _batch("newest", 1003.0),
        _batch("tie", 1003.0),
    ]
    best = tag.newest_unclaimed(listed)
    assert best is not None and best.id == "newest"
    assert tag.newest_unclaimed(listed[:1]) is None
    assert tag.newest_unclaimed([listed[2]]) is None


def test_without_an_intent_any_unclaimed_batch_may_be_the_lost_one() -> None:
    tag = BatchTag("run", "m|t0|s0", 0)
    best = tag.newest_unclaimed([_batch("undated", None), _batch("dated", 5.0)])
    assert best is not None and best.id == "dated"
