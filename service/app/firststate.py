"""When is a new subscription's first state known, and what went wrong (pure).

The same reading as ``mcpsubctl subscribe`` (``cli/subscription_cmds.py::first_state``): a first
revision was read, or the subscription or its link failed with the daemon's error code.
"""

from __future__ import annotations

from typing import Any, Final

FAILED_STATES: Final = ("error", "not_honored", "login_required")
LINK_FAILED_STATES: Final = ("error", "login_required", "throttled", "backoff")
HINTS: Final = {
    "RESOURCE_NOT_FOUND": "the server does not list this URI; check it with "
    "`mcpsubctl probe --url URL --uri URI` (or resources/list on the server)",
    "SUBSCRIPTION_NOT_HONORED": "the server acknowledged the stream without this URI; check "
    "it with `mcpsubctl probe --url URL --uri URI`",
    "AUTH_LOGIN_REQUIRED": "run `mcpsubctl login URL`; the daemon picks the token up",
}
FIRST_STATE_TIMEOUT_S: Final = 10.0


def verdict(
    sub: dict[str, Any], link: dict[str, Any] | None
) -> tuple[bool, str | None, str | None]:
    """(known, errorCode, hint) for a subscription and its link's status entry."""
    link = link or {}
    failed = sub.get("state") in FAILED_STATES
    if sub.get("state") == "active" and (sub.get("revision") or 0) >= 1:
        return True, None, None  # the first read is stored and the link open
    if failed:
        code = sub.get("stateCode") or link.get("lastErrorCode") or "INTERNAL_ERROR"
        hint = link.get("lastErrorHint") if code == link.get("lastErrorCode") else None
        return True, str(code), HINTS.get(str(code)) or hint
    if link.get("state") in LINK_FAILED_STATES and link.get("lastErrorCode"):
        hint = link.get("lastErrorHint")
        if link.get("state") == "backoff":
            hint = (hint + "; " if hint else "") + "the daemon keeps retrying"
        return True, str(link["lastErrorCode"]), hint
    return False, None, None
