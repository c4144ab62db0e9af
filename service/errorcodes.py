"""Every ``errorCode`` mcpsub gives, in one table: its HTTP status when the daemon answers
with it, the exit code ``mcpsubctl`` ends with, and the hint shown when the raiser names none.

The error classes read it (:class:`service.app.errors.ApiError` takes its ``status`` and
``default_hint`` from here, :class:`service.app.errors.AgentError` its hint and status), so
does ``mcpsubctl`` (:mod:`cli.exitcodes`), and docs/cli.md's exit-code table is checked
against it. Adding a code is one row in :data:`CODES`; tests/unit/test_errorcodes.py fails
for a code raised anywhere in ``service/`` or ``cli/`` that has no row.

No imports: ``mcpsubctl``'s daemon commands read the exit codes on every run, and every layer
may read this table (it sits at the bottom, beside the other leaves).
"""

from __future__ import annotations

# mcpsubctl's exit codes, one per class of failure (docs/cli.md keeps the same table).
EXIT_OK = 0
EXIT_TOOL_ERROR = 1
EXIT_USAGE = 2
EXIT_AUTH = 3
EXIT_PROTOCOL = 4
EXIT_NETWORK = 5
EXIT_TIMEOUT = 6
EXIT_NOT_FOUND = 7
EXIT_NOT_HONORED = 8
EXIT_DISCONNECTED = 9
EXIT_DAEMON_UNAVAILABLE = 10
EXIT_NOT_MCPSUBD = 11
"""``--api`` (or ``MCPSUB_API``) reaches something, and it is not mcpsubd."""
EXIT_SOCKET_NOT_TRUSTED = 12
"""The API socket's directory, or the process serving it, is another user's: nothing sent."""
EXIT_INTERNAL = 70


class Code:
    """One code's row: the CLI's exit code, the HTTP status (None: never an HTTP answer of
    the daemon's), and the default hint (None: the raiser always words its own)."""

    __slots__ = ("exit", "hint", "status")

    def __init__(self, exit: int, status: int | None = None, hint: str | None = None) -> None:
        self.exit = exit
        self.status = status
        self.hint = hint

    def __repr__(self) -> str:
        return f"Code({self.exit}, {self.status}, {self.hint!r})"


CODES: dict[str, Code] = {
    # ---- the command line and bad input -------------------------------------------------
    "USAGE_ERROR": Code(EXIT_USAGE),
    "INVALID_ARGS": Code(EXIT_USAGE),
    "SERVER_URL_UNKNOWN": Code(EXIT_USAGE),
    "TOOL_NAME_REQUIRED": Code(EXIT_USAGE),
    "RESOURCE_URI_REQUIRED": Code(EXIT_USAGE),
    "BAD_REQUEST": Code(EXIT_USAGE, 400),
    "INVALID_JSON": Code(
        EXIT_USAGE,
        400,
        'send a JSON object such as {"url": "http://host/mcp", "uri": "scheme:path"}',
    ),
    "INVALID_URL": Code(
        EXIT_USAGE, 400, "url must be an absolute http:// or https:// URL with a host"
    ),
    "INVALID_URI": Code(
        EXIT_USAGE, 400, "uri must be a resource URI with a scheme (e.g. test://x) and no spaces"
    ),
    "INVALID_PARAMETER": Code(EXIT_USAGE, 400),
    "INVALID_ARGUMENT": Code(EXIT_USAGE),
    "AMBIGUOUS_URI": Code(EXIT_USAGE, 409, "name the server: --server URL|ID (the API's ?server=)"),
    "BODY_TOO_LARGE": Code(EXIT_USAGE, 413),
    "DIFF_TOO_LARGE": Code(
        EXIT_USAGE,
        400,
        "read both revisions (GET …/revisions/{revision}) and compare them locally",
    ),
    "METHOD_NOT_ALLOWED": Code(EXIT_USAGE, 405),
    "INVALID_SECRET": Code(
        EXIT_USAGE, 400, "pass whsec_ followed by the base64 of 24 to 64 random bytes, or omit it"
    ),
    "PRIVATE_TARGET": Code(
        EXIT_USAGE,
        400,
        "link-local and cloud-metadata targets are refused; pass allowPrivateTarget: true "
        "(`mcpsubctl webhook add --allow-private-target`) if you really mean it",
    ),
    "DUPLICATE_HEADER": Code(EXIT_USAGE, 400),
    "CONSOLE_NEEDS_TCP": Code(
        EXIT_USAGE,
        409,
        "this listener takes no token (the unix socket): run `mcpsubctl ui`, which asks the "
        "daemon for a loopback TCP listener",
    ),
    "CONSOLE_LISTENER_UNAVAILABLE": Code(
        EXIT_USAGE, 409, "run `mcpsubctl ui` against the daemon's own socket"
    ),
    # ---- who may ------------------------------------------------------------------------
    "AUTH_LOGIN_REQUIRED": Code(EXIT_AUTH),
    "AUTH_TIMEOUT": Code(EXIT_AUTH),
    "AUTH_REFRESH_FAILED": Code(EXIT_AUTH),
    "AUTH_FAILED": Code(EXIT_AUTH),
    "API_TOKEN_REQUIRED": Code(EXIT_AUTH, 401),
    "CSRF_TOKEN_REQUIRED": Code(EXIT_AUTH, 403),
    "SESSION_ENDED": Code(EXIT_AUTH, 401, "log in to the console again (mcpsubctl ui)"),
    "PERMISSION_DENIED": Code(EXIT_AUTH),
    "HOST_NOT_ALLOWED": Code(EXIT_AUTH, 421),
    "ORIGIN_NOT_ALLOWED": Code(EXIT_AUTH, 403),
    "AGENT_ORIGIN_NOT_ALLOWED": Code(EXIT_AUTH, 403),
    "NOT_CREATED_BY_AGENT": Code(EXIT_AUTH, 403),
    "URI_WATCHED_ELSEWHERE": Code(EXIT_AUTH, 403),
    # ---- the MCP server's answers -------------------------------------------------------
    "PROTOCOL_UNSUPPORTED": Code(EXIT_PROTOCOL),
    "UNKNOWN_PROTOCOL": Code(EXIT_PROTOCOL),
    "PROTOCOL_ERROR": Code(EXIT_PROTOCOL),
    "RESPONSE_TOO_LARGE": Code(EXIT_PROTOCOL),
    "TOOL_REQUEST_REJECTED": Code(EXIT_PROTOCOL),
    "SERVER_ERROR": Code(EXIT_PROTOCOL),
    "CALL_FAILED": Code(EXIT_PROTOCOL),
    "TOOL_ERROR": Code(EXIT_TOOL_ERROR),
    # ---- the network --------------------------------------------------------------------
    "CONNECTION_REFUSED": Code(EXIT_NETWORK),
    "DNS_LOOKUP_FAILED": Code(EXIT_NETWORK),
    "TLS_CERT_UNTRUSTED": Code(EXIT_NETWORK),
    "TLS_HANDSHAKE_FAILED": Code(EXIT_NETWORK),
    "NETWORK_ERROR": Code(EXIT_NETWORK),
    "WEBHOOK_TEST_FAILED": Code(EXIT_NETWORK),
    # ---- time ---------------------------------------------------------------------------
    "NOTIFICATION_TIMEOUT": Code(
        EXIT_TIMEOUT, 408, "no update arrived in time; wait again with after=<the returned after>"
    ),
    "REQUEST_TIMEOUT": Code(EXIT_TIMEOUT, 408, "send the whole body at once"),
    # ---- not there ----------------------------------------------------------------------
    "ENDPOINT_NOT_FOUND": Code(EXIT_NOT_FOUND),
    "RESOURCE_NOT_FOUND": Code(EXIT_NOT_FOUND),
    "NOT_FOUND": Code(EXIT_NOT_FOUND, 404),
    "SUBSCRIPTION_NOT_FOUND": Code(
        EXIT_NOT_FOUND,
        404,
        "list the subscriptions with `mcpsubctl list` (GET /v1/subscriptions)",
    ),
    "NOT_WATCHED": Code(
        EXIT_NOT_FOUND, 404, "subscribe first: `mcpsubctl subscribe --url URL --uri URI`"
    ),
    "NO_CONTENT_YET": Code(
        EXIT_NOT_FOUND,
        404,
        "the daemon has not read this resource yet; retry or use `mcpsubctl wait`",
    ),
    "REVISION_NOT_FOUND": Code(
        EXIT_NOT_FOUND, 404, "list the kept revisions with GET /v1/subscriptions/{id}/revisions"
    ),
    "WEBHOOK_NOT_FOUND": Code(
        EXIT_NOT_FOUND,
        404,
        "list the targets with `mcpsubctl webhook list` (GET /v1/webhooks)",
    ),
    "DELIVERY_NOT_FOUND": Code(
        EXIT_NOT_FOUND,
        404,
        "list the deliveries with `mcpsubctl deliveries list` (GET /v1/deliveries)",
    ),
    # ---- triggers (docs/triggers.md) ----------------------------------------------------
    "TRIGGER_NOT_FOUND": Code(
        EXIT_NOT_FOUND, 404, "list the triggers with `mcpsubctl trigger list` (GET /v1/triggers)"
    ),
    "RUN_NOT_FOUND": Code(
        EXIT_NOT_FOUND, 404, "list the runs with `mcpsubctl trigger runs` (GET /v1/triggers/runs)"
    ),
    "RUN_IN_FLIGHT": Code(EXIT_USAGE, 409, "the run is running now; retry it once it has finished"),
    "TRIGGER_LIMIT": Code(
        EXIT_USAGE,
        409,
        "remove a trigger you no longer need (`mcpsubctl trigger remove ID`), "
        "or raise trigger_max_triggers",
    ),
    "PROGRAM_NOT_FOUND": Code(
        EXIT_USAGE,
        400,
        "name an executable by its absolute path, or one on the daemon's PATH "
        "(`mcpsubctl trigger add` resolves a bare name on yours)",
    ),
    "TRIGGER_TEST_FAILED": Code(EXIT_TOOL_ERROR),
    # ---- subscriptions ------------------------------------------------------------------
    "SUBSCRIPTION_NOT_HONORED": Code(EXIT_NOT_HONORED),
    "SUBSCRIPTION_FAILED": Code(EXIT_NOT_HONORED),
    "SUBSCRIPTION_DISCONNECTED": Code(EXIT_DISCONNECTED),
    "SUBSCRIPTION_CLOSED": Code(EXIT_DISCONNECTED),
    "RELISTEN_LIMIT": Code(EXIT_DISCONNECTED),
    # ---- the daemon ---------------------------------------------------------------------
    "DAEMON_UNAVAILABLE": Code(EXIT_DAEMON_UNAVAILABLE),
    "NOT_READY": Code(
        EXIT_DAEMON_UNAVAILABLE, 503, "the daemon is still starting; retry in a moment"
    ),
    "STORAGE_FAILING": Code(
        EXIT_DAEMON_UNAVAILABLE,
        503,
        "nothing was stored; free space in the state directory's filesystem (or bring the "
        "database back) and retry; `mcpsubctl status` shows the storage state",
    ),
    "TOO_MANY_WAITERS": Code(
        EXIT_DAEMON_UNAVAILABLE,
        503,
        "too many open streams and long-polls; close some and retry",
    ),
    "RESOURCE_LIMIT": Code(
        EXIT_DAEMON_UNAVAILABLE,
        None,
        "raise the open-file limit (LimitNOFILE=, ulimit -n) or watch fewer servers",
    ),
    "NOT_MCPSUBD": Code(EXIT_NOT_MCPSUBD),
    "SOCKET_NOT_TRUSTED": Code(EXIT_SOCKET_NOT_TRUSTED),
    # ---- the client's own programs ------------------------------------------------------
    "SERVICE_ERROR": Code(EXIT_TOOL_ERROR),
    "SKILL_MODIFIED": Code(EXIT_TOOL_ERROR),
    "SKILLS_DIR_UNWRITABLE": Code(EXIT_TOOL_ERROR),
    "SKILLS_DIR_LINKED": Code(EXIT_TOOL_ERROR),
    "SKILLS_MISSING": Code(EXIT_TOOL_ERROR),
    # ---- bugs and the ones nobody sees --------------------------------------------------
    "INTERNAL_ERROR": Code(EXIT_INTERNAL, 500),
    "DAEMON_ERROR": Code(EXIT_INTERNAL),
    "CLIENT_GONE": Code(EXIT_INTERNAL),
}
"""``errorCode`` → its row. Keep a new code beside its kind."""


def exit_code(code: str | None) -> int:
    """``mcpsubctl``'s exit code for a code (0 for none; 70, a bug, for one not in the table)."""
    if code is None:
        return EXIT_OK
    row = CODES.get(code)
    return EXIT_INTERNAL if row is None else row.exit


def http_status(code: str, default: int = 400) -> int:
    """The status the daemon answers a code with."""
    row = CODES.get(code)
    return default if row is None or row.status is None else row.status


def default_hint(code: str) -> str | None:
    row = CODES.get(code)
    return None if row is None else row.hint
