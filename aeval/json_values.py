"""What a JSON file of a run holds, as types: the records aeval writes (``config.json``,
``manifest.json``'s shards, ``verdicts.jsonl``'s lines) and reads back."""

from __future__ import annotations

from typing import TypeAlias

__all__ = ["JsonObject", "JsonValue"]

JsonValue: TypeAlias = "bool | int | float | str | list[JsonValue] | dict[str, JsonValue] | None"
JsonObject: TypeAlias = "dict[str, JsonValue]"
