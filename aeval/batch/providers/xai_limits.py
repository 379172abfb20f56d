"""xAI's Batch API limits, read by the spec (a shard's size) and the adapter: a leaf.

Sources (tests/conformance/xai/limits.json keeps them beside the numbers):

- xAI's Batch API guide (https://docs.x.ai/developers/advanced-api-usage/batch-api,
  "Limitations"): no fixed request count, but batches of more than 100,000 requests
  "may be throttled"; one batch created per second per team; 25 MB a request that adds
  requests to a batch.
- xAI's Files API (https://docs.x.ai/developers/files/managing-files): 48 MB a file
  (xAI's pages also say 50 MB; the lower figure is kept).
"""

from __future__ import annotations

__all__ = ["MAX_FILE_BYTES", "MAX_REQUESTS", "RESULTS_PAGE"]

MAX_REQUESTS = 100_000
MAX_FILE_BYTES = 48 * 1000 * 1000
# Results read a page at a time (GET /v1/batches/{id}/results): this many a page.
RESULTS_PAGE = 100
