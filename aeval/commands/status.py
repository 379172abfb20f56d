"""``python -m aeval status RUN_DIR``: every shard's state, fresh from the API, at once.

Read-only: safe while the run is still going in another process. Asks each
shard's provider (a mixed run: each provider's API) for the current status of
every unfinished batch (one quick call each, no long retries) where that
provider's key is set; otherwise shows the manifest's last known state.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import anyio

from aeval.batch.providers.base import RemoteBatch
from aeval.batch.providers.registry import ProviderSet, open_providers, providers_of
from aeval.commands.drive import existing_run_dir
from aeval.config import RetrySettings
from aeval.display import stdout_console
from aeval.errors import ConfigError, InputFileError
from aeval.scoring.responses import parse_batch_line
from aeval.store import RunLayout, RunStore, ShardRecord
from aeval.store.cancel_failures import cancel_failures, describe_cancel_failure

# One quick try per batch: status must answer now, not after a backoff.
_STATUS_TIMEOUT_S = 15.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="the run directory")
    parser.add_argument(
        "--local", action="store_true", help="do not ask the API; show the manifest only"
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def status_providers(records: list[ShardRecord]) -> ProviderSet | None:
    """The providers of the run's shards whose keys are set (quick calls, one SDK retry)."""
    retry = RetrySettings(sdk_max_retries=1, request_timeout_s=_STATUS_TIMEOUT_S)
    try:
        opened = open_providers([r.model for r in records], None, retry, required=False)
    except ConfigError:  # a model of an unknown provider: the manifest's states only
        return None
    return opened if any(True for _ in opened) else None


async def fresh_status(
    records: list[ShardRecord], providers: ProviderSet
) -> dict[str, RemoteBatch | str]:
    """Each shard's provider's current view of its recorded batch (or the error asking
    for it); shards of a provider that is not open keep the manifest's state."""
    out: dict[str, RemoteBatch | str] = {}

    async def ask(rec: ShardRecord) -> None:
        assert rec.batch_id is not None
        try:
            provider = providers.for_model(rec.model)
        except ConfigError as err:  # no key for this shard's provider
            out[rec.key] = f"last known state ({err})"
            return
        try:
            with anyio.fail_after(_STATUS_TIMEOUT_S):
                out[rec.key] = await provider.retrieve(rec.batch_id)
        except Exception as err:  # reported per shard; status never fails as a whole
            out[rec.key] = f"unavailable: {err}"

    try:
        async with anyio.create_task_group() as tg:
            for rec in records:
                if rec.batch_id is not None and rec.status != "done":
                    tg.start_soon(ask, rec)
    finally:
        await providers.aclose()
    return out


def _answer_counts(run_dir: Path, rec: ShardRecord) -> tuple[int, int] | None:
    """Direct mode: (answered, failed) lines of the job's answer file, or None when the
    run has none (a batch run). Read-only, so safe while the run writes it."""
    path = RunLayout(run_dir).direct_answers(rec.model, rec.trial)
    if rec.shard != 0 or not path.is_file():
        return None
    answered = failed = 0
    with path.open("rb") as fh:
        for raw in fh:
            if not raw.endswith(b"\n"):
                break  # being written
            try:
                failed += parse_batch_line(raw).is_error
            except InputFileError:
                failed += 1
            answered += 1
    return answered - failed, failed


def _rows(store: RunStore, fresh: dict[str, RemoteBatch | str]) -> list[dict[str, Any]]:
    rows = []
    for rec in sorted(store.shards.values(), key=lambda r: (r.model, r.trial, r.shard)):
        remote = fresh.get(rec.key)
        direct = _answer_counts(store.run_dir, rec)
        if direct is not None and rec.status not in ("done", "failed"):
            rec = rec.evolve(status="in_progress (direct)", completed=direct[0], failed=direct[1])
        row: dict[str, Any] = {
            "model": rec.model,
            "trial": rec.trial,
            "shard": rec.shard,
            "round": rec.repair_round,  # the repair round (--rounds) its requests are of
            "requests": rec.requests,
            "status": rec.status,
            "batch_id": rec.batch_id,
            "completed": rec.completed,
            "failed": rec.failed,
            "downloaded": rec.output_downloaded or rec.error_downloaded,
            "message": rec.message,
            "direct": direct is not None,  # answered by direct requests: no batch
        }
        if isinstance(remote, RemoteBatch):
            row.update(
                status=remote.status, completed=remote.completed, failed=remote.failed, live=True
            )
        elif isinstance(remote, str):
            row["message"] = remote
        rows.append(row)
    return rows


def _provider_names(records: list[ShardRecord]) -> str:
    try:
        return ", ".join(providers_of(r.model for r in records)) or "the API"
    except ConfigError:  # a direct run's model names are not provider-qualified
        return "the API"


def main(args: argparse.Namespace) -> int:
    from rich.table import Table

    store = RunStore.open(existing_run_dir(args.run_dir), read_only=True)
    records = list(store.shards.values())
    providers = None if args.local else status_providers(records)
    fresh = {} if providers is None else anyio.run(fresh_status, records, providers)
    rows = _rows(store, fresh)
    total = sum(r.requests for r in records if r.parent is None)
    failures = cancel_failures(store.run_dir)
    if args.json:
        json.dump(
            {
                "run_dir": str(store.run_dir),
                "verdicts": store.verdict_count,
                "shards": rows,
                "cancel_failures": failures,
            },
            sys.stdout,
            indent=2,
        )
        print()
        return 0
    table = Table(title=f"run {store.run_id}")
    # A run with repair rounds shows each shard's round: a job's highest is where it is.
    rounds = store.config.get("rounds", 1) != 1
    columns = ("model", "trial", "shard", *(("round",) if rounds else ()), "requests")
    for col in (*columns, "status", "done/failed", "batch"):
        numeric = col in ("trial", "shard", "round", "requests")
        table.add_column(col, justify="right" if numeric else "left")
    for r in rows:
        status = r["status"] + (" (live)" if r.get("live") else "")
        if r["message"]:
            status += f"\n{r['message'][:120]}"
        table.add_row(
            *(str(r[c]) for c in columns),
            status,
            f"{r['completed']}/{r['failed']}",
            r["batch_id"] or ("direct" if r["direct"] else "—"),
        )
    console = stdout_console()
    console.print(table)
    console.print(f"verdicts: {store.verdict_count} of {total} in {store.run_dir}")
    for batch_id, failure in sorted(failures.items()):
        console.print(
            describe_cancel_failure(store.run_dir, batch_id, failure),
            style="bold red",
            markup=False,
        )
    if not args.local and providers is None:
        console.print(f"(no API key set for {_provider_names(records)}: last known states)")
    return 0
