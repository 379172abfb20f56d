"""Start-up cost: ``python -m aeval --help`` and a verifier worker, this tree against another.

Each measure is a fresh process, the two trees interleaved round by round so
that machine load hits both alike; medians are reported with their ratio.

- ``--help``: ``python -m aeval --help`` to its exit;
- worker: what a verification worker imports before its first check
  (``aeval.verify.worker``, then the modules and Z3 it loads on its first frame).

    git archive <commit> aeval | tar -x -C /tmp/base
    .venv/bin/python bench/startup.py --baseline /tmp/base --rounds 15
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

WORKER = (
    "import aeval.verify.worker; import z3; "
    "import aeval.verdicts, aeval.verify.equivalence, aeval.verify.published"
)
MEASURES = {
    "--help": ["-m", "aeval", "--help"],
    "worker": ["-c", WORKER],
}


def _time(tree: Path, args: list[str]) -> float:
    env = dict(os.environ, PYTHONPATH=str(tree))
    start = time.perf_counter()
    subprocess.run([sys.executable, *args], env=env, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, required=True, help="a tree holding aeval/")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    trees = {"this tree": ROOT, "baseline": args.baseline.resolve()}
    times: dict[tuple[str, str], list[float]] = {}
    for name, argv in MEASURES.items():
        for tree in trees.values():
            _time(tree, argv)  # warm the file cache
        for _ in range(args.rounds):
            for label, tree in trees.items():
                times.setdefault((name, label), []).append(_time(tree, argv))
    print(f"{'measure':8} {'this tree s':>12} {'baseline s':>11} {'ratio':>6}")
    for name in MEASURES:
        here = statistics.median(times[name, "this tree"])
        base = statistics.median(times[name, "baseline"])
        print(f"{name:8} {here:12.3f} {base:11.3f} {here / base:6.2f}")


if __name__ == "__main__":
    main()
