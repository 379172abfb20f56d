"""Benchmark: ``aeval leaderboard`` over a study of 30 runs (Issue 38, item 6).

    .venv/bin/python bench/leaderboard.py [--runs 30] [--models 3] [--trials 3] [--rounds 3]

Writes ``--runs`` finished run directories (``verdicts.parquet`` through the store's
writer, ``config.json`` with the provenance a run records), each of ``--models``
models × ``--trials`` trials over every row of the WARP benchmark (671 rows: 30 × 3
× 3 × 671 = 181,170 verdicts), statuses drawn at random (nothing is verified: the
leaderboard never verifies), answer classes and token counts as a run has them,
and reasoning tokens in a third of the runs (the column newer runs have). The
models are different in every run (90 rows, 4,005 pairs compared) unless
``--same-models`` (the same 3 in every run: 3 rows of 30 runs' pooled trials).

Then times ``python -m aeval leaderboard ROOT -f FORMAT -o FILE`` end to end as a
subprocess (start-up included, as a user waits for it) for json and html (html
draws the four figures), and reads its peak resident memory (``ru_maxrss`` of
the command, through a small parent that runs nothing else). Medians over
rounds. The issue's target: under 10 s and under 1 GB.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import polars as pl
from options import options_parser

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATASET = ROOT / "tests" / "data" / "warp-benchmark.parquet"
TARGET_S, TARGET_MB = 10.0, 1024

# Runs the command and prints its peak RSS (kB on Linux): the only child this parent waits for.
_MEASURE = """
import resource, subprocess, sys
proc = subprocess.run(sys.argv[1:], capture_output=True, text=True)
if proc.returncode:
    sys.exit(proc.stderr)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def write_study(dataset: Path, root: Path, runs: int, models: int, trials: int, same: bool) -> int:
    """The run directories; returns the number of verdicts written."""
    from aeval.dataset import TruthTable, load_dataset_fingerprinted
    from aeval.store.atomic_files import atomic_write_text
    from aeval.store.layout import RunLayout
    from aeval.store.provenance import versions
    from aeval.store.results import write_results
    from aeval.verdicts import Status, verdict_schema
    from aeval.verify.limits import DEFAULT_LIMITS

    frame, fingerprint = load_dataset_fingerprinted(str(dataset))
    truth = TruthTable(frame)
    ids = truth.ids()
    facts = [truth[i] for i in ids]
    items = pl.DataFrame(
        {
            "custom_id": ids,
            "tier": [f.tier for f in facts],
            "program": [f.program for f in facts],
            "distance": [f.distance for f in facts],
            "answer_chars": [f.answer_chars for f in facts],
        }
    )
    difficulty = np.random.default_rng(1).random(len(ids))  # some items are hard for everyone
    schema = verdict_schema()
    total = 0
    rng = np.random.default_rng(38)
    for r in range(runs):
        run_dir = root / f"run-{r:02d}"
        run_dir.mkdir(parents=True)
        parts = []
        for m in range(models):
            skill = 0.25 + 0.5 * rng.random()
            name = f"model-{m}" if same else f"model-{r:02d}-{m}"
            for t in range(1, trials + 1):
                ok = rng.random(len(ids)) < np.clip(skill + 0.4 * (0.5 - difficulty), 0, 1)
                wrong = rng.choice(
                    [Status.NOT_EQUIVALENT.value, Status.PARSE_ERROR.value], size=len(ids)
                )
                status = np.where(ok, Status.EQUIVALENT.value, wrong)
                infra = rng.random(len(ids)) < 0.005
                status = np.where(infra, Status.API_ERROR.value, status)
                parts.append(
                    items.with_columns(
                        pl.lit(name).alias("model"),
                        pl.lit(t, dtype=pl.Int64).alias("trial"),
                        pl.Series("status", status),
                        pl.Series("correct_published", ok & ~infra),
                        pl.Series("answer_class", np.where(ok, 0, np.where(infra, -1, 1))),
                        pl.Series("prompt_tokens", rng.integers(600, 1200, len(ids))),
                        pl.Series("completion_tokens", rng.integers(100, 3000, len(ids))),
                    )
                )
        run = pl.concat(parts, how="diagonal")
        columns = [
            pl.col(c).cast(dtype) if c in run.columns else pl.lit(None, dtype=dtype).alias(c)
            for c, dtype in schema.items()
        ]
        run = run.select(columns)
        if r % 3 == 0:
            run = run.with_columns(
                (pl.col("completion_tokens") // 2).cast(pl.Int64).alias("reasoning_tokens")
            )
        write_results(run_dir, run, None)
        config = {
            "api": "batch",
            "run_id": run_dir.name,
            "limits": asdict(DEFAULT_LIMITS),
            "published_binary": False,
            "provenance": {
                "synthetic": True,
                "offline": True,
                "responder": "bench/leaderboard.py",
                "dataset": fingerprint.to_dict(),
                "instruction_sha256": "0" * 64,
                "system_sha256": None,
                "protocol": "default",
                "generation": {"temperature": None},
                "versions": versions(),
            },
        }
        atomic_write_text(RunLayout(run_dir).config, json.dumps(config))
        total += run.height
    return total


def measure(root: Path, fmt: str, out: Path) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of one ``leaderboard`` command."""
    argv = [sys.executable, "-m", "aeval", "leaderboard", str(root), "-f", fmt, "-o", str(out)]
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", _MEASURE, *argv], capture_output=True, text=True, cwd=ROOT
    )
    elapsed = time.perf_counter() - start
    if proc.returncode:
        raise SystemExit(proc.stderr)
    return elapsed, int(proc.stdout.strip().splitlines()[-1]) / 1024


def main() -> None:
    parser = options_parser(__doc__, dataset=DEFAULT_DATASET, runs=30, models=3, trials=3, rounds=3)
    parser.add_argument("--same-models", action="store_true", help="the same models in every run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "study"
        start = time.perf_counter()
        n = write_study(args.dataset, root, args.runs, args.models, args.trials, args.same_models)
        print(
            f"{args.runs} runs × {args.models} models × {args.trials} trials = {n:,} verdicts "
            f"({'the same' if args.same_models else 'different'} models per run), written in "
            f"{time.perf_counter() - start:.1f} s"
        )
        results: dict[str, list[tuple[float, float]]] = {"json": [], "html": []}
        for r in range(args.rounds):
            for fmt in results:
                results[fmt].append(measure(root, fmt, Path(tmp) / f"board.{fmt}"))
            print(
                f"round {r + 1}: "
                + "; ".join(f"{f} {v[-1][0]:.2f} s, {v[-1][1]:.0f} MB" for f, v in results.items())
            )
        board = json.loads((Path(tmp) / "board.json").read_text())
        print(f"{len(board['rows'])} rows, {len(board['pairs'])} pairs, {board['items']} items")
    print("\n| format | median wall s | median peak RSS MB | target |")
    print("|---|---|---|---|")
    for fmt, values in results.items():
        wall = statistics.median(v[0] for v in values)
        rss = statistics.median(v[1] for v in values)
        met = "met" if wall < TARGET_S and rss < TARGET_MB else "NOT met"
        print(f"| {fmt} | {wall:.2f} | {rss:.0f} | < {TARGET_S:.0f} s, < {TARGET_MB} MB: {met} |")


if __name__ == "__main__":
    main()
