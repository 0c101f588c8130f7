"""``/ui``: the inspector page (:mod:`edgewise.serve.api.inspector`), served by the app itself.

The page, its style and its script need no API key (a browser's navigation sends none); the page
calls the API (``/v1/capabilities``, ``/v1/pack``, ``/v1/prune``; ``/v1/retrieve`` when the server
has a ``--store``) and ``/ui/curve`` with the key typed into it, when the server has one. Every
answer of ``/ui`` carries a Content-Security-Policy that lets the page run only its own script and
style and talk only to this server, so a chunk's text that holds markup could do nothing even if it were ever parsed as such. None of it is in
``/openapi.json``: it is a page, not an endpoint of the API.

>>> from fastapi.testclient import TestClient
>>> from edgewise.serve.app import create_app
>>> from edgewise.serve.config import ServeConfig
>>> with TestClient(create_app(ServeConfig(api_key=None))) as client:
...     r = client.get("/ui")
>>> r.status_code, r.headers["content-type"], r.headers["content-security-policy"] == SERVED_POLICY
(200, 'text/html; charset=utf-8', True)
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response

from ..errors import ApiError
from .assets import resolve_spec
from .inspector import SERVED_POLICY, asset, curve, page

#: the headers of every answer of /ui: the policy, no type sniffing, no referrer, never in a frame
HEADERS = {"Content-Security-Policy": SERVED_POLICY, "X-Content-Type-Options": "nosniff",
           "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY", "Cache-Control": "no-cache"}
_TYPES = {"inspector.css": "text/css; charset=utf-8", "inspector.js": "text/javascript; charset=utf-8"}


def router(keyed: list[Any]) -> APIRouter:
    """The page and its files (no key), and ``/ui/curve`` (behind ``keyed``: the API's key check)."""
    r = APIRouter(include_in_schema=False)

    @r.get("/ui")
    async def ui() -> Response:
        return Response(page(), media_type="text/html; charset=utf-8", headers=HEADERS)

    @r.get("/ui/curve", dependencies=keyed)
    def position_curve(request: Request, profile: str | None = Query(default=None),
                       strategy: str | None = Query(default=None)) -> JSONResponse:
        """The position curve of a pack: the profile ``order="auto"`` chose, by name, or the file of
        a ``calibrated:FILE`` order, read from ``--assets`` like the order reads it."""
        assets = request.app.state.assets
        if (profile is None) == (strategy is None):
            raise ApiError(422, "invalid_input", "/ui/curve takes one of profile (a profile's name) or strategy "
                                                 "(calibrated:FILE)")
        found = curve(profile=profile, strategy=strategy,
                      resolve=lambda arg: resolve_spec("orders", f"calibrated:{arg}", assets).partition(":")[2])
        if found is None:
            what = f"profile {profile!r}" if profile else f"order {strategy!r}"
            raise ApiError(404, "not_found", f"no position curve for {what}: edgewise list shows the profiles found")
        return JSONResponse(found, headers=HEADERS)

    @r.get("/ui/{name}")
    async def static(name: str) -> Response:
        if name not in _TYPES:
            raise ApiError(404, "not_found", f"the inspector's files are {', '.join(_TYPES)}, but got {name!r}")
        return Response(asset(name), media_type=_TYPES[name], headers=HEADERS)

    return r
