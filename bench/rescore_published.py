"""Benchmark: ``aeval rescore`` with the published reading, whole process, beside the seed's way.

    .venv/bin/python bench/rescore_published.py [--rounds 3] [--workers 2]

Two sets of answers to the 671 WARP rows, each in one output file:

* **correct**: 671 correct answers (``<think>…</think><answer>truth</answer>``);
* **held-out-like**: 3 × 671 real-looking outputs (``tests/answer_corpus.py``:
  mostly well-formed, many malformed: several asserts on lines, surplus or
  missing parentheses, fences, prose, cut-off answers; some wrong).

Each round times, each in a fresh process, on the same files:

1. seed       the seed workflow: one ``z3 -in`` per answer over the study's script,
              one after another (the study's own evaluator, as its notebook ran it);
2. default    ``python -m aeval rescore`` (the published reading on: in the verifier
              where provable, the binary for the rest);
3. binary     ``python -m aeval rescore --published-binary`` (the audit switch: the
              binary for every answer);
4. off        ``python -m aeval rescore --no-published``.

Targets (issue 23): correct answers, seed / default ≥ 8; held-out-like, the published
reading's cost (default − off) ≤ half the binary's (binary − off).
The verdicts of default and binary are compared item for item (they must agree).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from answer_corpus import heldout_like  # noqa: E402

DEFAULT_DATASET = ROOT / "tests" / "data" / "warp-benchmark.parquet"

# The seed workflow in a fresh interpreter: read the lines, one z3 -in per answer.
_SEED = """
import json, subprocess, sys, time
import polars as pl
from aeval.verify.published import (
    extract_published, published_script, read_published_output, z3_binary,
)
dataset, path = sys.argv[1:]
rows = pl.read_parquet(dataset).select("answer", "constants").rows()
binary = str(z3_binary())
correct = 0
start = time.perf_counter()
for line in open(path):
    item = json.loads(line)
    truth, constants = rows[int(item["custom_id"])]
    content = item["response"]["body"]["choices"][0]["message"]["content"]
    answer = extract_published(content)
    if answer is None:
        continue
    script = published_script(constants, truth, answer)
    out = subprocess.run([binary, "-in"], input=script, capture_output=True, text=True)
    correct += read_published_output(out.stdout).correct
print(json.dumps({"s": time.perf_counter() - start, "correct": correct}))
"""


def output_line(custom_id: int, content: str, trial: int) -> str:
    body = {
        "model": f"bench-model-t{trial}",
        "choices": [{"index": 0, "message": {"content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 50},
    }
    return json.dumps({"custom_id": str(custom_id), "response": {"status_code": 200, "body": body}})


def write_sets(dataset: Path, out: Path) -> dict[str, list[Path]]:
    rows = pl.read_parquet(dataset).select("answer", "constants").rows()
    correct = out / "correct.jsonl"
    correct.write_text(
        "".join(
            output_line(i, f"<think>…</think>\n<answer>\n{truth}\n</answer>", 1) + "\n"
            for i, (truth, _) in enumerate(rows)
        )
    )
    held = []
    for trial in range(3):
        responses = heldout_like(rows, seed=trial)
        lines = [output_line(i, text, trial) for i, text in enumerate(responses)]
        path = out / f"heldout-{trial + 1}.jsonl"
        path.write_text("\n".join(lines) + "\n")
        held.append(path)
    return {"correct": [correct], "held-out-like": held}


def children_cpu() -> float:
    """CPU seconds of every finished child process and its own children (z3 processes
    and verifier workers included): steadier than wall time on a shared machine."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def time_seed(dataset: Path, files: list[Path]) -> float:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    total = 0.0
    for path in files:
        proc = subprocess.run(
            [sys.executable, "-c", _SEED, str(dataset), str(path)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        total += json.loads(proc.stdout.strip().splitlines()[-1])["s"]
    return total


def time_rescore(dataset: Path, files: list[Path], workers: int, flags: list[str], out: Path):
    argv = [sys.executable, "-m", "aeval", "rescore", "--dataset", str(dataset), "--out", str(out)]
    argv += ["--workers", str(workers), "--quiet", *flags, *map(str, files)]
    start = time.perf_counter()
    subprocess.run(argv, capture_output=True, check=True, cwd=ROOT)
    elapsed = time.perf_counter() - start
    frame = pl.read_parquet(out / "verdicts.parquet")
    return elapsed, frame


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    print(f"load: {os.getloadavg()[0]:.2f}, {args.workers} workers, {args.rounds} rounds")
    with tempfile.TemporaryDirectory() as tmp:
        sets = write_sets(args.dataset, Path(tmp))
        for name, files in sets.items():
            times: dict[str, list[float]] = {w: [] for w in ("seed", "default", "binary", "off")}
            cpu: dict[str, list[float]] = {w: [] for w in times}
            for r in range(args.rounds):
                before = children_cpu()
                times["seed"].append(time_seed(args.dataset, files))
                cpu["seed"].append(children_cpu() - before)
                frames = {}
                for way, flags in (
                    ("default", []),
                    ("binary", ["--published-binary"]),
                    ("off", ["--no-published"]),
                ):
                    before = children_cpu()
                    # A fresh --out each round: the verdict cache a rescore leaves in its
                    # --out would answer every line of the next round.
                    s, frames[way] = time_rescore(
                        args.dataset, files, args.workers, flags, Path(tmp) / f"{name}-{way}-{r}"
                    )
                    times[way].append(s)
                    cpu[way].append(children_cpu() - before)
                cols = ["model", "trial", "custom_id", "correct_published", "published_reason"]
                a = frames["default"].select(cols).sort(cols[:3])
                b = frames["binary"].select(cols).sort(cols[:3])
                assert a.equals(b), "the in-process reading disagrees with the binary"
                print(
                    f"{name} round {r + 1}: "
                    + ", ".join(f"{w} {t[-1]:.2f} s" for w, t in times.items())
                )
            med = {w: statistics.median(t) for w, t in times.items()}
            lines = sum(len(p.read_text().splitlines()) for p in files)
            print(f"\n{name} ({lines} answers): median s")
            print("| seed (z3 -in each) | default | --published-binary | --no-published |")
            print("|---|---|---|---|")
            print("| " + " | ".join(f"{med[w]:.2f}" for w in times) + " |")
            med_cpu = {w: statistics.median(t) for w, t in cpu.items()}
            print("CPU s (every process of each way): " + ", ".join(
                f"{w} {t:.2f}" for w, t in med_cpu.items()))  # fmt: skip
            print(f"seed / default: {med['seed'] / med['default']:.1f}×  (target ≥ 8×)")
            print(f"  in CPU time: {med_cpu['seed'] / med_cpu['default']:.1f}×")
            cost = med["default"] - med["off"]
            binary_cost = med["binary"] - med["off"]
            print(
                f"published reading's cost: default {cost:.2f} s, binary {binary_cost:.2f} s, "
                f"ratio {cost / binary_cost:.2f} (target ≤ 0.5)\n"
            )


if __name__ == "__main__":
    main()
