"""Benchmark: what working out each line's model and trial adds to a rescore.

    .venv/bin/python bench/rescore_attribution.py [--workers N] [--dataset PATH]

Writes three models' output and error files for the 671-row benchmark (3 × 671
lines) into a temporary directory, then in one run: reads and parses them (best
of 5), attributes models and trials and removes duplicates (best of 5), and
rescores them end to end once (Z3 included). Prints the attribution's share of
the whole rescore; absolute times drift on a shared machine, the ratio is what
to read.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import anyio
import polars as pl

from aeval.rescoring.rescore import Problem, _deduplicate, _read_file, _rows, rescore_files
from aeval.scoring.attribution import assign_models, assign_trials

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATASET = ROOT / "tests" / "data" / "warp-benchmark.parquet"
MODELS = ("model-a", "model-b", "model-c")


def write_files(folder: Path, truths: list[str]) -> list[Path]:
    files = []
    for k, model in enumerate(MODELS):
        answered, expired = [], []
        for i, truth in enumerate(truths):
            if i % 50 == k:  # a few expired requests per model: error-file lines
                error = {"code": "batch_expired", "message": "expired"}
                expired.append(json.dumps({"custom_id": str(i), "response": None, "error": error}))
                continue
            content = (
                f"<answer>{truth}</answer>" if (i + k) % 3 else "<answer>(assert false)</answer>"
            )
            message = {"role": "assistant", "content": content}
            body = {"model": model, "choices": [{"message": message, "finish_reason": "stop"}]}
            response = {"status_code": 200, "body": body}
            answered.append(json.dumps({"custom_id": str(i), "error": None, "response": response}))
        for kind, lines in (("output", answered), ("error", expired)):
            path = folder / f"batch_{k}_{kind}.jsonl"
            path.write_text("\n".join(lines) + "\n")
            files.append(path)
    return files


def best_of(n: int, fn) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    parser.add_argument("--workers", type=int, default=None)
    args = parser.parse_args()
    dataset = pl.read_parquet(args.dataset)
    rows = _rows(dataset)
    with tempfile.TemporaryDirectory() as tmp:
        files = write_files(Path(tmp), dataset.get_column("answer").to_list())
        problems: list[Problem] = []

        def read() -> list:  # type: ignore[type-arg]
            return [_read_file(f, i, rows, problems) for i, f in enumerate(files)]

        parsed = read()

        def attribute() -> None:
            assign_models(parsed)
            assign_trials(parsed)
            _deduplicate(parsed, problems)

        t_read = best_of(5, read)
        t_attr = best_of(5, attribute)
        start = time.perf_counter()
        result = anyio.run(lambda: rescore_files(files, dataset, workers=args.workers))
        t_total = time.perf_counter() - start
    models = sorted({(v.model, v.trial) for v in result.verdicts})
    print(f"lines: {result.lines} in {len(files)} files; (model, trial): {models}")
    print(f"read + parse:          {1000 * t_read:8.1f} ms")
    print(f"attribution + dedup:   {1000 * t_attr:8.2f} ms")
    print(f"whole rescore (Z3):    {t_total:8.2f} s")
    print(f"attribution / rescore: {100 * t_attr / t_total:8.3f} %")


if __name__ == "__main__":
    main()
