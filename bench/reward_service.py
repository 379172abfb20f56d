"""Benchmark: one GRPO-sized step through ``aeval serve-reward`` in one request, beside the
in-process reward, side by side in one run.

    .venv/bin/python bench/reward_service.py [--rows 128] [--group 16] [--repeat 5] [--workers 2]

The step is bench/reward.py's (``rows`` benchmark rows x ``group`` completions built from the
ground truths: correct, rewritten, wrong, malformed), without the hostile share. The HTTP
request is what OpenRLHF posts: each query is the chat-formatted evaluation prompt followed by
the completion and an end-of-turn marker, each label ``{"answer", "constants"}``.

Both sides use a pool of ``workers`` processes: the in-process ``EquivalenceReward``, and the
server started as ``python -m aeval serve-reward`` in a child process (stopped by its PID).
Both keep no verdicts across calls (``cache_entries=0``, ``--cache-entries 0``; a step's own
duplicates are still checked once): the bench repeats one step, and a training run never sends
the same completions twice, so with the cache every repeat after the first would be a lookup.
Steps alternate between the two, ``repeat`` times after one warm-up step each; the median of
the pairs' ratios is what to read (target: the server within 1.2x of the in-process reward).
The HTTP side counts everything a client pays: encoding the body, the request, the reply.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx
import polars as pl
from options import options_parser

sys.path.insert(0, str(Path(__file__).resolve().parent))
import reward as step  # bench/reward.py: the same GRPO-sized step

from aeval.prompts import format_prompt
from aeval.reward import EquivalenceReward

TARGET = 1.2


def chat(question: str) -> str:
    return f"<|im_start|>user\n{format_prompt(question)}<|im_end|>\n<|im_start|>assistant\n"


def main() -> None:
    args = options_parser(
        __doc__,
        dataset=step.DEFAULT_DATASET,
        rows=128,
        group=16,
        repeat=5,
        seed=0,
        workers=os.cpu_count() or 1,
    ).parse_args()

    data = pl.read_parquet(args.dataset)
    completions, answers, constants, _ = step.build_step(data, args.rows, args.group, args.seed)
    questions = dict(zip(data["answer"].to_list(), data["question"].to_list(), strict=False))
    prompts = [chat(questions[a]) for a in answers]
    body = {
        "query": [p + c + "<|im_end|>" for p, c in zip(prompts, completions, strict=True)],
        "prompts": prompts,
        "labels": [{"answer": a, "constants": c} for a, c in zip(answers, constants, strict=True)],
    }
    n = len(completions)
    mb = len(json.dumps(body).encode()) / 1e6
    print(f"step: {args.rows} rows x {args.group} = {n} completions; request body {mb:.1f} MB")

    command = [sys.executable, "-m", "aeval", "serve-reward", "--port", "0"]
    server = subprocess.Popen(
        [*command, "--workers", str(args.workers), "--cache-entries", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        if not url.startswith("http"):
            raise SystemExit(f"serve-reward did not start (exit code {server.poll()})")
        with (
            EquivalenceReward(workers=args.workers, cache_entries=0) as reward,
            httpx.Client(timeout=120) as client,
        ):

            def in_process() -> list[float]:
                return reward(completions=completions, answer=answers, constants=constants)

            def over_http() -> list[float]:
                raw = json.dumps(body).encode()
                reply = client.post(url, content=raw, headers={"content-type": "application/json"})
                reply.raise_for_status()
                return list(reply.json()["rewards"])

            local_scores, served_scores = in_process(), over_http()  # warm-up: pools, truths
            local_times, served_times = [], []
            for _ in range(args.repeat):
                for run, times in ((in_process, local_times), (over_http, served_times)):
                    start = time.perf_counter()
                    scores = run()
                    times.append(time.perf_counter() - start)
                    assert scores == local_scores, "the two sides disagree"
            assert served_scores == local_scores
    finally:
        os.kill(server.pid, signal.SIGINT)
        server.wait(30)

    local, served = statistics.median(local_times), statistics.median(served_times)
    print(f"in-process EquivalenceReward ({args.workers} workers)")
    print(f"  step, median of {args.repeat}   {local:6.3f} s  ({n / local:,.0f}/s)")
    print(f"  all steps  {', '.join(f'{t:.3f}' for t in local_times)}")
    print(f"serve-reward, one request ({args.workers} workers)")
    print(f"  step, median of {args.repeat}   {served:6.3f} s  ({n / served:,.0f}/s)")
    print(f"  all steps  {', '.join(f'{t:.3f}' for t in served_times)}")
    print(f"  same rewards as in-process, item for item: yes ({sum(local_scores):.0f} correct)")
    # Each HTTP step ran right after an in-process one: the median of those pairs' ratios
    # cancels most of the load drift of a shared machine (the ratio of the medians and of the
    # fastest steps are printed beside it).
    paired = statistics.median(s / t for s, t in zip(served_times, local_times, strict=True))
    print(
        f"  ratio of the medians {served / local:.3f}x; "
        f"of the fastest steps {min(served_times) / min(local_times):.3f}x"
    )
    verdict = "met" if paired <= TARGET else "MISSED"
    print(
        f"-> serve-reward / in-process, median of {args.repeat} side-by-side pairs: "
        f"{paired:.3f}x (target <= {TARGET:g}x: {verdict})"
    )


if __name__ == "__main__":
    main()
