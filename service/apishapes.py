"""What an answer of mcpsubd's local API must look like before a client reads it: one table
for both clients (``mcpsubctl``, through ``cli/localapi.py``, and the stdio face,
``service/face/remote.py``).

A peer at ``--api`` that answers 200 with ``{}`` (a web server, a fake at the socket's name)
would otherwise end a command in a ``KeyError`` traceback where it indexes the answer. Each
route's 2xx answer is checked against its shape here first; one that does not match is
``NOT_MCPSUBD`` (exit 11), naming the first field that is wrong. Only what the clients read
is checked, so fields a newer daemon adds pass.

A shape is a type (``str``; ``int`` is not satisfied by ``True``), a tuple of alternatives
(``(str, None)``), a dict (an object; a key ending in ``?`` may be missing) or a one-item
list (a list of that shape). No imports: the CLIs read this on every daemon command.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing is not imported on the CLIs' fast path
if TYPE_CHECKING:
    from typing import Any

NUMBER = (int, float)
TEXT = (str, None)

LINK = {
    "state?": TEXT,
    "url?": TEXT,
    "lastError?": TEXT,
    "lastErrorCode?": TEXT,
    "lastErrorHint?": TEXT,
    "streamOpen?": (bool, None),
    "honoredUris?": ([str], None),
    "capabilities?": (dict, None),
}
FIRST_STATE = {"known": bool, "errorCode?": TEXT, "hint?": TEXT}
"""``GET /v1/subscriptions/{id}``'s ``firstState``: the daemon's reading, which the CLI renders."""
SUBSCRIPTION = {
    "id": int,
    "uri": str,
    "serverUrl": str,
    "state": str,
    "revision": int,
    "stateCode?": TEXT,
    "stateHint?": TEXT,
    "link?": (LINK, None),
    "current?": (dict, None),
    "firstState?": (FIRST_STATE, None),
}
SUBSCRIPTIONS = {"subscriptions": [SUBSCRIPTION]}
EVENT = {"id": int, "type": str, "data?": (dict, None)}
TARGET = {
    "id": int,
    "url": str,
    "enabled": bool,
    "mode": str,
    "consecutiveFailures": int,
    "uriPatterns?": [str],
    "subscriptionIds?": [int],
}
DELIVERY = {
    "id": int,
    "targetId": int,
    "state": str,
    "attempts": int,
    "webhookId": str,
    "uri": str,
}
CONTENT = {
    "subscriptionId": int,
    "serverUrl": str,
    "uri": str,
    "revision": int,
    "text": TEXT,
    "eventId?": (int, None),
}
REVISION = {"text?": TEXT, "serverUrl?": TEXT, "revision?": (int, None)}
"""A long-poll's revision, as ``wait`` reads it (the daemon sends all of :data:`CONTENT`)."""
STATUS = {
    "ready": bool,
    "lastEventId?": (int, None),
    "uptimeSeconds?": (*NUMBER, None),
    "counts?": dict,
    "subscriptionsByState?": dict,
    "storage?": (dict, None),
    "webhooks?": (dict, None),
    "deliveries?": (dict, None),
    "links?": [LINK],
}

ROUTES: dict[tuple[str, str], object] = {
    ("GET", "/v1/status"): STATUS,
    ("GET", "/v1/subscriptions"): SUBSCRIPTIONS,
    ("POST", "/v1/subscriptions"): SUBSCRIPTION,
    ("GET", "/v1/subscriptions/{id}"): SUBSCRIPTION,
    ("DELETE", "/v1/subscriptions/{id}"): SUBSCRIPTION,
    ("POST", "/v1/agent/subscriptions"): SUBSCRIPTIONS,
    ("POST", "/v1/resubscribe"): {"rechecked": [str]},
    ("GET", "/v1/content"): CONTENT,
    ("GET", "/v1/events"): {"events": [EVENT]},
    ("GET", "/v1/wait"): {
        "event": EVENT,
        "revision": (REVISION, None),
        "previous?": (dict, None),
        "link?": (LINK, None),
    },
    ("GET", "/v1/webhooks"): {"webhooks": [TARGET]},
    ("POST", "/v1/webhooks"): TARGET,
    ("GET", "/v1/webhooks/{id}"): TARGET,
    ("DELETE", "/v1/webhooks/{id}"): TARGET,
    ("POST", "/v1/webhooks/{id}/enable"): TARGET,
    ("POST", "/v1/webhooks/{id}/disable"): TARGET,
    ("POST", "/v1/webhooks/{id}/test"): {"ok": bool},
    ("POST", "/v1/webhooks/{id}/rotate-secret"): {
        "id": int,
        "secret": str,
        "previousSecretValidUntil": (*NUMBER, str, None),
    },
    ("GET", "/v1/deliveries"): {"deliveries": [DELIVERY]},
    ("GET", "/v1/deliveries/{id}"): DELIVERY,
    ("POST", "/v1/deliveries/{id}/retry"): DELIVERY,
    ("POST", "/v1/deliveries/recover"): {"recovered": int, "targetId": int},
    ("DELETE", "/v1/console/sessions"): {"revoked": int},
    ("POST", "/v1/console/listener"): {"url": str, "path": str, "expiresInSeconds": NUMBER},
    ("POST", "/v1/console/login-link"): {"path": str, "expiresInSeconds": NUMBER},
}
"""Route (method, path with ``{id}`` for a numeric segment) → its 2xx answer's shape."""


def route_of(method: str, target: str) -> tuple[str, str]:
    """``("GET", "/v1/webhooks/{id}")`` for ``GET /v1/webhooks/7?x=1``."""
    path = target.split("?", 1)[0].split("#", 1)[0]
    parts = ["{id}" if part.isdigit() else part for part in path.split("/")]
    return method.upper(), "/".join(parts)


def answer_problem(method: str, target: str, body: object) -> str | None:
    """What is wrong with a 2xx answer to ``method target`` (None: it has the shape the
    clients read, or the route has no shape here)."""
    shape = ROUTES.get(route_of(method, target))
    if shape is None:
        return None if isinstance(body, dict) else "the answer is not a JSON object"
    return problem(shape, body, "the answer")


def problem(shape: Any, value: object, where: str) -> str | None:
    """The first place where ``value`` does not have ``shape`` (None: it has)."""
    if isinstance(shape, dict):
        if not isinstance(value, dict):
            return f"{where} is not a JSON object"
        for key, inner in shape.items():
            name = key[:-1] if key.endswith("?") else key
            if name not in value:
                if key.endswith("?"):
                    continue
                return f"{where} has no {name!r}"
            found = problem(inner, value[name], f"{where}.{name}")
            if found is not None:
                return found
        return None
    if isinstance(shape, list):
        if not isinstance(value, list):
            return f"{where} is not a JSON array"
        for index, item in enumerate(value):
            found = problem(shape[0], item, f"{where}[{index}]")
            if found is not None:
                return found
        return None
    alternatives = shape if isinstance(shape, tuple) else (shape,)
    first = None
    for alternative in alternatives:
        if alternative is None:
            if value is None:
                return None
            continue
        if isinstance(alternative, type):
            if isinstance(value, alternative) and not (
                isinstance(value, bool) and alternative is not bool
            ):
                return None
            continue
        found = problem(alternative, value, where)
        if found is None:
            return None
        first = first or found
    return first or f"{where} is {_kind(value)}, not {_names(alternatives)}"


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    return "a string" if isinstance(value, str) else "a number"


def _names(alternatives: tuple[Any, ...]) -> str:
    names = {str: "a string", int: "an integer", float: "a number", bool: "a boolean"}
    names.update({dict: "an object", list: "an array"})
    said = []
    for alternative in alternatives:
        if alternative is None:
            said.append("null")
        elif isinstance(alternative, type):
            said.append(names.get(alternative, alternative.__name__))
        else:
            said.append("an object" if isinstance(alternative, dict) else "an array")
    return " or ".join(dict.fromkeys(said))
