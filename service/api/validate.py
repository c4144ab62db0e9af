"""Input checks for the API (pure): each returns the clean value or raises an ApiError."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from service.api.errors import InvalidJson, InvalidParameter, InvalidUri, InvalidUrl

MAX_URL_LENGTH = 2048
MAX_URI_LENGTH = 2048
MAX_ID = 2**63 - 1


def json_object(raw: bytes) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidJson(f"the body is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise InvalidJson("the body must be a JSON object")
    return value


def server_url(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidUrl("url is required and must be a string", field="url")
    if len(value) > MAX_URL_LENGTH:
        raise InvalidUrl(f"url is longer than {MAX_URL_LENGTH} characters", field="url")
    if any(ch.isspace() for ch in value):
        raise InvalidUrl("url must not contain whitespace", field="url")
    try:
        parts = urlsplit(value)
        _ = parts.port  # raises ValueError on a bad port
    except ValueError as exc:
        raise InvalidUrl(f"url is malformed: {exc}", field="url") from None
    if parts.scheme not in ("http", "https"):
        raise InvalidUrl("url must start with http:// or https://", field="url")
    if not parts.hostname:
        raise InvalidUrl("url has no host", field="url")
    return value


def resource_uri(value: Any, field: str = "uri") -> str:
    if not isinstance(value, str) or not value:
        raise InvalidUri(f"{field} is required and must be a non-empty string", field=field)
    if len(value) > MAX_URI_LENGTH:
        raise InvalidUri(f"{field} is longer than {MAX_URI_LENGTH} characters", field=field)
    if any(ch.isspace() for ch in value):
        raise InvalidUri(f"{field} must not contain whitespace", field=field)
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
