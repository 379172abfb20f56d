"""A run's events, given to its subscribers and to every open :meth:`Run.events` iterator."""

from __future__ import annotations

import contextlib
import math
from collections.abc import AsyncIterator, Callable, Iterable

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from aeval.events import Event

__all__ = ["Broadcast"]


class Broadcast:
    """Fan-out of one run's events: synchronous subscribers first, then the iterators.

    A subscriber that raises is counted and ignored (a broken display must not
    break the run); an iterator is never made to wait (its buffer is unbounded).
    """

    def __init__(self, subscribers: Iterable[Callable[[Event], None]] = ()) -> None:
        self._subscribers = list(subscribers)
        self._streams: list[MemoryObjectSendStream[Event]] = []
        self.subscriber_errors = 0

    def subscribe(self, subscriber: Callable[[Event], None]) -> None:
        self._subscribers.append(subscriber)

    def emit(self, event: Event) -> None:
        for subscriber in self._subscribers:
            try:
                subscriber(event)
            except Exception:  # a broken display must not break the run
                self.subscriber_errors += 1
        for stream in self._streams:
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                stream.send_nowait(event)

    def listen(self, *, closed: bool = False) -> AsyncIterator[Event]:
        """An iterator over the events from now on; it ends at :meth:`close`
        (at once if ``closed``)."""
        send, receive = anyio.create_memory_object_stream[Event](math.inf)
        if closed:
            send.close()  # nothing more will come
        else:
            self._streams.append(send)
        return _iterate(receive)

    def close(self) -> None:
        for stream in self._streams:
            stream.close()


async def _iterate(receive: MemoryObjectReceiveStream[Event]) -> AsyncIterator[Event]:
    async with receive:
        async for event in receive:
            yield event
