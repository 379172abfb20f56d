"""The WARP program of every row: matched by ground truth, never by position."""

from __future__ import annotations

import csv
import hashlib
from pathlib import Path

import polars as pl
import pytest

from aeval.dataset import TruthTable, demo_dataset_path, known_programs, load_dataset


@pytest.fixture(scope="module")
def by_row(programs_path: Path) -> dict[int, str]:
    """The released mapping: row position of the hub dataset → program."""
    with programs_path.open() as f:
        return {int(r["row"]): r["program"] for r in csv.DictReader(f)}


def test_shipped_table_holds_each_distinct_ground_truth_once_with_its_program(
    benchmark_path: Path, by_row: dict[int, str]
) -> None:
    raw = pl.read_parquet(benchmark_path)
    table = known_programs()
    digests = {hashlib.sha256(a.encode()).hexdigest() for a in raw["answer"]}
    assert set(table) == digests  # only what is needed: one line per distinct ground truth
    assert len(set(table.values())) == 20


def test_every_row_of_the_benchmark_gets_its_program(
    benchmark_path: Path, by_row: dict[int, str]
) -> None:
    frame = load_dataset(benchmark_path)
    assert frame["program"].to_list() == [by_row[i] for i in range(frame.height)]


def test_a_shuffled_copy_matches_by_ground_truth_not_position(
    benchmark_path: Path, by_row: dict[int, str], tmp_path: Path
) -> None:
    raw = pl.read_parquet(benchmark_path).with_row_index("row")
    shuffled = raw.sample(fraction=1.0, shuffle=True, seed=7)
    assert shuffled["row"].to_list() != sorted(shuffled["row"].to_list())
    path = tmp_path / "shuffled.jsonl"
    shuffled.with_columns(pl.col("row").cast(pl.String).alias("id")).drop("row").write_ndjson(path)
    frame = load_dataset(path)
    # ids carry the original row: each row's program is the one of its ground truth
    assert frame["program"].to_list() == [by_row[int(i)] for i in frame["id"]]
    # and the truth table (what verdicts are stamped from) agrees
    truth = TruthTable(frame)
    assert all(truth[i].program == by_row[int(i)] for i in frame["id"])


def test_a_sample_keeps_each_rows_program(benchmark_path: Path, by_row: dict[int, str]) -> None:
    frame = load_dataset(benchmark_path, sample=40, seed=3)
    assert frame.height == 40
    assert frame["program"].to_list() == [by_row[int(i)] for i in frame["id"]]
    # the same rows a frame without the column: the truth table looks them up itself
    truth = TruthTable(frame.drop("program"))
    assert [truth[i].program for i in frame["id"]] == frame["program"].to_list()


def test_another_benchmark_has_no_program_column(benchmark_path: Path, tmp_path: Path) -> None:
    # the synthetic demo repeats a few WARP constraints by construction: still not WARP's
    demo = load_dataset(demo_dataset_path())
    assert "program" not in demo.columns
    assert TruthTable(demo)["0"].program is None
    # one row whose ground truth aeval does not know: the mapping is not this benchmark's
    raw = pl.read_parquet(benchmark_path).head(10)
    raw = raw.with_columns(
        pl.when(pl.int_range(pl.len()) == 4)
        .then(pl.lit("(assert (= x 1))"))
        .otherwise(pl.col("answer"))
        .alias("answer")
    )
    raw.write_parquet(tmp_path / "mixed.parquet")
    assert "program" not in load_dataset(tmp_path / "mixed.parquet").columns


def test_a_benchmarks_own_program_column_is_kept(benchmark_path: Path, tmp_path: Path) -> None:
    raw = pl.read_parquet(benchmark_path).head(3).with_columns(program=pl.lit("mine"))
    raw.write_parquet(tmp_path / "own.parquet")
    frame = load_dataset(tmp_path / "own.parquet")
    assert frame["program"].to_list() == ["mine"] * 3
    assert TruthTable(frame)["1"].program == "mine"


def test_the_dataset_fingerprint_does_not_change_with_the_program_column(
    benchmark_path: Path,
) -> None:
    from aeval.dataset import load_dataset_fingerprinted
    from aeval.dataset.fingerprint import content_sha256

    frame, fingerprint = load_dataset_fingerprinted(benchmark_path)
    # runs made before aeval knew programs resume: the digest is of the data alone
    assert fingerprint.content_sha256 == content_sha256(frame.drop("program"))


def test_a_released_truth_table_is_empty_and_its_declarations_outlive_it() -> None:
    frame = pl.DataFrame(
        {
            "id": ["a", "b"],
            "answer": ["(assert (> x 0))", "(assert (< y 0))"],
            "constants": ["(declare-const x Int)", None],
        }
    )
    table = TruthTable(frame)
    constants = table.constants_lookup()
    table.release()
    assert len(table) == 0 and "a" not in table and table.get("a") is None
    assert table.ids() == []
    # what the answers' classes at a run's end still ask for
    assert constants("a") == "(declare-const x Int)" and constants("b") == ""
    assert constants("zzz") is None
