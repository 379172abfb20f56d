"""``python -m aeval serve``: the local OpenAI-compatible batch server, in the foreground.

Prints its base URL (``http://HOST:PORT/v1``) on the first line of stdout, so
a script that started it with ``--port 0`` can read where it listens.

Its arguments are in :mod:`aeval.commands.serve_args`, which ``--help`` loads
without the server.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

import polars as pl

from aeval.commands.options import listen_token
from aeval.commands.serve_args import API_KEY_ENV
from aeval.dataset import demo_dataset_path, load_dataset
from aeval.errors import ConfigError
from aeval.http_guard import is_loopback
from aeval.local import (
    Limits,
    LocalBatchServer,
    Serving,
    Timing,
    demo_timing,
    parse_faults,
    parse_models,
)


def main(args: argparse.Namespace) -> int:
    api_key = args.api_key or listen_token(API_KEY_ENV, args.token_file)
    if not api_key and not args.no_auth and not is_loopback(args.host):
        raise ConfigError(
            f"serve: refusing to listen on {args.host} without an API key: set {API_KEY_ENV} "
            "or --api-key-file FILE (or say --no-auth)"
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
        api_key=api_key,
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
            f"synthetic); xAI is at XAI_BASE_URL={url.removesuffix('/v1')}/xai/v1, Azure's "
            f"v1 API at AZURE_OPENAI_BASE_URL={url.removesuffix('/v1')}/openai/v1 "
            "(docs/providers.md). Ctrl-C stops it.",
            file=sys.stderr,
            flush=True,
        )

    server.serve_forever(on_listening=announce)
    return 0


def _load_dataset(ref: str | None) -> pl.DataFrame:
    """The benchmark the responders answer from: ``--dataset`` or the shipped demo one."""
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
