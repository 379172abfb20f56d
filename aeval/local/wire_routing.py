"""Which provider's wire format a request speaks, so one port can serve them all.

Several providers use the same paths for different shapes (``POST /v1/batches``
is OpenAI's and Together's; ``GET /v1/files`` is OpenAI's, Together's,
Mistral's and, under google-genai 3.x's default API version, Gemini's), so a
request is told apart by what only its SDK sends: Gemini's
``x-goog-api-key``/``x-goog-api-client`` headers, the Together SDK's and the
Mistral SDK's ``User-Agent``, and the paths only one provider has. Everything
else is OpenAI's (and Azure's, Groq's under ``/openai/v1``, the direct routes).
"""

from __future__ import annotations

from collections.abc import Mapping

from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["WIRES", "WireRouter", "wire_of"]

WIRES = ("openai", "google", "together", "mistral")
TOGETHER_UPLOADS = "/together-uploads/"  # where Together's presigned upload URL points


def wire_of(scope: Scope) -> str:
    """The provider whose API a request is meant for: one of :data:`WIRES`."""
    path: str = scope.get("path", "")
    headers = dict(scope.get("headers") or [])
    if (
        b"x-goog-api-key" in headers
        or b"x-goog-api-client" in headers
        or path.startswith(("/v1beta/", "/upload/"))
    ):
        return "google"
    if path.startswith("/v1/batch/jobs"):
        return "mistral"
    if path.startswith(TOGETHER_UPLOADS):
        return "together"
    agent = headers.get(b"user-agent", b"").lower()
    if b"together/python" in agent:  # "AsyncTogether/Python 2.x"
        return "together"
    if agent.startswith(b"mistral-client-python/"):  # the mistralai SDK's own agent
        return "mistral"
    return "openai"


class WireRouter:
    """Hands each request to the app of the provider it speaks to (lifespan: to ``openai``)."""

    def __init__(self, apps: Mapping[str, ASGIApp]) -> None:
        self._apps = dict(apps)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._apps["openai"](scope, receive, send)
            return
        wire = wire_of(scope)
        await self._apps.get(wire, self._apps["openai"])(scope, receive, send)
