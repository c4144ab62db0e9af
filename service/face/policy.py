"""Which servers an agent may make the daemon subscribe to (pure).

Resource text reaches a model, and a prompt injection in it could ask the agent to
``subscribe`` to any URL: the daemon would then fetch it. So ``subscribe`` through the face
is limited to ``agent_allowed_origins`` (daemon setting, comma-separated
``scheme://host[:port]`` origins, or ``*`` for any); by default (empty) only the origins the
daemon already watches. A person adds a new server with ``mcpsubctl subscribe`` (or the
setting); the agent can then add URIs on it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final
from urllib.parse import urlsplit

from service.face.backend import FaceError

DEFAULT_PORTS: Final = {"http": 80, "https": 443}


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
    """Raise FaceError ``AGENT_ORIGIN_NOT_ALLOWED`` unless ``url``'s origin is allowed."""
    origin = origin_of(url)
    if allowed == ("*",) and origin is not None:
        return
    pool = set(allowed) if allowed is not None else {origin_of(u) for u in subscribed_urls}
    if origin is not None and origin in pool:
        return
    where = "agent_allowed_origins" if allowed is not None else "the servers already watched"
    raise FaceError(
        "AGENT_ORIGIN_NOT_ALLOWED",
        f"agents may subscribe only on {where}; {origin or url!r} is not one of them",
        "a person can add the server with `mcpsubctl subscribe --url URL --uri URI`, or list "
        "its origin in the daemon's agent_allowed_origins setting",
    )
