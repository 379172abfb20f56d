from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from aeval.errors import RunDirError
from aeval.store import RunStore, ShardRecord, atomic_write_text, shard_key
from aeval.verdicts import Status, Verdict


def _record(n: int = 0) -> ShardRecord:
    return ShardRecord(
        key=shard_key("m", 1, n),
        model="m",
        trial=1,
        shard=n,
        requests=3,
        input_path=f"requests/m-t1-s{n}.jsonl",
        sha256="ab",
        bytes=10,
    )


def _verdict(cid: str, status: Status = Status.EQUIVALENT) -> Verdict:
    return Verdict(model="m", trial=1, custom_id=cid, status=status)


def test_create_refuses_keys_and_existing_runs(tmp_path: Path) -> None:
    with pytest.raises(RunDirError, match="API key"):
        RunStore.create(tmp_path, "r", {"api_key": "sk"})
    store = RunStore.create(tmp_path, "r", {"models": ["m"]})
    store.close()
    with pytest.raises(RunDirError, match="resume"):
        RunStore.create(tmp_path, "r", {"models": ["m"]})


def test_manifest_round_trip_and_atomic_replacement(tmp_path: Path) -> None:
    store = RunStore.create(tmp_path, "r", {"models": ["m"]})
    rec = store.put_shard(_record().evolve(batch_id="b1", errors=({"code": "x"},)))
    store.close()
    leftovers = [p.name for p in (tmp_path / "r").iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []
    again = RunStore.open(tmp_path / "r")
    assert again.shards[rec.key].batch_id == "b1"
    assert again.shards[rec.key].errors == ({"code": "x"},)
    again.close()


def test_verdicts_append_dedupe_and_survive_a_torn_line(tmp_path: Path) -> None:
    store = RunStore.create(tmp_path, "r", {})
    assert store.append_verdict(_verdict("a"))
    assert not store.append_verdict(_verdict("a", Status.MISSING))  # first one wins
    assert store.append_verdict(_verdict("b"))
    store.close()
    path = tmp_path / "r" / "verdicts.jsonl"
    with path.open("a") as fh:
        fh.write('{"model": "m", "trial": 1, "custom_id": "c", "sta')  # killed mid-write
    store = RunStore.open(tmp_path / "r")
    assert store.has_verdict("m", 1, "a") and not store.has_verdict("m", 1, "c")
    assert store.append_verdict(_verdict("c"))
    frame = store.verdicts_frame()
    store.close()
    assert frame["custom_id"].to_list() == ["a", "b", "c"]
    assert all(line.startswith("{") for line in path.read_text().splitlines())


def test_a_damaged_verdict_line_is_reported_with_its_place(tmp_path: Path) -> None:
    RunStore.create(tmp_path, "r", {}).close()
    (tmp_path / "r" / "verdicts.jsonl").write_text('{"model": "m"}\n')
    with pytest.raises(RunDirError, match="line 1"):
        RunStore.open(tmp_path / "r")


@pytest.mark.parametrize(
    ("manifest", "said"),
    [
        ([], "not a JSON object"),
        ({"run_id": 7, "shards": {}}, "no run id"),
        ({"run_id": "r", "shards": ["x"]}, "no shard table"),
        ({"run_id": "r", "shards": {"k": "x"}}, "shard record is malformed"),
    ],
)
def test_a_malformed_manifest_is_named_in_one_line(
    tmp_path: Path, manifest: object, said: str
) -> None:
    store = RunStore.create(tmp_path, "r", {"models": ["m"]})
    store.close()
    path = tmp_path / "r" / "manifest.json"
    if isinstance(manifest, dict):
        manifest = {"version": json.loads(path.read_text())["version"], **manifest}
    path.write_text(json.dumps(manifest))
    with pytest.raises(RunDirError, match=said):
        RunStore.open(tmp_path / "r", read_only=True)


def test_open_rejects_a_foreign_directory(tmp_path: Path) -> None:
    with pytest.raises(RunDirError, match="not a run directory"):
        RunStore.open(tmp_path)


def test_a_live_store_holds_the_run(tmp_path: Path) -> None:
    RunStore.create(tmp_path, "r", {}).close()
    first = RunStore.open(tmp_path / "r")
    with pytest.raises(RunDirError, match=f"in use by process {os.getpid()}"):
        RunStore.open(tmp_path / "r")  # a second driver, even in the same process
    RunStore.open(tmp_path / "r", read_only=True)  # status may still look
    first.close()
    RunStore.open(tmp_path / "r").close()  # released on close


def test_atomic_write_replaces_whole(tmp_path: Path) -> None:
    target = tmp_path / "f.json"
    atomic_write_text(target, json.dumps({"a": 1}))
    atomic_write_text(target, json.dumps({"a": 2}))
    assert json.loads(target.read_text()) == {"a": 2}


def test_finish_writes_parquet_and_summary(tmp_path: Path) -> None:
    import polars as pl

    store = RunStore.create(tmp_path, "r", {})
    store.append_verdict(_verdict("a"))
    store.finish({"overall": {"n": 1}})
    store.close()
    assert pl.read_parquet(tmp_path / "r" / "verdicts.parquet").height == 1
    assert json.loads((tmp_path / "r" / "summary.json").read_text())["overall"]["n"] == 1


def test_each_verdict_line_is_the_verdicts_record(tmp_path: Path) -> None:
    v = Verdict(
        model="m",
        trial=2,
        custom_id="x",
        status=Status.NOT_EQUIVALENT,
        reason="r",
        direction="too_weak",
        counterexample={"a": "1"},
        tier="small",
        prompt_tokens=3,
    )
    store = RunStore.create(tmp_path, "r", {})
    assert store.append_verdict(v)
    store.close()
    (line,) = (tmp_path / "r" / "verdicts.jsonl").read_text(encoding="utf-8").splitlines()
    assert json.loads(line) == v.to_record()


def test_shard_stems_never_collide_and_recorded_stems_are_used(tmp_path: Path) -> None:
    from aeval.store import shard_stem

    names = ["m/x", "m_x", "m:x", "M_x", "gpt-4o-mini-2024-07-18"]
    stems = {shard_stem(n, 1, 0) for n in names}
    assert len(stems) == len(names)
    assert all(
        set(s) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
        for s in stems
    )
    assert shard_stem("m/x", 1, 0).startswith("m_x-")
    # A shard's files are named from the request file its record names.
    with RunStore.create(tmp_path, "r", {"models": ["m"]}) as store:
        old = _record()  # requests/m-t1-s0.jsonl
        assert store.output_path(old, "output").name == "m-t1-s0-a0.output.jsonl"


def test_the_store_docstring_lists_every_name_of_the_layout(tmp_path: Path) -> None:
    import aeval.store
    from aeval.store import layout

    doc = aeval.store.__doc__ or ""
    names = [
        getattr(layout, n) for n in layout.__all__ if n.endswith(("_FILE", "_DIR", "_PARQUET"))
    ]
    run = layout.RunLayout(tmp_path)
    pages = [run.report_page, run.samples_page, run.compare_page]
    assert names and all(n in doc for n in names), [n for n in names if n not in doc]
    assert all(p.name in doc for p in pages)
    assert "wrong-<status>.html" in doc and "-direct.jsonl" in doc


def test_an_output_file_name_parses_back_to_its_parts(tmp_path: Path) -> None:
    from aeval.store import RunLayout, parse_output_name, shard_stem

    stem = shard_stem("m/x", 3, 2)
    path = RunLayout(tmp_path).output(stem, 4, "error")
    name = parse_output_name(path.name)
    assert name is not None
    assert (name.stem, name.trial, name.attempt, name.kind) == (stem, 3, 4, "error")
    direct = RunLayout(tmp_path).direct_answers("m/x", 3)
    assert direct.parent == path.parent and parse_output_name(direct.name) is None
    assert parse_output_name("notes.jsonl") is None


def test_concat_sorted_is_a_stable_sort_of_the_parts_and_takes_them() -> None:
    import polars as pl

    from aeval.store.results import concat_sorted

    rng = random.Random(5)
    rows = [
        {
            "model": rng.choice("ba"),
            "trial": rng.randint(1, 3),
            "custom_id": str(rng.randint(0, 9)),
            "seq": i,
            "text": "x" * rng.randint(0, 40),
            "flag": rng.choice([True, None]),
        }
        for i in range(500)
    ]
    whole = pl.DataFrame(rows)
    parts = [whole.slice(start, 70) for start in range(0, 500, 70)]
    keys = ["model", "trial", "custom_id"]
    out = concat_sorted(parts, keys)
    assert parts == []  # the function owns them: the unsorted frame dies as it is moved
    assert out.columns == whole.columns and out.schema == whole.schema
    assert out.equals(whole.sort(keys, maintain_order=True))  # ties keep their order
    assert concat_sorted([whole.head(1)], keys).equals(whole.head(1))
    assert concat_sorted([whole.clear()], keys).is_empty()
