"""first_of finds the exception a person can act on inside nested exception groups."""

from __future__ import annotations

import errno

from aeval.errors import AevalError, RunDirError
from aeval.exception_groups import first_of


def test_the_first_leaf_of_the_kind_in_order_at_any_depth() -> None:
    wanted, later = RunDirError("first"), AevalError("second")
    group = BaseExceptionGroup(
        "outer", [ValueError("no"), ExceptionGroup("inner", [KeyError("k"), wanted]), later]
    )
    assert first_of(group, AevalError) is wanted
    assert first_of(later, AevalError) is later  # not a group: itself
    assert first_of(group, OSError) is None
    assert first_of(ValueError("no"), AevalError) is None


def test_an_exception_of_unless_does_not_count() -> None:
    disk = OSError(errno.ENOSPC, "No space left on device")
    group = ExceptionGroup("g", [ConnectionResetError("reset"), ExceptionGroup("h", [disk])])
    assert first_of(group, OSError, unless=(ConnectionError,)) is disk
    assert first_of(ConnectionResetError(), OSError, unless=(ConnectionError,)) is None
