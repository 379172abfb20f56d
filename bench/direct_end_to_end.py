"""Direct mode end to end: a real ``aeval run --api direct`` process, measured from
outside through a counting proxy, from its first request to its exit.

The server is ``aeval serve --latency-ms 300,60 --max-concurrency 16`` in its own
process (a fresh one per run); the client is ``python -m aeval run --api direct
--max-connections 32`` over 3 models × 120 rows (360 requests), its ``OPENAI_BASE_URL``
pointing at a loopback TCP proxy that forwards every byte and records when each request
went out, when its answer ended, its status and a digest of its body. The proxy runs
**separate** (bench/counting_proxy.py in its own process: issue 39's measurement) and,
labelled beside it, **in-process** (in this script's event loop, the figure the bench
printed before). Printed per run:

- **ratio**: first request → the client process's exit, over the ideal bound
  rows × models × mean latency / cap (360 × 0.3 s / 16 = 6.75 s); target ≤ 1.10;
- **429s** the server sent (target ≤ 5), **in flight** on average between proxy and
  server from the first request to the last answer (the server takes 16), **tail**:
  last answer → exit, **lost** (no answer but 429s) and **twice** (answered twice);
- **bound**: the drain bound beside the ideal: the expected wall time of a perfect
  client (no cost of its own, every slot refilled the instant it frees) against this
  server, whose latency is uniform in 300 ± 60 ms (``aeval serve --latency-ms``): the
  ideal plus the last requests' drain, which no client avoids (the last of 32 requests
  in flight ends up to 0.36 s after it was sent while the ideal counts 0.3 s of it
  spread over the slots); its ratio is the client's own cost;
- ``--uncapped``: the same against a server with no cap (ideal 360 × 0.3 / 32),
  target ≤ 1.10; ``--cap-change``: a server whose cap halves 2 s after the first
  request and is restored at 4 s (the ideal integrates the capacity);
  ``--naive``: the naive client (``asyncio.gather`` + ``Semaphore(32)`` + the openai
  SDK's default retries) through the in-process proxy: its ratio, 429s and lost requests.

    .venv/bin/python bench/direct_end_to_end.py                # 3 runs, the median
    .venv/bin/python bench/direct_end_to_end.py --runs 3 --uncapped --cap-change --before SRC
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import math
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent))
from counting_proxy import Recorder, read_record, start_proxy
from engine_direct import naive_gather  # bench/engine_direct.py: the same naive client
from options import options_parser

from aeval.local import serve_process

ROOT = Path(__file__).resolve().parents[1]
BENCHMARK = ROOT / "tests" / "data" / "warp-benchmark.parquet"
MODELS = ("model-a", "model-b", "model-c")
ROWS = 120
LATENCY_S = 0.3
JITTER_S = 0.06  # the server draws each latency uniformly in LATENCY_S ± JITTER_S
CAP = 16
CONNECTIONS = 32
HALVE_AT, RESTORE_AT = 2.0, 4.0  # --cap-change: seconds after the first request


def server_args(dataset: Path, cap: str | None) -> list[str]:
    # The synthetic mix without HTTP 500s (their backoff measures the retry policy).
    mix = "too_strong=0.28,too_weak=0.28,no_answer=0.1,unbalanced=0.1,undeclared_var=0.1"
    models = f"model-*=synthetic:seed=5,accuracy=0.6,{mix},truncated_length=0.1"
    latency = f"{LATENCY_S * 1000:g},{JITTER_S * 1000:g}"
    args = ["--dataset", str(dataset), "--models", models, "--latency-ms", latency]
    return args + (["--max-concurrency", cap] if cap else [])


@dataclass(frozen=True)
class Figures:
    wall: float  # first request → exit (or the last answer, for the naive client)
    ideal: float
    bound: float  # the drain bound: a perfect client's expected wall time
    busy: int
    in_flight: float
    tail: float
    lost: int = 0  # requests never answered but 429 (-1: the client failed)
    twice: int = 0  # requests answered (not 429) more than once: sent twice

    @property
    def ratio(self) -> float:
        return self.wall / self.ideal

    def line(self, name: str) -> str:
        return (
            f"{name:<44} {self.wall:6.2f} s / ideal {self.ideal:5.2f} s = ratio "
            f"{self.ratio:4.2f} (drain bound {self.bound:4.2f} s: {self.wall / self.bound:4.2f}); "
            f"429s {self.busy:3d}; in flight {self.in_flight:5.1f}; "
            f"tail {self.tail:4.2f} s; lost {self.lost}; twice {self.twice}"
        )


def figures(rec: Recorder, end: float, server: Server, expected: int | None) -> Figures:
    ex = [e for e in rec.exchanges if e.done is not None and e.target.endswith("/completions")]
    start = min(e.sent for e in ex)
    last = max(e.done for e in ex if e.done is not None)
    # time-average of requests in flight between the first request and the last answer
    events = sorted([(e.sent, 1) for e in ex] + [(e.done, -1) for e in ex if e.done is not None])
    area, level, at = 0.0, 0, start
    for t, step in events:
        area += level * (t - at)
        level, at = level + step, t
    busy = sum(1 for e in ex if e.status == 429)
    answered = Counter(e.digest for e in ex if e.status != 429)
    lost = -1 if expected is None else expected - len(answered)
    twice = sum(1 for n in answered.values() if n > 1)
    return Figures(
        end - start,
        server.ideal,
        server.bound,
        busy,
        area / (last - start),
        end - last,
        lost,
        twice,
    )


def run_aeval(
    base_url: str, out: Path, dataset: Path, source: Path | None = None
) -> tuple[float, int]:
    """``python -m aeval run --api direct`` to the end; (exit time, its exit code).

    :param source: run aeval from this source tree instead (``git archive REV``).
    """
    env = {**os.environ, "OPENAI_API_KEY": "sk-bench", "OPENAI_BASE_URL": base_url}
    if source is not None:
        env["PYTHONPATH"] = str(source)
    trace = os.environ.get("AEVAL_TAIL_TRACE")  # a wrapper script that logs the run's end
    command = [sys.executable, *([trace] if trace else ["-m", "aeval"]), "run", "--api", "direct"]
    command += ["--model", ",".join(MODELS), "--dataset", str(dataset)]
    command += ["--max-connections", str(CONNECTIONS), "--out", str(out), "--quiet"]
    # ``python -m`` puts the working directory first on sys.path: run in the source
    # tree, or the checkout the bench runs from would be imported instead of it.
    cwd = source if source is not None else ROOT
    proc = subprocess.Popen(
        command, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    _, err = proc.communicate()
    ended = time.monotonic()
    if proc.returncode != 0:
        print(f"aeval run exited {proc.returncode}: {err.decode()[-2000:]}", file=sys.stderr)
    return ended, proc.returncode


async def naive(base_url: str, dataset: Path) -> tuple[float, int]:
    """asyncio.gather + Semaphore(32) + the SDK's default retries: (last answer, lost)."""
    from aeval.prompts import request_body

    questions = pl.read_parquet(dataset)["question"].to_list()
    bodies = [request_body(m, q) for m in MODELS for q in questions]
    _, lost = await naive_gather(base_url, bodies, CONNECTIONS)
    return time.monotonic(), lost


async def in_process(
    upstream: tuple[str, int], run: Callable[[str], tuple[float, int | None]]
) -> tuple[Recorder, float, int | None]:
    """The proxy in this process's event loop (the client runs in a thread)."""
    rec = Recorder()
    proxy = await start_proxy(upstream, rec)
    try:
        url = f"http://127.0.0.1:{proxy.sockets[0].getsockname()[1]}/v1"
        end, expected = await asyncio.to_thread(run, url)
    finally:
        proxy.close()
    return rec, end, expected


def separate(
    upstream: tuple[str, int], run: Callable[[str], tuple[float, int | None]], tmp: Path
) -> tuple[Recorder, float, int | None]:
    """The proxy in its own process (bench/counting_proxy.py), stopped by its PID."""
    record = tmp / "proxy.jsonl"
    command = [sys.executable, str(Path(__file__).with_name("counting_proxy.py"))]
    proxy = subprocess.Popen(
        [*command, f"{upstream[0]}:{upstream[1]}", str(record)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proxy.stdout is not None
        port = int(proxy.stdout.readline().split()[1])
        end, expected = run(f"http://127.0.0.1:{port}/v1")
    finally:
        proxy.send_signal(signal.SIGTERM)
        proxy.wait(30)
    return read_record(record), end, expected


def median(runs: list[Figures]) -> Figures:
    """The run with the median ratio (the middle one of an odd count)."""
    return sorted(runs, key=lambda f: f.ratio)[len(runs) // 2]


@dataclass(frozen=True)
class Server:
    label: str
    cap: str | None  # ``aeval serve --max-concurrency``
    ideal: float
    bound: float  # :func:`drain_bound`


def drain_bound(
    requests: int, room: tuple[tuple[float, int], ...], samples: int = 400, seed: int = 39
) -> float:
    """The mean wall time of a perfect client over ``samples`` simulated runs: every
    request's latency drawn as the server draws it, a freed slot refilled at once, the
    server's room ``(from second, requests)`` followed exactly (a request in flight when
    the room shrinks runs on; new ones wait). What it adds to the ideal is the drain:
    the last requests in flight end at different times, and the run ends with the last.
    """
    rng = random.Random(seed)
    total = 0.0
    for _ in range(samples):
        now, sent, ends, changes = 0.0, 0, list[float](), [t for t, _ in room[1:]]
        while sent < requests or ends:
            cap = next(n for t, n in reversed(room) if t <= now)
            while sent < requests and len(ends) < cap:
                heapq.heappush(ends, now + rng.uniform(LATENCY_S - JITTER_S, LATENCY_S + JITTER_S))
                sent += 1
            change = next((t for t in changes if t > now), math.inf)
            now = change if change < ends[0] else heapq.heappop(ends)
        total += now
    return total / samples


def servers(requests: int, args: argparse.Namespace) -> list[Server]:
    work = requests * LATENCY_S  # request-seconds the server must spend

    def server(
        label: str, cap: str | None, ideal: float, room: tuple[tuple[float, int], ...]
    ) -> Server:
        return Server(label, cap, ideal, drain_bound(requests, room))

    found = (
        [] if args.uncapped_only else [server(f"cap {CAP}", str(CAP), work / CAP, ((0.0, CAP),))]
    )
    if args.uncapped or args.uncapped_only:
        # The client's own ceiling is the server's room.
        found.append(server("uncapped", None, work / CONNECTIONS, ((0.0, CONNECTIONS),)))
    if args.cap_change:
        # CAP until HALVE_AT s after the first request, CAP/2 until RESTORE_AT, CAP again.
        low = CAP // 2
        left = work - CAP * HALVE_AT - low * (RESTORE_AT - HALVE_AT)
        spec = f"{CAP},{low}@{HALVE_AT:g},{CAP}@{RESTORE_AT:g}"
        room = ((0.0, CAP), (HALVE_AT, low), (RESTORE_AT, CAP))
        found.append(server(f"cap {CAP}→{low}→{CAP}", spec, RESTORE_AT + left / CAP, room))
    return found


def main() -> int:
    parser = options_parser(__doc__, runs=3, proxy=("both", "separate", "in-process"))
    parser.add_argument("--uncapped", action="store_true", help="also against a server with no cap")
    parser.add_argument(
        "--uncapped-only", action="store_true", help="only against a server with no cap"
    )
    parser.add_argument(
        "--cap-change", action="store_true", help="also a server whose cap halves, then is restored"
    )
    parser.add_argument("--naive", action="store_true", help="also the naive client")
    parser.add_argument(
        "--before",
        type=Path,
        metavar="SRC",
        help="also run the client from this source tree (git archive REV | tar -x -C SRC), "
        "alternating with the current one",
    )
    args = parser.parse_args()
    print(f"load average: {os.getloadavg()}", flush=True)
    clients: list[tuple[str, Path | None]] = [("after", None)]
    if args.before is not None:
        clients.insert(0, ("before", args.before))
    proxies = ["separate", "in-process"] if args.proxy == "both" else [args.proxy]
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        dataset = tmp / f"warp-{ROWS}.parquet"
        pl.read_parquet(BENCHMARK).head(ROWS).write_parquet(dataset)
        requests = len(MODELS) * ROWS
        runs: dict[str, list[Figures]] = {}
        for server in servers(requests, args):
            print(
                f"{server.label}: ideal {server.ideal:.2f} s (issue 39's); drain bound "
                f"{server.bound:.2f} s (the ideal + {server.bound - server.ideal:.2f} s expected "
                f"drain: a perfect client at {LATENCY_S * 1000:g} ± {JITTER_S * 1000:g} ms)",
                flush=True,
            )
            for i in range(args.runs):
                for name, source in clients:
                    for where in proxies:
                        out = tmp / f"{name}-{server.label}-{where}-{i}"
                        key = f"{server.label}, {name}, proxy {where}"

                        def client(
                            url: str, out: Path = out, source: Path | None = source
                        ) -> tuple[float, int | None]:
                            end, code = run_aeval(url, out, dataset, source)
                            return end, requests if code == 0 else None

                        # A server per run: a cap schedule counts from its first request.
                        with serve_process(server_args(dataset, server.cap)) as base:
                            host, port = base.removeprefix("http://").split("/")[0].split(":")
                            upstream = (host, int(port))
                            if where == "separate":
                                rec, end, expected = separate(upstream, client, tmp)
                            else:
                                rec, end, expected = asyncio.run(in_process(upstream, client))
                        f = figures(rec, end, server, expected)
                        if dump := os.environ.get("AEVAL_BENCH_DUMP"):  # every exchange
                            Path(dump).write_text(
                                "\n".join(
                                    f"{e.sent:.4f} {e.done or 0:.4f} {e.status}"
                                    for e in rec.exchanges
                                )
                            )
                        runs.setdefault(key, []).append(f)
                        print(f.line(f"{key}, run {i + 1}"), flush=True)
            if args.naive:
                with serve_process(server_args(dataset, server.cap)) as base:
                    host, port = base.removeprefix("http://").split("/")[0].split(":")
                    rec, end, _ = asyncio.run(
                        in_process(
                            (host, int(port)),
                            lambda url: (asyncio.run(naive(url, dataset))[0], None),
                        )
                    )
                print(
                    figures(rec, end, server, requests).line(f"{server.label}, naive client"),
                    flush=True,
                )
        print(f"load average: {os.getloadavg()}")
        for key, found in runs.items():
            ratios = ", ".join(f"{f.ratio:.2f}" for f in found)
            print(median(found).line(f"{key}: median of {len(found)}") + f" (ratios {ratios})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
