"""Input checks for every front end (pure): each returns the clean value or raises an ApiError.

Every check runs before anything is written: a string the database or a JSON encoder
cannot take (a lone surrogate such as ``"\\ud800"`` decodes fine from JSON but has no UTF-8
form) is refused here with a 4xx, never found later as a 500 after a partial write.
"""

from __future__ import annotations

import ipaddress
import re
import unicodedata
from typing import Any
from urllib.parse import urlsplit

from service import jsondecode
from service.app.errors import ApiError, InvalidJson, InvalidParameter, InvalidUri, InvalidUrl
from service.netguard import literal_address

MAX_URL_LENGTH = 2048
MAX_URI_LENGTH = 2048
MAX_ID = 2**63 - 1
MAX_JSON_DEPTH = 64
"""Request bodies are flat objects; anything deeper is refused (``service.jsondecode``)."""
STATE_PATTERN = re.compile(r"^[a-z_]{1,32}$")


def json_object(raw: bytes) -> dict[str, Any]:
    try:
        value = jsondecode.loads(raw, max_depth=MAX_JSON_DEPTH)
    except jsondecode.InvalidJson as exc:
        if exc.too_deep:
            raise InvalidJson(f"the body nests deeper than {MAX_JSON_DEPTH} levels") from None
        raise InvalidJson(f"the body is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise InvalidJson("the body must be a JSON object")
    return value


def text_problem(value: str) -> str | None:
    """Why ``value`` cannot be stored or shown as is: a lone surrogate or a control character."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "contains a lone surrogate (not valid UTF-8)"
    if any(unicodedata.category(ch) == "Cc" for ch in value):
        return "must not contain control characters (NUL, ESC, newlines, ...)"
    return None


def one_word(value: Any, field: str, limit: int, error: type[ApiError], kind: str) -> str:
    """The checks a URL and a URI share: a non-empty string of at most ``limit`` characters,
    with no control character and no whitespace."""
    if not isinstance(value, str) or not value:
        raise error(f"{field} is required and must be {kind}", field=field)
    if len(value) > limit:
        raise error(f"{field} is longer than {limit} characters", field=field)
    problem = text_problem(value)
    if problem:
        raise error(f"{field} {problem}", field=field)
    if any(ch.isspace() for ch in value):
        raise error(f"{field} must not contain whitespace", field=field)
    return value


def http_url(given: Any, field: str = "url", error: type[ApiError] = InvalidUrl) -> str:
    """An absolute http(s) URL with a host, a port in 1..65535 when given, and no fragment."""
    value = one_word(given, field, MAX_URL_LENGTH, error, "a string")
    try:
        parts = urlsplit(value)
        port = parts.port  # raises ValueError on a bad port
    except ValueError as exc:
        raise error(f"{field} is malformed: {exc}", field=field) from None
    if parts.scheme not in ("http", "https"):
        raise error(f"{field} must start with http:// or https://", field=field)
    if not parts.hostname:
        raise error(f"{field} has no host", field=field)
    if port is not None and not 1 <= port <= 65535:
        raise error(f"{field} has an invalid port {port}", field=field)
    problem = host_name_problem(parts.hostname)
    if problem:
        raise error(f"{field} host {problem}", field=field)
    if parts.fragment or value.endswith("#"):
        raise error(f"{field} must not have a #fragment", field=field)
    return value


def host_name_problem(host: str) -> str | None:
    """Why ``host`` (an IP literal or a DNS name) cannot be connected to by name, or None.

    Both HTTP paths must be able to encode the name for DNS: httpx encodes it with IDNA 2008
    (``httpx.URL``), the plain-http path hands it to ``getaddrinfo``, which encodes it with
    Python's ``idna`` codec (labels of 1..63 characters). A name either one refuses would be
    stored and then fail at every connect as an internal error, so it is refused here."""
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
        return None
    except ValueError:
        pass
    try:
        host.encode("idna")
    except UnicodeError as exc:
        reason = str(exc).rsplit("UnicodeError: ", 1)[-1].rstrip(")")
        return f"is not a valid DNS name: {reason}"
    if host.isascii():  # httpx refuses only what it must IDNA-encode
        return None
    import httpx  # here: a daemon whose URLs are all plain http:// never imports httpx

    try:
        httpx.URL(scheme="http", host=host)
    except httpx.InvalidURL:
        return "is not a valid DNS name: not valid IDNA 2008"
    return None


def server_url(value: Any) -> str:
    return http_url(value)


def host_address(url: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The URL's host as an IP address when it is a literal one (read as the resolver reads it,
    :func:`service.netguard.literal_address`: ``169.254.169.254.`` is that address), else None."""
    return literal_address(urlsplit(url).hostname or "")


def resource_uri(given: Any, field: str = "uri") -> str:
    value = one_word(given, field, MAX_URI_LENGTH, InvalidUri, "a non-empty string")
    if ":" not in value:
        raise InvalidUri(f"{field} must have a scheme (contain ':')", field=field)
    return value


def cursor(value: str | None, field: str) -> int | None:
    """An event id from a header or query parameter; None when absent or empty."""
    if value is None or value.strip() == "":
        return None
    try:
        number = int(value.strip())
    except ValueError:
        raise InvalidParameter(f"{field} must be an event id (integer >= 0)", field=field) from None
    if not 0 <= number <= MAX_ID:
        raise InvalidParameter(f"{field} must be an event id (integer >= 0)", field=field)
    return number


def state_filter(value: str | None) -> str | None:
    """A state name to filter a list by (``open``, ``error``, ...); None when absent."""
    if value and not STATE_PATTERN.match(value):
        raise InvalidParameter("state must be a state name such as open or error", field="state")
    return value or None


def text_filter(value: str | None, field: str) -> str | None:
    """A fragment to filter a list by (a server URL's part, a URI pattern); None when absent."""
    if value is None or value == "":
        return None
    problem = text_problem(value)
    if problem or len(value) > MAX_URL_LENGTH:
        raise InvalidParameter(f"{field} {problem or 'is too long'}", field=field)
    return value
