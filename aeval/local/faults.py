"""Seeded fault injection: the failures the real API throws at a long run.

A :class:`FaultPlan` is a seed and an ordered list of :class:`FaultRule`. Each rule fires
on the matching events it selects: after ``skip`` of them, with probability ``rate``, at
most ``times`` times. Whether the n-th matching event fires depends only on (seed, rule
position, n), so a failing test replays exactly.

On the command line one ``--faults`` value is ``KIND[@ENDPOINT][:key=value,…]``, e.g.
``http@POST /v1/batches:status=429,retry_after=0.2,times=2`` or
``expire:fraction=0.5,model=gpt-4o*,metadata.aeval_run=r1``; several are separated by ``;``.
"""

from __future__ import annotations

import fnmatch
import hashlib
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal, get_args

from aeval.errors import ConfigError
from aeval.local.options import parse_fields, split_items
from aeval.local.state import BatchRecord

__all__ = ["FaultInjector", "FaultKind", "FaultPlan", "FaultRule", "parse_faults"]

FaultKind = Literal["http", "drop", "slow", "token_limit", "expire", "stuck_finalizing", "fail",
                    "cancel_fail", "request_error"]  # fmt: skip
_HTTP_KINDS = ("http", "drop", "slow")


@dataclass(frozen=True, slots=True)
class FaultRule:
    """One kind of failure and when it strikes.

    Matched by request (``http``, ``drop``, ``slow``): ``endpoint``, ``"[METHOD ]PATH-GLOB"``, and
    ``provider``, a glob on the API a request speaks (``openai``, ``anthropic``, ``google``,
    ``together``, ``mistral``: some paths are shared). Matched by batch (the rest): ``model``, a
    glob on the batch's model, and ``metadata`` items it must contain.

    - ``http``: answer ``status`` with the wire's error body and ``Retry-After:
      retry_after`` (omitted when ``None``); ``code`` picks another error of that status
      (``insufficient_quota``: the 429 that is not a rate limit);
    - ``drop``: close the connection half-way through the response; with ``after=True`` the request
      is carried out first and only the response is lost (what makes a naive client submit twice);
    - ``slow``: wait ``delay`` seconds, then answer;
    - ``token_limit`` / ``fail``: the batch fails validation (``token_limit_exceeded`` /
      ``server_error``);
    - ``expire``: the batch expires once ``fraction`` of its requests are done;
    - ``stuck_finalizing``: the batch stays in ``finalizing`` ``delay`` seconds longer, or
      until it is cancelled;
    - ``cancel_fail``: a cancel of the batch answers 500 and the batch runs on;
    - ``request_error``: a request of the batch fails with ``status`` (and ``code``, e.g. Gemini's
      ``FAILED_PRECONDITION``) in its results; ``rate`` and ``times`` count requests.
    """

    kind: FaultKind
    endpoint: str = "*"
    status: int = 429
    code: str | None = None
    retry_after: float | None = 1.0
    delay: float = 1.0
    fraction: float = 0.5
    after: bool = False
    rate: float = 1.0
    times: int | None = None
    skip: int = 0
    model: str = "*"
    metadata: Mapping[str, str] = field(default_factory=dict)
    provider: str = "*"

    def __post_init__(self) -> None:
        if self.kind not in get_args(FaultKind):
            raise ConfigError(
                f"unknown fault kind {self.kind!r}: use one of {', '.join(get_args(FaultKind))}"
            )
        if not 0.0 <= self.rate <= 1.0 or not 0.0 <= self.fraction <= 1.0:
            raise ConfigError(f"fault {self.kind}: rate and fraction must be between 0 and 1")
        if self.kind in ("http", "request_error") and not 400 <= self.status <= 599:
            raise ConfigError(f"fault {self.kind}: status {self.status} is not an HTTP error")

    def matches_request(self, method: str, path: str) -> bool:
        want_method, _, want_path = self.endpoint.rpartition(" ")
        if want_method and want_method.upper() != method.upper():
            return False
        return fnmatch.fnmatchcase(path, want_path or "*")

    def matches_batch(self, model: str | None, metadata: Mapping[str, str]) -> bool:
        if not fnmatch.fnmatchcase(model or "", self.model):
            return False
        return all(metadata.get(k) == v for k, v in self.metadata.items())


@dataclass(frozen=True, slots=True)
class FaultPlan:
    """The faults of one server: an ordered list of rules and the seed that drives them."""

    rules: tuple[FaultRule, ...] = ()
    seed: int = 0


class FaultInjector:
    """Decides, event by event, which rule of a plan fires; counts what it injected.

    One running server's (its counters are that server's); asked from several threads.
    """

    def __init__(self, plan: FaultPlan | None) -> None:
        self._plan = plan or FaultPlan()
        self._seen = [0] * len(self._plan.rules)
        self._fired = [0] * len(self._plan.rules)
        self._lock = threading.Lock()
        self._injected: Counter[str] = Counter()

    def for_request(self, method: str, path: str, wire: str = "openai") -> FaultRule | None:
        """The HTTP fault for a request to ``path`` in ``wire``'s API
        (:func:`aeval.local.layers.wire_of`), if one fires."""
        return self._first(
            lambda r: r.kind in _HTTP_KINDS and r.matches_request(method, path)
            and fnmatch.fnmatchcase(wire, r.provider)
        )  # fmt: skip

    def for_batch(self, kind: FaultKind, batch: BatchRecord) -> FaultRule | None:
        metadata = batch.metadata or {}
        return self._first(lambda r: r.kind == kind and r.matches_batch(batch.model, metadata))

    def injected(self) -> dict[str, int]:
        with self._lock:
            return dict(self._injected)

    def _first(self, wanted: Callable[[FaultRule], bool]) -> FaultRule | None:
        with self._lock:
            for position, rule in enumerate(self._plan.rules):
                if not wanted(rule):
                    continue
                n = self._seen[position]
                self._seen[position] += 1
                if n < rule.skip or (
                    rule.times is not None and self._fired[position] >= rule.times
                ):
                    continue
                if rule.rate < 1.0 and _unit(self._plan.seed, position, n) >= rule.rate:
                    continue
                self._fired[position] += 1
                self._injected[f"http:{rule.status}" if rule.kind == "http" else rule.kind] += 1
                return rule
        return None


def _unit(seed: int, position: int, n: int) -> float:
    digest = hashlib.blake2b(f"{seed}/{position}/{n}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def parse_faults(values: Iterable[str], seed: int = 0) -> FaultPlan:
    """Parse ``--faults`` values (see the module docstring) into a plan."""
    return FaultPlan(rules=tuple(_rule(item) for item in split_items(values)), seed=seed)


def _rule(item: str) -> FaultRule:
    head, _, options = item.partition(":")
    kind, _, endpoint = head.partition("@")
    metadata: dict[str, str] = {}

    def metadata_item(key: str, raw: str) -> bool:
        if key.startswith("metadata."):
            metadata[key.removeprefix("metadata.")] = raw
        return key.startswith("metadata.")

    fields = {"kind": kind.strip(), "endpoint": endpoint.strip() or "*", "metadata": metadata}
    return parse_fields("--faults", item, options, FaultRule, fields, metadata_item)
