"""Direct mode: how close to the server's own bound a direct run gets, and its memory.

Three models × the real benchmark (671 rows: 2,013 requests) against the local
server in its own process, answering each request after 500 ms ± 20 %:

1. server ``--max-concurrency 64``, aeval ``--max-connections 64``: the time
   from the first request to the last answer against the ideal bound
   (requests × latency ÷ 64); target ≤ 1.10;
2. server capped at 32 while aeval asks for 64: zero lost requests and the
   same ratio against the bound for 32; target ≤ 1.15. Beside it a naive
   client (``asyncio.gather`` + ``Semaphore(64)`` + the openai SDK with its
   default retries) on the same server: its wall time, 429s and lost requests;
3. memory: 20,000 requests (the 2,013 × 10 trials, 20 ms latency, no
   published reading): the engine's RSS growth from the 1,000th answer to the
   last; target < 50 MB.

Each run also prints its whole wall time (verification included) and, for 1,
the same with ``--no-published`` (no z3 process per answer competing for the
CPU), and a bare httpx client keeping 64 requests in flight with nothing else
to do: the server's own bound on this machine, the baseline aeval is compared
with side by side.

    .venv/bin/python bench/engine_direct.py            # all of it (~4 min on 2 cores)
    .venv/bin/python bench/engine_direct.py --skip-memory
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path

import anyio
import polars as pl

from aeval.config import Credentials, RunConfig
from aeval.engine import Run
from aeval.events import Event, ShardUpdated, VerdictProduced
from aeval.local import serve_process
from aeval.local.server import fetch_direct_counters

ROOT = Path(__file__).resolve().parents[1]
BENCHMARK = ROOT / "tests" / "data" / "warp-benchmark.parquet"
MODELS = ("model-a", "model-b", "model-c")
LATENCY_S = 0.5


def server_args(cap: int | None, latency: str = "500,20%", dataset: Path = BENCHMARK) -> list[str]:
    # The synthetic mix without its 4 % of HTTP 500s: those are retried with backoff
    # (seconds), a tail that measures the retry policy, not the throughput.
    mix = "too_strong=0.28,too_weak=0.28,no_answer=0.1,unbalanced=0.1,undeclared_var=0.1"
    models = f"model-*=synthetic:seed=5,accuracy=0.6,{mix},truncated_length=0.1"
    args = ["--dataset", str(dataset), "--models", models]
    args += ["--latency-ms", latency]
    return args + (["--max-concurrency", str(cap)] if cap else [])


def _rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        pages = int(fh.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 1e6


class _Clock:
    """When the first job opened and when each job got its last answer."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.start: float | None = None
        self.last: dict[tuple[str, int], float] = {}
        self.answers = 0
        self.rss: list[tuple[int, float]] = []

    def __call__(self, event: Event) -> None:
        if isinstance(event, ShardUpdated) and event.in_flight is not None:
            if self.start is None:
                self.start = time.monotonic()
            if event.completed + event.failed >= event.total:
                self.last.setdefault((event.model, event.trial), time.monotonic())
        elif isinstance(event, VerdictProduced):
            self.answers += 1
            if self.answers in (1_000, self.total):
                self.rss.append((self.answers, _rss_mb()))

    @property
    def generation_s(self) -> float:
        assert self.start is not None
        return max(self.last.values()) - self.start


async def _aeval(
    url: str,
    out: Path,
    *,
    connections: int,
    trials: int = 1,
    published: bool = True,
    dataset: Path = BENCHMARK,
    rows: int = 671,
) -> tuple[_Clock, float, int]:
    config = RunConfig(
        models=MODELS,
        trials=trials,
        dataset=str(dataset),
        out_dir=out,
        api="direct",
        max_connections=connections,
        published=published,
        credentials=Credentials("sk-bench", url),
    )
    clock = _Clock(len(MODELS) * rows * trials)
    started = time.monotonic()
    result = await Run(config, subscribers=[clock]).run()
    wall = time.monotonic() - started
    lost = result.verdicts.filter(result.verdicts["status"] == "api_error").height
    assert result.outcome == "finished", result.message
    return clock, wall, lost


async def naive_gather(
    url: str, bodies: list[dict[str, object]], connections: int = 64
) -> tuple[float, int]:
    """What a user writes without aeval: asyncio.gather + Semaphore(connections) + the
    SDK's default retries, one chat completion per body: (wall s, lost)."""
    import openai

    client = openai.AsyncOpenAI(api_key="sk-bench", base_url=url)
    gate = asyncio.Semaphore(connections)
    lost = 0

    async def one(body: dict[str, object]) -> None:
        nonlocal lost
        async with gate:
            try:
                await client.chat.completions.create(**body)  # type: ignore[call-overload]
            except openai.OpenAIError:
                lost += 1

    started = time.monotonic()
    await asyncio.gather(*(one(b) for b in bodies))
    await client.close()
    return time.monotonic() - started, lost


async def _raw(url: str, bodies: list[dict[str, object]], connections: int) -> float:
    """The server's own bound on this machine: a bare httpx client, ``connections``
    requests always in flight, nothing else (no SDK, no files, no verifier). Wall s."""
    import httpx

    queue = list(reversed(list(enumerate(bodies))))
    headers = {"Authorization": "Bearer sk-bench", "X-Aeval-Trial": "1"}
    limits = httpx.Limits(max_connections=connections)
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as client:

        async def worker() -> None:
            while queue:
                i, body = queue.pop()
                extra = {"X-Aeval-Custom-Id": str(i % 671)}
                response = await client.post(
                    "/chat/completions", json=body, headers={**headers, **extra}
                )
                assert response.status_code < 500, response.text

        started = time.monotonic()
        await asyncio.gather(*(worker() for _ in range(connections)))
        return time.monotonic() - started


def _row(name: str, requests: int, cap: int, clock: _Clock, wall: float) -> str:
    ideal = requests * LATENCY_S / cap
    ratio = clock.generation_s / ideal
    return (
        f"{name:<44} answers in {clock.generation_s:6.1f} s (ideal {ideal:5.1f} s, "
        f"ratio {ratio:4.2f}); whole run {wall:6.1f} s"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-memory", action="store_true")
    parser.add_argument(
        "--only-cap16", action="store_true", help="only the capped scenario of issue 23"
    )
    args = parser.parse_args()
    if not BENCHMARK.exists():
        print(f"skipped: needs the real benchmark at {BENCHMARK}")
        return 0
    requests = len(MODELS) * 671
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        from aeval.dataset import load_dataset
        from aeval.prompts import request_body

        # Issue 23's capped server: 300 ms ± 60, at most 16 at once; aeval asks for 32;
        # 3 models × 120 rows. Ideal: 360 × 0.3 s / 16.
        small = out / "warp-120.parquet"
        pl.read_parquet(BENCHMARK).head(120).write_parquet(small)
        with serve_process(server_args(16, latency="300,60", dataset=small)) as url:
            clock, wall, lost = anyio.run(
                lambda: _aeval(url, out, connections=32, dataset=small, rows=120)
            )
            busy = fetch_direct_counters(url).busy_rejections
            ideal = 360 * 0.3 / 16
            print(
                f"{'cap 16 (300 ms ± 60), aeval 32, 3 × 120':<44} answers in "
                f"{clock.generation_s:6.1f} s (ideal {ideal:5.1f} s, ratio "
                f"{clock.generation_s / ideal:4.2f}); whole run {wall:6.1f} s, lost {lost}, "
                f"429s {busy}"
            )
        if args.only_cap16:
            return 0
        questions = load_dataset(str(BENCHMARK))["question"].to_list()
        bodies = [request_body(m, q) for m in MODELS for q in questions]
        with serve_process(server_args(64)) as url:
            raw_s = asyncio.run(_raw(url, bodies, 64))
            ideal = requests * LATENCY_S / 64
            print(
                f"{'cap 64, bare httpx client, 64 in flight':<44} answers in {raw_s:6.1f} s "
                f"(ideal {ideal:5.1f} s, ratio {raw_s / ideal:4.2f}): the server's own bound here"
            )
            clock, wall, lost = anyio.run(lambda: _aeval(url, out, connections=64))
            print(
                _row("cap 64, aeval 64", requests, 64, clock, wall)
                + f", lost {lost}; against the bare client {clock.generation_s / raw_s:4.2f}"
            )
            clock, wall, lost = anyio.run(lambda: _aeval(url, out, connections=64, published=False))
            print(_row("cap 64, aeval 64, --no-published", requests, 64, clock, wall))
        with serve_process(server_args(32)) as url:
            before = fetch_direct_counters(url).busy_rejections
            clock, wall, lost = anyio.run(lambda: _aeval(url, out, connections=64))
            ours_429 = fetch_direct_counters(url).busy_rejections - before
            print(
                _row("cap 32, aeval 64", requests, 32, clock, wall)
                + f", lost {lost}, 429s {ours_429}"
            )
            before = fetch_direct_counters(url).busy_rejections
            naive_s, naive_lost = asyncio.run(naive_gather(url, bodies))
            naive_429 = fetch_direct_counters(url).busy_rejections - before
            ideal = requests * LATENCY_S / 32
            print(
                f"{'cap 32, naive gather+Semaphore(64)+SDK retries':<44} answers in "
                f"{naive_s:6.1f} s (ideal {ideal:5.1f} s, ratio {naive_s / ideal:4.2f}); "
                f"lost {naive_lost}, 429s {naive_429}"
            )
        if not args.skip_memory:
            with serve_process(server_args(None, latency="20")) as url:
                clock, wall, _ = anyio.run(
                    lambda: _aeval(url, out, connections=64, trials=10, published=False)
                )
            (n0, r0), (n1, r1) = clock.rss
            print(
                f"memory: {clock.total} requests in {wall:.0f} s; engine RSS {r0:.0f} MB at "
                f"answer {n0}, {r1:.0f} MB at answer {n1}: growth {r1 - r0:+.1f} MB"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
