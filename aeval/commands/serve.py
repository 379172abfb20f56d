"""``python -m aeval serve``: the local OpenAI-compatible batch server, in the foreground.

Prints its base URL (``http://HOST:PORT/v1``) on the first line of stdout, so
a script that started it with ``--port 0`` can read where it listens.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from aeval.commands.options import add_listen_arguments
from aeval.errors import ConfigError

if TYPE_CHECKING:
    import polars as pl


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_listen_arguments(parser, port=8000)
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
        "cancel_fail)",
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
    parser.add_argument("--api-key", help="require 'Authorization: Bearer KEY' on every request")
    parser.add_argument("--log-level", default="info", help="uvicorn log level")


def main(args: argparse.Namespace) -> int:
    import dataclasses

    from aeval.local import (
        Limits,
        LocalBatchServer,
        Serving,
        Timing,
        demo_timing,
        parse_faults,
        parse_models,
    )

    timing = demo_timing() if args.timing == "demo" else Timing()
    if args.requests_per_second is not None:
        timing = dataclasses.replace(timing, requests_per_second=args.requests_per_second)
    cap, cap_changes = parse_max_concurrency(args.max_concurrency)
    mean_ms, jitter_ms = parse_latency(args.latency_ms) if args.latency_ms else (0.0, 0.0)
    serving = Serving(
        latency_ms=mean_ms,
        jitter_ms=jitter_ms,
        output_tokens_per_second=args.output_tokens_per_second,
        max_concurrency=cap,
        cap_changes=cap_changes,
        seed=args.fault_seed,
    )
    dataset = _load_dataset(args.dataset)
    models = parse_models(args.models) or None
    server = LocalBatchServer(
        dataset=dataset,
        models=models,
        faults=parse_faults(args.faults, seed=args.fault_seed),
        timing=timing,
        limits=Limits(enqueued_tokens=args.enqueued_token_limit),
        serving=serving,
        state_dir=args.state_dir,
        host=args.host,
        port=args.port,
        api_key=args.api_key,
        log_level=args.log_level,
    )
    described = (
        ", ".join(f"{pattern} → {spec.responder}" for pattern, spec in (models or {}).items())
        or "* → reference"
    )

    def announce(url: str) -> None:
        # The URL alone on stdout (scripts read it); the rest on stderr, for people.
        print(url, flush=True)
        print(
            f"aeval local batch server: {dataset.height} benchmark rows; models: {described}; "
            f"state: {args.state_dir or 'temporary'}. Use OPENAI_BASE_URL={url} (and "
            f"AEVAL_LOCAL_SERVER={url}, so runs know it is aeval's own and label it "
            "synthetic). Ctrl-C stops it.",
            file=sys.stderr,
            flush=True,
        )

    server.serve_forever(on_listening=announce)
    return 0


def _load_dataset(ref: str | None) -> pl.DataFrame:
    """The benchmark the responders answer from: ``--dataset`` or the shipped demo one."""
    from aeval.dataset import demo_dataset_path, load_dataset

    return load_dataset(ref if ref is not None else demo_dataset_path())


def parse_latency(value: str) -> tuple[float, float]:
    """``MEAN[,JITTER]`` in milliseconds; JITTER may be a share of MEAN (``500,20%``)."""
    mean_raw, _, jitter_raw = value.partition(",")
    try:
        mean, jitter_raw = float(mean_raw), jitter_raw.strip()
        unit = mean / 100 if jitter_raw.endswith("%") else 1.0  # a share of MEAN, or ms
        jitter = float(jitter_raw.removesuffix("%")) * unit if jitter_raw else 0.0
    except ValueError:
        raise ConfigError(
            f"--latency-ms {value!r}: expected MEAN[,JITTER] in milliseconds, e.g. 500,100 "
            "or 500,20%"
        ) from None
    return mean, jitter


def parse_max_concurrency(value: str | None) -> tuple[int | None, tuple[tuple[float, int], ...]]:
    """``N[,N@SECONDS...]``: the cap, and its changes (seconds after the first request)."""
    if value is None:
        return None, ()
    first, *rest = value.split(",")
    try:
        changes = [(float(at), int(n)) for n, _, at in (r.partition("@") for r in rest)]
        cap = int(first)
    except ValueError:
        changes, cap = [], 0
    times = [at for at, _ in changes]
    if cap < 1 or min(n for _, n in changes or [(0, 1)]) < 1 or times != sorted(set(times)):
        raise ConfigError(
            f"--max-concurrency {value!r}: expected N or N,N@SECONDS,... with every N >= 1 "
            "and the times in increasing order, e.g. 16 or 16,8@2,16@4"
        )
    return cap, tuple(changes)
