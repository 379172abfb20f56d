"""``python -m aeval serve-reward``: the Z3 judge over HTTP, in OpenRLHF's remote reward protocol.

Prints its URL (``http://HOST:PORT/get_reward``, the value of OpenRLHF's
``--reward.remote_url``, formerly ``--remote_rm_url``) alone on the first line
of stdout, so a script that started it with ``--port 0`` can read where it
listens. See docs/reward.md.

Its arguments are in :mod:`aeval.commands.serve_reward_args`, which ``--help``
loads without the verifier pool and the server.
"""

from __future__ import annotations

import argparse
import sys

from aeval.commands.drive import ray_address
from aeval.commands.options import listen_token
from aeval.errors import ConfigError
from aeval.reward import EquivalenceReward, RewardScores
from aeval.reward.client import TOKEN_ENV
from aeval.reward.server import RewardServer
from aeval.reward.service import ServiceLimits


def main(args: argparse.Namespace) -> int:
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
        max_reading=args.max_reading,
        read_timeout_s=args.read_timeout,
    )
    token = listen_token(TOKEN_ENV, args.token_file)
    scores = RewardScores(format_credit=args.format_credit, repair_penalty=args.repair_penalty)
    if args.cache_entries is not None and args.cache_entries < 0:
        raise ConfigError(f"--cache-entries must be >= 0, got {args.cache_entries}")
    cache = {} if args.cache_entries is None else {"cache_entries": args.cache_entries}
    # Refused before the verifier pool starts: a listening socket off loopback needs a token.
    RewardServer.check_auth(args.host, token, allow_no_token=args.no_auth)
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
            token=token,
            allow_no_token=args.no_auth,
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
                f"at most {limits.max_concurrency} requests at once"
                f"{'; token required' if token else ''}. Use "
                f"--reward.remote_url {url} with OpenRLHF. Ctrl-C stops it.",
                file=sys.stderr,
                flush=True,
            )

        server.serve_forever(on_listening=announce)
    return 0
