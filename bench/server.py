"""How many requests per second the local batch server turns around, and its memory.

The server runs as ``python -m aeval serve`` in its own process (reference
responder, zero-delay lifecycle); the official SDK uploads a batch input file,
creates the batch, polls it to ``completed`` and downloads the output. Each
size is timed end to end and by stage, and set beside a *floor* measured in
this process on the same input: the least work any server must do per request
(parse the request line, look the question up, build and serialise the
chat completion line). The ratio says how far the whole HTTP path is from
that floor. Peak RSS of the server process (VmHWM) is read from /proc after
each size, so the largest size gives the memory for a 50,000-request batch.
The latency of the SDK's polls while a batch is answered at full speed is
reported too (the answering thread shares the GIL with the server's loop).

    .venv/bin/python bench/server.py                     # 671, 10,000 and 50,000 requests
    .venv/bin/python bench/server.py --sizes 1000 --dataset PATH
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import openai
import polars as pl

from aeval.local.chat import ChatRequest, Completion
from aeval.local.questions import QuestionIndex
from aeval.local.responders import ReferenceResponder
from aeval.local.wire import batch_line, chat_completion, estimate_tokens
from aeval.prompts import request_body

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATASET = ROOT / "tests" / "data" / "warp-benchmark.parquet"


def request_file(questions: list[str], n: int) -> bytes:
    lines = (
        json.dumps(
            {
                "custom_id": f"req-{i}",
                "method": "POST",
                "url": "/v1/chat/completions",
                "body": request_body("gpt-4o-mini-2024-07-18", questions[i % len(questions)]),
            }
        )
        for i in range(n)
    )
    return "\n".join(lines).encode()


def floor_seconds(data: bytes, index: QuestionIndex) -> float:
    """The per-request work without HTTP, files or lifecycle, in this process."""
    responder = ReferenceResponder(index)
    started = time.perf_counter()
    out = []
    for raw in data.splitlines():
        request = json.loads(raw)
        body = request["body"]
        reply = responder.respond(ChatRequest(body["model"], body, request["custom_id"]))
        assert isinstance(reply, Completion)
        completion = chat_completion(
            body["model"], reply, estimate_tokens(json.dumps(body["messages"]))
        )
        out.append(json.dumps(batch_line(request["custom_id"], status_code=200, body=completion)))
        json.loads(out[-1])  # the client parses each output line too
    return time.perf_counter() - started


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def through_server(client: openai.OpenAI, data: bytes, n: int) -> dict[str, float]:
    t0 = time.perf_counter()
    file_id = client.files.create(file=("bench.jsonl", data), purpose="batch").id
    t1 = time.perf_counter()
    batch = client.batches.create(
        input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    polls: list[float] = []
    while batch.status not in ("completed", "failed", "expired", "cancelled"):
        time.sleep(0.01)
        started = time.perf_counter()
        batch = client.batches.retrieve(batch.id)
        polls.append(time.perf_counter() - started)
    t2 = time.perf_counter()
    assert batch.status == "completed", batch
    assert batch.output_file_id is not None
    content = client.files.content(batch.output_file_id).content
    lines = content.splitlines()
    for raw in lines:
        json.loads(raw)
    t3 = time.perf_counter()
    assert len(lines) == n, (len(lines), n)
    polls.sort()
    return {
        "upload": t1 - t0,
        "batch": t2 - t1,
        "download": t3 - t2,
        "total": t3 - t0,
        "poll_median_ms": 1000 * statistics.median(polls) if polls else float("nan"),
        "poll_max_ms": 1000 * polls[-1] if polls else float("nan"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    parser.add_argument("--sizes", default="671,10000,50000")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    frame = pl.read_parquet(args.dataset)
    questions = frame["question"].to_list()
    index = QuestionIndex.from_frame(frame)

    proc = subprocess.Popen(
        [sys.executable, "-m", "aeval", "serve", "--port", "0", "--dataset", str(args.dataset),
         "--log-level", "warning"],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        base_url = proc.stdout.readline().strip()
        client = openai.OpenAI(base_url=base_url, api_key="bench", max_retries=0, timeout=600)
        idle_mb = peak_rss_mb(proc.pid)
        print(f"server {base_url}  pid {proc.pid}  idle peak RSS {idle_mb:.0f} MB")
        header = (
            f"{'requests':>9} {'MB in':>7} {'upload s':>9} {'batch s':>8} {'download s':>10} "
            f"{'total s':>8} {'req/s':>8} {'floor req/s':>12} {'time/floor':>11} "
            f"{'peak RSS MB':>12} {'poll ms median/max':>19}"
        )
        print(header)
        for n in sizes:
            data = request_file(questions, n)
            floor = floor_seconds(data, index)
            stages = through_server(client, data, n)
            rate = n / stages["total"]
            print(
                f"{n:>9} {len(data) / 1e6:>7.1f} {stages['upload']:>9.2f} {stages['batch']:>8.2f} "
                f"{stages['download']:>10.2f} {stages['total']:>8.2f} {rate:>8.0f} "
                f"{n / floor:>12.0f} {stages['total'] / floor:>10.2f}x "
                f"{peak_rss_mb(proc.pid):>12.0f} "
                f"{stages['poll_median_ms']:>10.1f}/{stages['poll_max_ms']:<8.1f}"
            )
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
