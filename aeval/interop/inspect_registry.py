"""What Inspect AI loads through aeval's ``inspect_ai`` entry point: the names
``aeval/warp`` (the task) and ``aeval/equivalence`` (the scorer)."""

from aeval.interop.inspect_task import equivalence, warp

__all__ = ["equivalence", "warp"]
