"""The one exception a person can act on, found inside the nested exception groups that
task groups raise (a full disk under the engine's tasks, a verifier that cannot start)."""

from __future__ import annotations

from typing import TypeVar

__all__ = ["first_of"]

E = TypeVar("E", bound=BaseException)


def first_of(
    err: BaseException, kind: type[E], *, unless: tuple[type[BaseException], ...] = ()
) -> E | None:
    """The first ``kind`` in ``err``: ``err`` itself, or the first such leaf of its nested
    exception groups, in their order; an exception of ``unless`` does not count."""
    if isinstance(err, BaseExceptionGroup):
        for inner in err.exceptions:
            found = first_of(inner, kind, unless=unless)
            if found is not None:
                return found
        return None
    return err if isinstance(err, kind) and not isinstance(err, unless) else None
