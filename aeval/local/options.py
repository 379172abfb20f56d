"""The grammar ``--models`` and ``--faults`` share: values split into ``;``-separated
items, each with a comma-separated list of ``key=value`` options, one a dataclass field."""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from aeval.errors import ConfigError

__all__ = ["parse_fields", "split_items"]

T = TypeVar("T")


def split_items(values: Iterable[str]) -> Iterator[str]:
    """The non-blank ``;``-separated items of (repeated) flag values, stripped."""
    for value in values:
        for item in (part.strip() for part in value.split(";")):
            if item:
                yield item


def parse_fields(flag: str, item: str, options: str, cls: Callable[..., T], fields: dict[str, Any],
                 other: Callable[[str, str], bool] = lambda key, raw: False) -> T:  # fmt: skip
    """``cls(**fields, **options)``, each ``key=value`` of ``options`` parsed to its field's type.

    A key that is no field of ``cls`` (nor one of ``fields``) goes to ``other``, which says
    whether it took it. A bad option becomes a :class:`ConfigError` naming ``flag``, ``item``
    and the option.
    """
    hints = typing.get_type_hints(cls)
    for option in (o.strip() for o in options.split(",") if o.strip()):
        key, sep, raw = (part.strip() for part in option.partition("="))
        try:
            if not sep:
                raise ValueError("missing '='")
            if key in hints and key not in fields:
                fields[key] = _parsed(hints[key], raw)
            elif not other(key, raw):
                raise ValueError(f"unknown option {key!r}")
        except ValueError as err:
            raise ConfigError(f"{flag} {item!r}: {option!r}: {err}") from err
    return cls(**fields)


def _parsed(hint: Any, raw: str) -> object:
    """``raw`` as a value of type ``hint`` (``none`` is None where the field allows it)."""
    kinds = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    if type(None) in kinds and raw.lower() == "none":
        return None
    kind = next(k for k in kinds if k is not type(None))
    if typing.get_origin(kind) is typing.Literal:  # one of a closed set of words
        if raw not in typing.get_args(kind):
            raise ValueError(f"expected one of {', '.join(typing.get_args(kind))}")
        return raw
    if typing.get_origin(kind) is tuple:  # numbers separated by "/" (a comma ends the option)
        return tuple(float(part) for part in raw.split("/"))
    if kind is bool:
        return raw.lower() in ("1", "true", "yes")
    if kind not in (int, float, str):
        raise ValueError("not an option of this form")
    return kind(raw)
