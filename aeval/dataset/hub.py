"""Read a benchmark from the Hugging Face hub, pinned to the commit it was loaded at."""

from __future__ import annotations

import re

import httpx
import polars as pl

from aeval.dataset.source import Source, first_line, row_only
from aeval.errors import DatasetError

__all__ = ["HUB_ID", "HUB_PROBE_TIMEOUT_S", "read_hub"]

# How long the hub reachability probe may take before we call the hub unreachable.
HUB_PROBE_TIMEOUT_S = 5.0

_COMMIT = re.compile(r"^[0-9a-f]{40}$")
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def _probe_hub(endpoint: str) -> str | None:
    """One quick request to the hub: ``None`` if it answered, else why not.

    huggingface_hub retries a refused or unresolvable connection five times with
    back-off (about 23 s) and has no setting to shorten that, so an unreachable
    hub is detected here first, in seconds, before ``datasets`` is asked.
    """
    try:
        httpx.head(endpoint, timeout=HUB_PROBE_TIMEOUT_S, follow_redirects=False)
    except httpx.HTTPError as err:
        return f"{type(err).__name__}: {first_line(err) or 'no response'}"
    return None


def read_hub(
    repo_id: str, *, split: str, revision: str | None, config_name: str | None
) -> tuple[pl.DataFrame, Source]:
    import datasets  # deferred: the hub stack costs ~1 s to import, paid only for a hub id
    from datasets import config as ds_config

    where = repo_id + (f"@{revision}" if revision else "")
    fix = "pass a local file with --dataset (.parquet, .jsonl, .csv or a save_to_disk directory)"
    if not ds_config.HF_HUB_OFFLINE:
        reason = _probe_hub(ds_config.HF_ENDPOINT)
        if reason is not None:
            raise DatasetError(
                f"cannot load dataset {where!r}: the Hugging Face hub at {ds_config.HF_ENDPOINT} "
                f"is unreachable ({reason}). Either {fix}, or, if the dataset is already in "
                "your Hugging Face cache, set HF_HUB_OFFLINE=1 to load it from there"
            )
    try:
        # What datasets.load_dataset does, in its three steps, to learn the hub
        # commit the rows come from (the builder's hash): the run pins it, so a
        # resume reloads exactly these rows even after the dataset is updated.
        builder = datasets.load_dataset_builder(repo_id, name=config_name, revision=revision)
        builder.download_and_prepare()
        loaded = builder.as_dataset(split=split)
        commit = builder.hash if _COMMIT.match(str(builder.hash or "")) else revision
    except datasets.exceptions.DatasetNotFoundError as err:
        raise DatasetError(
            f"dataset {where!r} was not found on the Hugging Face hub (or it is private/gated: "
            f"log in with `hf auth login`); check the id, or {fix}"
        ) from err
    except ConnectionError as err:
        why = (
            "with HF_HUB_OFFLINE=1 only datasets already in the cache load"
            if ds_config.HF_HUB_OFFLINE
            else "the connection to the hub failed"
        )
        raise DatasetError(
            f"cannot load dataset {where!r} from the Hugging Face hub ({first_line(err)}); "
            f"{why}. {fix[0].upper()}{fix[1:]}"
        ) from err
    except ValueError as err:
        message = first_line(err)
        if "split" in message.lower():
            raise DatasetError(
                f"dataset {where!r} has no split {split!r} ({message}); choose one with --split"
            ) from err
        raise DatasetError(f"cannot load dataset {where!r}: {message}") from err
    except Exception as err:  # anything else from deep inside datasets: name it, no trace
        raise DatasetError(
            f"cannot load dataset {where!r}: {type(err).__name__}: {first_line(err)}"
        ) from err
    if not isinstance(loaded, datasets.Dataset):
        raise DatasetError(f"dataset {where!r} split {split!r} did not load as one table")
    source = Source(f"{where} (split {split})", row_only, kind="hub", revision=commit)
    return loaded.to_polars(), source
