"""Credentials from an SDK's own key and base-URL variables (every provider but OpenAI, whose
Azure variables :func:`aeval.api_settings.resolve_credentials` reads)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aeval.api_settings import Credentials

__all__ = ["key_credentials"]


def key_credentials(
    env: Mapping[str, str], key_variables: Sequence[str], base_url_variable: str | None
) -> Credentials | None:
    """The first key set among ``key_variables`` (in the SDK's order of preference) and the
    base URL, or ``None`` when no key is set."""
    key = next((env[v].strip() for v in key_variables if (env.get(v) or "").strip()), "")
    if not key:
        return None
    base_url = (env.get(base_url_variable) or "").strip() if base_url_variable else ""
    return Credentials(api_key=key, base_url=base_url or None)
