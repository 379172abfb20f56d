"""A 100,000-request Message Batch's results, streamed: how much memory does reading them take?

The local server (its own process, instant timing) answers one Message Batch of
``--requests`` requests, created through the anthropic adapter by a child process
(so that the 100,000 requests it held never sit in the measuring process); then the engine's
own download path (:class:`aeval.batch.outputs.OutputDownload` over the adapter's
``open_lines``: every result converted to an answer line, written to disk and
given to a sink) reads them while a sampler watches this process's resident set.
Printed: the RSS right before the download, its peak during it, and the growth
(target < 50 MB), beside the size of what was streamed.

    .venv/bin/python bench/anthropic_results.py              # 100,000 requests
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
from options import options_parser

from aeval.batch.outputs import OutputDownload
from aeval.batch.providers.anthropic_api import AnthropicBatchProvider
from aeval.batch.providers.anthropic_spec import request_body
from aeval.batch.providers.base import BatchInput, BatchTag
from aeval.config import Credentials
from aeval.local import serve_process
from aeval.prompts import GenerationSettings, PromptSettings

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_bytes() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * PAGE


def write_requests(path: Path, n: int) -> int:
    gen = GenerationSettings(max_tokens=256)
    size = 0
    with path.open("w") as fh:
        for i in range(n):
            body = request_body("model-a", f"Question {i}: constrain x?", PromptSettings(), gen)
            line = json.dumps(
                {"custom_id": str(i), "method": "POST", "url": "/v1/messages", "body": body}
            )
            fh.write(line + "\n")
            size += len(line) + 1
    return size


async def create(base_url: str, requests: Path, n: int, size: int) -> None:
    """The child's part: create the batch, wait for its end, print its id."""
    provider = AnthropicBatchProvider(Credentials("bench", base_url.removesuffix("/v1")))
    tag = BatchTag("bench", "anthropic/model-a|t1|s0", 0, n, time.time())
    remote = await provider.create(BatchInput(requests, None, n, size), tag)
    while not remote.terminal:
        await anyio.sleep(1.0)
        remote = await provider.retrieve(remote.id)
    await provider.aclose()
    print(json.dumps({"id": remote.id, "status": remote.status}))


async def main(args: argparse.Namespace) -> None:
    work = Path(tempfile.mkdtemp(prefix="aeval-anthropic-results-"))
    requests = work / "requests.jsonl"
    size = write_requests(requests, args.requests)
    serve_args = ["--models", "model-*=synthetic:seed=2,accuracy=0.6", "--log-level", "error"]
    with serve_process(serve_args) as base_url:
        t0 = time.time()
        child = subprocess.run(
            [
                sys.executable,
                __file__,
                "--create",
                base_url,
                "--requests",
                str(args.requests),
                "--file",
                str(requests),
                "--size",
                str(size),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        made = json.loads(child.stdout.strip().splitlines()[-1])
        answered = time.time() - t0
        provider = AnthropicBatchProvider(Credentials("bench", base_url.removesuffix("/v1")))
        tag = BatchTag("bench", "anthropic/model-a|t1|s0", 0, args.requests)
        lines = 0
        streamed = 0

        async def sink(line: str, lineno: int, kind: str) -> None:
            nonlocal lines, streamed
            lines += 1
            streamed += len(line)

        gc.collect()
        base = peak = rss_bytes()
        done = False

        async def sample() -> None:
            nonlocal peak
            while not done:
                peak = max(peak, rss_bytes())
                await anyio.sleep(0.02)

        out = work / "output.jsonl"
        download = OutputDownload(provider, made["id"], out, "output", sink, tag)
        t1 = time.time()
        async with anyio.create_task_group() as tg:
            tg.start_soon(sample)
            await download.attempt()
            download.finish()
            done = True
        took = time.time() - t1
        await provider.aclose()
    growth = (peak - base) / 1e6
    print(
        f"{args.requests:,} requests ({size / 1e6:.1f} MB of request lines); batch ended "
        f"{made['status']} after {answered:.1f} s"
    )
    print(
        f"results streamed: {lines:,} lines, {streamed / 1e6:.1f} MB in {took:.1f} s "
        f"({lines / took:,.0f} lines/s)"
    )
    print(
        f"RSS before {base / 1e6:.1f} MB, peak during {peak / 1e6:.1f} MB: "
        f"growth {growth:.1f} MB (target < 50 MB)"
    )


if __name__ == "__main__":
    parser = options_parser(__doc__, requests=100_000)
    parser.add_argument("--create", metavar="BASE_URL", help=argparse.SUPPRESS)
    parser.add_argument("--file", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)
    parsed = parser.parse_args()
    if parsed.create:
        anyio.run(create, parsed.create, parsed.file, parsed.requests, parsed.size)
    else:
        anyio.run(main, parsed)
