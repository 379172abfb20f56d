"""One Message Batch's limits, read by the spec (a shard's size) and the adapter (the
check before a create): a leaf, so that neither imports the other for them.

Source: Anthropic's Message Batches API reference (at most 100,000 requests or
256 MB in the create call's body).
"""

from __future__ import annotations

__all__ = ["MAX_BATCH_BYTES", "MAX_BATCH_REQUESTS"]

MAX_BATCH_REQUESTS = 100_000
MAX_BATCH_BYTES = 256 * 1000 * 1000
