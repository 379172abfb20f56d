"""What the commands that drive a run directory share: ``run``, ``resume`` and ``cancel``.

The argument groups (display, polling), the settings a resumed run may change,
the offline demo's local server, the one loop that shows a run's progress and
maps its outcome to an exit code, and the messages said by more than one
command (no API key, how to resume, a run directory that is not there). Each
command imports these from here and from nowhere else, so no command imports
another.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from aeval.config import Credentials, PollSettings, RetrySettings
from aeval.errors import ConfigError, RunDirError
from aeval.store.layout import RunLayout

if TYPE_CHECKING:
    import polars as pl

    from aeval.display import DisplayMode
    from aeval.engine import Run
    from aeval.events import Event

# Exit codes: what a script or a scheduler needs to know about the run.
EXIT_FINISHED = 0
EXIT_FAILED_JOBS = 1
# The run finished, but answers were lost to the infrastructure (``missing``, or
# ``api_error`` after every retry): paid-for work a script must not take for a result.
EXIT_LOST_ANSWERS = 3
EXIT_INTERRUPTED = 130
LOST_STATUSES = ("missing", "api_error")

OFFLINE_KEY = "sk-offline-demo"
# The offline demo's direct routes answer like a small inference server: each request
# takes 0.6 s ± 30 %, so a direct demo (360 requests at 32 connections) runs ~8 s with
# counts that move, as the batch demo's timing does (aeval.local.timing.demo_timing).
DEMO_LATENCY_MS, DEMO_JITTER_MS = 600.0, 180.0


# --------------------------------------------------------------------------- messages


def no_api_key(
    why: str = "to reach the API the run was sent to", models: Sequence[str] = ()
) -> ConfigError:
    """The error for a command that needs a key and has none (raise it)."""
    from aeval.batch.providers.registry import missing_key_error, providers_of

    try:
        names = providers_of(models) or ["openai"]
    except ConfigError:  # a direct run's names are not provider-qualified
        names = ["openai"]
    return missing_key_error(names, why, "'python -m aeval' with no key runs the offline demo")


# What a command sends a run's requests with: one endpoint (direct mode, or OpenAI
# alone), or one per provider.
CommandCredentials = Credentials | dict[str, Credentials]


def command_credentials(models: Sequence[str], api: str) -> CommandCredentials | None:
    """The credentials for a run of ``models`` from the environment; ``None`` when no
    key of any of their providers is set (the offline demo).

    :raises ConfigError: some providers have a key and another has none (naming its
        variable), or a model names an unknown provider.
    """
    from aeval.batch.providers.registry import missing_key_error, providers_of, run_credentials
    from aeval.config import resolve_credentials

    if api == "direct":  # one OpenAI-compatible endpoint, whatever the names say
        return resolve_credentials()
    found = run_credentials(models)
    if not found:
        return None
    for provider in providers_of(models):
        if provider not in found:
            raise missing_key_error(provider)
    return found


def saved_models(run_dir: Path) -> tuple[list[str], str]:
    """A run directory's models and api (``batch`` or ``direct``), from its config.json.

    :raises RunDirError: no readable configuration.
    """
    import json

    from aeval.store import RunLayout

    path = RunLayout(run_dir).config
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
        models = [str(m) for m in saved["models"]]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise RunDirError(f"{path}: cannot read the run's models: {err}") from err
    return models, str(saved.get("api") or "batch")


def run_credentials_or_fail(run_dir: Path, why: str) -> CommandCredentials:
    """The credentials of the run in ``run_dir`` (every provider it uses), or the error
    naming the missing key."""
    models, api = saved_models(run_dir)
    creds = command_credentials(models, api)
    if creds is None:
        raise no_api_key(why, models)
    return creds


def resume_hint(run_dir: Path | str) -> str:
    """How to carry on with (or stop) a run whose remote batches keep running."""
    return (
        f"Resume with 'python -m aeval resume {run_dir}', or cancel them with "
        f"'python -m aeval cancel {run_dir}'."
    )


def existing_run_dir(run_dir: Path) -> Path:
    """``run_dir`` if it is a run directory; else one line saying what it is instead.

    Checked before credentials, so a mistyped path is reported as such, not as a
    missing key.

    :raises RunDirError: it does not exist, is not a directory, or has no manifest.
    """
    if not run_dir.exists():
        raise RunDirError(f"{run_dir} does not exist: give a run directory (results/<run-id>)")
    if not run_dir.is_dir():
        raise RunDirError(f"{run_dir} is a file, not a run directory")
    layout = RunLayout(run_dir)
    if not layout.is_run():
        raise RunDirError(
            f"{run_dir} is not a run directory (no {layout.manifest.name}); "
            "give the directory that 'python -m aeval run' printed"
        )
    return run_dir


# --------------------------------------------------------------------------- arguments


def add_display_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("display")
    group.add_argument(
        "--display",
        choices=("auto", "live", "plain", "quiet"),
        default="auto",
        help="live table on a terminal, timestamped lines otherwise",
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
        "--workers",
        type=int,
        metavar="N",
        help="verifier processes (default: CPU count); with --ray, per node",
    )
    add_ray_argument(group)


def add_ray_argument(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    parser.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="verify on this Ray cluster (HOST:PORT of its head, or 'auto': the cluster Ray's "
        "own 'auto' finds, i.e. RAY_ADDRESS, else the last 'ray start' on this machine); "
        "needs pip install 'aeval[ray]'",
    )


def ray_address(args: argparse.Namespace) -> str | None:
    """``--ray``, once Ray is known to be installed (else the install hint, exit 2)."""
    address: str | None = getattr(args, "ray", None)
    if address is not None:
        from aeval.verify.ray_extra import require_ray

        require_ray()
    return address


def poll_settings(args: argparse.Namespace) -> PollSettings:
    default = PollSettings()
    for name in ("poll_initial", "poll_max", "poll_grace"):
        value = getattr(args, name, None)
        if value is not None and value <= 0:
            flag = "--" + name.replace("_", "-")
            raise ConfigError(f"{flag} must be a positive number of seconds, got {value:g}")
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


def resume_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The settings a resumed run may change (``Run.resume`` overrides): polling, workers,
    the connect deadline, and direct mode's connections and request timeout."""
    overrides: dict[str, Any] = {}
    if any(getattr(args, n, None) is not None for n in ("poll_initial", "poll_max", "poll_grace")):
        overrides["poll"] = poll_settings(args)
    workers = getattr(args, "workers", None)
    if workers is not None:
        if workers < 1:
            raise ConfigError(f"--workers must be at least 1, got {workers}")
        overrides["workers"] = workers
    if getattr(args, "connect_deadline", None) is not None:
        overrides["retry"] = retry_settings(args)
    # Never saved: a resume verifies on this machine unless told --ray again.
    address = ray_address(args)
    if address is not None:
        overrides["ray_address"] = address
    # Direct mode's pace (resume only: 'run' always has them, with their defaults).
    for name in ("max_connections", "request_timeout"):
        if getattr(args, name, None) is not None:
            overrides[name] = getattr(args, name)
    return overrides


# --------------------------------------------------------------------------- offline demo


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
    dataset: str, run_dir: Path, recorded: dict[str, Any] | None = None
) -> Iterator[dict[str, Credentials]]:
    """The local batch server with the demo's synthetic models, in the background;
    yields the credentials that reach it, for every provider it speaks.

    Its files and batches live in ``run_dir/local-server`` so that an offline
    run, like a real one, can be resumed after a crash: ``resume`` restarts the
    server on the same state and reattaches to the same batches.

    :param recorded: the run's recorded provenance, on resume: data that changed
        since is refused before the server (which answers from it) starts.
    """
    from aeval.dataset import load_dataset_fingerprinted
    from aeval.local import LocalBatchServer, demo_timing
    from aeval.local.direct import Serving
    from aeval.store.provenance import check_same_data

    frame, fingerprint = load_dataset_fingerprinted(dataset)  # the responders' rows
    if recorded is not None:
        check_same_data(run_dir, recorded, fingerprint)
    state_dir = RunLayout(run_dir).offline_state
    with LocalBatchServer(
        dataset=frame,
        models=offline_models(),
        timing=demo_timing(),
        serving=Serving(latency_ms=DEMO_LATENCY_MS, jitter_ms=DEMO_JITTER_MS),
        state_dir=state_dir,
    ) as server:
        from aeval.batch.providers.registry import server_credentials

        yield server_credentials(server.base_url, OFFLINE_KEY)


# --------------------------------------------------------------------------- the loop


def display_mode(args: argparse.Namespace) -> DisplayMode:
    return "quiet" if args.quiet else args.display


def execute(
    make_run: Callable[[Sequence[Callable[[Event], None]]], Run],
    args: argparse.Namespace,
    *,
    offline: bool = False,
    direct: bool = False,
    lost_is_failure: bool = True,
) -> int:
    """Run with the progress display, print the summary, map the outcome to an exit code.

    :param make_run: ``subscribers -> Run``.
    :param lost_is_failure: answers lost to the infrastructure end the command with
        :data:`EXIT_LOST_ANSWERS` (not after ``cancel``, which lost them on purpose).
    """
    from rich.console import Console

    from aeval.display import progress_view, stdout_console
    from aeval.display.final import final_summary
    from aeval.report import summarize

    console = stdout_console()
    err = Console(stderr=True)
    quiet = display_mode(args) == "quiet"
    if offline and direct:
        err.print(
            "[bold yellow]offline demo (direct mode):[/] no OPENAI_API_KEY (or OPENAI_KEY) is "
            "set, so each request goes to a local server's /v1/chat/completions with synthetic "
            "models on the bundled demo benchmark.\nTo run for real: set OPENAI_BASE_URL to "
            "your server (vLLM, Ollama…) and OPENAI_API_KEY, and run "
            "'python -m aeval run --api direct --model NAME' (docs/providers.md)."
        )
    elif offline:  # even when quiet: synthetic answers must never pass for real ones
        err.print(
            "[bold yellow]offline demo:[/] no OPENAI_API_KEY (or OPENAI_KEY) is set, so this "
            "run goes to a local batch server with synthetic models on the bundled demo "
            "benchmark.\nTo run for real: export OPENAI_API_KEY=sk-… and run "
            "'python -m aeval run --model gpt-4o-mini' (Batch API: half the price, "
            "results within 24 h)."
        )
    run = None
    try:
        with progress_view(console, mode=display_mode(args)) as on_event:
            run = make_run([on_event])
            if not quiet:
                err.print(f"run directory: {run.run_dir}")
            result = anyio.run(run.run)
    except KeyboardInterrupt:
        where = run.run_dir if run is not None else "the run directory"
        if run is not None and run.config.api == "direct":
            err.print(f"interrupted. Resume with 'python -m aeval resume {where}'.")
        else:
            err.print(f"interrupted: remote batches keep running. {resume_hint(where)}")
        return EXIT_INTERRUPTED
    assert run is not None
    if result.verdicts.height:
        # The run's provenance rides along: a synthetic run's table says SYNTHETIC.
        # A finished run's summary is the one it wrote (computed once: a tenth of a
        # second at 360 verdicts, more at scale, between the last answer and exit).
        summary = result.summary
        if summary is None:
            batch_prices = run.config.api != "direct"  # direct requests are paid in full
            summary = summarize(result.verdicts, batch_prices=batch_prices)
            summary["provenance"] = run.provenance
        console.print(final_summary(summary, run_dir=run.run_dir))
    from aeval.store.cancel_failures import cancel_failures, describe_cancel_failure

    for batch_id, failure in sorted(cancel_failures(result.run_dir).items()):
        err.print(
            describe_cancel_failure(result.run_dir, batch_id, failure), markup=False, soft_wrap=True
        )
    if result.outcome == "interrupted":
        err.print(result.message)
        return EXIT_INTERRUPTED
    # A synthetic run (the offline demo, aeval's own server) says it too, but its
    # losses are the synthetic models' show, not paid work lost.
    synthetic = offline or bool(run.provenance and run.provenance.get("synthetic"))
    lost = lost_answers(result.verdicts, synthetic=synthetic) if lost_is_failure else None
    lost_exit = lost is not None and not synthetic
    if lost is not None:
        err.print(lost, markup=False, style="bold red", soft_wrap=True)
    if result.outcome == "finished_with_failures":
        err.print(f"[bold red]{result.message}[/]")
        err.print(f"verdicts: {result.run_dir}")
        return EXIT_FAILED_JOBS
    err.print(f"verdicts: {RunLayout(result.run_dir).verdicts_parquet}")
    return EXIT_LOST_ANSWERS if lost_exit else EXIT_FINISHED


def lost_answers(verdicts: pl.DataFrame, *, synthetic: bool = False) -> str | None:
    """One line on the answers lost to the infrastructure (how many, of what status,
    and the commonest reasons, and the exit status it brings: none for a ``synthetic``
    run), or ``None`` when none was."""
    import polars as pl

    if not verdicts.height or "status" not in verdicts.columns:
        return None
    lost = verdicts.filter(pl.col("status").is_in(LOST_STATUSES))
    if "reason" in lost.columns:  # a batch the user cancelled lost its requests on purpose
        lost = lost.filter(~pl.col("reason").fill_null("").str.starts_with("batch_cancelled"))
    if not lost.height:
        return None
    counts = ", ".join(
        f"{n} {status}" for status, n in lost.group_by("status").len().sort("status").iter_rows()
    )
    reason = pl.col("reason").fill_null("").str.slice(0, 80) if "reason" in lost.columns else None
    why = ""
    if reason is not None:
        top = lost.group_by(reason.alias("r")).len().sort("len", descending=True).head(3)
        why = "; ".join(f"{r or 'no reason given'} ({n})" for r, n in top.iter_rows())
    return (
        f"{lost.height} of {verdicts.height} answers lost to the infrastructure ({counts}): "
        f"{why} ({'synthetic models: exit 0' if synthetic else f'exit {EXIT_LOST_ANSWERS}'}; "
        "'run --retry-failed N' resubmits the retryable ones)"
    )
