"""What every route of one local server shares (a leaf: the routes import it, not the app)."""

from __future__ import annotations

from dataclasses import dataclass, field

from anyio.abc import TaskGroup

from aeval.local.direct import DirectState
from aeval.local.faults import FaultInjector
from aeval.local.models import ModelRouter
from aeval.local.simulated_batch import BatchRunner
from aeval.local.state import BatchRecord, Store
from aeval.local.timing import Limits

__all__ = ["ServerContext"]


@dataclass(slots=True)
class ServerContext:
    """Everything the routes of one server share."""

    store: Store
    router: ModelRouter
    faults: FaultInjector
    runner: BatchRunner
    limits: Limits
    api_key: str | None = None
    loopback: bool = False  # listening on loopback only: requests must name it in ``Host``
    body_timeout_s: float = 60.0  # a body must arrive whole this long after its head
    task_group: TaskGroup | None = field(default=None)
    direct: DirectState = field(default_factory=DirectState)

    def start(self, batch: BatchRecord) -> None:
        """Run ``batch`` through its lifecycle in the server's task group."""
        assert self.task_group is not None, "the app runs inside its lifespan"
        self.task_group.start_soon(self.runner.run, batch)
