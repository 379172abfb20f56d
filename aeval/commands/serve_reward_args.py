"""``python -m aeval serve-reward``'s arguments: light, so ``serve-reward --help``
builds without the verifier pool and the server (:mod:`aeval.commands.serve_reward`
serves)."""

from __future__ import annotations

import argparse

from aeval.commands.drive import add_ray_argument
from aeval.commands.options import add_listen_arguments, add_token_arguments

# aeval.reward.client.TOKEN_ENV, named here so that --help loads no client
TOKEN_ENV = "AEVAL_REWARD_TOKEN"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_listen_arguments(parser, port=5000)
    add_token_arguments(parser, env=TOKEN_ENV, what="token")
    parser.add_argument(
        "--reading",
        choices=("strict", "lenient"),
        default="strict",
        help="which answers count as correct (lenient: named repairs too)",
    )
    parser.add_argument(
        "--format-credit",
        type=float,
        default=0.0,
        help="added to a wrong but well-formed answer's reward",
    )
    parser.add_argument(
        "--repair-penalty",
        type=float,
        default=0.0,
        help="lenient reading: taken from a repaired correct answer's reward",
    )
    parser.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="verifier processes (default: the CPU count); with --ray, per node",
    )
    add_ray_argument(parser)
    parser.add_argument(
        "--cache-entries",
        type=int,
        metavar="N",
        help="verdicts remembered across requests, each distinct answer to a row checked "
        "once (default: the reward's; 0: none kept, a request's duplicates still checked once)",
    )
    parser.add_argument(
        "--max-concurrency",
        type=int,
        default=256,
        metavar="N",
        help="requests scored at once; more wait for a turn",
    )
    parser.add_argument(
        "--max-waiting",
        type=int,
        default=4096,
        metavar="N",
        help="requests allowed to wait for a turn; beyond, 503 with Retry-After",
    )
    parser.add_argument(
        "--max-body-mb",
        type=float,
        default=96.0,
        metavar="MB",
        help="largest request body (default: a GRPO step of 2,048 samples fits); beyond, 413",
    )
    parser.add_argument(
        "--max-items", type=int, default=4096, metavar="N", help="most queries in one request"
    )
    parser.add_argument(
        "--max-reading",
        type=int,
        default=512,
        metavar="N",
        help="request bodies read at once, before scoring; beyond, 503 with Retry-After",
    )
    parser.add_argument(
        "--read-timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="a request body must arrive whole this long after its head; else 408",
    )
    parser.add_argument(
        "--chunk-size",
        type=int,
        default=1024,
        metavar="N",
        help="concurrent requests' checks go to the pool together, up to N at a time",
    )
    parser.add_argument(
        "--chunk-wait-ms",
        type=float,
        default=20.0,
        metavar="MS",
        help="how long a chunk waits for more checks before it is sent",
    )
    parser.add_argument("--log-level", default="warning", help="uvicorn log level")
