"""How close the live view's ETA is to the truth on the offline demo (Issue 12 §4).

Runs the offline demo (local batch server, demo timing, synthetic models) with
the live view's state folding the run's events, samples the ETA it would show
every 0.25 s, and once the run has ended compares each sample with the time
that was actually left. Prints, for the samples taken after 10 %, 25 % and
50 % of the work (API answers plus verdicts, out of twice the requests), the
worst and the median ratio of shown to true time left.

    .venv/bin/python bench/display_eta.py [--limit N] [--trials T] [--repeat R]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import tempfile
import threading
import time
from pathlib import Path

import anyio

from aeval.commands.execute import offline_responders, offline_server
from aeval.config import RunConfig
from aeval.dataset import demo_dataset_path
from aeval.display import ProgressState
from aeval.engine import Run
from aeval.store import new_run_id


def one_run(limit: int | None, trials: int) -> tuple[float, list[tuple[float, float, float]]]:
    """(duration, [(time, work fraction, eta shown)]) of one offline demo run."""
    out = Path(tempfile.mkdtemp(prefix="aeval-eta-"))
    config = RunConfig(dataset=str(demo_dataset_path()), out_dir=out, limit=limit, trials=trials)
    config = dataclasses.replace(config, run_id=new_run_id())
    state = ProgressState()
    samples: list[tuple[float, float, float]] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.25):
            with state.lock:
                state.sample()
                requests, verified, _, _ = state.totals()
                eta = state.eta()
                work = (state.api_done() + verified) / (2 * requests) if requests else 0.0
            if eta is not None:
                samples.append((time.time(), work, eta))

    sampler = threading.Thread(target=sample)
    started = time.time()
    sampler.start()
    try:
        with offline_server(config.dataset, out / str(config.run_id)) as credentials:
            run = Run(
                config.with_credentials(credentials),
                subscribers=[state.apply],
                offline=True,
                synthetic=offline_responders(),
            )
            anyio.run(run.run)
    finally:
        stop.set()
        sampler.join()
    ended = time.time()
    return ended - started, [(ended - t, w, eta) for t, w, eta in samples]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=None, help="demo rows (default: all 120)")
    parser.add_argument("--trials", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    for n in range(args.repeat):
        duration, samples = one_run(args.limit, args.trials)
        print(f"run {n + 1}: {duration:.1f} s, {len(samples)} ETA samples")
        for after in (0.10, 0.25, 0.50):
            ratios = [eta / left for left, work, eta in samples if work >= after and left >= 1.0]
            if not ratios:
                print(f"  after {after:.0%}: no samples")
                continue
            worst = max(ratios, key=lambda r: abs(r - 1))
            within = sum(abs(r - 1) <= 0.3 for r in ratios) / len(ratios)
            print(
                f"  after {after:.0%} of the work: shown/true median "
                f"{statistics.median(ratios):.2f}, worst {worst:.2f}, "
                f"{within:.0%} of samples within 30 % (n={len(ratios)})"
            )


if __name__ == "__main__":
    main()
