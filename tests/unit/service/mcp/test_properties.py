"""Property-based tests (hypothesis) for the pure protocol pieces a hostile server feeds.

Example-based tests pin the cases we thought of; these look for the ones we did not: any
chunking of an SSE stream, any order of frames on a listen stream, any header value, any
JSON and any compressed body. Examples are bounded so ``make test`` stays fast.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import string
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from service import jsondecode
from service.mcp import wire
from service.mcp.coding import BodyTooLarge, LimitedBody
from service.mcp.errors import ProtocolViolation
from service.mcp.listen import (
    Acknowledged,
    Closed,
    Failed,
    ListenMachine,
    ListenState,
    Notified,
)
from service.mcp.sse import Comment, Event, EventTooLarge, SSEDecoder

FAST = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# ---- SSE decoder ------------------------------------------------------------------------
line_text = st.text(
    alphabet=st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)),
    max_size=40,
)
sse_events = st.lists(
    st.tuples(
        st.lists(line_text, min_size=1, max_size=4),  # data lines
        st.one_of(st.none(), st.text(alphabet=string.ascii_letters, min_size=1, max_size=8)),
        st.booleans(),  # a comment before the event
    ),
    max_size=8,
)
newlines = st.sampled_from(["\n", "\r\n", "\r"])


def encode(events: list[tuple[list[str], str | None, bool]], nl: str) -> bytes:
    out = []
    for data, kind, comment in events:
        if comment:
            out.append(f": keep-alive{nl}")
        if kind is not None:
            out.append(f"event: {kind}{nl}")
        out.extend(f"data: {line}{nl}" for line in data)
        out.append(nl)
    return "".join(out).encode()


def decode_in_chunks(raw: bytes, cuts: list[int]) -> list[Event | Comment]:
    decoder = SSEDecoder()
    items: list[Event | Comment] = []
    start = 0
    for cut in [*sorted(set(c % (len(raw) + 1) for c in cuts)), len(raw)]:
        items += decoder.feed(raw[start:cut])
        start = cut
    return items


@FAST
@given(sse_events, newlines, st.lists(st.integers(min_value=0), max_size=20))
def test_sse_any_chunking_gives_the_same_events(
    events: list[tuple[list[str], str | None, bool]], nl: str, cuts: list[int]
) -> None:
    raw = encode(events, nl)
    whole = SSEDecoder().feed(raw)
    assert decode_in_chunks(raw, cuts) == whole
    got = [item for item in whole if isinstance(item, Event)]
    assert [(e.data, e.event) for e in got] == [
        ("\n".join(data), kind or "message") for data, kind, _ in events
    ]
    assert sum(isinstance(i, Comment) for i in whole) == sum(c for _, _, c in events)


@FAST
@given(st.binary(max_size=2000), st.lists(st.integers(min_value=0), max_size=10))
def test_sse_arbitrary_bytes_never_crash(raw: bytes, cuts: list[int]) -> None:
    decoder = SSEDecoder(max_event_bytes=256)
    try:
        start = 0
        for cut in [*sorted(set(c % (len(raw) + 1) for c in cuts)), len(raw)]:
            decoder.feed(raw[start:cut])
            start = cut
    except EventTooLarge:
        pass


class GeneralDecoder(SSEDecoder):
    """The decoder with its general line splitting only (CRLF, LF, lone CR): the reference
    for the LF-only split that :meth:`SSEDecoder.feed` takes when no CR is in sight."""

    def feed(self, chunk: bytes) -> list[Event | Comment]:
        out: list[Event | Comment] = []
        if not chunk:
            return out
        if self._pending_cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]
        self._pending_cr = False
        self._feed_any_line_end(chunk, out)
        if len(self._buffer) > self._max:
            raise EventTooLarge("too long")
        return out


sse_bytes = st.lists(
    st.sampled_from(
        [
            b"data: ",
            b"event: x",
            b": c",
            b"id: 1",
            b"retry: 5",
            b"\n",
            b"\n",
            b"\r",
            b"\r\n",
            b"x",
            b"\xc3\xa9",
            b"\xef\xbb\xbf",
            b":",
        ]
    ),
    max_size=60,
).map(b"".join)


@FAST
@given(
    st.one_of(sse_bytes, st.binary(max_size=300)), st.lists(st.integers(min_value=0), max_size=12)
)
def test_sse_the_lf_only_split_decodes_as_the_general_one(raw: bytes, cuts: list[int]) -> None:
    fast, general = SSEDecoder(max_event_bytes=64), GeneralDecoder(max_event_bytes=64)
    got: list[object] = []
    want: list[object] = []
    start = 0
    for cut in [*sorted(set(c % (len(raw) + 1) for c in cuts)), len(raw)]:
        piece = raw[start:cut]
        start = cut
        for decoder, items in ((fast, got), (general, want)):
            try:
                items += decoder.feed(piece)
            except EventTooLarge:
                items.append("too large")
        if got and got[-1] == "too large":
            break
    assert got == want
    assert bytes(fast._buffer) == bytes(general._buffer)


@FAST
@given(st.integers(min_value=1, max_value=64), st.integers(min_value=65, max_value=400))
def test_sse_limit_holds_for_any_line_length(limit: int, length: int) -> None:
    decoder = SSEDecoder(max_event_bytes=limit)
    with pytest.raises(EventTooLarge):
        decoder.feed(b"data: " + b"x" * length)
        decoder.feed(b"\n\n")


# ---- listen state machine ---------------------------------------------------------------
LISTEN_ID = 7
ids = st.sampled_from([LISTEN_ID, "7", 8, True, None, 7.0])


def frame_strategy() -> st.SearchStrategy[dict[str, Any]]:
    def tagged(method: str, tag: Any, extra: dict[str, Any]) -> dict[str, Any]:
        return wire.notification(method, {"_meta": {wire.META_SUBSCRIPTION_ID: tag}, **extra})

    ack = st.builds(lambda tag: tagged(wire.ACKNOWLEDGED, tag, {"notifications": {}}), ids)
    updated = st.builds(lambda tag: tagged(wire.RESOURCE_UPDATED, tag, {"uri": "test://a"}), ids)
    untagged = st.just(wire.notification(wire.RESOURCE_UPDATED, {"uri": "test://a"}))
    result = st.builds(lambda rid: wire.result_response(rid, {}), ids)
    error = st.builds(lambda rid: wire.error_response(rid, -32603, "boom"), ids)
    request = st.builds(
        lambda rid: {"jsonrpc": "2.0", "id": rid, "method": "ping", "params": {}}, ids
    )
    garbage = st.dictionaries(st.text(max_size=5), st.integers(), max_size=3)
    return st.one_of(ack, updated, untagged, result, error, request, garbage)


@FAST
@given(st.lists(frame_strategy(), max_size=12))
def test_listen_machine_follows_its_table_for_any_frames(frames: list[dict[str, Any]]) -> None:
    machine = ListenMachine(LISTEN_ID)
    for frame in frames:
        before = machine.state
        try:
            event = machine.receive(frame)
        except ProtocolViolation:
            assert machine.state is before, "a violation never changes the state"
            continue
        if isinstance(event, Acknowledged):
            assert before is ListenState.AWAITING_ACK and machine.state is ListenState.OPEN
        elif isinstance(event, Notified):
            assert before is ListenState.OPEN and machine.state is ListenState.OPEN
            tag = event.params["_meta"][wire.META_SUBSCRIPTION_ID]
            assert type(tag) is int and tag == LISTEN_ID, "only this listen's id, type kept"
        elif isinstance(event, Closed):
            assert before is ListenState.OPEN and machine.state is ListenState.CLOSED
        elif isinstance(event, Failed):
            assert before in (ListenState.AWAITING_ACK, ListenState.OPEN)
            assert machine.state is ListenState.FAILED
    if machine.state in (ListenState.CLOSED, ListenState.FAILED):
        with pytest.raises(ProtocolViolation):
            machine.receive(wire.result_response(LISTEN_ID, {}))


# ---- wire codec and JSON ----------------------------------------------------------------
@FAST
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=60))
def test_header_values_round_trip_and_travel_as_printable_ascii(value: str) -> None:
    encoded = wire.encode_header_value(value)
    assert all(0x20 <= ord(ch) <= 0x7E for ch in encoded)
    assert wire.decode_header_value(encoded) == value


@FAST
@given(st.text(max_size=60))
def test_decoding_any_header_value_returns_or_raises_value_error(value: str) -> None:
    with contextlib.suppress(ValueError):
        wire.decode_header_value(value)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=30,
)


@FAST
@given(json_values)
def test_jsondecode_round_trips_what_json_dumps(value: Any) -> None:
    assert jsondecode.loads(json.dumps(value)) == value


@FAST
@given(st.integers(min_value=1, max_value=400), st.sampled_from(["[", '{"k":']))
def test_jsondecode_depth_bound_is_exact_for_any_depth(depth: int, opener: str) -> None:
    closer = "]" if opener == "[" else "}"
    inner = "[]" if opener == "[" else "1"
    extra = 1 if opener == "[" else 0  # the innermost [] is itself a level
    text = opener * depth + inner + closer * depth
    if depth + extra <= jsondecode.MAX_DEPTH:
        jsondecode.loads(text)
    else:
        with pytest.raises(jsondecode.InvalidJson):
            jsondecode.loads(text)


@FAST
@given(st.text(max_size=200))
def test_jsondecode_raises_only_invalid_json(text: str) -> None:
    with contextlib.suppress(jsondecode.InvalidJson):
        jsondecode.loads(text)


# ---- content coding ---------------------------------------------------------------------
@FAST
@given(st.binary(max_size=5000), st.lists(st.integers(min_value=0), max_size=10))
def test_gzip_body_decodes_the_same_in_any_chunking(data: bytes, cuts: list[int]) -> None:
    raw = gzip.compress(data)
    body = LimitedBody("gzip", limit=10_000)
    start = 0
    for cut in [*sorted(set(c % (len(raw) + 1) for c in cuts)), len(raw)]:
        body.feed(raw[start:cut])
        start = cut
    assert body.finish() == data


@FAST
@given(st.integers(min_value=1, max_value=4000), st.integers(min_value=0, max_value=100_000))
def test_limited_body_refuses_exactly_past_the_limit(limit: int, size: int) -> None:
    assume(size != limit)
    body = LimitedBody("gzip", limit=limit)
    raw = gzip.compress(b"z" * size)
    if size <= limit:
        body.feed(raw)
        assert body.finish() == b"z" * size
    else:
        with pytest.raises(BodyTooLarge):
            body.feed(raw)
            body.finish()


_SSE_BITS = st.sampled_from(
    [b": keepalive\n", b":\n", b"\n", b"data: x\n", b"data: y", b"event: e\n", b"\r", b"\r\n",
     b": c\r\n", b"id: 1\n", b"\xef\xbb\xbf", b"da", b"ta: z\n"]
)  # fmt: skip


@given(
    before=st.lists(_SSE_BITS, max_size=6).map(b"".join),
    piece=st.lists(_SSE_BITS, min_size=1, max_size=5).map(b"".join),
)
@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
def test_a_piece_of_comments_only_changes_nothing_but_the_comments(
    before: bytes, piece: bytes
) -> None:
    """When ``comments_only`` says a piece may be skipped, feeding it would have reported
    exactly that many comments and left the decoder as it was; so the listen stream's quiet
    path loses no event and no byte of one."""
    skipped, fed = SSEDecoder(), SSEDecoder()
    skipped.feed(before)
    fed.feed(before)
    comments = skipped.comments_only(piece)
    if not comments:
        return
    state = {name: repr(getattr(skipped, name)) for name in vars(skipped)}
    out = fed.feed(piece)
    assert len(out) == comments and all(isinstance(item, Comment) for item in out)
    assert {name: repr(getattr(fed, name)) for name in vars(fed)} == state
    # And whatever follows decodes the same on both.
    tail = b"data: after\n\n"
    assert skipped.feed(tail) == fed.feed(tail)
