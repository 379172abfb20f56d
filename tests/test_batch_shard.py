from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from aeval.batch.shard import batch_line, write_shards
from aeval.config import ShardLimits
from aeval.errors import ConfigError


def _requests(n: int, size: int = 10) -> list[tuple[str, dict[str, object]]]:
    return [
        (f"id{i}", {"model": "m", "messages": [{"role": "user", "content": "x" * size}]})
        for i in range(n)
    ]


def test_batch_line_is_one_json_line() -> None:
    line = batch_line("a", {"model": "m"})
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line) == {
        "custom_id": "a",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": "m"},
    }


def test_split_by_count_with_hashes(tmp_path: Path) -> None:
    files = write_shards(
        _requests(10), lambda n: tmp_path / f"s{n}.jsonl", ShardLimits(max_requests=4)
    )
    assert [f.requests for f in files] == [4, 4, 2]
    for f in files:
        data = f.path.read_bytes()
        assert f.bytes == len(data)
        assert f.sha256 == hashlib.sha256(data).hexdigest()


def test_split_by_bytes(tmp_path: Path) -> None:
    line_len = len(batch_line(*_requests(1, size=300)[0]))
    limits = ShardLimits(max_requests=1000, max_bytes=line_len * 3 + 10)
    files = write_shards(_requests(7, size=300), lambda n: tmp_path / f"{n}.jsonl", limits)
    assert [f.requests for f in files] == [3, 3, 1]
    assert all(f.bytes <= limits.max_bytes for f in files)


def test_one_request_over_the_byte_limit_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="id0"):
        write_shards(
            _requests(1, size=5000),
            lambda n: tmp_path / f"{n}.jsonl",
            ShardLimits(max_bytes=2048),
        )


def test_no_requests_no_files(tmp_path: Path) -> None:
    assert write_shards([], lambda n: tmp_path / f"{n}.jsonl", ShardLimits()) == []
