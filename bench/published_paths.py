"""Where the published reading's time goes: each answer's path and CPU, in one process.

    .venv/bin/python bench/published_paths.py --outputs DIR [--dataset PATH] [--no-reuse]

Each answer of every ``*.jsonl`` in ``--outputs`` (the WARP study's released outputs:
see bench/README.md, issue 48) is checked, then read as a verifier worker reads it
by default in a ``"both"`` request (:mod:`aeval.verify.worker`): the reading without
the binary, reusing the check's solver results (``--no-reuse``: without them), and
for the answers it declines the published request (the kept ``z3 -in``, else a
fresh ``z3``). Printed per path (no answer, refused; in-process; unclosed, no Z3;
kept z3; fresh z3) and per model: answers and CPU seconds (this process's, plus
the z3 processes', from ``/proc`` and ``RUSAGE_CHILDREN``), beside the check's own.
One process, no pool: the work itself, without the pool's transport.
"""

from __future__ import annotations

import collections
import json
import os
import resource
import sys
import time
from pathlib import Path

import polars as pl
import z3
from options import options_parser

from aeval.study_reasons import UNPARSED
from aeval.verify.equivalence import Verifier
from aeval.verify.limits import DEFAULT_LIMITS
from aeval.verify.published import (
    REFUSED,
    check_published,
    extract_published,
    published_script,
    published_without_binary,
    z3_binary,
)
from aeval.verify.published_inprocess import PublishedInProcess
from aeval.verify.published_session import Z3Session, z3_memory_mb

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATASET = ROOT / "tests" / "data" / "warp-benchmark.parquet"


def main() -> None:
    parser = options_parser(__doc__, dataset=Path)
    parser.add_argument("--outputs", type=Path, required=True)
    parser.add_argument("--no-reuse", action="store_true")
    args = parser.parse_args()
    limits = DEFAULT_LIMITS
    z3.set_param("memory_max_size", z3_memory_mb(limits.memory_mb))
    frame = pl.read_parquet(args.dataset or DEFAULT_DATASET)
    ids = frame["id"].cast(pl.String) if "id" in frame.columns else range(frame.height)
    rows = dict(zip(map(str, ids), frame.select("answer", "constants").rows(), strict=True))
    verifier = Verifier(limits)
    reader = PublishedInProcess(verifier, limits.timeout_s)
    session = Z3Session(z3_binary, limits.timeout_s, limits.memory_mb)
    tick = os.sysconf("SC_CLK_TCK")

    def cpu() -> float:
        """CPU seconds of this process, its kept z3 and every z3 it waited for."""
        kept = 0.0
        process = session._process
        if process is not None and process.poll() is None:
            fields = Path(f"/proc/{process.pid}/stat").read_text().rsplit(")", 1)[1].split()
            kept = (int(fields[11]) + int(fields[12])) / tick
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        return time.process_time() + kept + children.ru_utime + children.ru_stime

    totals: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])
    models: dict[str, dict[str, list[float]]] = collections.defaultdict(
        lambda: collections.defaultdict(lambda: [0, 0.0])
    )
    try:
        for path in sorted(args.outputs.glob("*.jsonl")):
            model = path.name.rsplit("-t", 1)[0]
            for line in path.read_text().splitlines():
                record = json.loads(line)
                content = record["response"]["body"]["choices"][0]["message"]["content"]
                truth, constants = rows[record["custom_id"]]
                start = cpu()
                verifier.check(content, truth, constants)
                checked = cpu()
                directions = None if args.no_reuse else verifier.last_directions
                result = published_without_binary(
                    content,
                    truth,
                    constants,
                    in_process=lambda a, t, c, d=directions: reader.reading(a, t, c, d),
                )
                if result is None:
                    answer = extract_published(content) or ""
                    script = published_script(constants, truth, answer)
                    kept = session.reads(script, truth, constants)
                    left = session.left
                    check_published(
                        content,
                        truth,
                        constants,
                        timeout_s=limits.timeout_s,
                        memory_mb=limits.memory_mb,
                        in_process=reader.reading,
                        session=session,
                        declined=True,
                    )
                    way = "kept z3" if kept and session.left == left else "fresh z3"
                elif result.in_process:
                    way = "unclosed, no Z3" if result.reason == UNPARSED else "in-process"
                else:
                    refused = result.reason.startswith(REFUSED)
                    way = "refused" if refused else "no answer"
                done = cpu()
                for table in (totals, models[model]):
                    table["check"][0] += 1
                    table["check"][1] += checked - start
                    table[way][0] += 1
                    table[way][1] += done - checked
    finally:
        session.close()
    print("| path | answers | CPU s | ms / answer |")
    print("|---|---|---|---|")
    for way, (count, seconds) in sorted(totals.items()):
        print(f"| {way} | {count:.0f} | {seconds:.2f} | {1000 * seconds / count:.2f} |")
    published = sum(s for w, (_, s) in totals.items() if w != "check")
    print(f"\npublished reading / check, CPU: {published / totals['check'][1]:.2f}")
    for model, table in models.items():
        print(model, {w: (int(n), round(s, 2)) for w, (n, s) in sorted(table.items())})


if __name__ == "__main__":
    sys.exit(main())
