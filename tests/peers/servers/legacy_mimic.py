"""A 2025-era-only server, answering a 2026-07-28 client the way real legacy servers do.

The official SDK 2.x cannot be made legacy-only: its ``StreamableHTTPSessionManager`` routes
every request whose ``MCP-Protocol-Version`` header is not a handshake-era version to the
modern (2026-07-28) handler, whatever ``stateless_http`` says. So this is a tiny Starlette
app that mimics the answers documented in spec §1.6 (python ``mcp`` 1.x, v1.29
``streamable_http.py``), checked in 1.x's order (Accept, Content-Type, JSON, then session,
then protocol version):

* ``--variant stateful``: 400, ``-32600`` "Bad Request: Missing session ID" (id
  ``"server-error"``), with a fresh ``mcp-session-id`` header, as 1.x's stateful manager does
  for a non-initialize request without a session;
* ``--variant stateless``: 400, ``-32600`` "Bad Request: Unsupported protocol version: …";
* ``--variant method-not-found``: a server that ignores the header answers
  ``server/discover`` with HTTP 200 and ``-32601`` "Method not found".

A legacy ``initialize`` (no 2026 header) would be served, to show the server is alive; our
client must never send one. stdout: ``PORT <n>``, then ``POST <method> <header>`` per request.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from _serve import parse_port, serve
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

SUPPORTED = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]


def _error(status: int, code: int, message: str, rid: Any = "server-error", **headers: str):
    body = {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}
    return JSONResponse(body, status_code=status, headers=headers)


def build(variant: str) -> Starlette:
    async def mcp(request: Request) -> Response:
        if request.method != "POST":
            return Response(status_code=405)
        accept = request.headers.get("accept", "")
        if "application/json" not in accept or "text/event-stream" not in accept:
            return _error(
                406,
                -32600,
                "Not Acceptable: Client must accept both application/json and text/event-stream",
            )
        if not request.headers.get("content-type", "").startswith("application/json"):
            return _error(
                415, -32600, "Unsupported Media Type: Content-Type must be application/json"
            )
        try:
            message = json.loads(await request.body())
        except ValueError:
            return _error(400, -32700, "Parse error")
        method = message.get("method")
        version = request.headers.get("mcp-protocol-version")
        print(f"POST {method} {version}", flush=True)
        rid = message.get("id")
        if method == "initialize":
            result = {
                "protocolVersion": "2025-11-25",
                "capabilities": {"resources": {"subscribe": True}},
                "serverInfo": {"name": "legacy-mimic", "version": "1.29.0"},
            }
            return JSONResponse({"jsonrpc": "2.0", "id": rid, "result": result})
        if variant == "stateful" and "mcp-session-id" not in request.headers:
            return _error(
                400,
                -32600,
                "Bad Request: Missing session ID",
                **{"mcp-session-id": uuid.uuid4().hex},
            )
        if variant == "stateless" and version is not None and version not in SUPPORTED:
            return _error(
                400,
                -32600,
                f"Bad Request: Unsupported protocol version: {version}. "
                f"Supported versions: {', '.join(SUPPORTED)}",
            )
        if rid is None:
            return Response(status_code=202)
        return _error(200, -32601, "Method not found", rid)

    return Starlette(routes=[Route("/mcp", mcp, methods=["GET", "POST", "DELETE"])])


def main() -> None:
    args = parse_port(
        __doc__ or "",
        lambda p: p.add_argument(
            "--variant", choices=["stateful", "stateless", "method-not-found"], required=True
        ),
    )
    serve(build(args.variant), args.port)


if __name__ == "__main__":
    main()
