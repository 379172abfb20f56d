"""Direct mode end to end: a real ``aeval run --api direct`` process, measured from
outside through a recording proxy, from its first request to its exit.

The server is ``aeval serve --latency-ms 300,60 --max-concurrency 16`` in its own
process; the client is ``python -m aeval run --api direct --max-connections 32``
over 3 models × 120 rows (360 requests), its ``OPENAI_BASE_URL`` pointing at a
loopback TCP proxy in this process that forwards every byte and records when
each request went out, when its answer ended and its status. Printed per run:

- **ratio**: first request → the client process's exit, over the ideal bound
  (360 × 0.3 s / 16 = 6.75 s); target ≤ 1.15;
- **429s** the server sent (target ≤ 5), **in flight** on average from the first
  request to the last answer (the server takes 16), **tail**: last answer → exit;
- ``--uncapped``: the same against a server with no cap (ideal 360 × 0.3 / 32),
  target ≤ 1.10; ``--naive``: beside it the naive client (``asyncio.gather`` +
  ``Semaphore(32)`` + the openai SDK's default retries) through the same proxy:
  its ratio, 429s and lost requests (aeval must lose none).

    .venv/bin/python bench/direct_end_to_end.py                # 3 runs, the median
    .venv/bin/python bench/direct_end_to_end.py --runs 1 --uncapped --naive
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent))
from engine_direct import naive_gather  # bench/engine_direct.py: the same naive client

from aeval.local import serve_process

ROOT = Path(__file__).resolve().parents[1]
BENCHMARK = ROOT / "tests" / "data" / "warp-benchmark.parquet"
MODELS = ("model-a", "model-b", "model-c")
ROWS = 120
LATENCY_S = 0.3
CAP = 16
CONNECTIONS = 32


def server_args(dataset: Path, cap: int | None) -> list[str]:
    # The synthetic mix without HTTP 500s (their backoff measures the retry policy).
    mix = "too_strong=0.28,too_weak=0.28,no_answer=0.1,unbalanced=0.1,undeclared_var=0.1"
    models = f"model-*=synthetic:seed=5,accuracy=0.6,{mix},truncated_length=0.1"
    args = ["--dataset", str(dataset), "--models", models, "--latency-ms", "300,60"]
    return args + (["--max-concurrency", str(cap)] if cap else [])


@dataclass
class Exchange:
    sent: float
    target: str = ""  # the request line's method and path
    done: float | None = None
    status: int | None = None


@dataclass
class Recorder:
    """Every request/answer pair the proxy saw, in order."""

    exchanges: list[Exchange] = field(default_factory=list)

    def reset(self) -> None:
        self.exchanges = []


async def _pipe_requests(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    pending: asyncio.Queue[Exchange],
    rec: Recorder,
) -> None:
    """Client → server: each request's head and Content-Length body; one Exchange each."""
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            exchange = Exchange(time.monotonic(), b" ".join(head.split(b" ", 2)[:2]).decode())
            rec.exchanges.append(exchange)
            await pending.put(exchange)
            length = _content_length(head)
            writer.write(head)
            if length:
                writer.write(await reader.readexactly(length))
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def _pipe_answers(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, pending: asyncio.Queue[Exchange]
) -> None:
    """Server → client: each answer's head and body; stamps the oldest open Exchange."""
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            exchange = await pending.get()
            exchange.status = int(head.split(b" ", 2)[1])
            writer.write(head)
            length = _content_length(head)
            if length:
                writer.write(await reader.readexactly(length))
            await writer.drain()
            exchange.done = time.monotonic()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


def _content_length(head: bytes) -> int:
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value.strip())
        if name.strip().lower() == b"transfer-encoding":
            raise RuntimeError("chunked bodies are not proxied (the local server sends none)")
    return 0


async def start_proxy(upstream: tuple[str, int], rec: Recorder) -> asyncio.Server:
    async def handle(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        server_r, server_w = await asyncio.open_connection(*upstream)
        pending: asyncio.Queue[Exchange] = asyncio.Queue()
        try:
            await asyncio.gather(
                _pipe_requests(client_r, server_w, pending, rec),
                _pipe_answers(server_r, client_w, pending),
            )
        except asyncio.CancelledError:  # the scenario ended with the connection open
            server_w.close()
            client_w.close()

    return await asyncio.start_server(handle, "127.0.0.1", 0)


@dataclass(frozen=True)
class Figures:
    wall: float  # first request → exit (or the last answer, for the naive client)
    ideal: float
    busy: int
    in_flight: float
    tail: float
    lost: int = 0

    @property
    def ratio(self) -> float:
        return self.wall / self.ideal

    def line(self, name: str) -> str:
        return (
            f"{name:<34} {self.wall:6.2f} s / ideal {self.ideal:5.2f} s = ratio "
            f"{self.ratio:4.2f}; 429s {self.busy:3d}; in flight {self.in_flight:5.1f}; "
            f"tail {self.tail:4.2f} s; lost {self.lost}"
        )


def figures(rec: Recorder, end: float, ideal: float, lost: int = 0) -> Figures:
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
    return Figures(end - start, ideal, busy, area / (last - start), end - last, lost)


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


async def scenario(
    upstream: str,
    out: Path,
    dataset: Path,
    ideal: float,
    *,
    client: str,
    source: Path | None = None,
) -> Figures:
    host, port = upstream.removeprefix("http://").split("/")[0].split(":")
    rec = Recorder()
    proxy = await start_proxy((host, int(port)), rec)
    url = f"http://127.0.0.1:{proxy.sockets[0].getsockname()[1]}/v1"
    try:
        if client == "naive":
            end, lost = await naive(url, dataset)
            return figures(rec, end, ideal, lost)
        end, code = await asyncio.to_thread(run_aeval, url, out, dataset, source)
        if dump := os.environ.get("AEVAL_BENCH_DUMP"):  # every exchange, for a closer look
            Path(dump).write_text(
                "\n".join(f"{e.sent:.4f} {e.done or 0:.4f} {e.status}" for e in rec.exchanges)
            )
        if os.environ.get("AEVAL_TAIL_TRACE"):  # CLOCK_MONOTONIC: the trace's clock too
            last = max((e.done for e in rec.exchanges if e.done is not None), default=0.0)
            print(f"  (monotonic: last answer {last:.4f}, exit {end:.4f})")
        answered = [
            e for e in rec.exchanges if e.status == 200 and e.target.endswith("/completions")
        ]
        lost = len(MODELS) * ROWS - len(answered)
        return figures(rec, end, ideal, lost if code == 0 else -1)
    finally:
        proxy.close()


def median(runs: list[Figures]) -> Figures:
    """The run with the median ratio (the middle one of an odd count)."""
    return sorted(runs, key=lambda f: f.ratio)[len(runs) // 2]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--uncapped", action="store_true", help="also against a server with no cap")
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
    clients: list[tuple[str, Path | None]] = [("aeval", None)]
    if args.before is not None:
        clients.insert(0, ("before", args.before))
    with tempfile.TemporaryDirectory() as tmp:
        dataset = Path(tmp) / f"warp-{ROWS}.parquet"
        pl.read_parquet(BENCHMARK).head(ROWS).write_parquet(dataset)
        requests = len(MODELS) * ROWS
        runs: dict[str, list[Figures]] = {name: [] for name, _ in clients}
        for label, cap in [(f"cap {CAP}", CAP), *([("uncapped", None)] if args.uncapped else [])]:
            ideal = requests * LATENCY_S / (cap or CONNECTIONS)
            with serve_process(server_args(dataset, cap)) as upstream:
                for i in range(args.runs):
                    for name, source in clients:
                        out = Path(tmp) / f"{name}-{label}-{i}"
                        f = asyncio.run(
                            scenario(upstream, out, dataset, ideal, client="aeval", source=source)
                        )
                        runs.setdefault(f"{name} {label}", []).append(f)
                        print(f.line(f"{label}, {name} {CONNECTIONS}, run {i + 1}"), flush=True)
                if args.naive:
                    f = asyncio.run(scenario(upstream, Path(tmp), dataset, ideal, client="naive"))
                    print(f.line(f"{label}, naive client"), flush=True)
            for name, _ in clients:
                found = runs.get(f"{name} {label}")
                if found:
                    print(median(found).line(f"{label}, {name}: median of {len(found)}"))
    print(f"load average: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
