"""Input checks for every front end (pure): each returns the clean value or raises an ApiError.

Every check runs before anything is written: a string the database or a JSON encoder
cannot take (a lone surrogate such as ``"\\ud800"`` decodes fine from JSON but has no UTF-8
form) is refused here with a 4xx, never found later as a 500 after a partial write.
"""

from __future__ import annotations

import ipaddress
import math
import re
import unicodedata
from datetime import UTC, datetime
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


# ---- what the webhook and trigger bodies share --------------------------------------------
MAX_PATTERNS = 100
"""URI globs of one webhook target or trigger, and subscription ids of one target."""


def text(value: Any, field: str, limit: int, *, required: bool = False) -> str | None:
    """A string of at most ``limit`` characters, storable and showable; None when absent and
    not ``required``."""
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value):
        raise InvalidParameter(f"{field} must be a non-empty string", field=field)
    if len(value) > limit:
        raise InvalidParameter(f"{field} is longer than {limit} characters", field=field)
    problem = text_problem(value)
    if problem:
        raise InvalidParameter(f"{field} {problem}", field=field)
    return value


def flag(value: Any, field: str) -> bool:
    """true or false; absent is false."""
    if value is None:
        return False
    if not isinstance(value, bool):
        raise InvalidParameter(f"{field} must be true or false", field=field)
    return value


def whole_number(value: Any) -> int | None:
    """An integer, or a float with no fraction (JSON has one number type: 3.0 is 3)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def bounded_int(value: Any, field: str, low: int, high: int, default: int) -> int:
    """A whole number from ``low`` to ``high``; ``default`` when absent."""
    if value is None:
        return default
    number = whole_number(value)
    if number is None or not low <= number <= high:
        raise InvalidParameter(f"{field} must be an integer from {low} to {high}", field=field)
    return number


def seconds(value: Any, field: str, high: float, default: float) -> float:
    """A number of seconds above 0 and at most ``high``; ``default`` when absent."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidParameter(f"{field} must be a number of seconds", field=field)
    number = float(value)
    if not math.isfinite(number) or not 0 < number <= high:
        raise InvalidParameter(f"{field} must be above 0 and at most {high:g}", field=field)
    return number


def choice(value: Any, field: str, options: tuple[str, ...], default: str) -> str:
    """One of ``options``; ``default`` when absent."""
    if value is None:
        return default
    if value not in options:
        raise InvalidParameter(f"{field} must be one of {', '.join(options)}", field=field)
    return str(value)


def state_in(value: str | None, states: tuple[str, ...]) -> str | None:
    """A list's ``state`` filter: one of ``states``, or None when absent."""
    if value is not None and value not in states:
        raise InvalidParameter(f"state must be one of {', '.join(states)}", field="state")
    return value


def uri_patterns(value: Any, *, required: bool = False) -> list[str]:
    """URI globs (``*`` a wildcard). A trigger requires them (``[]`` or ``["*"]`` is every URI,
    said on purpose); a webhook target without them gets every URI."""
    field = "uriPatterns"
    if value is None and not required:
        return []
    if not isinstance(value, list) or len(value) > MAX_PATTERNS:
        if required:
            message = f"{field} must list at most {MAX_PATTERNS} URI globs ('*' for every URI)"
        else:
            message = f"{field} must be a list of at most {MAX_PATTERNS} URI globs"
        raise InvalidParameter(message, field=field)
    for item in value:
        if not isinstance(item, str) or not item or any(ch.isspace() for ch in item):
            raise InvalidParameter(
                f"{field} entries must be non-empty strings without spaces", field=field
            )
        problem = text_problem(item)
        if problem or len(item) > MAX_URI_LENGTH:
            raise InvalidParameter(f"{field} entry {problem or 'is too long'}", field=field)
    return list(value)


def subscription_ids(value: Any) -> list[int]:
    field = "subscriptionIds"
    if value is None:
        return []
    if not isinstance(value, list) or len(value) > MAX_PATTERNS:
        raise InvalidParameter(f"{field} must be a list of subscription ids", field=field)
    ids = [whole_number(item) for item in value]
    if any(item is None or not 1 <= item <= MAX_ID for item in ids):
        raise InvalidParameter(f"{field} entries must be integers >= 1", field=field)
    return [item for item in ids if item is not None]


def since_time(value: Any) -> float:
    """ISO-8601 (a naive time is UTC) or Unix seconds, as a number or a string."""
    field = "since"
    if isinstance(value, bool) or value is None or value == "":
        raise InvalidParameter(f"{field} is required: ISO-8601 or Unix seconds", field=field)
    if isinstance(value, (int, float)):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            try:
                parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
            except ValueError:
                raise InvalidParameter(
                    f"{field} must be ISO-8601 (2026-11-29T00:00:00Z) or Unix seconds",
                    field=field,
                ) from None
            if parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=UTC)
            number = parsed.timestamp()
    else:
        raise InvalidParameter(f"{field} must be ISO-8601 or Unix seconds", field=field)
    if not math.isfinite(number) or number < 0:
        raise InvalidParameter(f"{field} must be a time after 1970", field=field)
    return number
