from __future__ import annotations

import contextlib
import hashlib
import http.server
import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar, TypeVar

import datasets
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aeval.dataset import (
    DEFAULT_DATASET,
    FRAME_COLUMNS,
    load_dataset,
    select_rows,
    validate_frame,
)
from aeval.errors import DatasetError


@pytest.fixture(scope="module")
def real(benchmark_path: Path) -> pl.DataFrame:
    return load_dataset(benchmark_path)


def _raw(benchmark_path: Path) -> pl.DataFrame:
    return pl.read_parquet(benchmark_path)


# --------------------------------------------------------------------------- the real benchmark


def test_real_benchmark_loads_with_standard_columns(real: pl.DataFrame) -> None:
    # then the program of each row, which aeval knows for the WARP benchmark
    assert real.columns == [*FRAME_COLUMNS, "program"]
    assert all(dtype == pl.String for dtype in real.dtypes)
    assert real.height == 671
    # No id column in the file: the 0-based row index, as text, is the id.
    assert real["id"].to_list() == [str(i) for i in range(671)]
    assert set(real["tier"].unique().to_list()) == {"small", "medium", "large"}


def test_jsonl_csv_json_and_save_to_disk_exports_load_identically(
    benchmark_path: Path, real: pl.DataFrame, tmp_path: Path
) -> None:
    raw = _raw(benchmark_path)
    raw.write_ndjson(tmp_path / "b.jsonl")
    raw.write_csv(tmp_path / "b.csv")
    raw.write_json(tmp_path / "array.json")  # a JSON array, not JSON lines
    ds = datasets.Dataset.from_polars(raw)
    ds.save_to_disk(str(tmp_path / "saved"))
    datasets.DatasetDict({"test": ds, "train": ds.select(range(3))}).save_to_disk(
        str(tmp_path / "saved_dict")
    )
    # datasets' own JSON export is JSON lines under a .json name.
    ds.to_json(str(tmp_path / "hf.json"))
    for name in ("b.jsonl", "b.csv", "array.json", "hf.json", "saved", "saved_dict"):
        loaded = load_dataset(tmp_path / name)
        assert loaded.equals(real), name
    assert load_dataset(str(tmp_path / "saved_dict"), split="train").height == 3


def test_existing_id_column_is_kept_as_text(benchmark_path: Path, tmp_path: Path) -> None:
    raw = _raw(benchmark_path).head(5).with_columns(id=pl.Series([10, 11, 12, 13, 14]))
    raw = raw.with_columns(source=pl.lit("x"))
    raw.write_parquet(tmp_path / "ids.parquet")
    loaded = load_dataset(tmp_path / "ids.parquet")
    assert loaded["id"].to_list() == ["10", "11", "12", "13", "14"]
    # extra columns ride along, then the program aeval knows of these (WARP) rows
    assert loaded.columns == [*FRAME_COLUMNS, "source", "program"]


def test_missing_tier_becomes_null_column(benchmark_path: Path, tmp_path: Path) -> None:
    _raw(benchmark_path).head(4).drop("tier").write_parquet(tmp_path / "notier.parquet")
    loaded = load_dataset(tmp_path / "notier.parquet")
    assert loaded["tier"].dtype == pl.String
    assert loaded["tier"].null_count() == 4
    with pytest.raises(DatasetError, match="no rows of tier 'small'; it has no tier column"):
        load_dataset(tmp_path / "notier.parquet", tier="small")


# --------------------------------------------------------------------------- selection


def test_selection_keeps_ids_and_order(benchmark_path: Path, real: pl.DataFrame) -> None:
    assert load_dataset(benchmark_path, limit=7)["id"].to_list() == [str(i) for i in range(7)]
    large = load_dataset(benchmark_path, tier="large")
    assert large.height == real.filter(pl.col("tier") == "large").height == 5
    a = load_dataset(benchmark_path, sample=20, seed=3)
    b = load_dataset(benchmark_path, sample=20, seed=3)
    c = load_dataset(benchmark_path, sample=20, seed=4)
    assert a.equals(b)
    assert not a.equals(c)
    ids = [int(i) for i in a["id"]]
    assert ids == sorted(ids) and len(set(ids)) == 20
    # Each row is still the row of that id in the full benchmark.
    assert a.equals(real.filter(pl.col("id").is_in(a["id"].implode())))
    medium = load_dataset(benchmark_path, tier="medium", sample=10, seed=1, limit=4)
    assert medium.height == 4 and set(medium["tier"]) == {"medium"}
    assert load_dataset(benchmark_path, sample=10_000).height == 671


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"limit": 0}, "--limit must be a positive integer"),
        ({"sample": -2}, "--sample must be a positive integer"),
        ({"tier": "huge"}, "no rows of tier 'huge'; its tiers are large, medium, small"),
    ],
)
def test_bad_selection_is_refused(
    benchmark_path: Path, kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(DatasetError, match=message):
        load_dataset(benchmark_path, **kwargs)  # type: ignore[arg-type]


def test_select_rows_on_a_plain_frame(real: pl.DataFrame) -> None:
    assert select_rows(real, limit=2)["id"].to_list() == ["0", "1"]


# --------------------------------------------------------------------------- malformed data


def _rows(n: int = 3) -> list[dict[str, object]]:
    return [
        {
            "question": f"What is the constraint for N={i + 2}?",
            "answer": "(assert (> x 0))",
            "constants": "(declare-const x Int)",
            "tier": "small",
        }
        for i in range(n)
    ]


def _write_jsonl(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_missing_column_is_named(tmp_path: Path) -> None:
    rows = [{k: v for k, v in r.items() if k != "constants"} for r in _rows()]
    path = _write_jsonl(tmp_path / "nocon.jsonl", rows)
    with pytest.raises(DatasetError) as info:
        load_dataset(path)
    message = str(info.value)
    assert str(path) in message
    assert "lacks required column(s) constants" in message
    assert "it has question, answer, tier" in message


def test_null_question_names_the_line(tmp_path: Path) -> None:
    rows = _rows(4)
    rows[2]["question"] = None
    path = tmp_path / "nullq.jsonl"
    # A blank line before the bad row: the reported line is the file's real line.
    path.write_text(
        "\n".join(json.dumps(r) for r in rows[:2])
        + "\n\n"
        + "\n".join(json.dumps(r) for r in rows[2:])
    )
    with pytest.raises(DatasetError, match=r"null or empty question, first at row 2 \(line 4\)"):
        load_dataset(path)


def test_empty_question_in_csv_names_the_line(tmp_path: Path) -> None:
    rows = _rows(3)
    rows[0]["question"] = "line one\nline two"  # a quoted field spanning two lines
    rows[1]["question"] = "   "
    path = tmp_path / "emptyq.csv"
    pl.DataFrame(rows).write_csv(path)
    with pytest.raises(DatasetError, match=r"first at row 1 \(line 4\)"):
        load_dataset(path)


def test_duplicate_and_null_ids_are_refused(tmp_path: Path) -> None:
    rows = _rows(4)
    for row, id_ in zip(rows, ["a", "b", "a", "c"], strict=True):
        row["id"] = id_
    with pytest.raises(DatasetError, match=r"duplicate id\(s\) 'a', first at row 0 \(line 1\)"):
        load_dataset(_write_jsonl(tmp_path / "dup.jsonl", rows))
    rows[2]["id"] = None
    with pytest.raises(DatasetError, match=r"null id, first at row 2 \(line 3\)"):
        load_dataset(_write_jsonl(tmp_path / "nullid.jsonl", rows))


def test_non_text_question_is_refused(tmp_path: Path) -> None:
    frame = pl.DataFrame({"question": [1, 2], "answer": ["a", "b"], "constants": ["", ""]})
    frame.write_parquet(tmp_path / "ints.parquet")
    with pytest.raises(DatasetError, match="column 'question' holds Int64, expected text"):
        load_dataset(tmp_path / "ints.parquet")


def test_broken_json_line_is_named(tmp_path: Path) -> None:
    path = tmp_path / "broken.jsonl"
    good = [json.dumps(r) for r in _rows(3)]
    path.write_text(f'{good[0]}\n{good[1]}\n{{"question": "unterminated\n{good[2]}\n')
    with pytest.raises(DatasetError, match="line 3 is not valid JSON"):
        load_dataset(path)


def test_null_ground_truth_is_not_a_load_error(tmp_path: Path) -> None:
    rows = _rows(2)
    rows[0]["answer"] = None
    rows[1]["answer"] = "(assert (this does not parse"
    loaded = load_dataset(_write_jsonl(tmp_path / "gt.jsonl", rows))
    assert loaded["answer"].to_list() == ["", "(assert (this does not parse"]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: d / "missing.parquet", "does not exist"),
        (lambda d: str(d / "missing.csv"), "does not exist"),
        (lambda d: "not a hub id!", "neither an existing file or directory nor a Hugging Face"),
        (lambda d: (d / "x.txt").write_text("hi") and d / "x.txt", "unsupported extension"),
        (lambda d: d, "was not written by datasets.save_to_disk"),
        (
            lambda d: (d / "h.csv").write_text("question,answer,constants\n") and d / "h.csv",
            "has no rows",
        ),
        (lambda d: (d / "bad.parquet").write_bytes(b"PAR1junk") and d / "bad.parquet", "cannot"),
    ],
)
def test_unusable_sources_get_a_message(tmp_path: Path, make, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(DatasetError, match=message):
        load_dataset(make(tmp_path))


def test_saved_dict_without_the_split_lists_the_splits(tmp_path: Path) -> None:
    ds = datasets.Dataset.from_list(_rows(2))
    datasets.DatasetDict({"train": ds}).save_to_disk(str(tmp_path / "d"))
    with pytest.raises(DatasetError, match="has no split 'test'; it has train"):
        load_dataset(tmp_path / "d")


# --------------------------------------------------------------------------- the hub, on loopback

_REPO = DEFAULT_DATASET
_SHA = "0123456789abcdef" * 2 + "01234567"


class _FakeHub(http.server.BaseHTTPRequestHandler):
    """Just enough of the hub's HTTP API for datasets to load one parquet repo.

    It stands in for the network only: the code under test is the real
    datasets/huggingface_hub client path (HEAD/resolve, revision info, tree).
    """

    files: ClassVar[dict[str, bytes]] = {}
    url: ClassVar[str] = ""

    def _send(self, code: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _handle(self) -> None:
        path = urllib.parse.urlparse(self.path).path
        resolve = f"/datasets/{_REPO}/resolve/"
        tree = f"/api/datasets/{_REPO}/tree/"
        if path.startswith(resolve):
            name = path[len(resolve) :].partition("/")[2]
            if name in self.files:
                body = self.files[name]
                etag = '"' + hashlib.sha1(body).hexdigest() + '"'
                self._send(200, body, {"X-Repo-Commit": _SHA, "ETag": etag})
                return
            self._send(404, b"{}", {"X-Error-Code": "EntryNotFound"})
        elif path.startswith(f"/api/datasets/{_REPO}/revision/"):
            info = {"id": _REPO, "sha": _SHA, "private": False, "cardData": {}, "tags": []}
            info["siblings"] = [{"rfilename": name} for name in self.files]
            self._send(200, json.dumps(info).encode(), {"Content-Type": "application/json"})
        elif path.startswith(tree):
            folder = path[len(tree) :].partition("/")[2]
            entries: dict[str, dict[str, object]] = {}
            for name, body in self.files.items():
                if folder and not name.startswith(folder + "/"):
                    continue
                rest = name[len(folder) + 1 :] if folder else name
                if "/" in rest:
                    sub = (folder + "/" if folder else "") + rest.split("/")[0]
                    entries[sub] = {"type": "directory", "path": sub, "oid": "0" * 40, "size": 0}
                else:
                    oid = hashlib.sha1(body).hexdigest()
                    entries[name] = {"type": "file", "path": name, "size": len(body), "oid": oid}
            body = json.dumps(list(entries.values())).encode()
            self._send(200, body, {"Content-Type": "application/json"})
        else:
            self._send(404, b"{}", {"X-Error-Code": "RepoNotFound"})

    do_GET = do_HEAD = _handle

    def log_message(self, format: str, *args: object) -> None:
        pass


_Hub = TypeVar("_Hub", bound=_FakeHub)


@contextlib.contextmanager
def serving_hub(kind: type[_Hub], benchmark_path: Path, **state: object) -> Iterator[type[_Hub]]:
    """A fresh subclass of ``kind``, its class attributes ``state``, serving a one-parquet
    repo of the benchmark on loopback (its address in ``url``) until the block ends."""
    handler = type("Hub", (kind,), state)
    handler.files = {
        "README.md": b"# a benchmark\n",
        "data/test-00000-of-00001.parquet": benchmark_path.read_bytes(),
    }
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    handler.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield handler
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture
def fake_hub(benchmark_path: Path) -> Iterator[str]:
    with serving_hub(_FakeHub, benchmark_path) as hub:
        yield hub.url


_LOAD_SCRIPT = textwrap.dedent(
    """
    import json, sys
    from aeval.dataset import load_dataset
    from aeval.errors import DatasetError
    for ref, split, out, options in json.loads(sys.argv[1]):
        try:
            frame = load_dataset(ref, split=split, **options)
        except DatasetError as err:
            print(json.dumps({"error": str(err)}))
        else:
            frame.write_parquet(out)
            print(json.dumps({"rows": frame.height}))
    """
)


def _loads_in_subprocess(
    env: dict[str, str], *loads: tuple[str, Path, dict[str, object]]
) -> list[dict[str, object]]:
    """Each ``(ref, out, options)`` loaded in turn (``options`` may name the split),
    in one process with ``env``: datasets reads HF_ENDPOINT / HF_HUB_OFFLINE at
    import, so a fresh process per setting (and one import of the hub stack for all
    the loads of a setting)."""
    calls = [
        (ref, str(options.get("split", "test")), str(out), {
            k: v for k, v in options.items() if k != "split"
        })
        for ref, out, options in loads
    ]  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-c", _LOAD_SCRIPT, json.dumps(calls)],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    results = [json.loads(line) for line in done.stdout.strip().splitlines()[-len(loads) :]]
    assert len(results) == len(loads), done.stdout
    return results


def test_hub_id_loads_through_datasets_then_from_cache_offline(
    fake_hub: str, real: pl.DataFrame, tmp_path: Path
) -> None:
    env = dict(os.environ, HF_HOME=str(tmp_path / "hf"), HF_ENDPOINT=fake_hub)
    env.pop("HF_HUB_OFFLINE", None)
    env.pop("HF_DATASETS_CACHE", None)
    whole, pinned, no_config, wrong_split, missing = _loads_in_subprocess(
        env,
        (_REPO, tmp_path / "hub.parquet", {}),
        (_REPO, tmp_path / "r.parquet", {"revision": _SHA, "limit": 5}),
        (_REPO, tmp_path / "c.parquet", {"config_name": "nope"}),
        (_REPO, tmp_path / "x.parquet", {"split": "train"}),
        ("someone/no-such-benchmark", tmp_path / "y.parquet", {}),
    )
    assert whole == {"rows": 671}
    assert pl.read_parquet(tmp_path / "hub.parquet").equals(real)
    assert pinned == {"rows": 5}
    assert str(no_config["error"]).startswith(f"cannot load dataset '{_REPO}'")
    assert "nope" in str(no_config["error"])
    assert "has no split 'train'" in str(wrong_split["error"])
    assert "was not found on the Hugging Face hub" in str(missing["error"])

    # What the unreachable-hub message advises: the cached copy loads offline.
    offline = dict(
        env, HF_HUB_OFFLINE="1", HF_ENDPOINT=f"http://127.0.0.1:{_closed_loopback_port()}"
    )
    cached = _loads_in_subprocess(offline, (_REPO, tmp_path / "cached.parquet", {}))
    assert cached == [{"rows": 671}]
    assert pl.read_parquet(tmp_path / "cached.parquet").equals(real)


# --------------------------------------------------------------------------- the hub, unreachable


def _closed_loopback_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again on exit: connections are refused


_HUB_SCRIPT = textwrap.dedent(
    """
    import sys
    from aeval.dataset import load_dataset
    from aeval.errors import DatasetError
    try:
        load_dataset(sys.argv[1])
    except DatasetError as err:
        print(err)
        sys.exit(0)
    sys.exit("loaded from an unreachable hub?")
    """
)


@contextlib.contextmanager
def _dropping_endpoint() -> Iterator[tuple[str, list[int]]]:
    """A loopback endpoint that takes each connection and closes it without a word (a
    hub that is there but never answers), counting them."""
    listener = socket.create_server(("127.0.0.1", 0))
    taken = [0]

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:  # the listener was closed: the test is over
                return
            taken[0] += 1
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}", taken
    finally:
        listener.shutdown(socket.SHUT_RDWR)  # wakes the accept (close alone would not)
        listener.close()
        thread.join(timeout=10)
        assert not thread.is_alive()


@pytest.mark.parametrize("mode", ["dropping_endpoint", "offline_flag"])
def test_unreachable_hub_fails_fast_with_advice(tmp_path: Path, mode: str) -> None:
    # Fast means at once, counted rather than timed: huggingface_hub alone connects again
    # and again with back-off (~23 s); aeval asks the hub once (a probe) and then gives
    # its advice, or, offline, does not connect at all.
    env = dict(os.environ, HF_HOME=str(tmp_path / "hf"), HF_DATASETS_CACHE=str(tmp_path / "c"))
    with _dropping_endpoint() as (endpoint, connections):
        env["HF_ENDPOINT"] = endpoint
        if mode == "dropping_endpoint":
            env.pop("HF_HUB_OFFLINE", None)
        else:
            env["HF_HUB_OFFLINE"] = "1"
        done = subprocess.run(
            [sys.executable, "-c", _HUB_SCRIPT, DEFAULT_DATASET],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr
    message = done.stdout
    assert DEFAULT_DATASET in message
    assert "pass a local file with --dataset" in message.lower()
    assert "Traceback" not in done.stdout + done.stderr
    if mode == "offline_flag":
        assert "HF_HUB_OFFLINE=1" in message
        assert connections == [0]
    else:
        assert "unreachable" in message and endpoint in message
        assert connections == [1]


def test_id_type_changing_late_in_jsonl_still_loads(tmp_path: Path) -> None:
    # polars guesses the schema from the first lines; integer ids that turn
    # into text after line 100 must not break the load.
    rows = _rows(300)
    for i, row in enumerate(rows):
        row["id"] = i if i < 250 else f"x{i}"
    loaded = load_dataset(_write_jsonl(tmp_path / "mixed.jsonl", rows))
    assert loaded["id"].to_list()[248:252] == ["248", "249", "x250", "x251"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            b'question,answer,constants\nq,a,c\n"q\nmore",a,c\n"caf\xe9",a,c\n',
            "line 5 is not UTF-8",
        ),
        (b'question,answer,constants\n"x\ny",a,c\nq,a,c,d\n', "record at line 4 has 4 fields"),
        (b'question,answer,constants\nq,a,c\n"q,a\n', "line 3: unexpected end of data"),
    ],
)
def test_broken_csv_names_the_line(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "broken.csv"
    path.write_bytes(content)
    with pytest.raises(DatasetError, match=message) as info:
        load_dataset(path)
    assert str(path) in str(info.value)


def test_home_relative_path_is_expanded(
    benchmark_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "bench.parquet").write_bytes(benchmark_path.read_bytes())
    assert load_dataset("~/bench.parquet", limit=3)["id"].to_list() == ["0", "1", "2"]
    with pytest.raises(DatasetError, match="does not exist"):
        load_dataset("~/other.parquet")


@settings(max_examples=60, deadline=None)
@given(
    height=st.integers(1, 60),
    sample=st.one_of(st.none(), st.integers(1, 80)),
    limit=st.one_of(st.none(), st.integers(1, 80)),
    seed=st.integers(-(2**40), 2**40),
)
def test_selection_is_an_ordered_subset(
    height: int, sample: int | None, limit: int | None, seed: int
) -> None:
    frame = validate_frame(
        pl.DataFrame(
            {
                "question": [f"q{i}" for i in range(height)],
                "answer": ["a"] * height,
                "constants": [""] * height,
            }
        )
    )
    picked = select_rows(frame, sample=sample, limit=limit, seed=seed)
    ids = [int(i) for i in picked["id"]]
    expected = min(height, sample or height, limit or height)
    assert len(ids) == expected
    assert ids == sorted(set(ids))  # dataset order, no repeats
    assert picked.equals(frame.filter(pl.col("id").is_in(picked["id"].implode())))
    assert select_rows(frame, sample=sample, limit=limit, seed=seed).equals(picked)
