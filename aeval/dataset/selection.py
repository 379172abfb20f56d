"""Row selection (ids, tier, sample, limit): which rows of a benchmark a run sends.

Ids are assigned before selection, so a row keeps its id whatever subset is run.
"""

from __future__ import annotations

import random

import polars as pl

from aeval.errors import DatasetError

__all__ = ["check_selection", "parse_id_spec", "select_rows"]


def check_selection(
    *,
    limit: int | None = None,
    sample: int | None = None,
    seed: int = 0,
    tier: str | None = None,
    ids: str | None = None,
) -> None:
    for name, value in (("limit", limit), ("sample", sample)):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise DatasetError(f"--{name} must be a positive integer, got {value!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise DatasetError(f"--sample-seed must be an integer, got {seed!r}")
    if tier is not None and (not isinstance(tier, str) or not tier):
        raise DatasetError(f"--tier must be a tier name, got {tier!r}")
    if ids is not None:
        parse_id_spec(ids)


# A range wider than this is a typo (10-2000000), not a selection.
_MAX_RANGE = 10_000_000


def parse_id_spec(spec: str) -> tuple[str, ...]:
    """The item ids named by ``--sample-id``: ``"5,7,10-20"`` → 5, 7, 10, 11, …, 20.

    Comma-separated; ``A-B`` with two integers is the inclusive range (ids are
    compared as text, so ``7`` names the row whose id is ``"7"``); anything else
    is one id as written. Duplicates are kept once, first mention first.

    :raises DatasetError: an empty spec or entry, or a range that runs backwards.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise DatasetError(f"--sample-id must list item ids (e.g. 5,7,10-20), got {spec!r}")
    out: dict[str, None] = {}
    for raw in spec.split(","):
        entry = raw.strip()
        if not entry:
            raise DatasetError(f"--sample-id {spec!r}: an empty entry between commas")
        low, sep, high = entry.partition("-")
        if sep and low.strip().isdigit() and high.strip().isdigit():
            a, b = int(low), int(high)
            if b < a or b - a > _MAX_RANGE:
                raise DatasetError(
                    f"--sample-id {spec!r}: range {entry!r} runs backwards or is too wide"
                )
            out.update(dict.fromkeys(str(i) for i in range(a, b + 1)))
        else:
            out[entry] = None
    return tuple(out)


def select_rows(
    frame: pl.DataFrame,
    *,
    limit: int | None = None,
    sample: int | None = None,
    seed: int = 0,
    tier: str | None = None,
    ids: str | None = None,
    source: str = "<frame>",
) -> pl.DataFrame:
    """Keep rows with ``ids`` and of ``tier``, then ``sample`` of them at random, then
    the first ``limit``.

    Sampled rows stay in dataset order.

    The sample is drawn with :class:`random.Random` (stable across Python and
    polars versions), so a seed names the same rows everywhere. A ``limit`` or
    ``sample`` larger than what is left keeps everything.

    :raises DatasetError: a bad value, a tier that no row has, or an id that no row has
        (a range may name ids that do not exist, as long as one does).
    """
    check_selection(limit=limit, sample=sample, seed=seed, tier=tier, ids=ids)
    if ids is not None:
        frame = _rows_with_ids(frame, ids, source)
    if tier is not None:
        tiers = frame.get_column("tier")
        kept = frame.filter(tiers == tier)
        if kept.height == 0:
            present = sorted(t for t in tiers.unique().to_list() if t is not None)
            have = f"its tiers are {', '.join(present)}" if present else "it has no tier column"
            raise DatasetError(f"dataset {source} has no rows of tier {tier!r}; {have}")
        frame = kept
    if sample is not None and sample < frame.height:
        picked = sorted(random.Random(seed).sample(range(frame.height), sample))
        frame = frame[picked]
    if limit is not None:
        frame = frame.head(limit)
    return frame


def _rows_with_ids(frame: pl.DataFrame, spec: str, source: str) -> pl.DataFrame:
    wanted = parse_id_spec(spec)
    present = frame.get_column("id")
    kept = frame.filter(present.is_in(wanted))
    singles = {e.strip() for e in spec.split(",") if not _is_range(e)}
    missing = sorted(singles - set(kept.get_column("id").to_list()), key=_id_order)
    if missing or kept.height == 0:
        named = ", ".join(missing[:5]) + (" …" if len(missing) > 5 else "")
        raise DatasetError(
            f"--sample-id: dataset {source} has no row with id {named or spec} "
            f"({present.len()} rows, ids {present.head(1).item()} … {present.tail(1).item()})"
        )
    return kept


def _is_range(entry: str) -> bool:
    low, sep, high = entry.strip().partition("-")
    return bool(sep) and low.strip().isdigit() and high.strip().isdigit()


def _id_order(item_id: str) -> tuple[int, int | str]:
    """Numeric ids in numeric order (2 before 10), then the rest as text."""
    return (0, int(item_id)) if item_id.isdigit() else (1, item_id)
