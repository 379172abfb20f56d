"""``python -m aeval run``: run models on the benchmark through a batch API.

With no API key in the environment this is the offline demo: a local batch
server starts in the background with synthetic models, and the run goes to it
exactly as it would go to OpenAI (the engine only sees a base URL and a key).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio

from aeval.config import (
    MISSION_MODELS,
    Credentials,
    PollSettings,
    RetrySettings,
    RunConfig,
    resolve_credentials,
)
from aeval.errors import ConfigError
from aeval.store import new_run_id

# Exit codes: what a script or a scheduler needs to know about the run.
EXIT_FINISHED = 0
EXIT_FAILED_JOBS = 1
EXIT_INTERRUPTED = 130

OFFLINE_KEY = "sk-offline-demo"
# Inside an offline run directory: the local server's persisted files and batches.
OFFLINE_STATE_DIR = "local-server"


def add_display_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("display")
    group.add_argument(
        "--display",
        choices=("auto", "live", "plain", "quiet"),
        default="auto",
        help="live table on a terminal, timestamped lines otherwise (default: auto)",
    )
    group.add_argument("-q", "--quiet", action="store_true", help="print only the final summary")


def add_poll_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("polling")
    default = PollSettings()
    group.add_argument(
        "--poll-initial",
        type=float,
        metavar="S",
        help=f"first wait between polls of a batch (default {default.initial_s:g} s)",
    )
    group.add_argument(
        "--poll-max",
        type=float,
        metavar="S",
        help=f"longest wait between polls (default {default.max_s:g} s)",
    )
    group.add_argument(
        "--poll-grace",
        type=float,
        metavar="S",
        help="how long polls may keep failing before a batch is given up "
        f"(default {default.grace_s:g} s)",
    )
    group.add_argument(
        "--connect-deadline",
        type=float,
        metavar="S",
        help="while nothing was created remotely, stop (exit 2) when the API cannot be "
        f"reached at all for this long (default {RetrySettings().connect_deadline_s:g} s)",
    )
    group.add_argument(
        "--workers", type=int, metavar="N", help="verifier processes (default: CPU count)"
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model",
        "-m",
        action="append",
        metavar="NAME",
        help="model to evaluate (repeat or comma-separate; default: "
        + ", ".join(MISSION_MODELS)
        + ")",
    )
    parser.add_argument("--trials", type=int, default=1, help="runs per model (default 1)")
    data = parser.add_argument_group("benchmark rows")
    data.add_argument(
        "--dataset",
        metavar="REF",
        help="hub id, .parquet/.jsonl/.csv file or saved dataset directory "
        "(default: the WARP benchmark; offline: the bundled demo benchmark)",
    )
    data.add_argument(
        "--dataset-revision",
        metavar="REV",
        help="hub branch, tag or commit to load (default: the commit main points at, "
        "pinned in the run so a resume loads the same rows)",
    )
    data.add_argument("--limit", type=int, help="first N rows only")
    data.add_argument("--sample", type=int, help="N rows drawn at random (see --seed)")
    data.add_argument("--seed", type=int, default=0, help="seed for --sample (default 0)")
    data.add_argument("--tier", help="only rows of this tier (small, medium, large)")
    gen = parser.add_argument_group("prompt and generation")
    gen.add_argument("--instruction-file", type=Path, help="instruction text after each question")
    gen.add_argument(
        "--protocol",
        choices=("default", "warp-2025"),
        default="default",
        help="generation protocol: 'default' (the seed instruction after each question) or "
        "'warp-2025' (the WARP study's instruction before each question)",
    )
    gen.add_argument("--system-file", type=Path, help="system message")
    gen.add_argument("--temperature", type=float)
    gen.add_argument("--top-p", type=float)
    gen.add_argument("--max-tokens", type=int)
    gen.add_argument(
        "--max-completion-tokens", type=int, help="for reasoning models (instead of --max-tokens)"
    )
    gen.add_argument("--generation-seed", type=int, help="the API's sampling seed")
    ver = parser.add_argument_group("verification")
    ver.add_argument(
        "--check-timeout", type=float, metavar="S", help="hard wall-clock budget per answer"
    )
    ver.add_argument(
        "--no-published",
        dest="published",
        action="store_false",
        help="skip the published reading (the study's own evaluator, one z3 process per "
        "answer): the correct_published column stays empty",
    )
    add_poll_arguments(parser)
    parser.add_argument(
        "--retry-failed",
        type=int,
        default=0,
        metavar="N",
        help="resubmit requests that failed for retryable reasons (batch_expired, 429, 5xx) "
        "up to N times (default 0)",
    )
    parser.add_argument(
        "--out", type=Path, default=Path("results"), help="where run directories go"
    )
    parser.add_argument("--run-id", help="name of the run directory (default: time-based)")
    parser.add_argument(
        "--resume",
        type=Path,
        metavar="RUN_DIR",
        help="continue this run directory instead of starting a new run",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="write the request files and show what would be sent, without calling the API",
    )
    parser.add_argument(
        "--offline",
        action="store_true",
        help="use the local batch server with synthetic models even when a key is set",
    )
    add_display_arguments(parser)


def _models(values: list[str] | None) -> tuple[str, ...]:
    if not values:
        return MISSION_MODELS
    return tuple(m.strip() for v in values for m in v.split(",") if m.strip())


def poll_settings(args: argparse.Namespace) -> PollSettings:
    default = PollSettings()
    return PollSettings(
        initial_s=args.poll_initial if args.poll_initial is not None else default.initial_s,
        max_s=args.poll_max
        if args.poll_max is not None
        else max(default.max_s, args.poll_initial or 0),
        factor=default.factor,
        jitter=default.jitter,
        grace_s=args.poll_grace if args.poll_grace is not None else default.grace_s,
    )


def retry_settings(args: argparse.Namespace) -> RetrySettings:
    deadline = getattr(args, "connect_deadline", None)
    if deadline is None:
        return RetrySettings()
    if deadline <= 0:
        raise ConfigError(f"--connect-deadline must be positive, got {deadline:g}")
    return RetrySettings(connect_deadline_s=deadline)


def resume_overrides(args: argparse.Namespace) -> dict[str, object]:
    """The settings a resumed run may change (``Run.resume`` overrides): polling, workers."""
    overrides: dict[str, object] = {}
    if any(getattr(args, n, None) is not None for n in ("poll_initial", "poll_max", "poll_grace")):
        overrides["poll"] = poll_settings(args)
    if getattr(args, "workers", None) is not None:
        overrides["workers"] = args.workers
    if getattr(args, "connect_deadline", None) is not None:
        overrides["retry"] = retry_settings(args)
    return overrides


def config_from_args(args: argparse.Namespace, *, dataset: str | None) -> RunConfig:
    from aeval.prompts import GenerationSettings, PromptSettings
    from aeval.verify import VerifyLimits

    protocol = getattr(args, "protocol", "default")
    if protocol != "default" and args.instruction_file is not None:
        raise ConfigError(
            f"--protocol {protocol} fixes the instruction: drop --instruction-file "
            f"{args.instruction_file}"
        )
    prompt = PromptSettings.from_files(args.instruction_file, args.system_file)
    generation = GenerationSettings(
        temperature=args.temperature,
        top_p=args.top_p,
        seed=args.generation_seed,
        max_tokens=args.max_tokens,
        max_completion_tokens=args.max_completion_tokens,
    )
    limits = (
        VerifyLimits.with_budget(args.check_timeout)
        if args.check_timeout is not None
        else VerifyLimits()
    )
    if dataset is not None and Path(dataset).exists():
        dataset = str(Path(dataset).resolve())  # so resume works from any directory
    return RunConfig(
        models=_models(args.model),
        trials=args.trials,
        dataset=dataset,
        dataset_revision=getattr(args, "dataset_revision", None),
        limit=args.limit,
        sample=args.sample,
        seed=args.seed,
        tier=args.tier,
        prompt=prompt,
        generation=generation,
        limits=limits,
        poll=poll_settings(args),
        retry=retry_settings(args),
        retry_failed=args.retry_failed,
        out_dir=args.out,
        run_id=args.run_id,
        workers=args.workers,
        protocol=protocol,
        published=getattr(args, "published", True),
    )


def offline_models() -> dict[str, Any]:
    """The offline demo's models: the mission models' presets, and one for any other name."""
    from aeval.local import ModelSpec, demo_models

    return {**demo_models(), "*": ModelSpec("synthetic", seed=1, accuracy=0.5)}


def offline_responders() -> str:
    """Which synthetic responders answer an offline run (its provenance says so)."""
    from aeval.local.models import describe_models

    return describe_models(offline_models())


@contextlib.contextmanager
def offline_server(
    dataset: str | None, run_dir: Path, recorded: dict[str, Any] | None = None
) -> Iterator[Credentials]:
    """The local batch server with the demo's synthetic models, in the background.

    Its files and batches live in ``run_dir/local-server`` so that an offline
    run, like a real one, can be resumed after a crash: ``resume`` restarts the
    server on the same state and reattaches to the same batches.

    :param recorded: the run's recorded provenance, on resume: data that changed
        since is refused before the server (which answers from it) starts.
    """
    from aeval.dataset import load_dataset_fingerprinted
    from aeval.local import LocalBatchServer, demo_timing
    from aeval.provenance import check_same_data

    frame, fingerprint = load_dataset_fingerprinted(dataset)  # the responders' rows
    if recorded is not None:
        check_same_data(run_dir, recorded, fingerprint)
    state_dir = run_dir / OFFLINE_STATE_DIR
    with LocalBatchServer(
        dataset=frame, models=offline_models(), timing=demo_timing(), state_dir=state_dir
    ) as server:
        yield Credentials(api_key=OFFLINE_KEY, base_url=server.base_url)


def display_mode(args: argparse.Namespace) -> str:
    return "quiet" if args.quiet else args.display


def execute(make_run: Any, args: argparse.Namespace, *, offline: bool = False) -> int:
    """Run with the progress display, print the summary, map the outcome to an exit code.

    :param make_run: ``subscribers -> Run``.
    """
    from rich.console import Console

    from aeval.display import progress_view, stdout_console
    from aeval.report import summarize, summary_table

    console = stdout_console()
    err = Console(stderr=True)
    if offline:
        err.print(
            "[bold yellow]offline demo:[/] no OPENAI_API_KEY (or OPENAI_KEY) is set, so this "
            "run goes to a local batch server with synthetic models on the bundled demo "
            "benchmark.\nTo run for real: export OPENAI_API_KEY=sk-… and run "
            "'python -m aeval run --model gpt-4o-mini' (Batch API: half the price, "
            "results within 24 h)."
        )
    run = None
    try:
        with progress_view(console, mode=display_mode(args)) as on_event:  # type: ignore[arg-type]
            run = make_run([on_event])
            err.print(f"run directory: {run.run_dir}")
            result = anyio.run(run.run)
    except KeyboardInterrupt:
        where = run.run_dir if run is not None else "the run directory"
        err.print(
            f"interrupted: remote batches keep running. Resume with "
            f"'python -m aeval resume {where}', or cancel them with "
            f"'python -m aeval cancel {where}'."
        )
        return EXIT_INTERRUPTED
    if result.verdicts.height:
        # The run's provenance rides along: a synthetic run's table says SYNTHETIC.
        summary = {**summarize(result.verdicts), "provenance": run.provenance}
        console.print(summary_table(summary))
    if result.outcome == "interrupted":
        err.print(result.message)
        return EXIT_INTERRUPTED
    if result.outcome == "finished_with_failures":
        err.print(f"[bold red]{result.message}[/]")
        err.print(f"verdicts: {result.run_dir}")
        return EXIT_FAILED_JOBS
    err.print(f"verdicts: {result.run_dir / 'verdicts.parquet'}")
    return EXIT_FINISHED


def _dry_run(config: RunConfig) -> int:
    from aeval.engine import plan_run

    plan = plan_run(config)
    print(f"dry run: nothing was sent. Request files are in {plan.run_dir / 'requests'}")
    print(f"{plan.items} rows × {len(config.models)} model(s) × {config.trials} trial(s)")
    for rec in plan.shards:
        print(
            f"  {rec.model} trial {rec.trial} shard {rec.shard}: {rec.requests} requests, "
            f"{rec.bytes / 1e6:.2f} MB ({rec.input_path})"
        )
    print(
        f"total: {sum(r.requests for r in plan.shards)} requests, "
        f"{plan.request_bytes / 1e6:.2f} MB, about {plan.estimated_input_tokens:,} input tokens"
    )
    print(f"to send it (and pay for it): python -m aeval resume --submit {plan.run_dir}")
    return EXIT_FINISHED


def run(args: argparse.Namespace) -> int:
    from aeval.engine import Run

    if args.resume is not None:
        from aeval.commands.resume import resume_run

        return resume_run(args.resume, args)
    if args.trials < 1:
        raise ConfigError(f"--trials must be at least 1, got {args.trials}")
    credentials = None if args.offline else resolve_credentials()
    offline = credentials is None and not args.dry_run
    dataset = args.dataset
    if dataset is None and (offline or (args.dry_run and credentials is None)):
        from aeval.dataset import demo_dataset_path

        dataset = str(demo_dataset_path())
    config = config_from_args(args, dataset=dataset)
    if args.dry_run:
        return _dry_run(config)
    if not offline:
        config = config.with_credentials(credentials)
        return execute(lambda subs: Run(config, subscribers=subs), args)
    # The run id is fixed before the server starts: its state goes inside the run directory.
    config = dataclasses.replace(config, run_id=config.run_id or new_run_id())
    run_dir = Path(config.out_dir) / str(config.run_id)
    with offline_server(config.dataset, run_dir) as creds:
        config = config.with_credentials(creds)
        synthetic = offline_responders()
        return execute(
            lambda subs: Run(config, subscribers=subs, offline=True, synthetic=synthetic),
            args,
            offline=True,
        )


def main() -> None:  # pragma: no cover - convenience for `python -m aeval.commands.run`
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    sys.exit(run(parser.parse_args()))
