"""Benchmark: what the study's lens costs (programs, question facts, the study's
categories, per-group tables, separating items), side by side with a checkout
from before it.

    .venv/bin/python bench/study.py --baseline /tmp/base [--rounds 3] [--workers 2]

``--baseline`` is a checkout of the code to compare with (e.g. ``git worktree
add /tmp/base <commit>``). Each round runs, in fresh processes with
``PYTHONPATH`` set to the checkout under test, alternately:

1. ``rescore``: 3 trial files of the 671 WARP rows (bench/rescore.py's mix: a
   quarter verbatim, a quarter rewritten, a quarter fenced, a quarter wrong)
   scored with the defaults (published reading on) and written out
   (``rescore_files`` then ``write_outputs``: verdicts.parquet, summary.json),
   timed in the process, start-up excluded;
2. ``report``: ``python -m aeval report RUN -f table`` and ``-f html`` on a run
   directory of 21,000 verdicts (7 models × 3 trials × 1,000 items whose ground
   truths are the WARP rows', with the published reading and answer classes),
   timed around the whole command (start-up included, as a user waits for it).

Each is measured twice: wall time, and CPU time (user + system of the process
and every process it started and waited for: the verifier's workers and their
z3 processes), which other helpers' load on the shared machine disturbs far
less than wall time. Medians over rounds, and the median of the per-round
ratio to the baseline. The issue's target: each no more than 10 % slower than
the baseline.
"""

from __future__ import annotations

import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl
from options import options_parser

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rescore import DEFAULT_DATASET, write_trials

ROOT = Path(__file__).resolve().parents[1]
TARGET = 1.10

_RESCORE_CHILD = """
import json, sys, time, anyio
from aeval.dataset import load_dataset
try:
    from aeval.rescoring.rescore import rescore_files, write_outputs
except ImportError:  # a baseline from before the stage folders
    from aeval.rescore import rescore_files, write_outputs
dataset_path, workers, out, *files = sys.argv[1:]
frame = load_dataset(dataset_path)
start = time.perf_counter()
result = anyio.run(lambda: rescore_files(files, frame, workers=int(workers)))
write_outputs(result, out)
elapsed = time.perf_counter() - start
assert len(result.verdicts) == 3 * frame.height, len(result.verdicts)
print(json.dumps({"s": elapsed, "equivalent": sum(v.correct for v in result.verdicts)}))
"""


def write_run(dataset: Path, run_dir: Path) -> int:
    """A finished run's verdicts.parquet: 7 models × 3 trials × 1,000 items."""
    from aeval.dataset import TruthTable, load_dataset
    from aeval.study_reasons import EQUIVALENT, NO_ANSWER, NOT_IMPLIED, UNPARSED
    from aeval.verdicts import Status, Verdict, verdicts_frame

    rng = random.Random(20)
    truth = TruthTable(load_dataset(dataset))
    ids = truth.ids()
    right = (Status.EQUIVALENT, EQUIVALENT, 0)
    wrong = [
        (Status.NOT_EQUIVALENT, NOT_IMPLIED, 1),
        (Status.PARSE_ERROR, UNPARSED, -1),
        (Status.NO_ANSWER, NO_ANSWER, -1),
    ]
    verdicts = []
    for m in range(7):
        for trial in (1, 2, 3):
            for i in range(1000):
                row = truth[ids[i % len(ids)]]
                ok = rng.random() < 0.3 + 0.08 * m
                status, reason, cls = right if ok else rng.choice(wrong)
                v = Verdict(
                    model=f"model-{m}",
                    trial=trial,
                    custom_id=str(i),
                    status=status,
                    tier=row.tier,
                    prompt_tokens=900,
                    completion_tokens=400,
                    correct_published=ok,
                    published_reason=reason,
                )
                verdicts.append(row.stamp(v).to_record() | {"answer_class": cls})
    frame = verdicts_frame(verdicts).with_columns(
        pl.Series("answer_class", [v["answer_class"] for v in verdicts], dtype=pl.Int64)
    )
    run_dir.mkdir(parents=True)
    frame.write_parquet(run_dir / "verdicts.parquet")
    return frame.height


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def rescore_once(
    code: Path, dataset: Path, files: list[Path], workers: int, out: Path
) -> tuple[dict, float]:
    """The child's own report (in-process wall time, verdicts) and the CPU time of
    the whole process tree (start-up included)."""
    env = {**os.environ, "PYTHONPATH": str(code)}
    argv = [sys.executable, "-c", _RESCORE_CHILD, str(dataset), str(workers), str(out)]
    cpu = _children_cpu()
    proc = subprocess.run(
        [*argv, *map(str, files)], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(proc.stdout.strip().splitlines()[-1]), _children_cpu() - cpu


def report_once(code: Path, run_dir: Path, fmt: str, out: Path) -> tuple[float, float]:
    """Wall and CPU time of one ``report`` command."""
    env = {**os.environ, "PYTHONPATH": str(code)}
    argv = [sys.executable, "-m", "aeval", "report", str(run_dir), "-f", fmt, "-o", str(out)]
    cpu = _children_cpu()
    start = time.perf_counter()
    subprocess.run(argv, env=env, capture_output=True, text=True, check=True, cwd=code)
    return time.perf_counter() - start, _children_cpu() - cpu


def main() -> None:
    parser = options_parser(__doc__, dataset=DEFAULT_DATASET, rounds=3, workers=2)
    parser.add_argument("--baseline", type=Path, required=True, help="checkout to compare with")
    parser.add_argument(
        "--skip-rescore", action="store_true", help="time only the reports (rescore takes minutes)"
    )
    args = parser.parse_args()
    codes = {"baseline": args.baseline.resolve(), "this": ROOT}
    tasks: tuple[str, ...] = ("rescore 3×671", "report table 21k", "report html 21k")
    if args.skip_rescore:
        tasks = tasks[1:]
    times: dict[tuple[str, str], list[float]] = {(t, c): [] for t in tasks for c in codes}
    cpus: dict[tuple[str, str], list[float]] = {(t, c): [] for t in tasks for c in codes}
    with tempfile.TemporaryDirectory() as tmp:
        files = write_trials(args.dataset, Path(tmp))
        run_dir = Path(tmp) / "run21k"
        n = write_run(args.dataset, run_dir)
        print(f"rescore: 3 × {args.dataset.name}, {args.workers} workers; report: {n:,} verdicts")
        for r in range(args.rounds):
            line = []
            # alternate who goes first, so neither always meets a warmer page cache
            order = list(codes) if r % 2 == 0 else list(reversed(codes))
            equivalent = set()
            for who in order if not args.skip_rescore else ():
                got, cpu = rescore_once(
                    codes[who], args.dataset, files, args.workers, Path(tmp) / who
                )
                equivalent.add(got["equivalent"])
                times[("rescore 3×671", who)].append(got["s"])
                cpus[("rescore 3×671", who)].append(cpu)
            assert len(equivalent) <= 1, equivalent  # the same verdicts both ways
            for fmt in ("table", "html"):
                for who in order:
                    t, cpu = report_once(
                        codes[who], run_dir, fmt, Path(tmp) / f"report-{who}.{fmt}"
                    )
                    times[(f"report {fmt} 21k", who)].append(t)
                    cpus[(f"report {fmt} 21k", who)].append(cpu)
            for task in tasks:
                line.append(
                    f"{task}: "
                    + ", ".join(
                        f"{who} {times[(task, who)][-1]:.2f} s (cpu {cpus[(task, who)][-1]:.2f})"
                        for who in codes
                    )
                )
            print(f"round {r + 1}: " + "; ".join(line))
    print(
        "\n| task | measure | baseline median s | this median s | median ratio (per round) "
        "| target |"
    )
    print("|---|---|---|---|---|---|")
    for task in tasks:
        for measure, table in (("wall", times), ("cpu", cpus)):
            base, this = table[(task, "baseline")], table[(task, "this")]
            ratio = statistics.median(t / b for t, b in zip(this, base, strict=True))
            verdict = "met" if ratio <= TARGET else "NOT met"
            print(
                f"| {task} | {measure} | {statistics.median(base):.2f} | "
                f"{statistics.median(this):.2f} | {ratio:.3f} | ≤ {TARGET:.2f}: {verdict} |"
            )


if __name__ == "__main__":
    main()
