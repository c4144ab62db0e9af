"""service.mcp.sse: the incremental WHATWG SSE decoder."""

from __future__ import annotations

import pytest

from service.mcp.sse import DEFAULT_MAX_EVENT_BYTES, Comment, Event, EventTooLarge, SSEDecoder


def decode(*chunks: bytes, **kwargs: int) -> list[Event | Comment]:
    decoder = SSEDecoder(**kwargs)
    out: list[Event | Comment] = []
    for chunk in chunks:
        out += decoder.feed(chunk)
    return out


def bytewise(data: bytes) -> list[Event | Comment]:
    return decode(*(data[i : i + 1] for i in range(len(data))))


MIXED = (
    b": ping\r\n"
    b'event: message\r\ndata: {"a":1}\r\n\r\n'
    b"data: line1\ndata: line2\n\n"
    b"data: cr-only\r\r"
    b"id: 9\rretry: 250\rdata: caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x99\x82\r\n\r\n"
    b":\n"
    b"event: custom\ndata:nospace\n\n"
)
MIXED_EVENTS = [
    Comment("ping"),
    Event('{"a":1}'),
    Event("line1\nline2"),
    Event("cr-only"),
    Event("café € 🙂", id="9", retry=250),
    Comment(""),
    Event("nospace", event="custom", id="9", retry=250),
]


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"])
def test_line_endings(eol: bytes) -> None:
    body = b"event: message" + eol + b'data: {"x":1}' + eol + eol
    assert decode(body) == [Event('{"x":1}', event="message")]


def test_mixed_stream_in_one_chunk() -> None:
    assert decode(MIXED) == MIXED_EVENTS


def test_byte_by_byte_equals_one_chunk() -> None:
    assert bytewise(MIXED) == MIXED_EVENTS


def test_every_two_way_split_equals_one_chunk() -> None:
    for cut in range(len(MIXED) + 1):
        assert decode(MIXED[:cut], MIXED[cut:]) == MIXED_EVENTS, cut


def test_cr_at_chunk_end_then_lf_is_one_line_break() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\r") == []
    # If the LF were a second line break it would dispatch "a" and "b" separately.
    assert decoder.feed(b"\ndata: b\r\n\r\n") == [Event("a\nb")]


def test_cr_at_chunk_end_then_other_byte_is_a_line_break() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\r") == []
    assert decoder.feed(b"\r") == [Event("a")]


def test_empty_chunk_between_cr_and_lf() -> None:
    decoder = SSEDecoder()
    out = decoder.feed(b"data: a\r") + decoder.feed(b"") + decoder.feed(b"\ndata: b\n\n")
    assert out == [Event("a\nb")]


def test_comments_are_reported() -> None:
    assert decode(b": keepalive\n") == [Comment("keepalive")]
    assert decode(b":\r\n") == [Comment("")]


def test_comment_inside_an_event_does_not_dispatch_it() -> None:
    assert decode(b"data: a\n: ping\ndata: b\n\n") == [Comment("ping"), Event("a\nb")]


def test_event_type_defaults_to_message() -> None:
    assert decode(b"data: x\n\n") == [Event("x", event="message")]
    assert decode(b"event: ping\ndata: x\n\n") == [Event("x", event="ping")]


def test_event_type_does_not_leak_to_next_event() -> None:
    assert decode(b"event: ping\ndata: 1\n\ndata: 2\n\n") == [
        Event("1", event="ping"),
        Event("2", event="message"),
    ]


def test_multiline_data_joined_with_lf() -> None:
    assert decode(b"data: a\ndata:\ndata: c\n\n") == [Event("a\n\nc")]


def test_only_one_space_after_colon_is_stripped() -> None:
    assert decode(b"data:x\n\ndata:  y\n\n") == [Event("x"), Event(" y")]


def test_field_without_colon_has_empty_value() -> None:
    assert decode(b"data\n\n") == [Event("")]


def test_id_and_retry() -> None:
    assert decode(b"id: 7\nretry: 1500\ndata: x\n\n") == [Event("x", id="7", retry=1500)]


def test_id_persists_and_bad_values_are_ignored() -> None:
    body = b"id: 1\ndata: a\n\nid: bad\x00id\nretry: 1.5\ndata: b\n\n"
    assert decode(body) == [Event("a", id="1"), Event("b", id="1")]


def test_retry_with_non_ascii_digit_is_ignored() -> None:
    assert decode("retry: ²\ndata: x\n\n".encode()) == [Event("x")]


def test_leading_bom_is_ignored() -> None:
    assert decode(b"\xef\xbb\xbfdata: x\n\n") == [Event("x")]


def test_unknown_fields_are_ignored() -> None:
    assert decode(b"foo: bar\ndata: x\n\n") == [Event("x")]


def test_event_without_data_is_not_dispatched() -> None:
    assert decode(b"event: ping\n\n") == []
    assert decode(b"\n\n\r\n") == []


def test_unterminated_event_discarded_at_flush() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: partial\ndata: more") == []
    assert decoder.flush() == []
    # Nothing of the discarded event survives into the next one.
    assert decoder.feed(b"\n\ndata: next\n\n") == [Event("next")]


def test_multibyte_utf8_split_across_chunks() -> None:
    body = "data: héllo € 🙂\n\n".encode()
    euro = body.index("€".encode())
    emoji = body.index("🙂".encode())
    assert decode(body[: euro + 1], body[euro + 1 : emoji + 2], body[emoji + 2 :]) == [
        Event("héllo € 🙂")
    ]
    assert bytewise(body) == [Event("héllo € 🙂")]


def test_line_over_limit_raises_even_without_newline() -> None:
    decoder = SSEDecoder(max_event_bytes=100)
    assert decoder.feed(b"data: " + b"x" * 94) == []  # exactly 100 bytes buffered
    with pytest.raises(EventTooLarge):
        decoder.feed(b"x")


def test_line_over_limit_across_many_chunks() -> None:
    decoder = SSEDecoder(max_event_bytes=64)
    with pytest.raises(EventTooLarge):
        for _ in range(100):
            decoder.feed(b"xxxxxxxx")


def test_event_over_limit_raises() -> None:
    decoder = SSEDecoder(max_event_bytes=100)
    line = b"data: " + b"y" * 24 + b"\n"  # 30 bytes without the LF
    assert decoder.feed(line * 3) == []
    with pytest.raises(EventTooLarge):
        decoder.feed(line)


def test_event_size_resets_after_dispatch() -> None:
    decoder = SSEDecoder(max_event_bytes=100)
    event = b"data: " + b"z" * 60 + b"\n\n"
    for _ in range(5):
        assert decoder.feed(event) == [Event("z" * 60)]


def test_default_limit_is_4_mib() -> None:
    assert DEFAULT_MAX_EVENT_BYTES == 4 * 1024 * 1024
    with pytest.raises(EventTooLarge):
        SSEDecoder().feed(b"data: " + b"x" * DEFAULT_MAX_EVENT_BYTES + b"\n")


def test_event_too_large_is_a_value_error() -> None:
    assert issubclass(EventTooLarge, ValueError)


@pytest.mark.parametrize(
    ("before", "piece", "comments"),
    [
        (b"", b": keepalive\n\n", 1),
        (b"data: a\n\n", b": one\n: two\n\n", 2),
        (b"data: a\n\n", b":\n", 1),
        # Must be fed: the decoder is inside an event (a blank line would dispatch it) ...
        (b"data: a\n", b": keepalive\n\n", 0),
        # ... or holds part of a line, or a CR that may start a CRLF ...
        (b"data: a\n\ndat", b": keepalive\n\n", 0),
        (b"data: a\r", b": keepalive\n\n", 0),
        # ... or the piece is not whole comment lines ending in LF.
        (b"", b": keepalive", 0),
        (b"", b": keepalive\r\n\r\n", 0),
        (b"", b": keepalive\ndata: x\n\n", 0),
        (b"", b"\n", 0),
        (b"", b": " + b"x" * 300 + b"\n\n", 0),
    ],
)
def test_comments_only_says_when_a_piece_may_be_skipped(
    before: bytes, piece: bytes, comments: int
) -> None:
    decoder = SSEDecoder()
    decoder.feed(b": first line\n")  # past the byte order mark's place
    decoder.feed(before)
    assert decoder.comments_only(piece) == comments
