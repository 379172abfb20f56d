"""``python -m aeval resume RUN_DIR``: continue an interrupted run.

Reattaches to every batch the run created (finding, through the API's batch
list, any whose id was never recorded), creates only batches that were never
created, downloads what was not downloaded, and verifies only what has no
verdict yet.

It claims the directory (:class:`aeval.store.lock.RunLock`) before anything
else, so a second ``resume`` of a live run exits 2 at once, naming the process
that drives it. A directory on hold (``--dry-run``, ``cancel``) creates no
batch unless ``--submit`` says so.

Its arguments are in :mod:`aeval.commands.resume_args`, which ``--help`` loads
without this module's engine.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from aeval.commands.drive import (
    cloud_environment,
    command_credentials,
    existing_run_dir,
    no_api_key,
    resume_overrides,
    saved_models,
)
from aeval.commands.execute import execute, offline_responders, offline_server
from aeval.engine import Run
from aeval.errors import ConfigError, RunDirError
from aeval.events import Event
from aeval.store.hold import Submit, submission_hold
from aeval.store.layout import RunLayout
from aeval.store.lock import RunLock


def resume_run(run_dir: Path, args: argparse.Namespace) -> int:
    existing_run_dir(Path(run_dir))  # a mistyped path says so, not "no API key"
    overrides = resume_overrides(args)
    models, api = saved_models(Path(run_dir))
    credentials = command_credentials(models, api, cloud_environment(args))
    offline = credentials is None and RunLayout(Path(run_dir)).offline_state.is_dir()
    if credentials is None and not offline:
        raise no_api_key("to reach the API the run was sent to", models)
    with claim(Path(run_dir)) as lock:
        overrides["lock"] = lock
        overrides["submit"] = _submit(Path(run_dir), args)
        if offline:
            return _resume_offline(Path(run_dir), args, overrides)

        def make(subscribers: Sequence[Callable[[Event], None]]) -> Run:
            return Run.resume(
                run_dir, subscribers=subscribers, credentials=credentials, **overrides
            )

        return execute(make, args)


def claim(run_dir: Path) -> RunLock:
    """The lock on ``run_dir``, taken before anything is read or started.

    :raises RunDirError: not a run directory, or another process drives it.
    """
    return RunLock.acquire(existing_run_dir(run_dir))


def _submit(run_dir: Path, args: argparse.Namespace) -> Submit:
    """``Run.resume``'s ``submit``: create with ``--submit``, else as the directory says."""
    if getattr(args, "submit", False):
        return Submit.CREATE
    hold = submission_hold(run_dir)
    if hold == "dry-run":
        raise ConfigError(
            f"{run_dir} is a --dry-run plan: nothing was sent, and resume does not start "
            f"paying on its own. Submit it with 'python -m aeval resume --submit {run_dir}'"
        )
    if hold == "cancelled":
        print(
            f"{run_dir} was cancelled: collecting what exists, creating no batch "
            "('resume --submit' creates the batches its shards never got)",
            file=sys.stderr,
        )
    return Submit.AS_HELD


def _resume_offline(run_dir: Path, args: argparse.Namespace, overrides: dict[str, Any]) -> int:
    """An offline demo run: restart its local server on the state kept in the run directory."""
    path = RunLayout(run_dir).config
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
        dataset = saved["dataset"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise RunDirError(
            f"{path}: cannot read the saved dataset of the offline run: {err}"
        ) from err
    recorded = saved.get("provenance")
    recorded = recorded if isinstance(recorded, dict) else None
    synthetic = (recorded or {}).get("responder") or offline_responders()
    models = [str(m) for m in saved.get("models") or ()]
    with offline_server(dataset, run_dir, recorded, models) as credentials:

        def make(subscribers: Sequence[Callable[[Event], None]]) -> Run:
            return Run.resume(
                run_dir,
                subscribers=subscribers,
                credentials=credentials,
                offline=True,
                synthetic=synthetic,
                **overrides,
            )

        return execute(make, args, offline=True, direct=saved.get("api") == "direct", models=models)


def main(args: argparse.Namespace) -> int:
    return resume_run(args.run_dir, args)
