"""What an agent may make the daemon do (pure): the agent policy, applied the same way to
``/mcp`` and to ``/v1/agent/subscriptions`` (which ``mcpsubctl mcp`` uses).

Resource text reaches a model, and a prompt injection in it could ask the agent to
``subscribe`` to any URL: the daemon would then fetch it. So ``subscribe`` through the face
is limited to ``agent_allowed_origins`` (daemon setting, comma-separated
``scheme://host[:port]`` origins, or ``*`` for any); by default (empty) only the origins the
daemon already watches. A person adds a new server with ``mcpsubctl subscribe`` (or the
setting); the agent can then add URIs on it.

The same injection could ask it to ``unsubscribe`` what a person watches, and with it the
revisions and deliveries. So an agent may remove only a subscription an agent made through
the face (``createdBy: "agent"``), unless the daemon's ``agent_unsubscribe`` setting is
``any``: :func:`check_unsubscribe` refuses the rest with ``NOT_CREATED_BY_AGENT``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final
from urllib.parse import urlsplit

from service.app.errors import AgentError
from service.safetext import split_secret

DEFAULT_PORTS: Final = {"http": 80, "https": 443}
UNSUBSCRIBE_SETTINGS: Final = ("own", "any")
"""``agent_unsubscribe``: ``own`` (default) = only what an agent made; ``any`` = anything."""
NOT_CREATED_BY_AGENT: Final = "NOT_CREATED_BY_AGENT"


def origin_of(url: str) -> str | None:
    """``scheme://host:port`` (lower-cased, default port made explicit); None if not a URL."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    if scheme not in DEFAULT_PORTS or not host:
        return None
    if ":" in host:
        host = f"[{host}]"
    return f"{scheme}://{host}:{port or DEFAULT_PORTS[scheme]}"


def parse_setting(value: str) -> tuple[str, ...] | None:
    """``agent_allowed_origins`` → the allowed origins; None = "the subscribed ones"."""
    items = [item.strip() for item in value.split(",") if item.strip()]
    if not items:
        return None
    if "*" in items:
        return ("*",)
    origins = []
    for item in items:
        origin = origin_of(item)
        if origin is None:
            raise ValueError(f"agent_allowed_origins: {item!r} is not an http(s) origin")
        origins.append(origin)
    return tuple(origins)


def check(url: str, allowed: tuple[str, ...] | None, subscribed_urls: Iterable[str]) -> None:
    """Raise AgentError ``AGENT_ORIGIN_NOT_ALLOWED`` unless ``url``'s origin is allowed."""
    origin = origin_of(url)
    if allowed == ("*",) and origin is not None:
        return
    pool = set(allowed) if allowed is not None else {origin_of(u) for u in subscribed_urls}
    if origin is not None and origin in pool:
        return
    where = "agent_allowed_origins" if allowed is not None else "the servers already watched"
    raise AgentError(
        "AGENT_ORIGIN_NOT_ALLOWED",
        f"agents may subscribe only on {where}; {origin or url!r} is not one of them",
        "a person can add the server with `mcpsubctl subscribe --url URL --uri URI`, or list "
        "its origin in the daemon's agent_allowed_origins setting",
    )


def check_one_server(url: str, uris: Iterable[str], watched: Iterable[tuple[str, str]]) -> None:
    """Raise AgentError ``URI_WATCHED_ELSEWHERE`` when a URI of ``uris`` is already watched on
    a server other than ``url`` (``watched``: ``(shown server URL, URI)`` of every
    subscription). An agent's second server for a URI would put its text beside the first
    one's in what a person reads, waits for, tails and delivers by that URI."""
    shown = split_secret(url)[0]
    wanted = set(uris)
    elsewhere = sorted(
        {(uri, server) for server, uri in watched if uri in wanted and server != shown}
    )
    if not elsewhere:
        return
    uri, server = elsewhere[0]
    raise AgentError(
        "URI_WATCHED_ELSEWHERE",
        f"{uri} is already watched on {server}; agents may not watch it on a second server",
        f"read it from there (read with url={server}); a person can add the second server "
        "with `mcpsubctl subscribe`",
    )


def parse_unsubscribe_setting(value: str) -> str:
    """``agent_unsubscribe`` → ``own`` or ``any`` (empty = ``own``); ValueError otherwise."""
    setting = value.strip().lower() or "own"
    if setting not in UNSUBSCRIBE_SETTINGS:
        raise ValueError(f"agent_unsubscribe: {value!r} is not one of own, any")
    return setting


def check_unsubscribe(subscription: dict[str, Any], setting: str) -> None:
    """Raise AgentError ``NOT_CREATED_BY_AGENT`` unless an agent may remove ``subscription``
    (a ``subscription_json`` row): one an agent made, or any under ``agent_unsubscribe =
    any``."""
    if setting == "any" or subscription.get("createdBy") == "agent":
        return
    raise AgentError(
        NOT_CREATED_BY_AGENT,
        f"subscription {subscription.get('id')} was made by a person; agents may remove only "
        "what an agent subscribed",
        f"ask the person to run `mcpsubctl unsubscribe {subscription.get('id')}`",
    )
