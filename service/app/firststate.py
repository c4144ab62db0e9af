"""When is a new subscription's first state known, and what went wrong (pure).

Decided here only: ``GET /v1/subscriptions/{id}`` answers it as ``firstState``, which
``mcpsubctl subscribe`` and ``wait`` render as they poll, and
:class:`service.app.subscriptions.Subscriptions` answers an agent with it. A first revision was read, or the subscription or its link failed
with the daemon's error code.
"""

from __future__ import annotations

from typing import Any, Final

from service.failures import state_hint as code_hint

FAILED_STATES: Final = ("error", "not_honored", "login_required")
LINK_FAILED_STATES: Final = ("error", "login_required", "throttled", "backoff")
FIRST_STATE_TIMEOUT_S: Final = 10.0


def verdict(
    sub: dict[str, Any], link: dict[str, Any] | None
) -> tuple[bool, str | None, str | None]:
    """(known, errorCode, hint) for a subscription and its link's status entry.

    A failed subscription's hint is its code's standing one (the ``stateHint`` it shows),
    else the link's for the same failure, so every front end prints the same words."""
    link = link or {}
    failed = sub.get("state") in FAILED_STATES
    if sub.get("state") == "active" and (sub.get("revision") or 0) >= 1:
        return True, None, None  # the first read is stored and the link open
    if failed:
        code = sub.get("stateCode") or link.get("lastErrorCode") or "INTERNAL_ERROR"
        hint = link.get("lastErrorHint") if code == link.get("lastErrorCode") else None
        return True, str(code), code_hint(str(code)) or hint
    if link.get("state") in LINK_FAILED_STATES and link.get("lastErrorCode"):
        hint = link.get("lastErrorHint")
        if link.get("state") == "backoff":
            hint = (hint + "; " if hint else "") + "the daemon keeps retrying"
        return True, str(link["lastErrorCode"]), hint
    return False, None, None


def first_state_json(sub: dict[str, Any], link: dict[str, Any] | None) -> dict[str, Any]:
    """:func:`verdict` as the API answers it: ``{"known", "errorCode", "hint"}``."""
    known, code, hint = verdict(sub, link)
    return {"known": known, "errorCode": code, "hint": hint}
