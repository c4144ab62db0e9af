"""The one decoder for outside JSON: every failure, depth included, is InvalidJson."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service import jsondecode
from service.actions import extract_next_action
from service.mcp.classify import parse_json_message, parse_response
from service.mcp.errors import ProtocolViolation


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize("depth", [jsondecode.MAX_DEPTH + 1, 1000, 200_000])
def test_too_deep_is_invalid_json_not_recursion_error(depth: int) -> None:
    with pytest.raises(jsondecode.InvalidJson) as caught:
        jsondecode.loads(nested(depth))
    assert caught.value.too_deep


def test_depth_bound_is_exact() -> None:
    assert jsondecode.loads(nested(jsondecode.MAX_DEPTH)) is not None
    assert jsondecode.loads('{"a": ' * 3 + "1" + "}" * 3, max_depth=3) == {"a": {"a": {"a": 1}}}
    with pytest.raises(jsondecode.InvalidJson):
        jsondecode.loads('{"a": ' * 4 + "1" + "}" * 4, max_depth=3)


@pytest.mark.parametrize("text", ["", "{", "nan-ish", b"\xff\xfe", "[1,]", "1" * 5000])
def test_other_failures_are_invalid_json(text: str | bytes) -> None:
    with pytest.raises(jsondecode.InvalidJson) as caught:
        jsondecode.loads(text)
    assert not caught.value.too_deep


def test_wide_is_not_deep() -> None:
    assert len(jsondecode.loads("[" + ",".join(["[[]]"] * 10_000) + "]")) == 10_000


def test_listen_frame_and_reply_turn_depth_into_protocol_violation() -> None:
    with pytest.raises(ProtocolViolation, match="over-nested"):
        parse_json_message(nested(200_000))
    with pytest.raises(ProtocolViolation, match="over-nested"):
        parse_response(200, "application/json", nested(200_000).encode(), 1, "resources/read")
    sse = b"data: " + nested(5000).encode() + b"\n\n"
    with pytest.raises(ProtocolViolation, match="over-nested"):
        parse_response(200, "text/event-stream", sse, 1, "resources/read")


def test_next_action_search_survives_deep_text() -> None:
    # The resource text comes from the server; the search recurses, so depth is bounded.
    text = nested(200_000) + ' recommended_next_action: "POLL_AFTER"'
    assert extract_next_action(text) == "POLL_AFTER"
    assert extract_next_action(nested(900)) is None


_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats()
    | st.text()
)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=16,
)


@given(_values, st.booleans())
@settings(max_examples=200)
def test_with_orjson_loaded_the_values_are_json_s(value: object, as_bytes: bool) -> None:
    """The daemon has orjson loaded, so loads() decodes with it first: whatever it decodes
    must be exactly what json.loads gives (types too: a wide integer stays an int, a float
    stays a float; NaN, lone surrogates and the like take json's way)."""
    import orjson  # noqa: F401  # loaded, as in the daemon

    text = json.dumps(value, ensure_ascii=as_bytes)
    data: str | bytes = text.encode("utf-8", "surrogatepass") if as_bytes else text
    expected = json.loads(data)
    assert json.dumps(jsondecode.loads(data)) == json.dumps(expected)


@pytest.mark.parametrize(
    "text",
    [
        "-9223372036854775809",
        "18446744073709551616",
        '{"é": [1, 123456789012345678901234567890]}',
        '["\\ud800", 99999999999999999999]',
        '"\u0663\u0663\u0663\u0663\u0663\u0663\u0663\u0663\u0663\u0663"',
    ],
)
@pytest.mark.parametrize("as_bytes", [False, True])
def test_integers_orjson_cannot_hold_stay_integers(text: str, as_bytes: bool) -> None:
    """The search for 19 digits in a row that sends a text json's way: in str and in bytes,
    beside non-ASCII text and escapes (the boundary the hypothesis test may not reach)."""
    import orjson  # noqa: F401  # loaded, as in the daemon

    data: str | bytes = text.encode() if as_bytes else text
    assert json.dumps(jsondecode.loads(data)) == json.dumps(json.loads(data))
