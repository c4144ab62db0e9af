"""service.api.openapi: the document's string constraints say what the validators accept.

A request the document calls valid must be accepted and one it calls invalid must get a
documented 400; here each pattern is compared with its validator, string by string."""

from __future__ import annotations

import base64
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.api.openapi import SECRET_SCHEMA, TYPE_LIST_PATTERN, URI_SCHEMA, URL_SCHEMA
from service.app import validate
from service.app import webhooks as webhook_checks
from service.app.errors import ApiError
from service.eventtypes import EVENT_TYPES
from service.webhooks.signing import InvalidSecret, secret_key


def schema_accepts(schema: dict[str, object], value: str) -> bool:
    if len(value) > int(schema.get("maxLength", 10**9)) or len(value) < int(
        schema.get("minLength", 0)
    ):  # type: ignore[call-overload]
        return False
    return re.search(str(schema["pattern"]), value) is not None


def accepts(check: object, value: str) -> bool:
    try:
        check(value)  # type: ignore[operator]
    except (ApiError, InvalidSecret):
        return False
    return True


URLS = [
    "http://127.0.0.1:8080/mcp",
    "HTTPS://example.test/mcp?x=1",
    "http://user:pw@127.0.0.1/mcp",
    "http://127.0.0.1:65535",
    "http://127.0.0.1:",
    "http://127.0.0.1:0/mcp",
    "http://127.0.0.1:65536/mcp",
    "http://127.0.0.1:00080/mcp",
    "ftp://127.0.0.1/mcp",
    "http:///mcp",
    "http://127.0.0.1/mcp#frag",
    "http://127.0.0.1/m cp",
    "http://127.0.0.1/\x1b[31m",
    "127.0.0.1:8080/mcp",
    "http://" + "a" * 2050,
]


_B64_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


@pytest.mark.parametrize("url", URLS)
def test_url_pattern_agrees_with_http_url(url: str) -> None:
    assert schema_accepts(URL_SCHEMA, url) == accepts(validate.http_url, url)


URIS = ["test://x", "scheme:path", ":", "no-scheme", "a b:c", "x:\x00", "x:" + "y" * 2050, ""]


@pytest.mark.parametrize("uri", URIS)
def test_uri_pattern_agrees_with_resource_uri(uri: str) -> None:
    assert schema_accepts(URI_SCHEMA, uri) == accepts(validate.resource_uri, uri)


@settings(max_examples=300, deadline=None)
@given(size=st.integers(min_value=0, max_value=80), strip=st.integers(min_value=0, max_value=2))
def test_secret_pattern_agrees_with_the_signing_key(size: int, strip: int) -> None:
    encoded = base64.b64encode(bytes(range(size % 256))[:size].ljust(size, b"\x01")).decode()
    secret = "whsec_" + (encoded[: len(encoded) - strip] if strip else encoded)
    assert schema_accepts(SECRET_SCHEMA, secret) == accepts(secret_key, secret)


def test_secret_pattern_refuses_non_canonical_padding_bits() -> None:
    # base64 of 25 bytes ends in two characters and "=="; a last character with low bits
    # set decodes loosely but is not what the document allows, nor what the API accepts.
    canonical = "whsec_" + base64.b64encode(b"\x00" * 25).decode()
    assert schema_accepts(SECRET_SCHEMA, canonical)
    assert accepts(webhook_checks.secret, canonical)
    loose = canonical[:-3] + "B=="
    assert not schema_accepts(SECRET_SCHEMA, loose)
    assert not accepts(webhook_checks.secret, loose)


@settings(max_examples=300, deadline=None)
@given(raw=st.binary(min_size=20, max_size=70), last=st.sampled_from(_B64_ALPHABET))
def test_secret_pattern_agrees_with_the_api(raw: bytes, last: str) -> None:
    """The document's pattern and the API's check accept the same secrets, canonical
    padding included (before: the API accepted "…B==" that the document refuses)."""
    encoded = base64.b64encode(raw).decode()
    stem = encoded.rstrip("=")
    changed = "whsec_" + stem[:-1] + last + encoded[len(stem) :]
    for secret in ("whsec_" + encoded, changed):
        assert schema_accepts(SECRET_SCHEMA, secret) == accepts(webhook_checks.secret, secret)


def test_the_type_list_names_every_event_type_and_nothing_else() -> None:
    assert re.fullmatch(TYPE_LIST_PATTERN, ",".join(EVENT_TYPES))
    for name in EVENT_TYPES:
        assert re.fullmatch(TYPE_LIST_PATTERN, name)
    assert not re.fullmatch(TYPE_LIST_PATTERN, "resource.updated,")
    assert not re.fullmatch(TYPE_LIST_PATTERN, "made.up")
