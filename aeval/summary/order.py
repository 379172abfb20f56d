"""How a summary orders tiers and item ids: sort keys every report module uses too.

A leaf: the summary, the group records, the samples and the viewer all sort by
these, so they live below all of them.
"""

from __future__ import annotations

import re

__all__ = ["item_sort_key", "tier_key"]

# The benchmark's tiers read best from small to large; other names sort after, by name.
_TIER_ORDER = {"tiny": 0, "small": 1, "medium": 2, "large": 3, "huge": 4}
_TRAILING_NUMBER = re.compile(r"^(.*?)(\d+)$")


def tier_key(tier: str | None) -> tuple[bool, int, str]:
    """Sort key for tier names: known sizes in size order, then others, then none."""
    return (tier is None, _TIER_ORDER.get((tier or "").lower(), len(_TIER_ORDER)), tier or "")


def item_sort_key(custom_id: str) -> tuple[str, int, str]:
    """Natural order of item ids: ``2`` before ``10``, ``item-2`` before ``item-10``."""
    match = _TRAILING_NUMBER.match(custom_id)
    if match is None:
        return (custom_id, -1, "")
    return (match[1], int(match[2]), custom_id)
