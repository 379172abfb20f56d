"""Benchmark: what the published reading costs a user's ``aeval rescore`` (issue 48).

    .venv/bin/python bench/published_cost.py [--outputs DIR] [--rounds 3] [--workers 2]
        [--baseline CHECKOUT] [--ways off,default,binary]

Side by side in one run, each round, each in a fresh process exactly as a user
runs it (``python -m aeval rescore … --no-cache --quiet`` into a new ``--out``):

1. off      ``--no-published`` (the verdict alone);
2. default  the published reading on (in-process where provable, unclosed answers
            without Z3, one ``z3 -in`` per worker kept across answers, a fresh
            ``z3`` for the rest);
3. binary   ``--published-binary`` (the audit: one fresh ``z3`` per answer).

With ``--baseline CHECKOUT`` (e.g. ``git archive <commit> | tar -x -C /tmp/base``),
the default of that checkout runs in the same rounds (``PYTHONPATH`` set to it):
the before and after of one change on the same load.

Timed: wall clock, and user and system CPU of the command and every process it
started (verifier workers, their z3 processes), from ``RUSAGE_CHILDREN``. On Linux
this bench is the child subreaper of what it runs: the pool SIGKILLs its workers
at the end, the ``z3 -in`` a worker kept dies with it (``PR_SET_PDEATHSIG``) and,
orphaned, is reparented here and reaped, so its CPU is counted too (a process
nobody waits for never reaches any ``RUSAGE_CHILDREN``).
Printed: per way the median over rounds, the ratios to ``--no-published``
(target: default ≤ 1.5× in wall time), and whether the default's published
readings and reasons equal the audit's on every answer (they must).

The corpus: ``--outputs DIR``, every ``*.jsonl`` in it (the WARP study's released
outputs: ``results/trial{1,2,3}/*-batch.jsonl*`` of dannkoh/WARP-evaluation, 5
models × 3 trials × 671 answers, are the realistic set; see bench/README.md);
without it, 3 × 671 held-out-like answers (``tests/answer_corpus.py``) plus the
shapes real answers take that fall back (``fallback_shapes``), one per row.
"""

from __future__ import annotations

import ctypes
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from answer_corpus import fallback_shapes, heldout_like  # noqa: E402

DEFAULT_DATASET = ROOT / "tests" / "data" / "warp-benchmark.parquet"
TARGET = 1.5
WAYS = {"off": ["--no-published"], "default": [], "binary": ["--published-binary"]}
KEY = ["model", "trial", "custom_id"]
_PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h


def output_line(custom_id: int, content: str, model: str) -> str:
    body = {
        "model": model,
        "choices": [{"index": 0, "message": {"content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 50},
    }
    return json.dumps({"custom_id": str(custom_id), "response": {"status_code": 200, "body": body}})


def synthetic(dataset: Path, out: Path) -> list[Path]:
    """3 trials of held-out-like answers, a fourth of shapes that fall back."""
    rows = pl.read_parquet(dataset).select("answer", "constants").rows()
    files = []
    for trial in range(3):
        responses = heldout_like(rows, seed=trial)
        path = out / f"bench-t{trial + 1}.jsonl"
        path.write_text("".join(output_line(i, r, "bench") + "\n" for i, r in enumerate(responses)))
        files.append(path)
    rng = random.Random(48)
    shapes = [rng.choice(fallback_shapes(t, c))[1] for t, c in rows]
    path = out / "bench-t4.jsonl"
    path.write_text("".join(output_line(i, r, "bench") + "\n" for i, r in enumerate(shapes)))
    return [*files, path]


def adopt_orphans() -> None:
    """Become the child subreaper of every process started from here (Linux)."""
    if sys.platform == "linux":
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def reap_orphans() -> None:
    """Wait for every process reparented here (killed z3 processes): their CPU then
    counts in RUSAGE_CHILDREN. Each was SIGKILLed with its worker, so none lingers."""
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def run(
    argv_tail: list[str], out: Path, pythonpath: Path
) -> tuple[float, float, float, pl.DataFrame]:
    """(wall s, user s, system s, verdicts) of one rescore in a fresh process."""
    argv = [sys.executable, "-m", "aeval", "rescore", "--out", str(out), *argv_tail]
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, capture_output=True, check=True, env=env, cwd=pythonpath)
    wall = time.perf_counter() - start
    reap_orphans()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    frame = pl.read_parquet(out / "verdicts.parquet")
    return wall, after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime, frame


def main() -> None:
    parser = options_parser(__doc__, rounds=3, workers=2, dataset=Path)
    parser.add_argument("--outputs", type=Path, default=None)
    parser.add_argument("--baseline", type=Path, default=None)
    # e.g. "off,default" on a loaded machine: the audit takes 2-5 times as long.
    parser.add_argument("--ways", default=",".join(WAYS), help="which of off,default,binary")
    args = parser.parse_args()
    dataset = (args.dataset or DEFAULT_DATASET).resolve()
    chosen = args.ways.split(",")
    if "off" not in chosen or not set(chosen) <= set(WAYS):
        parser.error(f"--ways: a comma-separated choice of {', '.join(WAYS)}, with off")
    ways = {w: WAYS[w] for w in chosen}
    adopt_orphans()
    if args.baseline is not None:
        ways["before"] = []
    with tempfile.TemporaryDirectory(prefix="aeval-bench-") as tmp:
        files = (
            sorted(args.outputs.resolve().glob("*.jsonl"))
            if args.outputs is not None
            else synthetic(dataset, Path(tmp))
        )
        answers = sum(len(p.read_text().splitlines()) for p in files)
        print(
            f"{answers} answers in {len(files)} files, {args.workers} workers, "
            f"{args.rounds} rounds; load at start {os.getloadavg()[0]:.1f}"
        )
        tail = ["--dataset", str(dataset), "--workers", str(args.workers), "--no-cache"]
        tail += ["--quiet", *map(str, files)]
        figures: dict[str, list[tuple[float, float, float]]] = {w: [] for w in ways}
        for r in range(args.rounds):
            frames = {}
            # A different order each round: a way never always runs first or last.
            order = list(ways)
            order = order[r % len(order) :] + order[: r % len(order)]
            for way in order:
                root = args.baseline.resolve() if way == "before" else ROOT
                wall, user, system, frames[way] = run(
                    [*tail, *ways[way]], Path(tmp) / f"{way}-{r}", root
                )
                figures[way].append((wall, user, system))
            line = f"round {r + 1} (load {os.getloadavg()[0]:.1f}): " + ", ".join(
                f"{w} {figures[w][-1][0]:.1f} s" for w in ways
            )
            if "default" in frames and "binary" in frames:
                cols = [*KEY, "correct_published", "published_reason"]
                default = frames["default"].select(cols).sort(KEY)
                binary = frames["binary"].select(cols).sort(KEY)
                differ = default.join(binary, on=KEY, suffix="_audit").filter(
                    (pl.col("correct_published") != pl.col("correct_published_audit"))
                    | (pl.col("published_reason") != pl.col("published_reason_audit"))
                )
                line += f"; default ≠ audit: {differ.height} of {default.height}"
            print(line)
            if "default" in frames and "binary" in frames and differ.height:
                print(differ.head(5))
        med = {
            w: tuple(statistics.median(f[i] for f in figures[w]) for i in range(3)) for w in ways
        }
        off = med["off"]
        print("\n| way | wall s | user s | system s | wall / off | CPU / off |")
        print("|---|---|---|---|---|---|")
        for w, (wall, user, system) in med.items():
            print(
                f"| {w} | {wall:.1f} | {user:.1f} | {system:.1f} | {wall / off[0]:.2f} | "
                f"{(user + system) / (off[1] + off[2]):.2f} |"
            )
        if "default" in med:
            print(f"\ndefault / off, wall: {med['default'][0] / off[0]:.2f} (target ≤ {TARGET})")


if __name__ == "__main__":
    main()
