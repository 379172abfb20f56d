"""The grammar ``--models`` and ``--faults`` share: values split into ``;``-separated
items, each with a comma-separated list of ``key=value`` options."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from aeval.errors import ConfigError

__all__ = ["parse_options", "split_items"]


def split_items(values: Iterable[str]) -> Iterator[str]:
    """The non-blank ``;``-separated items of (repeated) flag values, stripped."""
    for value in values:
        for item in (part.strip() for part in value.split(";")):
            if item:
                yield item


def parse_options(flag: str, item: str, options: str, apply: Callable[[str, str], None]) -> None:
    """Call ``apply(key, raw_value)`` for each ``key=value`` in ``options`` (keys stripped).

    A ``ValueError`` (no ``=``, or one ``apply`` raises for an unknown key or a
    bad number) becomes a :class:`ConfigError` naming ``flag``, ``item`` and the option.
    """
    for option in (o.strip() for o in options.split(",") if o.strip()):
        key, sep, raw = option.partition("=")
        try:
            if not sep:
                raise ValueError("missing '='")
            apply(key.strip(), raw)
        except ValueError as err:
            raise ConfigError(f"{flag} {item!r}: {option!r}: {err}") from err
