"""Opening the sample viewer: page-open time in headless Chromium for runs of
1,000, 20,000 and 100,000 verdicts, side by side, with the time to build each page.

Each run directory is synthetic but shaped like a real one: the WARP benchmark's
671 items (real questions and ground truths, tests/data), three models and as
many trials as the size needs, every response a draft in ``<think>`` plus an
``<answer>`` the length of the item's truth (the truth itself, or the truth with
one operator changed), laid out as ``aeval run`` writes it (manifest, output
files, ``verdicts.parquet``).

"Open" is what the page measures itself: ``performance.now()`` when its first
render is done (the list drawn, filters built), counted from the start of the
navigation, so it covers reading and parsing the whole file and the script's
start. It is read from the document Chromium dumps (``--dump-dom``; the dump
itself, which serialises the whole embedded data, is not timed). As a check
from outside the page, the wall time of ``--screenshot`` (open, lay out, paint,
capture) is printed less that of the same command on an empty page. Repeats
run round-robin over the sizes; medians are printed.

    .venv/bin/python bench/viewer.py                         # 1,000 / 20,000 / 100,000, 3 repeats
    .venv/bin/python bench/viewer.py --sizes 20000 --repeats 5

Target: the page opens in under 2 s for 20,000 verdicts.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

from aeval.report.samples import load_samples
from aeval.report.viewer import viewer_html
from aeval.store import shard_stem
from aeval.verdicts import Status, Verdict, verdicts_frame

ROOT = Path(__file__).resolve().parents[1]
BENCHMARK = ROOT / "tests" / "data" / "warp-benchmark.parquet"

sys.path.insert(0, str(ROOT / "tests"))
from chromium_helpers import CHROMIUM, flags  # noqa: E402

MODELS = ("model-a", "model-b", "model-c")
DRAFT = (
    "The examples grow with the input size; the worst-case path takes every branch "
    "that keeps the loop running, so each comparison of the largest example must "
    "hold for N as well. I extend the pattern and keep the bounds on every input. "
) * 3


def write_run(run_dir: Path, size: int) -> None:
    """A run directory of ``size`` verdicts over the benchmark's items."""
    items = pl.read_parquet(BENCHMARK)
    truths = items.get_column("answer").to_list()
    tiers = items.get_column("tier").to_list()
    per_job = len(truths)
    jobs = [(m, t) for t in range(1, size // (per_job * len(MODELS)) + 2) for m in MODELS]
    (run_dir / "outputs").mkdir(parents=True)
    (run_dir / "requests").mkdir()
    (run_dir / "config.json").write_text(json.dumps({"dataset": str(BENCHMARK)}))
    shards, verdicts, left = {}, [], size
    for model, trial in jobs:
        if left <= 0:
            break
        count = min(left, per_job)
        left -= count
        stem = shard_stem(model, trial, 0)
        shards[f"{model}|t{trial}|s0"] = {
            "model": model,
            "trial": trial,
            "round": 0,
            "input_path": f"requests/{stem}.jsonl",
        }
        with (run_dir / "outputs" / f"{stem}-a0.output.jsonl").open("w") as out:
            for i in range(count):
                right = (i + trial + len(model)) % 3 != 0
                answer = truths[i] if right else truths[i].replace(">=", ">", 1)
                content = f"<think>{DRAFT}</think><answer>{answer}</answer>"
                body = {
                    "model": model,
                    "choices": [{"message": {"content": content}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 900, "completion_tokens": len(content) // 4},
                }
                line = {"custom_id": str(i), "response": {"status_code": 200, "body": body}}
                out.write(json.dumps(line) + "\n")
                verdicts.append(
                    Verdict(
                        model=model,
                        trial=trial,
                        custom_id=str(i),
                        status=Status.EQUIVALENT if right else Status.NOT_EQUIVALENT,
                        reason="" if right else "too weak: the answer admits this input",
                        direction=None if right else "too_weak",
                        counterexample=None if right else {"in0": "3", "in1": "-1"},
                        tier=tiers[i],
                        finish_reason="stop",
                        prompt_tokens=900,
                        completion_tokens=len(content) // 4,
                        correct_published=right,
                    )
                )
    (run_dir / "manifest.json").write_text(json.dumps({"version": 1, "shards": shards}))
    verdicts_frame(verdicts).write_parquet(run_dir / "verdicts.parquet")


def open_page(url: str, profile: Path) -> float:
    """The page's own open time, in seconds."""
    done = subprocess.run(
        [*flags(profile), "--dump-dom", url],
        capture_output=True,
        check=True,
        timeout=600,
    )
    match = re.search(rb'data-ready="(\d+)"', done.stdout[:2000])
    if match is None:
        sys.exit(f"{url}: the page's script did not finish")
    return int(match[1]) / 1000


def screenshot(url: str, profile: Path) -> float:
    """Wall time of the browser command that opens the page and takes a screenshot."""
    start = time.perf_counter()
    subprocess.run(
        [*flags(profile), f"--screenshot={profile / 'shot.png'}", url],
        capture_output=True,
        check=True,
        timeout=600,
    )
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,20000,100000")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if CHROMIUM is None:
        sys.exit("bench/viewer.py needs headless Chromium: apt-get install chromium")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        pages: dict[int, tuple[Path, float, float]] = {}
        for size in sizes:
            run = root / f"run-{size}"
            write_run(run, size)
            start = time.perf_counter()
            page = viewer_html(load_samples(run), title=f"{size} verdicts")
            built = time.perf_counter() - start
            path = root / f"samples-{size}.html"
            path.write_text(page, encoding="utf-8")
            pages[size] = (path, built, path.stat().st_size / 1e6)
        blank = root / "blank.html"
        blank.write_text(
            "<!doctype html><title>x</title><script>"
            "document.documentElement.dataset.ready=Math.round(performance.now())</script>"
        )
        opened: dict[int, list[float]] = {s: [] for s in sizes}
        walls: dict[int, list[float]] = {s: [] for s in sizes}
        baseline: list[float] = []
        profile = root / "profile"
        for _ in range(args.repeats):
            baseline.append(screenshot(blank.as_uri(), profile))
            for size in sizes:
                url = pages[size][0].as_uri()
                opened[size].append(open_page(url, profile))
                walls[size].append(screenshot(url, profile))
    start_up = statistics.median(baseline)
    print(f"browser start + screenshot of an empty page: {start_up:.2f} s (median)")
    print("| verdicts | page | build (python) | open (page's clock) | screenshot − empty page |")
    print("|---:|---:|---:|---:|---:|")
    for size in sizes:
        _, built, mb = pages[size]
        print(
            f"| {size:,} | {mb:.0f} MB | {built:.1f} s | "
            f"{statistics.median(opened[size]):.2f} s (min {min(opened[size]):.2f}) | "
            f"{statistics.median(walls[size]) - start_up:.2f} s |"
        )
    if 20000 in opened:
        verdict = "met" if statistics.median(opened[20000]) < 2 else "NOT met"
        print(f"target (< 2 s to open 20,000 verdicts): {verdict}")


if __name__ == "__main__":
    main()
