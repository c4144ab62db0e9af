"""Handlers of the JSON-answered MCP methods (``subscriptions/listen`` is in :mod:`listen`).

A handler takes the :class:`~labserver.state.Lab` and a validated request and returns the
``result`` object, or raises :class:`RpcError`. Every result carries ``resultType`` and
``_meta.serverInfo`` (spec §1.1, §4.1). Caching hints are ``ttlMs: 0`` everywhere: the
lab's state can change at any moment through the control surface, so nothing it says
should be served from a cache.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any, Final

from labserver.resources import InvalidCursor, decode_cursor, page
from labserver.state import Lab
from labserver.validation import McpRequest
from service.mcp import wire


class RpcError(Exception):
    """A JSON-RPC error raised by a handler; ``status`` is the HTTP status to use."""

    def __init__(self, code: int, message: str, data: Any = None, status: int = 400) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data
        self.status = status


def invalid_params(message: str, data: Any = None) -> RpcError:
    # Handler-level -32602 is HTTP 400, as the Python SDK does (spec §2.3 step 7).
    return RpcError(wire.INVALID_PARAMS, message, data, 400)


def complete(lab: Lab, **fields: Any) -> dict[str, Any]:
    return {"resultType": "complete", **fields, "_meta": {wire.META_SERVER_INFO: lab.server_info}}


def capabilities(lab: Lab) -> dict[str, Any]:
    return {
        "resources": {
            "subscribe": lab.config.advertise_subscribe,
            "listChanged": lab.config.advertise_list_changed,
        },
        "tools": {},
    }


TOOLS: Final[list[dict[str, Any]]] = [
    {
        "name": "get_review_status",
        "description": "Return the current text of test://review/status.",
        "inputSchema": {"type": "object", "properties": {}},
    },
    {
        "name": "echo_tool",
        "description": "Echo `message` back; return isError=true when `shouldError` is true.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "message": {"type": "string"},
                "shouldError": {"type": "boolean"},
            },
        },
    },
]


async def discover(lab: Lab, request: McpRequest) -> dict[str, Any]:
    # ``subscribe``: whether this answer advertised resources.subscribe (the verdicts do
    # not ask a client to listen to a server that said it cannot deliver).
    lab.log.record("discover", subscribe=lab.config.advertise_subscribe)
    return complete(
        lab,
        supportedVersions=[wire.PROTOCOL_VERSION],
        capabilities=capabilities(lab),
        instructions="Lab server: listen on test://review/status and watch it change.",
        ttlMs=lab.config.discover_ttl_ms,
        cacheScope="public",
    )


async def resources_list(lab: Lab, request: McpRequest) -> dict[str, Any]:
    lab.console.info("[resources/list] requested")
    lab.log.record("resources.list")
    offset = 0
    if request.params.get("cursor") is not None:
        try:
            offset = decode_cursor(request.params["cursor"])
        except InvalidCursor as exc:
            raise invalid_params(f"Invalid cursor: {exc}") from exc
    items, next_cursor = page(list(lab.resources.values()), offset, lab.config.page_size)
    fields: dict[str, Any] = {"resources": [r.listing() for r in items]}
    if next_cursor is not None:
        fields["nextCursor"] = next_cursor
    return complete(lab, **fields, ttlMs=0, cacheScope="public")


async def resources_templates_list(lab: Lab, request: McpRequest) -> dict[str, Any]:
    return complete(lab, resourceTemplates=[], ttlMs=0, cacheScope="public")


async def resources_read(lab: Lab, request: McpRequest) -> dict[str, Any]:
    uri = request.params.get("uri")
    if not isinstance(uri, str):
        raise invalid_params("Invalid params: uri must be a string")
    if lab.config.read_delay_ms:
        await asyncio.sleep(lab.config.read_delay_ms / 1000)
    resource = lab.read(uri)
    if resource is None:
        raise invalid_params(f"Unknown resource URI: {uri}", {"uri": uri})
    lab.console.info(f"[resources/read] uri={uri} version={resource.version}")
    lab.log.record("resources.read", uri=uri, version=resource.version)
    return complete(lab, contents=[resource.contents()], ttlMs=0, cacheScope="private")


async def tools_list(lab: Lab, request: McpRequest) -> dict[str, Any]:
    return complete(lab, tools=TOOLS, ttlMs=0, cacheScope="public")


def _text_result(lab: Lab, text: str, is_error: bool = False) -> dict[str, Any]:
    return complete(lab, content=[{"type": "text", "text": text}], isError=is_error)


async def tools_call(lab: Lab, request: McpRequest) -> dict[str, Any]:
    name = request.params.get("name")
    if not isinstance(name, str):
        raise invalid_params("Invalid params: name must be a string")
    arguments = request.params.get("arguments")
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise invalid_params("Invalid params: arguments must be an object")
    if name not in ("get_review_status", "echo_tool"):
        raise invalid_params(f"Unknown tool: {name}", {"name": name})
    if lab.config.call_delay_ms:
        await asyncio.sleep(lab.config.call_delay_ms / 1000)
    if name == "get_review_status":
        lab.console.info("[tools/call] get_review_status")
        lab.log.record("tools.call", name=name)
        review = lab.review()
        return _text_result(lab, review.text if review is not None else "")
    message = arguments.get("message")
    should_error = arguments.get("shouldError")
    if message is not None and not isinstance(message, str):
        raise invalid_params("Invalid arguments for echo_tool: message must be a string")
    if should_error is not None and not isinstance(should_error, bool):
        raise invalid_params("Invalid arguments for echo_tool: shouldError must be a boolean")
    # Compact like JSON.stringify, so the line matches the original server's.
    shown = json.dumps(arguments, separators=(",", ":"), ensure_ascii=False)
    lab.console.info(f"[tools/call] echo_tool {shown}")
    lab.log.record("tools.call", name=name, arguments=arguments)
    return _text_result(lab, message or "", should_error is True)


Handler = Callable[[Lab, McpRequest], Awaitable[dict[str, Any]]]

HANDLERS: Final[dict[str, Handler]] = {
    wire.DISCOVER: discover,
    wire.RESOURCES_LIST: resources_list,
    wire.RESOURCES_TEMPLATES_LIST: resources_templates_list,
    wire.RESOURCES_READ: resources_read,
    wire.TOOLS_LIST: tools_list,
    wire.TOOLS_CALL: tools_call,
}
