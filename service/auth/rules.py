"""Pure helpers: no IO, no clock (callers pass ``now``)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

# A cached access token is used only while it has more than this left (seed §5.5 step 4).
EXPIRY_MARGIN_MS = 5 * 60 * 1000
SLOW_DOWN_STEP_S = 5.0
DEFAULT_DEVICE_EXPIRES_S = 900.0
DEFAULT_INTERVAL_S = 5.0
DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
LOGIN_REQUIRED_ERRORS = frozenset({"invalid_grant", "invalid_client", "unauthorized_client"})
CLIENT_REJECTED_ERRORS = frozenset({"invalid_client", "unauthorized_client"})


def origin_of(url: str) -> str:
    """``scheme://host[:port]`` of an absolute http(s) URL; ValueError otherwise."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"Invalid URL: {url}") from exc
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ValueError(f"Invalid URL: {url}")
    host = parts.hostname.lower()
    if ":" in host:
        host = f"[{host}]"
    default = {"http": 80, "https": 443}[parts.scheme.lower()]
    suffix = f":{port}" if port is not None and port != default else ""
    return f"{parts.scheme.lower()}://{host}{suffix}"


def canonical_resource(url: str) -> str:
    """RFC 8707 resource indicator: the MCP URL without fragment, query or trailing slash."""
    parts = urlsplit(url.strip())
    path = parts.path.rstrip("/")
    return f"{origin_of(url)}{path}"


def well_known_urls(url: str, suffix: str) -> list[str]:
    """RFC 9728 / RFC 8414 well-known locations: path-inserted first, then the root one."""
    origin = origin_of(url)
    path = urlsplit(url.strip()).path.rstrip("/")
    root = f"{origin}/.well-known/{suffix}"
    return [f"{root}{path}", root] if path else [root]


_PARAM = re.compile(r'([A-Za-z0-9_\-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]+))')


def parse_www_authenticate(header: str | None) -> dict[str, str] | None:
    """The parameters of the ``Bearer`` challenge in a ``WWW-Authenticate`` value, or None.

    >>> parse_www_authenticate('Bearer resource_metadata="https://x/.well-known/p", scope="a b"')
    {'resource_metadata': 'https://x/.well-known/p', 'scope': 'a b'}
    """
    if not header:
        return None
    match = re.search(r"(?:^|[\s,])bearer(?:\s+|$)", header, re.IGNORECASE)
    if match is None:
        return None
    rest = header[match.end() :]
    # Stop at the next challenge (a bare token followed by a space and a param).
    nxt = re.search(r",\s*[A-Za-z][A-Za-z0-9_\-]*\s+[A-Za-z0-9_\-]+\s*=", rest)
    if nxt is not None:
        rest = rest[: nxt.start()]
    params: dict[str, str] = {}
    for found in _PARAM.finditer(rest):
        value = found.group(2) if found.group(2) is not None else found.group(3)
        params[found.group(1).lower()] = re.sub(r"\\(.)", r"\1", value)
    return params


def is_fresh(expires_at_ms: int, now_ms: int) -> bool:
    """True while the token has more than :data:`EXPIRY_MARGIN_MS` left."""
    return expires_at_ms - EXPIRY_MARGIN_MS > now_ms


def expiry_ms(now_ms: int, expires_in: object) -> int:
    """``now + expires_in`` seconds in epoch ms; a missing or bad ``expires_in`` means 0."""
    seconds = 0.0
    if isinstance(expires_in, (int, float)) and not isinstance(expires_in, bool):
        seconds = max(0.0, float(expires_in))
    return now_ms + int(seconds * 1000)


@dataclass(frozen=True)
class PollStep:
    """What to do after one device-grant poll answer."""

    action: str  # "done" | "continue" | "fail"
    interval_s: float


def next_poll(error: str | None, interval_s: float) -> PollStep:
    """RFC 8628 §3.5: pending → keep going; slow_down → interval + 5 s; else fail."""
    if error is None:
        return PollStep("done", interval_s)
    if error == "authorization_pending":
        return PollStep("continue", interval_s)
    if error == "slow_down":
        return PollStep("continue", interval_s + SLOW_DOWN_STEP_S)
    return PollStep("fail", interval_s)


def number_or(value: object, default: float) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
        return float(value)
    return default
