"""The local server's HTTP surface: every provider's wire on one port.

Each provider's routes come from its codec (:mod:`aeval.local.batch_api` and the ``wire_*``
modules); the direct completion routes from :mod:`aeval.local.direct`; aeval's own ``/aeval/…``
routes from here. Pure-ASGI layers sit in front (:mod:`aeval.local.layers`): authentication (only
when the server has an API key), fault injection, and the router that tells the wires apart.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from aeval.local.context import ServerContext
from aeval.local.direct import direct_routes
from aeval.local.layers import Gateway
from aeval.local.models import describe_models
from aeval.local.wire_anthropic import AnthropicCodec
from aeval.local.wire_azure import AzureV1Codec
from aeval.local.wire_gemini import GeminiCodec
from aeval.local.wire_mistral import MistralCodec
from aeval.local.wire_openai import AzureCodec, GroqCodec, OpenAICodec
from aeval.local.wire_together import TogetherCodec
from aeval.local.wire_xai import XaiCodec

__all__ = ["COUNTERS_PATH", "RESPONDERS_PATH", "build_app"]

COUNTERS_PATH = "/aeval/counters"
# Which responders answer here: a run sent to this server records it (aeval.store.provenance).
RESPONDERS_PATH = "/aeval/responders"


def _aeval_routes(ctx: ServerContext) -> list[Route]:
    """Outside the providers' APIs: counters for tests that run the server in another
    process (aeval.local.fetch_counters), and which responders answer (provenance)."""

    async def counters(request: Request) -> Response:
        counted = ctx.store.counters(ctx.faults.injected()).to_json()
        return JSONResponse({**counted, "direct": ctx.direct.counters().to_json()})

    async def responders(request: Request) -> Response:
        specs = ctx.router.models
        synthetic = any(spec.responder != "replay" for spec in specs.values())
        body = {"server": "aeval-local", "synthetic": synthetic}
        return JSONResponse({**body, "responders": describe_models(specs)})

    return [
        Route(COUNTERS_PATH, counters, methods=["GET"]),
        Route(RESPONDERS_PATH, responders, methods=["GET"]),
    ]


def build_app(ctx: ServerContext) -> ASGIApp:
    """The ASGI app of one server: every wire's routes behind the auth and fault layers."""

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with anyio.create_task_group() as tg:
            ctx.task_group = tg
            # A persistent store may hold batches a previous server left unfinished.
            for batch in list(ctx.store.batches.values()):
                if not batch.terminal:
                    ctx.start(batch)
            try:
                yield
            finally:
                tg.cancel_scope.cancel()
                ctx.task_group = None

    codecs = {"openai": OpenAICodec(), "anthropic": AnthropicCodec(), "google": GeminiCodec(),
              "together": TogetherCodec(), "mistral": MistralCodec(),
              "xai": XaiCodec(), "azure": AzureV1Codec()}  # fmt: skip
    # Azure's and Groq's shapes of OpenAI's API, and the direct routes, live on its wire.
    shapes = [AzureCodec(), GroqCodec()]
    extra = [*shapes[0].app(ctx).routes, *shapes[1].app(ctx).routes,
             *direct_routes(ctx.router, ctx.direct), *_aeval_routes(ctx)]  # fmt: skip
    apps = {wire: codec.app(ctx) for wire, codec in codecs.items() if wire != "openai"}
    apps["openai"] = codecs["openai"].app(ctx, extra, lifespan=lifespan)
    return Gateway(apps, codecs, ctx, shapes)
