"""The proxy (``--upstream URL``, ``--upstream-anthropic URL``): documents packed into a chat on the way.

- :func:`router`: the proxy's routes for a server's settings, its upstreams opened and closed with the app.
- :mod:`.routes`: the OpenAI routes and the upstream client: what is packed, what is forwarded,
  and how the answer comes back.
- :mod:`.conversation`: a chat completions request packed (the budget, the earlier turns kept, the
  splice); :mod:`.openai_responses`: the same for OpenAI's Responses API (``POST /v1/responses``);
  :mod:`.chatformat`: what one chat message costs in tokens.
- :mod:`.anthropic_routes`: Anthropic's Messages API behind the proxy (its upstream, the count of a
  conversation, its error shape); :mod:`.anthropic`: a Messages request packed.
- :mod:`.passthrough`: every other ``/v1/*`` path, forwarded unchanged.
- :mod:`.readbody`: a request body read as strict JSON; :mod:`.rawjson`: its numbers kept as they
  came, so what the proxy does not change is forwarded as sent.
- :mod:`.disconnect`: an upstream call cancelled when the client leaves.

``docs/proxy.md`` is the guide.
"""

from __future__ import annotations

from typing import Any


def router(config: Any) -> Any:
    """The proxy's ``APIRouter`` for ``config.upstream`` (OpenAI) and ``config.upstream_anthropic``
    (Anthropic), one or both; each upstream's client is opened and closed with the app. The app adds
    auth, limits and error mapping."""
    from contextlib import AsyncExitStack, asynccontextmanager

    from fastapi import APIRouter

    from .routes import Upstream, openai_routes, packed_body, passthrough_route

    if not config.upstream and not config.upstream_anthropic:
        raise ValueError("the proxy needs config.upstream or config.upstream_anthropic")
    openai = Upstream(config) if config.upstream else None
    anthropic = None
    if config.upstream_anthropic:
        from .anthropic_routes import AnthropicUpstream

        anthropic = AnthropicUpstream(config)
    upstreams = [u for u in (openai, anthropic) if u is not None]

    @asynccontextmanager
    async def lifespan(app: Any):  # noqa: ANN202
        async with AsyncExitStack() as stack:
            for upstream in upstreams:
                await stack.enter_async_context(upstream.lifespan(app))
            yield

    r = APIRouter(lifespan=lifespan, tags=["proxy"])
    if openai is not None:
        openai_routes(r, openai)
    if anthropic is None:
        passthrough_route(r, openai)
    else:
        from .anthropic_routes import add_routes

        add_routes(r, anthropic, openai, packed_body())  # /v1/messages..., and every other /v1/* path
    return r
