"""Benchmark: ``rescore`` of 3 × 671 lines, today's code against this one, side by side.

    .venv/bin/python bench/rescore.py --baseline /tmp/base [--rounds 3] [--workers 2]

``--baseline`` is a checkout of the code to compare with (e.g. ``git worktree add
/tmp/base <commit>``). Three trial files of the 671 WARP rows are written once
(a realistic mix: a quarter verbatim copies, a quarter rewrites that Z3 must
decide, a quarter fenced, a quarter wrong), then each round scores them three
ways, each in a fresh process (``rescore_files``, pool start-up included):

1. baseline    the ``--baseline`` checkout;
2. off         this checkout, published reading off (``published=False``);
3. on          this checkout, published reading on (the default: one z3 process per answer).

Medians over rounds, and the ratio of each to the baseline within each round
(then its median), because the machine is shared and absolute times drift.
The issue's target: ``off`` no more than 10 % slower than ``baseline``.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import polars as pl
from options import options_parser

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from answer_corpus import truth_conjuncts  # noqa: E402

DEFAULT_DATASET = ROOT / "tests" / "data" / "warp-benchmark.parquet"
TARGET_OFF = 1.10

# Runs in a fresh interpreter with PYTHONPATH set to the checkout under test.
_CHILD = """
import json, sys, time, anyio, inspect
from aeval.dataset import load_dataset
from aeval.rescoring.rescore import rescore_files
dataset_path, workers, published, *files = sys.argv[1:]
frame = load_dataset(dataset_path)
kwargs = {"workers": int(workers)}
if "published" in inspect.signature(rescore_files).parameters:
    kwargs["published"] = published == "1"
start = time.perf_counter()
result = anyio.run(lambda: rescore_files(files, frame, **kwargs))
elapsed = time.perf_counter() - start
assert len(result.verdicts) == 3 * frame.height, len(result.verdicts)
print(json.dumps({"s": elapsed, "equivalent": sum(v.correct for v in result.verdicts)}))
"""


def rewrite(truth: str, constants: str) -> str:
    """The truth as one assert per conjunct, in reverse order: equivalent, not identical."""
    parts = truth_conjuncts(truth, constants)
    return " ".join(f"(assert {p.sexpr()})" for p in reversed(parts)).replace("\n", " ")


def output_line(custom_id: int, content: str) -> str:
    body = {
        "model": "bench-model",
        "choices": [{"index": 0, "message": {"content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 50},
    }
    return json.dumps({"custom_id": str(custom_id), "response": {"status_code": 200, "body": body}})


def write_trials(dataset: Path, out: Path) -> list[Path]:
    rows = pl.read_parquet(dataset).select("answer", "constants").rows()
    files = []
    for trial in range(3):
        lines = []
        for i, (truth, constants) in enumerate(rows):
            kind = (i + trial) % 4
            if kind == 0:
                answer = truth
            elif kind == 1:
                answer = rewrite(truth, constants)
            elif kind == 2:
                answer = f"```smt2\n{truth}\n```"
            else:
                answer = "(assert false)"
            lines.append(output_line(i, f"<think>…</think><answer>{answer}</answer>"))
        path = out / f"trial{trial + 1}.jsonl"
        path.write_text("\n".join(lines) + "\n")
        files.append(path)
    return files


def timed(code_root: Path, dataset: Path, files: list[Path], workers: int, published: bool):
    env = {**os.environ, "PYTHONPATH": str(code_root)}
    argv = [sys.executable, "-c", _CHILD, str(dataset), str(workers), "1" if published else "0"]
    proc = subprocess.run(
        [*argv, *map(str, files)], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = options_parser(__doc__, dataset=DEFAULT_DATASET, rounds=3, workers=2)
    parser.add_argument("--baseline", type=Path, required=True, help="checkout to compare with")
    args = parser.parse_args()
    ways = {"baseline": (args.baseline, False), "off": (ROOT, False), "on": (ROOT, True)}
    times: dict[str, list[float]] = {w: [] for w in ways}
    with tempfile.TemporaryDirectory() as tmp:
        files = write_trials(args.dataset, Path(tmp))
        print(f"3 × {args.dataset.name} lines, {args.workers} workers, {args.rounds} rounds")
        for r in range(args.rounds):
            got = {
                w: timed(root, args.dataset, files, args.workers, p)
                for w, (root, p) in ways.items()
            }
            assert len({g["equivalent"] for g in got.values()}) == 1, got  # same verdicts
            for w, g in got.items():
                times[w].append(g["s"])
            print(f"round {r + 1}: " + ", ".join(f"{w} {g['s']:.2f} s" for w, g in got.items()))
    base = times["baseline"]
    print("\n| way | median s | median ratio to baseline (per round) |\n|---|---|---|")
    for w in ways:
        ratios = [t / b for t, b in zip(times[w], base, strict=True)]
        print(f"| {w} | {statistics.median(times[w]):.2f} | {statistics.median(ratios):.3f} |")
    off = statistics.median(t / b for t, b in zip(times["off"], base, strict=True))
    verdict = "met" if off <= TARGET_OFF else "NOT met"
    print(f"\npublished off vs baseline: {off:.3f}× (target ≤ {TARGET_OFF:.2f}×: {verdict})")


if __name__ == "__main__":
    main()
