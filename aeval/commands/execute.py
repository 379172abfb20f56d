"""The run itself, for the commands that drive one: the offline demo's local server
and the one loop that shows a run's progress and maps its outcome to an exit code.

Split from :mod:`aeval.commands.drive` because it loads the engine, the server,
the display and polars: only a command's ``main`` imports it, never its parser.
"""

from __future__ import annotations

import argparse
import contextlib
import secrets
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import polars as pl
from rich.console import Console

from aeval.batch.providers.registry import provider_spec, providers_of, server_credentials
from aeval.commands.drive import (
    EXIT_FAILED_JOBS,
    EXIT_FINISHED,
    EXIT_INTERRUPTED,
    EXIT_LOST_ANSWERS,
    resume_hint,
)
from aeval.config import Credentials
from aeval.dataset import load_dataset_fingerprinted
from aeval.display import DisplayMode, progress_view, stdout_console
from aeval.display.final import final_summary
from aeval.engine import Run
from aeval.errors import ConfigError
from aeval.events import Event
from aeval.local import LocalBatchServer, ModelSpec, demo_models, demo_timing
from aeval.local.direct import Serving
from aeval.local.models import describe_models
from aeval.report import summarize
from aeval.store.cancel_failures import cancel_failures, describe_cancel_failure
from aeval.store.layout import RunLayout
from aeval.store.provenance import check_same_data

LOST_STATUSES = ("missing", "api_error")

# The offline demo's direct routes answer like a small inference server: each request
# takes 0.6 s ± 30 %, so a direct demo (360 requests at 32 connections) runs ~8 s with
# counts that move, as the batch demo's timing does (aeval.local.timing.demo_timing).
DEMO_LATENCY_MS, DEMO_JITTER_MS = 600.0, 180.0


# --------------------------------------------------------------------------- offline demo


def offline_models() -> dict[str, Any]:
    """The offline demo's models: the mission models' presets, and one for any other name."""
    return {**demo_models(), "*": ModelSpec("synthetic", seed=1, accuracy=0.5)}


def offline_responders() -> str:
    """Which synthetic responders answer an offline run (its provenance says so)."""
    return describe_models(offline_models())


@contextlib.contextmanager
def offline_server(
    dataset: str,
    run_dir: Path,
    recorded: dict[str, Any] | None = None,
    models: Sequence[str] = (),
) -> Iterator[dict[str, Credentials]]:
    """The local batch server with the demo's synthetic models, in the background;
    yields the credentials that reach it, for every provider it speaks.

    Its files and batches live in ``run_dir/local-server`` so that an offline
    run, like a real one, can be resumed after a crash: ``resume`` restarts the
    server on the same state and reattaches to the same batches.

    :param recorded: the run's recorded provenance, on resume: data that changed
        since is refused before the server (which answers from it) starts.
    :param models: the run's models: a ``bedrock/`` or ``vertex/`` one also starts that
        cloud's stand-in over its storage emulator (:func:`cloud_servers`).
    """
    frame, fingerprint = load_dataset_fingerprinted(dataset)  # the responders' rows
    if recorded is not None:
        check_same_data(run_dir, recorded, fingerprint)
    state_dir = RunLayout(run_dir).offline_state
    # Only this run knows the key: another user of the machine cannot cancel its batches.
    key = f"sk-offline-{secrets.token_urlsafe(24)}"
    with (
        LocalBatchServer(
            dataset=frame,
            models=offline_models(),
            timing=demo_timing(),
            serving=Serving(latency_ms=DEMO_LATENCY_MS, jitter_ms=DEMO_JITTER_MS),
            state_dir=state_dir,
            api_key=key,
        ) as server,
        cloud_servers(models, state_dir, frame) as clouds,
    ):
        yield {**server_credentials(server.base_url, key), **clouds}


@contextlib.contextmanager
def cloud_servers(
    models: Sequence[str], state_dir: Path, frame: pl.DataFrame
) -> Iterator[dict[str, Credentials]]:
    """The Bedrock and Vertex AI stand-ins (with moto's S3 server and gcp-storage-emulator)
    for the offline demo, when ``models`` name those providers; nothing otherwise."""
    try:
        wanted = {p for p in providers_of(models) if p in ("bedrock", "vertex")}
    except ConfigError:  # a direct run's names are not provider-qualified
        wanted = set()
    if not wanted:
        yield {}
        return
    # boto3, google-cloud-storage and the emulators are optional (aeval[emulators]):
    # only a demo of those providers loads them.
    from aeval.cloud_standins.offline import cloud_stand_ins

    with cloud_stand_ins(wanted, state_dir / "clouds", dataset=frame,
                         models=offline_models()) as (creds, described):  # fmt: skip
        # Even when quiet: a cloud's synthetic answers must never pass for its real ones.
        for line in described:
            Console(stderr=True).print(f"[bold yellow]offline demo:[/] {line}")
        yield creds


# --------------------------------------------------------------------------- the loop


def offline_banner(models: Sequence[str], *, direct: bool) -> str:
    """What the offline demo says first: that no key was found (naming the variables of
    every provider ``models`` use, not only OpenAI's), what answers instead, and how to
    run for real."""
    if direct:  # one OpenAI-compatible endpoint, whatever the names say
        return (
            "[bold yellow]offline demo (direct mode):[/] no OPENAI_API_KEY (or OPENAI_KEY) is "
            "set, so each request goes to a local server's /v1/chat/completions with synthetic "
            "models on the bundled demo benchmark.\nTo run for real: set OPENAI_BASE_URL to "
            "your server (vLLM, Ollama…) and OPENAI_API_KEY, and run "
            "'python -m aeval run --api direct --model NAME' (docs/providers/direct.md)."
        )
    try:
        providers = providers_of(models) or ["openai"]
    except ConfigError:  # a name no provider claims: the run itself says so
        providers = ["openai"]
    specs = [provider_spec(p) for p in providers]
    where = (
        "this run goes to a local batch server with synthetic models on the bundled demo benchmark"
    )
    if providers == ["openai"]:
        return (
            f"[bold yellow]offline demo:[/] no OPENAI_API_KEY (or OPENAI_KEY) is set, so {where}."
            "\nTo run for real: export OPENAI_API_KEY=sk-… and run "
            "'python -m aeval run --model gpt-4o-mini' (Batch API: half the price, "
            "results within 24 h)."
        )
    named = "; ".join(f"{s.name}: {' or '.join(s.key_variables)}" for s in specs)
    first = " ".join(f"{s.key_variable}=…" for s in specs)
    return (
        f"[bold yellow]offline demo:[/] no key of this run's providers is set ({named}), "
        f"so {where}.\nTo run for real: export {first} (each provider's page in "
        "docs/providers/ says what else it needs) and run the same command again "
        "(Batch API: half the price, results within 24 h)."
    )


def display_mode(args: argparse.Namespace) -> DisplayMode:
    return "quiet" if args.quiet else args.display


def execute(
    make_run: Callable[[Sequence[Callable[[Event], None]]], Run],
    args: argparse.Namespace,
    *,
    offline: bool = False,
    direct: bool = False,
    models: Sequence[str] = (),
    lost_is_failure: bool = True,
) -> int:
    """Run with the progress display, print the summary, map the outcome to an exit code.

    :param make_run: ``subscribers -> Run``.
    :param models: the run's models; an ``offline`` run's banner names their providers' keys.
    :param lost_is_failure: answers lost to the infrastructure end the command with
        :data:`EXIT_LOST_ANSWERS` (not after ``cancel``, which lost them on purpose).
    """
    console = stdout_console()
    err = Console(stderr=True)
    quiet = display_mode(args) == "quiet"
    if offline:  # even when quiet: synthetic answers must never pass for real ones
        err.print(offline_banner(models, direct=direct))
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
            summary = summarize(
                result.verdicts, batch_prices=batch_prices, rounds=run.config.rounds
            )
            summary["provenance"] = run.provenance
        console.print(final_summary(summary, run_dir=run.run_dir))
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
