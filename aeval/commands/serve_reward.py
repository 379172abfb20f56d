"""``python -m aeval serve-reward``: the Z3 judge over HTTP, in OpenRLHF's remote reward protocol.

Prints its URL (``http://HOST:PORT/get_reward``, the value of OpenRLHF's
``--reward.remote_url``, formerly ``--remote_rm_url``) alone on the first line
of stdout, so a script that started it with ``--port 0`` can read where it
listens. See docs/reward.md.
"""

from __future__ import annotations

import argparse
import sys

from aeval.commands.drive import add_ray_argument, ray_address
from aeval.commands.options import add_listen_arguments
from aeval.errors import ConfigError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_listen_arguments(parser, port=5000)
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


def main(args: argparse.Namespace) -> int:
    from aeval.reward import EquivalenceReward, RewardScores
    from aeval.reward.server import RewardServer
    from aeval.reward.service import ServiceLimits

    if args.workers is not None and args.workers < 1:
        raise ConfigError(f"--workers must be at least 1, got {args.workers}")
    if not args.max_body_mb > 0 or args.chunk_size < 1 or not args.chunk_wait_ms >= 0:
        raise ConfigError("--max-body-mb and --chunk-size must be positive, --chunk-wait-ms >= 0")
    address = ray_address(args)
    limits = ServiceLimits(
        max_concurrency=args.max_concurrency,
        max_waiting=args.max_waiting,
        max_body_bytes=int(args.max_body_mb * 1024 * 1024),
        max_items=args.max_items,
    )
    scores = RewardScores(format_credit=args.format_credit, repair_penalty=args.repair_penalty)
    if args.cache_entries is not None and args.cache_entries < 0:
        raise ConfigError(f"--cache-entries must be >= 0, got {args.cache_entries}")
    cache = {} if args.cache_entries is None else {"cache_entries": args.cache_entries}
    with EquivalenceReward(
        reading=args.reading, scores=scores, workers=args.workers, ray_address=address, **cache
    ) as reward:
        server = RewardServer(
            reward,
            limits=limits,
            chunk_size=args.chunk_size,
            chunk_wait_s=args.chunk_wait_ms / 1000.0,
            host=args.host,
            port=args.port,
            log_level=args.log_level,
        )

        def announce(url: str) -> None:
            # The URL alone on stdout (scripts read it); the rest on stderr, for people.
            print(url, flush=True)
            where = (
                f"verifying on the Ray cluster at {address}"
                if address is not None
                else f"{len(reward.worker_pids)} verifier workers on this machine"
            )
            print(
                f"aeval reward server: {args.reading} reading, {where}; "
                f"at most {limits.max_concurrency} requests at once. Use "
                f"--reward.remote_url {url} with OpenRLHF. Ctrl-C stops it.",
                file=sys.stderr,
                flush=True,
            )

        server.serve_forever(on_listening=announce)
    return 0
