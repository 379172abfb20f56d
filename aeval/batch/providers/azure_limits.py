"""Azure OpenAI's Global Batch limits, read by the spec and the adapter: a leaf.

Source: "Getting started with Azure OpenAI batch deployments", "Batch limits"
(https://learn.microsoft.com/azure/ai-foundry/openai/how-to/batch): at most 100,000
requests and 200 MB an input file, 500 input files a resource; a deployment's
enqueued-token quota is refused per batch with ``token_limit_exceeded`` ("The number of
enqueued tokens has surpassed the configured limit …"), which aeval waits out and
resubmits (aeval.batch.lifecycle). Uploaded files and batch outputs expire after 14 to
30 days (``expires_after`` / ``output_expires_after``: 1,209,600 to 2,592,000 seconds,
anchor ``created_at``).
"""

from __future__ import annotations

__all__ = ["EXPIRES_AFTER_S", "MAX_FILES", "MAX_FILE_BYTES", "MAX_REQUESTS"]

MAX_REQUESTS = 100_000
MAX_FILE_BYTES = 200 * 1000 * 1000
MAX_FILES = 500
# How long Azure keeps an upload and a batch's output: its shortest, 14 days, so a
# resource's 500-file quota frees itself soonest.
EXPIRES_AFTER_S = 14 * 24 * 3600
