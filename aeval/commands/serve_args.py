"""``python -m aeval serve``'s arguments: light, so ``serve --help`` builds without the
server (:mod:`aeval.commands.serve` runs it)."""

from __future__ import annotations

import argparse
from pathlib import Path

from aeval.commands.options import add_listen_arguments, add_token_arguments

API_KEY_ENV = "AEVAL_SERVE_API_KEY"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_listen_arguments(parser, port=8000)
    add_token_arguments(parser, env=API_KEY_ENV, what="API key", flag="--api-key-file")
    parser.add_argument(
        "--dataset",
        help="benchmark the responders answer from (a file, a save_to_disk directory or a "
        "hub id in the cache; default: the demo benchmark shipped with aeval)",
    )
    parser.add_argument(
        "--models",
        action="append",
        default=[],
        metavar="PATTERN=RESPONDER[:k=v,...]",
        help="map model names to responders, e.g. 'gpt-4o*=synthetic:seed=1,accuracy=0.8' "
        "or '*=replay:path=out.jsonl' or 'demo' (repeatable; default: every model answers "
        "with the reference responder)",
    )
    parser.add_argument(
        "--faults",
        action="append",
        default=[],
        metavar="KIND[@ENDPOINT][:k=v,...]",
        help="inject faults, e.g. 'http@POST /v1/batches:status=429,retry_after=1,times=2' "
        "(repeatable; kinds: http, drop, slow, token_limit, expire, stuck_finalizing, fail, "
        "cancel_fail, request_error)",
    )
    parser.add_argument("--fault-seed", type=int, default=0, help="seed of the fault injection")
    parser.add_argument(
        "--timing",
        choices=("instant", "demo"),
        default="instant",
        help="batch phase durations: instant (zero delay) or demo (looks real)",
    )
    parser.add_argument(
        "--requests-per-second",
        type=float,
        help="pace of each batch while in_progress (overrides --timing's)",
    )
    parser.add_argument(
        "--state-dir",
        type=Path,
        help="keep files and batches here, so a restarted server still has them",
    )
    parser.add_argument(
        "--enqueued-token-limit",
        type=int,
        metavar="TOKENS",
        help="per-model enqueued-token limit: a batch that would go over it fails with "
        "token_limit_exceeded, as with the real API",
    )
    parser.add_argument(
        "--latency-ms",
        metavar="MEAN[,JITTER]",
        help="per-request latency of /v1/chat/completions and /v1/completions, uniform in "
        "MEAN ± JITTER milliseconds (JITTER may be a share: 500,20%%; default: none)",
    )
    parser.add_argument(
        "--output-tokens-per-second",
        type=float,
        metavar="RATE",
        help="generation speed of the completion routes: each answer's tokens add to its latency",
    )
    parser.add_argument(
        "--max-concurrency",
        metavar="N[,N@SECONDS...]",
        help="completion requests answered at once; beyond N the server answers 429 with "
        "Retry-After, as a full inference server does (default: no cap). N@SECONDS changes "
        "the cap that long after the first completion request: 16,8@2,16@4 halves it "
        "from 2 s to 4 s",
    )
    parser.add_argument(
        "--api-key",
        help="require 'Authorization: Bearer KEY' on every request (visible in ps: prefer "
        f"{API_KEY_ENV} or --api-key-file)",
    )
    parser.add_argument("--log-level", default="info", help="uvicorn log level")
