"""The failure worth trying again: what a provider raises and the retry policy retries.

Its own module, below both of its sides: the providers' SDK error mapping
(:mod:`aeval.batch.providers.sdk_errors`) raises it with the policy's figures
(:func:`aeval.batch.retry.retryable_status`, ``Retry-After``), and the policy
(:mod:`aeval.batch.retry`) reads it, so neither has to import the other's module.
"""

from __future__ import annotations

__all__ = ["TransientApiError"]


class TransientApiError(Exception):
    """A failure that may go away if the same call is made again later."""

    def __init__(
        self,
        message: str,
        *,
        retry_after: float | None = None,
        connection: bool = False,
        status: int | None = None,
    ) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.connection = connection  # no HTTP answer at all (refused, DNS, timeout)
        self.status = status  # the HTTP status, when there was an answer
