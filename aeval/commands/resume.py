"""``python -m aeval resume RUN_DIR``: continue an interrupted run.

Reattaches to every batch the run created (finding, through the API's batch
list, any whose id was never recorded), creates only batches that were never
created, downloads what was not downloaded, and verifies only what has no
verdict yet.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from aeval.commands.run import (
    OFFLINE_STATE_DIR,
    add_display_arguments,
    add_poll_arguments,
    execute,
    offline_responders,
    offline_server,
    resume_overrides,
)
from aeval.config import resolve_credentials
from aeval.errors import ConfigError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="the run directory")
    add_poll_arguments(parser)
    add_display_arguments(parser)


def resume_run(run_dir: Path, args: argparse.Namespace) -> int:
    from aeval.engine import Run

    credentials = resolve_credentials()
    offline = credentials is None and (Path(run_dir) / OFFLINE_STATE_DIR).is_dir()
    if credentials is None and not offline:
        raise ConfigError(
            "no API key: set OPENAI_API_KEY (or OPENAI_KEY) and, for another endpoint, "
            "OPENAI_BASE_URL to the API the run was sent to"
        )
    overrides = resume_overrides(args)
    if offline:
        return _resume_offline(Path(run_dir), args, overrides)

    def make(subscribers):  # type: ignore[no-untyped-def]
        return Run.resume(run_dir, subscribers=subscribers, credentials=credentials, **overrides)

    return execute(make, args)


def _resume_offline(run_dir: Path, args: argparse.Namespace, overrides: dict[str, object]) -> int:
    """An offline demo run: restart its local server on the state kept in the run directory."""
    import json

    from aeval.engine import Run
    from aeval.errors import RunDirError
    from aeval.store import CONFIG_FILE

    path = run_dir / CONFIG_FILE
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
    with offline_server(dataset, run_dir, recorded) as credentials:

        def make(subscribers):  # type: ignore[no-untyped-def]
            return Run.resume(
                run_dir,
                subscribers=subscribers,
                credentials=credentials,
                offline=True,
                synthetic=synthetic,
                **overrides,
            )

        return execute(make, args, offline=True)


def run(args: argparse.Namespace) -> int:
    return resume_run(args.run_dir, args)
