from __future__ import annotations

import random
import re
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from aeval import synth
from aeval.dataset import demo_dataset_path, load_dataset
from aeval.errors import ConfigError, InputFileError
from aeval.synth import (
    DEMO_ROWS,
    FAMILIES,
    MAX_N,
    QUESTION_HEAD,
    Constraint,
    Problem,
    constraint,
    generate,
    problems,
    render_constraint,
    tier_of,
    verify_constraints,
    write_benchmark,
    write_demo,
    write_synthetic,
)
from aeval.verdicts import Status
from aeval.verify import VerifierPool, check_response

LINE = re.compile(r"^N=(\d+): (\(assert .*\))$")


@pytest.fixture(scope="module")
def sample() -> pl.DataFrame:
    # Z3 checks are the subject of test_every_family_is_satisfiable_at_every_size;
    # they do not change the rows.
    frame, _ = generate(400, seed=11, verify=False)
    return frame


# --------------------------------------------------------------------------- format


def test_rendering_matches_the_real_benchmark_byte_for_byte(benchmark_path: Path) -> None:
    real = pl.read_parquet(benchmark_path)
    guard = constraint(problems(["fixed_guard:0"])[0], 17)
    # The real benchmark holds this exact path constraint, spacing and nesting included.
    assert guard.assertion == "(assert (and (and  ( >=  n 1)  ( <=  n 5))  ( =  n 1)))"
    assert real.filter(pl.col("answer") == guard.assertion).height > 0
    assert real.filter(pl.col("constants") == guard.constants).height > 0
    assert render_constraint([" ( <  a b)"]) == "(assert  ( <  a b))"


def test_rows_have_the_real_question_format(sample: pl.DataFrame) -> None:
    assert sample.columns[:4] == ["question", "answer", "constants", "tier"]
    by_name = {p.name: p for p in problems()}
    for row in sample.iter_rows(named=True):
        question: str = row["question"]
        assert question.startswith(QUESTION_HEAD)
        *lines, last = question[len(QUESTION_HEAD) :].split("\n")
        target = int(re.fullmatch(r"What is the constraint for N=(\d+)\?", last).group(1))  # type: ignore[union-attr]
        assert target == row["n"] <= MAX_N
        problem = by_name[row["problem"]]
        sizes = []
        for line in lines:
            m = LINE.match(line)
            assert m, line
            sizes.append(int(m.group(1)))
            assert m.group(2) == constraint(problem, sizes[-1]).assertion
        assert len(sizes) >= 3 and sizes == sorted(set(sizes)) and sizes[-1] < target
        truth = constraint(problem, target)
        assert row["answer"] == truth.assertion and row["constants"] == truth.constants
        assert row["tier"] == tier_of(len(row["answer"]))
        # Declarations: exactly the symbols the answer uses, one Int per line.
        declared = re.findall(r"^\(declare-const (\w+) Int\)$", row["constants"], re.M)
        assert len(declared) == row["constants"].count("\n") + 1 == len(set(declared))
        used = set(re.findall(r"\b([a-z]+\d*)\b", row["answer"])) - {"assert", "and", "not", "mod"}
        assert used == set(declared)


def test_a_repeated_question_always_has_the_same_answer() -> None:
    # The local server matches requests to rows by question text: repeats must agree.
    frame, _ = generate(20_000, seed=2, verify=False)
    per_question = frame.group_by("question").agg(pl.col("answer").n_unique().alias("answers"))
    assert per_question.height < frame.height  # there are repeats at this size…
    assert per_question["answers"].max() == 1  # …and they agree


def test_generation_is_reproducible_and_seeded(sample: pl.DataFrame) -> None:
    again, _ = generate(400, seed=11, verify=False)
    other, _ = generate(400, seed=12, verify=False)
    assert again.equals(sample)
    assert not other.equals(sample)
    assert set(sample["family"]) == {f.name for f in FAMILIES}
    assert set(sample["tier"]) == {"small", "medium", "large"}


def test_problem_selection(tmp_path: Path) -> None:
    frame, stats = generate(50, seed=1, selection=["sorted", "distinct:2"])
    assert set(frame["problem"]) <= {"sorted:0", "sorted:1", "sorted:2", "sorted:3", "distinct:2"}
    assert stats.problems == 5 and stats.constraints_verified > 0
    with pytest.raises(ConfigError, match="unknown synthetic problem 'nope'; families are sorted"):
        problems(["nope"])
    with pytest.raises(ConfigError, match=r"distinct has variants 0\.\.3"):
        problems(["distinct:9"])
    with pytest.raises(ConfigError, match="--rows must be a positive integer"):
        generate(0)


def test_every_family_is_satisfiable_at_every_size() -> None:
    every = [constraint(p, n) for p in problems() for n in range(p.family.n_min, MAX_N + 1)]
    verify_constraints(every)  # raises on any unsat or unparsable constraint
    # And the checker does catch a broken one.
    bad = constraint(problems(["sorted:1"])[0], 3)
    cycle = render_constraint([*_atoms(problems(["sorted:1"])[0], 3), " ( <  in2 in0)"])
    broken = Constraint(bad.problem, 3, cycle, bad.constants)
    with pytest.raises(RuntimeError, match="sorted:1 N=3 is unsat"):
        verify_constraints([broken])
    # Satisfiable but not the family's path: step-2 counter text under the step-1 name.
    step2 = constraint(problems(["loop_counter:1"])[0], 3)
    relabelled = Constraint("loop_counter:0", 3, step2.assertion, step2.constants)
    with pytest.raises(RuntimeError, match="does not take the loop_counter path"):
        verify_constraints([relabelled])


@pytest.mark.parametrize(
    ("name", "n", "values", "expected"),
    [
        ("sorted:1", 3, {"in0": 1, "in1": 2, "in2": 2}, False),
        ("sorted:0", 3, {"in0": 1, "in1": 2, "in2": 2}, True),
        ("distinct:0", 3, {"in0": 0, "in1": 2, "in2": 1}, True),
        ("distinct:0", 3, {"in0": 0, "in1": 3, "in2": 1}, False),
        ("prefix_sum:0", 3, {"in0": 1, "in1": 2, "in2": 3, "t": 3}, False),
        ("prefix_sum:0", 3, {"in0": 1, "in1": 2, "in2": 3, "t": 4}, True),
        ("loop_counter:0", 2, {"c0": 0, "c1": 1, "c2": 2, "b": 2}, True),
        ("loop_counter:0", 2, {"c0": 0, "c1": 1, "c2": 2, "b": 3}, False),
        ("mod_filter:0", 2, {"in0": 3, "in1": 5}, True),
        ("mod_filter:0", 2, {"in0": 3, "in1": 4}, False),
        ("running_max:0", 3, {"in0": 1, "in1": 5, "in2": 4}, False),
        ("fixed_guard:2", 9, {"n": 8}, True),
    ],
)
def test_family_meaning_in_plain_python(
    name: str, n: int, values: dict[str, int], expected: bool
) -> None:
    problem = problems([name])[0]
    assert problem.family.holds(n, problem.params, values) is expected


# --------------------------------------------------------------------------- files and CLI


@pytest.mark.parametrize("suffix", [".parquet", ".jsonl", ".csv"])
def test_written_files_load_as_benchmarks(tmp_path: Path, suffix: str) -> None:
    frame, _ = generate(60, seed=5, verify=False)
    path = write_benchmark(frame, tmp_path / f"synth{suffix}")
    loaded = load_dataset(path)
    assert loaded.height == 60
    assert loaded.select("question", "answer", "constants", "tier").equals(
        frame.select("question", "answer", "constants", "tier")
    )
    assert loaded["problem"].to_list() == frame["problem"].to_list()
    assert not list(tmp_path.glob(".*tmp"))  # the temp file was renamed away


@pytest.mark.parametrize("suffix", [".parquet", ".jsonl", ".csv"])
def test_streamed_files_match_the_in_memory_frame(
    tmp_path: Path, suffix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(synth.rows, "ASSEMBLY_CHUNK", 7)  # 50 rows arrive in 8 chunks
    stats = write_synthetic(tmp_path / f"s{suffix}", 50, seed=9, selection=["bounded", "sorted"])
    frame, same = generate(50, seed=9, selection=["bounded", "sorted"])
    loaded = load_dataset(tmp_path / f"s{suffix}")
    assert loaded.drop("id").with_columns(pl.col("n").cast(pl.Int32)).equals(frame)
    assert stats.rows == 50 and stats.tiers == same.tiers
    assert sum(count for _, count in stats.tiers) == 50
    if suffix == ".csv":
        assert (tmp_path / "s.csv").read_text().count("question,answer,constants") == 1


def test_a_failed_write_leaves_no_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--rows must be a positive integer"):
        write_synthetic(tmp_path / "x.jsonl", 0)
    with pytest.raises(ConfigError, match=r"use a \.parquet, \.jsonl or \.csv name"):
        write_synthetic(tmp_path / "x.xlsx", 5)
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "file").write_text("not a directory")
    with pytest.raises(InputFileError, match=r"cannot write .*file/x\.jsonl"):
        write_synthetic(tmp_path / "file" / "x.jsonl", 5)


def test_cli_writes_the_same_file_for_the_same_seed(tmp_path: Path) -> None:
    def synth(out: Path, seed: int) -> str:
        done = subprocess.run(
            [
                *(sys.executable, "-m", "aeval", "synth", "--out", str(out), "--rows", "200"),
                *(
                    "--seed",
                    str(seed),
                    "--problems",
                    "bounded,prefix_sum",
                    "--problems",
                    "sorted:0",
                ),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout

    out = synth(tmp_path / "a.jsonl", 3)
    assert "wrote 200 rows" in out and "verified satisfiable by Z3" in out
    synth(tmp_path / "b.jsonl", 3)
    synth(tmp_path / "c.jsonl", 4)
    a, b, c = ((tmp_path / f"{x}.jsonl").read_bytes() for x in "abc")
    assert a == b and a != c
    assert set(load_dataset(tmp_path / "a.jsonl")["family"]) == {"bounded", "prefix_sum", "sorted"}
    bad = subprocess.run(
        [sys.executable, "-m", "aeval", "synth", "--out", str(tmp_path / "x.txt")],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "use a .parquet, .jsonl or .csv name" in bad.stderr
    assert "Traceback" not in bad.stderr


# --------------------------------------------------------------------------- the demo


def test_bundled_demo_regenerates_byte_for_byte(tmp_path: Path) -> None:
    shipped = demo_dataset_path()
    regenerated = write_demo(tmp_path / "demo-benchmark.jsonl")
    assert regenerated.read_bytes() == shipped.read_bytes()
    demo = load_dataset(shipped)
    assert demo.height == DEMO_ROWS
    assert set(demo["tier"]) == {"small", "medium", "large"}
    assert set(demo["family"]) == {f.name for f in FAMILIES}


# --------------------------------------------------------------------------- with the verifier


def _respond(answer: str) -> str:
    return f"<think>the pattern continues</think><answer>{answer}</answer>"


def _atoms(problem: Problem, n: int) -> list[str]:
    return problem.family.build(n, problem.params)


def _negate_last_atom(atoms: list[str]) -> str:
    """Replace the last conjunct A by (not A): the truth is sat, so this is never equivalent."""
    return render_constraint([*atoms[:-1], f"(not {atoms[-1].strip()})"])


def _shuffle_conjuncts(atoms: list[str], rng: random.Random) -> str:
    shuffled = list(atoms)
    rng.shuffle(shuffled)
    return render_constraint(shuffled)


def test_mutation_helpers_do_what_they_say() -> None:
    atoms = _atoms(problems(["sorted:0"])[0], 4)
    assert render_constraint(atoms) == (
        "(assert (and (and  ( <=  in0 in1)  ( <=  in1 in2))  ( <=  in2 in3)))"
    )
    assert _negate_last_atom(atoms) == (
        "(assert (and (and  ( <=  in0 in1)  ( <=  in1 in2)) (not ( <=  in2 in3))))"
    )
    shuffled = _shuffle_conjuncts(atoms, random.Random(1))
    assert shuffled != render_constraint(atoms) and sorted(shuffled) == sorted(
        render_constraint(atoms)
    )


def _cases(rows: pl.DataFrame) -> list[tuple[str, str, str, Status | None]]:
    """(response answer, truth, constants, expected) for each distinct truth in ``rows``."""
    rng = random.Random(0)
    by_name = {p.name: p for p in problems()}
    cases: list[tuple[str, str, str, Status | None]] = []
    for name, n, truth, constants in (
        rows.select("problem", "n", "answer", "constants").unique(maintain_order=True).iter_rows()
    ):
        problem = by_name[name]
        atoms = _atoms(problem, n)
        assert render_constraint(atoms) == truth
        cases.append((truth, truth, constants, Status.EQUIVALENT))
        cases.append((_shuffle_conjuncts(atoms, rng), truth, constants, Status.EQUIVALENT))
        cases.append((_negate_last_atom(atoms), truth, constants, Status.NOT_EQUIVALENT))
        smaller = constraint(problem, n - 1).assertion if n > problem.family.n_min else None
        if smaller is not None and smaller != truth:
            # Another row's truth (same problem, one size down): wrong, whatever the verdict.
            cases.append((smaller, truth, constants, None))
    return cases


def _expect(result_status: Status, expected: Status | None, case: tuple[str, ...]) -> None:
    if expected is None:
        assert result_status != Status.EQUIVALENT, case
    else:
        assert result_status == expected, (result_status, case[:1])


@pytest.mark.anyio
async def test_demo_truths_verify_with_the_verifier_pool() -> None:
    demo = load_dataset(demo_dataset_path())
    cases = _cases(demo)
    async with VerifierPool(workers=2) as pool:
        for answer, truth, constants, expected in cases:
            result = await pool.check(_respond(answer), truth, constants)
            _expect(result.status, expected, (answer, truth))


def test_sample_truths_verify_in_process(sample: pl.DataFrame) -> None:
    for answer, truth, constants, expected in _cases(sample.head(30)):
        _expect(check_response(_respond(answer), truth, constants).status, expected, (answer,))


@pytest.mark.slow
@pytest.mark.anyio
async def test_every_synthetic_truth_verifies_with_the_verifier_pool() -> None:
    rows = pl.DataFrame(
        [
            {
                "problem": p.name,
                "n": n,
                "answer": constraint(p, n).assertion,
                "constants": constraint(p, n).constants,
            }
            for p in problems()
            for n in range(p.family.n_min, MAX_N + 1)
        ]
    )
    async with VerifierPool(workers=2) as pool:
        for answer, truth, constants, expected in _cases(rows):
            result = await pool.check(_respond(answer), truth, constants)
            _expect(result.status, expected, (answer, truth))
