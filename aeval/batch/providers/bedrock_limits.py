"""One Amazon Bedrock batch inference job's limits, read by the spec (a shard's size) and
the adapter (the check before a job is created): a leaf, so neither imports the other.

Bedrock sets these as per-model service quotas; the values are the defaults of the
AWS General Reference's "Amazon Bedrock endpoints and quotas" table
(https://docs.aws.amazon.com/general/latest/gr/bedrock.html#limits_bedrock), whose
names the user guide lists under "Format and upload your batch inference data"
(https://docs.aws.amazon.com/bedrock/latest/userguide/batch-inference-data.html):

- "Minimum number of records per batch inference job": 100 (per model; adjustable
  for some). A job of fewer records is refused when it is created.
- "Records per batch inference job" and "Records per input file per batch inference
  job": 50,000 by default for the text models (Claude, Llama, Nova, Mistral); some
  models (Titan Text Embeddings V2) have 100,000.
- "Batch inference input file size (in GB)": 1, not adjustable.
- "Batch inference job size (in GB)": 5 (all input files of one job), not adjustable.

An account's own values can differ (quota increases; new accounts get lower ones):
``aws service-quotas list-service-quotas --service-code bedrock`` shows them. aeval
writes one input file per job, so a shard is held under the smaller of the file and
job limits.
"""

from __future__ import annotations

__all__ = [
    "MAX_FILE_BYTES",
    "MAX_JOB_BYTES",
    "MAX_RECORDS_PER_FILE",
    "MAX_RECORDS_PER_JOB",
    "MIN_RECORDS_PER_JOB",
]

MIN_RECORDS_PER_JOB = 100
MAX_RECORDS_PER_JOB = 50_000
MAX_RECORDS_PER_FILE = 50_000
MAX_FILE_BYTES = 1_000_000_000  # 1 GB (the quota is named in GB)
MAX_JOB_BYTES = 5_000_000_000
