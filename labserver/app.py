"""The Starlette application: the MCP endpoint(s), ``/healthz`` and, if enabled, ``/lab``.

The MCP endpoint is one function that walks the validation ladder of
:mod:`labserver.validation`, lets the fault-injection knobs answer first where they
apply, then dispatches to a handler. Every response from it carries
``X-Accel-Buffering: no`` so that a reverse proxy in front of the lab never buffers a
listen stream (seed §6.2).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any, Final

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from labserver.control import control_routes
from labserver.faults import injected_answer
from labserver.handlers import HANDLERS, RpcError
from labserver.listen import open_listen
from labserver.oauth import OAuthGateway, oauth_control_routes, oauth_routes
from labserver.report import report_routes
from labserver.requestinfo import CURRENT_REQUEST, describe
from labserver.settings import DEFAULT_PATH, Settings
from labserver.state import Lab
from labserver.validation import (
    Rejection,
    check_http,
    check_request,
    parse_message,
)
from service.mcp import wire

ACCEL: Final = {"X-Accel-Buffering": "no"}
KNOWN_METHODS: Final = frozenset({*HANDLERS, wire.LISTEN})
ALL_HTTP_METHODS: Final = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]


def json_reply(status: int, body: Any, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(body, status_code=status, headers={**ACCEL, **(headers or {})})


def _reject(lab: Lab, rejection: Rejection) -> Response:
    lab.log.record("http.error", status=rejection.status, code=rejection.code)
    lab.console.error(f"[server/error] {rejection.message}")
    return json_reply(rejection.status, rejection.body(), dict(rejection.headers))


async def _read_capped(request: Request, limit: int) -> bytes | None:
    """The body, or ``None`` as soon as it is known to exceed ``limit`` bytes."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


class HeldResponse(Response):
    """``silentMethods``: accept and never answer, until shutdown or client disconnect."""

    def __init__(self, lab: Lab) -> None:
        self.lab = lab
        self.status_code = 503
        self.background = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def disconnected() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass

        waits = [
            asyncio.ensure_future(disconnected()),
            asyncio.ensure_future(self.lab.shutting_down.wait()),
        ]
        done, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        if waits[1] in done:
            reply = PlainTextResponse("lab: shutting down\n", status_code=503, headers=ACCEL)
            await reply(scope, receive, send)


async def mcp_endpoint(request: Request) -> Response:
    lab: Lab = request.app.state.lab
    config = lab.config
    headers = [
        (k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in request.scope["headers"]
    ]
    gateway: OAuthGateway | None = request.app.state.oauth
    if gateway is not None:  # MCP_TEST_AUTH=oauth: tokens issued by labserver.oauth
        challenge = gateway.challenge(request)
        if challenge is not None:
            lab.log.record("http.error", status=401, code="invalid_token")
            return challenge
    body = await _read_capped(request, config.max_body_bytes) if request.method == "POST" else b""
    # Who sent it (for the per-client verdicts); later entries of this request point here.
    remote = request.client.host if request.client is not None else None
    seen = lab.log.record("mcp.request", **describe(request.method, headers, body, remote))
    CURRENT_REQUEST.set(seen["seq"])
    rejection = check_http(request.method, headers, body, auth_token=config.auth_token)
    if rejection is not None:
        return _reject(lab, rejection)
    assert body is not None  # check_http refused the oversized case
    message = parse_message(body)
    if isinstance(message, Rejection):
        return _reject(lab, message)
    if message.is_notification:
        lab.log.record("notification.received", method=message.method)
        return Response(status_code=202, headers=ACCEL)
    injected = injected_answer(config.legacy_mode, config.fail_methods, message, headers)
    if injected is not None:
        error = injected.body.get("error") if injected.body is not None else None
        if injected.status >= 400 or error is not None:
            code = error.get("code") if isinstance(error, dict) else None
            lab.log.record("http.error", status=injected.status, code=code, injected=True)
        else:
            lab.log.record("legacy.answer", method=message.method, status=injected.status)
        if injected.body is not None:
            return json_reply(injected.status, injected.body)
        return PlainTextResponse(injected.text, status_code=injected.status, headers=ACCEL)
    request_or_rejection = check_request(message, headers, KNOWN_METHODS)
    if isinstance(request_or_rejection, Rejection):
        return _reject(lab, request_or_rejection)
    mcp_request = request_or_rejection
    rid = mcp_request.request_id
    if mcp_request.method in config.silent_methods:
        lab.log.record("request.held", method=mcp_request.method)
        return HeldResponse(lab)
    try:
        if mcp_request.method == wire.LISTEN:
            return open_listen(lab, mcp_request)
        result = await HANDLERS[mcp_request.method](lab, mcp_request)
    except RpcError as exc:
        lab.log.record("http.error", status=exc.status, code=exc.code)
        lab.console.error(f"[server/error] {exc.message}")
        return json_reply(exc.status, wire.error_response(rid, exc.code, exc.message, exc.data))
    except Exception as exc:  # a lab bug must still answer in JSON-RPC
        lab.log.record("http.error", status=500, code=wire.INTERNAL_ERROR)
        lab.console.error(f"[server/error] {exc!r}")
        return json_reply(500, wire.error_response(rid, wire.INTERNAL_ERROR, "Internal error"))
    return json_reply(200, wire.result_response(rid, result))


async def healthz(request: Request) -> Response:
    return JSONResponse({"ok": True})


def create_app(
    settings: Settings, lab: Lab | None = None, oauth: OAuthGateway | None = None
) -> Starlette:
    """Build the app; ``lab`` may be passed in so the process shell can reach its state.

    ``oauth`` (default: from ``MCP_TEST_AUTH=oauth`` in the environment) puts the OAuth
    gateway of :mod:`labserver.oauth` in front of the MCP endpoint(s).
    """
    lab = lab or Lab(settings)
    oauth = oauth or OAuthGateway.from_env(os.environ)
    paths = [DEFAULT_PATH] + ([settings.path] if settings.path != DEFAULT_PATH else [])
    routes: list[Any] = [
        Route(path, mcp_endpoint, methods=ALL_HTTP_METHODS, name=f"mcp:{path}") for path in paths
    ]
    routes.append(Route("/healthz", healthz, methods=["GET"]))
    routes.extend(report_routes())  # read-only, so mounted without MCP_TEST_CONTROL too
    if oauth is not None:
        routes.extend(oauth_routes(paths, settings.path))
    if settings.control:
        routes.extend(control_routes())
        if oauth is not None:
            routes.extend(oauth_control_routes())
    app = Starlette(routes=routes)
    app.state.lab = lab
    app.state.oauth = oauth
    return app
