"""What the commands that drive a run directory share: ``run``, ``resume`` and ``cancel``.

The argument groups (display, polling, ``--ray``), the settings a resumed run
may change, the credentials a run is sent with, and the messages said by more
than one command (no API key, how to resume, a run directory that is not
there). Each command imports these from here and from nowhere else, so no
command imports another. This module stays light (no engine, server or
polars): every such command's parser is built from it, and ``status`` reads
run directories with it; the offline demo's server and the loop that shows a
run's progress are in :mod:`aeval.commands.execute`.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from aeval.batch.providers.registry import missing_key_error, providers_of, run_credentials
from aeval.config import Credentials, PollSettings, RetrySettings, resolve_credentials
from aeval.errors import ConfigError, RunDirError
from aeval.store.layout import RunLayout
from aeval.verify.ray_extra import require_ray

# Exit codes: what a script or a scheduler needs to know about the run.
EXIT_FINISHED = 0
EXIT_FAILED_JOBS = 1
# The run finished, but answers were lost to the infrastructure (``missing``, or
# ``api_error`` after every retry): paid-for work a script must not take for a result.
EXIT_LOST_ANSWERS = 3
EXIT_INTERRUPTED = 130


# --------------------------------------------------------------------------- messages


def no_api_key(
    why: str = "to reach the API the run was sent to", models: Sequence[str] = ()
) -> ConfigError:
    """The error for a command that needs a key and has none (raise it)."""
    try:
        names = providers_of(models) or ["openai"]
    except ConfigError:  # a direct run's names are not provider-qualified
        names = ["openai"]
    return missing_key_error(names, why, "'python -m aeval' with no key runs the offline demo")


# What a command sends a run's requests with: one endpoint (direct mode, or OpenAI
# alone), or one per provider.
CommandCredentials = Credentials | dict[str, Credentials]


def add_cloud_arguments(parser: argparse.ArgumentParser) -> None:
    """Where a bedrock/ or vertex/ run keeps its requests and results (each also read from
    its environment variable, which the flag overrides)."""
    clouds = parser.add_argument_group("cloud batch storage (bedrock/ and vertex/ models)")
    clouds.add_argument(
        "--bedrock-s3",
        metavar="S3_URI",
        help="s3://BUCKET/PREFIX for Bedrock's input records and results (AEVAL_BEDROCK_S3)",
    )
    clouds.add_argument(
        "--bedrock-role-arn",
        metavar="ARN",
        help="the service role Bedrock's jobs read and write that prefix with "
        "(AEVAL_BEDROCK_ROLE_ARN)",
    )
    clouds.add_argument(
        "--vertex-gcs",
        metavar="GS_URI",
        help="gs://BUCKET/PREFIX for Vertex AI's batch input and predictions (AEVAL_VERTEX_GCS)",
    )


def cloud_environment(args: argparse.Namespace) -> dict[str, str]:
    """The process environment with the cloud flags given on the command line laid over it
    (the providers' specs read them from there, as from the variables)."""
    env = dict(os.environ)
    for flag, variable in (
        ("bedrock_s3", "AEVAL_BEDROCK_S3"),
        ("bedrock_role_arn", "AEVAL_BEDROCK_ROLE_ARN"),
        ("vertex_gcs", "AEVAL_VERTEX_GCS"),
    ):
        value = getattr(args, flag, None)
        if value:
            env[variable] = str(value)
    return env


# What a cloud's batches need besides its credentials: (option, flag, variable).
_CLOUD_STORAGE: dict[str, tuple[tuple[str, str, str], ...]] = {
    "bedrock": (
        ("s3", "--bedrock-s3 s3://BUCKET/PREFIX", "AEVAL_BEDROCK_S3"),
        ("role_arn", "--bedrock-role-arn ARN", "AEVAL_BEDROCK_ROLE_ARN"),
    ),
    "vertex": (("gcs", "--vertex-gcs gs://BUCKET/PREFIX", "AEVAL_VERTEX_GCS"),),
}


def check_cloud_storage(credentials: CommandCredentials | None) -> None:
    """Refuse, before anything is written, a run whose ``bedrock/`` or ``vertex/`` models
    have credentials but nowhere to keep their batches.

    :raises ConfigError: naming the flag (and its variable) that is missing.
    """
    if not isinstance(credentials, dict):
        return
    for provider, needed in _CLOUD_STORAGE.items():
        creds = credentials.get(provider)
        for option, flag, variable in needed if creds is not None else ():
            if not creds.option(option):  # type: ignore[union-attr]
                raise ConfigError(f"{provider}/ models need {flag} (or {variable})")


def command_credentials(
    models: Sequence[str], api: str, env: Mapping[str, str] | None = None
) -> CommandCredentials | None:
    """The credentials for a run of ``models`` from the environment (``env``: the
    process's, with :func:`cloud_environment`'s flags); ``None`` when no key of any of
    their providers is set (the offline demo).

    :raises ConfigError: some providers have a key and another has none (naming its
        variable), or a model names an unknown provider.
    """
    if api == "direct":  # one OpenAI-compatible endpoint, whatever the names say
        return resolve_credentials()
    found = run_credentials(models, env=env)
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
