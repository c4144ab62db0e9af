"""The face's tools: JSON schemas, argument parsers and the shape of an answer (pure).

Each tool is one row of ``handlers.TOOLS`` that names its schema and its parser here, its
handler in ``handlers.py`` and its text in ``render.py``. A parser turns the ``arguments``
object into a frozen value or raises :class:`ToolArgError`, before anything is asked of the
daemon. A bad argument is a tool error (``isError: true`` with an ``errorCode`` and a
hint), so the model can correct itself; an unknown tool is a protocol error (-32602).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from service.face import render
from service.face.render import MAX_TEXT_CHARS

DEFAULT_WAIT_S: Final = 25.0
"""wait_for_change's default timeout: under the shortest common client limit (some
streamable-HTTP clients cap a tool call near 30 s; the TypeScript SDK's default request
timeout is 60 s and Claude Code's MCP tool timeout is longer), so a plain call returns
``changed: false`` and a cursor instead of being aborted."""
MAX_WAIT_S: Final = 300.0
PROGRESS_EVERY_S: Final = 5.0
"""With a progress token, wait_for_change reports progress this often (at most 10 s apart:
clients that reset their timeout on progress keep waiting)."""
MAX_PROGRESS_EVERY_S: Final = 10.0
MAX_URIS: Final = 100
MAX_CHANGES: Final = 200
MAX_STRING: Final = 8192

CLIENT_TOOL_LIMITS_S: Final[dict[str, tuple[float, str]]] = {
    "codex-mcp-client": (60.0, "Codex CLI: tool_timeout_sec, 60 s by default"),
    "gemini-cli-mcp-client": (600.0, "Gemini CLI: the MCP server timeout, 10 min by default"),
    "claude-ai": (60.0, "Claude Desktop: about 60 s, not configurable"),
    "claude-code": (
        100_000.0,
        "Claude Code: MCP_TOOL_TIMEOUT, about 28 h by default; its idle timeout on remote "
        "servers is reset by progress",
    ),
}
"""Known clients' limit on one tool call, by ``clientInfo.name`` (reference/agents.md §2 and
§6): the client cuts a call that runs longer and the model gets an error, not the cursor.
``wait_for_change`` ends :data:`WAIT_MARGIN_S` before it. A client not named here keeps
:data:`MAX_WAIT_S` (docs/agents-face.md has this table)."""
WAIT_MARGIN_S: Final = 10.0
"""How long before a client's limit a clamped wait ends: the answer still has to travel, and
a client's clock starts before ours."""

_CURSOR = {
    # One type: Gemini CLI's Ajv (strict mode) warned twice per start on ["integer",
    # "string"]. A string of digits from an older client is still accepted (cursor()).
    "type": "integer",
    "minimum": 0,
    "description": "an eventId or cursor returned earlier; default: the newest event now",
}
_ERROR_FIELDS = {
    "errorCode": {"type": "string"},
    "message": {"type": "string"},
    "hint": {"type": ["string", "null"]},
}

SUBSCRIBE: Final[dict[str, Any]] = {
    "description": (
        "Watch resource URI(s) on an MCP server (only servers the daemon allows for "
        "agents). Returns each subscription's first stored state, or an errorCode and hint."
    ),
    "inputSchema": {
        "type": "object",
        "properties": {
            "url": {"type": "string", "description": "the MCP server's endpoint URL"},
            "uri": {  # anyOf, not a type list: one type per schema (Gemini CLI's Ajv)
                "anyOf": [
                    {"type": "string"},
                    {"type": "array", "items": {"type": "string"}, "maxItems": MAX_URIS},
                ],
                "description": "a resource URI, or a list of them",
            },
        },
        "required": ["url", "uri"],
    },
    "annotations": {"readOnlyHint": False, "openWorldHint": True},
}
UNSUBSCRIBE: Final[dict[str, Any]] = {
    "description": "Stop watching a URI (url picks the server when several watch it).",
    "inputSchema": {
        "type": "object",
        "properties": {"uri": {"type": "string"}, "url": {"type": "string"}},
        "required": ["uri"],
    },
    "annotations": {"readOnlyHint": False, "destructiveHint": True},
}
LIST_SUBSCRIPTIONS: Final[dict[str, Any]] = {
    "description": "Every watched URI: state, revision, last read, and the link's health.",
    "inputSchema": {"type": "object", "properties": {}},
    "annotations": {"readOnlyHint": True},
}
READ: Final[dict[str, Any]] = {
    "description": (
        "The latest stored content of a watched URI, its revision and eventId (from the "
        "daemon's store; no round trip to the server). A text longer than "
        f"{MAX_TEXT_CHARS} characters comes in parts: pass the answer's nextOffset as "
        "offset for the next one."
    ),
    "inputSchema": {
        "type": "object",
        "properties": {
            "uri": {"type": "string"},
            "url": {"type": "string"},
            "offset": {
                "type": "integer",
                "minimum": 0,
                "description": "the first character of the text to return (default 0)",
            },
        },
        "required": ["uri"],
    },
    "annotations": {"readOnlyHint": True},
}
WAIT_FOR_CHANGE: Final[dict[str, Any]] = {
    "description": (
        "Block until a watched URI (glob pattern allowed) gets a revision newer than "
        f"`after`, at most timeoutSeconds (default {DEFAULT_WAIT_S:g}, max {MAX_WAIT_S:g}; "
        "less when your client cuts tool calls sooner). "
        "Returns changed/uri/revision/initialText/finalText/diff; on timeout changed=false "
        "and a cursor: pass it back as `after` so nothing between two calls is missed."
    ),
    "inputSchema": {
        "type": "object",
        "properties": {
            "uri": {"type": "string", "description": "URI or glob pattern; default any"},
            "after": _CURSOR,
            "timeoutSeconds": {"type": "number", "minimum": 0, "maximum": MAX_WAIT_S},
        },
    },
    "annotations": {"readOnlyHint": True},
}
CHANGES_SINCE: Final[dict[str, Any]] = {
    "description": "The events after a cursor (oldest first), without blocking.",
    "inputSchema": {
        "type": "object",
        "properties": {
            "after": _CURSOR,
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_CHANGES},
            "uri": {"type": "string", "description": "URI or glob pattern"},
        },
    },
    "annotations": {"readOnlyHint": True},
}
OUTPUT_SCHEMA: Final[dict[str, Any]] = {"type": "object", "properties": dict(_ERROR_FIELDS)}
"""Every tool's ``outputSchema``: an object, with the error fields when it failed."""


def listed(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    """A tool as ``tools/list`` shows it: its name, its schema, the shared output schema."""
    return {"name": name, **schema, "outputSchema": OUTPUT_SCHEMA}


class ToolArgError(ValueError):
    """A bad tool argument: shown to the model as ``INVALID_ARGUMENT`` with a hint."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


def _string(args: dict[str, Any], key: str, *, required: bool) -> str | None:
    value = args.get(key)
    if value is None:
        if required:
            raise ToolArgError(f"{key} is required", f"pass {key} as a string")
        return None
    if not isinstance(value, str) or not value or len(value) > MAX_STRING:
        raise ToolArgError(
            f"{key} must be a non-empty string", f"pass {key} as a string of at most {MAX_STRING}"
        )
    return value


def cursor(args: dict[str, Any]) -> int | None:
    value = args.get("after")
    if value is None:
        return None
    if isinstance(value, str) and value.isdigit() and len(value) < 19:
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 2**63:
        raise ToolArgError(
            "after must be an event id", "pass the cursor or eventId returned earlier"
        )
    return value


@dataclass(frozen=True, slots=True)
class SubscribeArgs:
    url: str
    uris: list[str]


def subscribe_args(args: dict[str, Any]) -> SubscribeArgs:
    url = _string(args, "url", required=True)
    assert url is not None
    raw = args.get("uri", args.get("uris"))
    items = raw if isinstance(raw, list) else [raw]
    if not items or len(items) > MAX_URIS:
        raise ToolArgError("uri must be a URI or a list of 1 to 100 URIs", "pass uri")
    uris = [_string({"uri": item}, "uri", required=True) or "" for item in items]
    return SubscribeArgs(url, list(dict.fromkeys(uris)))


def no_args(args: dict[str, Any]) -> None:
    """A tool without arguments ignores any it is given."""
    return None


@dataclass(frozen=True, slots=True)
class UriArgs:
    uri: str
    url: str | None


def uri_args(args: dict[str, Any]) -> UriArgs:
    uri = _string(args, "uri", required=True)
    assert uri is not None
    return UriArgs(uri, _string(args, "url", required=False))


@dataclass(frozen=True, slots=True)
class ReadArgs:
    uri: str
    url: str | None
    offset: int


def read_args(args: dict[str, Any]) -> ReadArgs:
    offset = args.get("offset", 0)
    if not isinstance(offset, int) or isinstance(offset, bool) or not 0 <= offset < 2**63:
        raise ToolArgError(
            "offset must be an integer >= 0", "pass the nextOffset of the previous answer"
        )
    named = uri_args(args)
    return ReadArgs(named.uri, named.url, offset)


def client_limit(client_name: str | None) -> tuple[float, str] | None:
    """The known tool-call limit of the client named ``client_name`` (and where it comes
    from), or None for a client not in :data:`CLIENT_TOOL_LIMITS_S`."""
    return CLIENT_TOOL_LIMITS_S.get(client_name) if isinstance(client_name, str) else None


def clamp_wait(timeout_s: float, client_name: str | None) -> tuple[float, float | None]:
    """(the wait to do, the client's limit when it shortened it): ``timeout_s`` ends
    :data:`WAIT_MARGIN_S` before the client's limit, so the model gets the cursor, not the
    client's timeout error. Pure."""
    known = client_limit(client_name)
    if known is None:
        return timeout_s, None
    ceiling = max(known[0] - WAIT_MARGIN_S, 1.0)
    return (ceiling, known[0]) if timeout_s > ceiling else (timeout_s, None)


@dataclass(frozen=True, slots=True)
class WaitArgs:
    pattern: str | None
    after: int | None
    timeout_s: float


def wait_args(args: dict[str, Any]) -> WaitArgs:
    timeout = args.get("timeoutSeconds", DEFAULT_WAIT_S)
    if (
        not isinstance(timeout, int | float)
        or isinstance(timeout, bool)
        or not 0 <= timeout <= MAX_WAIT_S
    ):
        raise ToolArgError(
            f"timeoutSeconds must be a number from 0 to {MAX_WAIT_S:g}",
            f"omit it for {DEFAULT_WAIT_S:g} s",
        )
    return WaitArgs(_string(args, "uri", required=False), cursor(args), float(timeout))


@dataclass(frozen=True, slots=True)
class ChangesArgs:
    after: int | None
    limit: int
    pattern: str | None


def changes_args(args: dict[str, Any]) -> ChangesArgs:
    limit = args.get("limit", 50)
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_CHANGES:
        raise ToolArgError(f"limit must be an integer from 1 to {MAX_CHANGES}", "omit it for 50")
    return ChangesArgs(cursor(args), limit, _string(args, "uri", required=False))


def tool_result(structured: dict[str, Any], text: str, *, is_error: bool = False) -> dict[str, Any]:
    return {
        "content": [{"type": "text", "text": text}],
        "structuredContent": structured,
        "isError": is_error,
    }


def tool_error(code: str, message: str, hint: str | None) -> dict[str, Any]:
    body = {"errorCode": code, "message": message, "hint": hint}
    return tool_result(body, render.error_text(body), is_error=True)


def never_failed(body: dict[str, Any]) -> bool:
    """The ``isError`` of a tool whose failures are all raised (most tools)."""
    return False


def carries_error(body: dict[str, Any]) -> bool:
    """The ``isError`` of an answer that is an error with fields of its own (a
    ``wait_for_change`` the daemon left mid-wait still gives its cursor)."""
    return "errorCode" in body


def every_subscription_failed(body: dict[str, Any]) -> bool:
    """``subscribe``'s ``isError``: true only when no URI was subscribed (a partial failure
    is an answer that names its failed rows)."""
    return all(row.get("errorCode") for row in body.get("subscriptions") or [])
