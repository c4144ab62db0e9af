"""service.mcp.wire: header value encoding (spec §2.2), request headers and _meta."""

from __future__ import annotations

import base64
import random
import re

import pytest

from service.mcp import wire
from service.mcp.wire import decode_header_value, encode_header_value, request_headers, request_meta

HEADER_SAFE = re.compile(r"[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?")


def b64(text: str) -> str:
    return "=?base64?" + base64.b64encode(text.encode("utf-8")).decode("ascii") + "?="


# ---- encode ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "value",
    ["get_weather", "file:///project/config.json", "a b c", "~!@#$%^&*()", "x", "=?base64"],
)
def test_plain_ascii_passes_unchanged(value: str) -> None:
    assert encode_header_value(value) == value


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("café", "=?base64?Y2Fmw6k=?="),
        ("日本", "=?base64?5pel5pys?="),
        (" lead", "=?base64?IGxlYWQ=?="),
        ("trail ", "=?base64?dHJhaWwg?="),
        ("", "=?base64??="),
    ],
)
def test_non_plain_values_are_wrapped_exactly(value: str, expected: str) -> None:
    assert encode_header_value(value) == expected
    assert decode_header_value(expected) == value


@pytest.mark.parametrize(
    "value", [" ", "\tx", "a\tb", "a\x00b", "a\x7fb", "a\nb", "a\rb", "\nabc", "x\x1b[0m"]
)
def test_control_characters_and_blanks_are_wrapped(value: str) -> None:
    encoded = encode_header_value(value)
    assert encoded == b64(value)
    assert HEADER_SAFE.fullmatch(encoded)


@pytest.mark.parametrize("value", ["=?base64?YQ==?=", "=?base64?not-base64?=", "=?base64??="])
def test_values_that_look_like_the_sentinel_are_wrapped(value: str) -> None:
    encoded = encode_header_value(value)
    assert encoded == b64(value)
    assert decode_header_value(encoded) == value


def test_trailing_newline_is_wrapped() -> None:
    assert encode_header_value("abc\n") == b64("abc\n")


def test_sentinel_with_trailing_newline_is_not_decoded() -> None:
    assert decode_header_value("=?base64?YWJj?=\n") == "=?base64?YWJj?=\n"


# ---- decode ----------------------------------------------------------------------------
def test_decode_plain_value_is_identity() -> None:
    assert decode_header_value("get_weather") == "get_weather"


def test_decode_markers_are_case_sensitive() -> None:
    assert decode_header_value("=?BASE64?YQ==?=") == "=?BASE64?YQ==?="


@pytest.mark.parametrize(
    "value",
    [
        "=?base64?!!!!?=",  # not base64 alphabet
        "=?base64?YQ?=",  # bad padding
        "=?base64?Y Q==?=",  # whitespace inside
        "=?base64?/w==?=",  # valid base64 of b"\xff": not UTF-8
    ],
)
def test_invalid_base64_raises_value_error(value: str) -> None:
    with pytest.raises(ValueError, match="invalid base64 header value"):
        decode_header_value(value)


_ALPHABET = (
    [chr(c) for c in range(0x20, 0x7F)] * 4
    + [" ", "\t", "\n", "\r", "\x00", "\x7f", "\x1f"]
    + ["é", "ß", "€", "日", "🙂", "\u00a0", "\u2028"]
    + ["=?base64?", "?="]
)


def _random_strings(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        out.append("".join(rng.choice(_ALPHABET) for _ in range(rng.randint(0, 24))))
    return out


def test_round_trip_over_random_strings() -> None:
    samples = _random_strings(3000, seed=20260728)
    samples += ["=?base64?" + s + "?=" for s in samples[:200]]
    for value in samples:
        assert decode_header_value(encode_header_value(value)) == value, repr(value)


def test_encoded_values_are_header_safe_over_random_strings() -> None:
    # Strings ending in "\n" hit the `$` bug pinned by test_trailing_newline_is_wrapped.
    samples = [s for s in _random_strings(3000, seed=7) if not s.endswith("\n")]
    for value in samples:
        assert HEADER_SAFE.fullmatch(encode_header_value(value)), repr(value)


# ---- request headers -------------------------------------------------------------------
def test_tools_call_headers_exact() -> None:
    assert request_headers("tools/call", {"name": "get_weather", "arguments": {}}) == {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": "get_weather",
    }


def test_prompts_get_uses_params_name() -> None:
    assert request_headers("prompts/get", {"name": "greet"})["Mcp-Name"] == "greet"


def test_resources_read_uses_params_uri() -> None:
    headers = request_headers("resources/read", {"uri": "test://review/status", "name": "n"})
    assert headers["Mcp-Name"] == "test://review/status"


def test_mcp_name_is_encoded() -> None:
    assert request_headers("tools/call", {"name": "météo"})["Mcp-Name"] == b64("météo")


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("tools/list", {"name": "x"}),
        ("server/discover", {}),
        ("subscriptions/listen", {"name": "x", "uri": "y"}),
        ("resources/list", {"uri": "y"}),
        ("resources/read", {"name": "only-name"}),
        ("tools/call", {"name": 5}),
        ("tools/call", {}),
    ],
)
def test_no_mcp_name_otherwise(method: str, params: dict) -> None:
    headers = request_headers(method, params)
    assert "Mcp-Name" not in headers
    assert headers["Mcp-Method"] == method


def test_version_is_mirrored_in_header() -> None:
    assert request_headers("tools/list", {}, version="v999.0.0")["MCP-Protocol-Version"] == (
        "v999.0.0"
    )


# ---- _meta -----------------------------------------------------------------------------
def test_request_meta_defaults() -> None:
    assert request_meta() == {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }


def test_request_meta_with_info_and_capabilities_copies_inputs() -> None:
    info = {"name": "mcpsub", "version": "1"}
    caps = {"sampling": {}}
    meta = request_meta(client_info=info, capabilities=caps, version="2030-01-01")
    assert meta == {
        wire.META_PROTOCOL_VERSION: "2030-01-01",
        wire.META_CLIENT_CAPABILITIES: {"sampling": {}},
        wire.META_CLIENT_INFO: {"name": "mcpsub", "version": "1"},
    }
    meta[wire.META_CLIENT_CAPABILITIES]["x"] = 1
    meta[wire.META_CLIENT_INFO]["y"] = 2
    assert caps == {"sampling": {}}
    assert info == {"name": "mcpsub", "version": "1"}
