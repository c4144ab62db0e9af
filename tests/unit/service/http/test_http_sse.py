"""service.http.sse: the daemon's one SSE encoder, read back by the WHATWG decoder
(``service.mcp.sse``) as a client would read it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.http import sse
from service.mcp.sse import Comment, Event, SSEDecoder

ROOT = Path(__file__).resolve().parents[4]


def read(data: bytes) -> list[Event | Comment]:
    """What a client reads of ``data``: fed one byte at a time, then the end of the stream."""
    decoder = SSEDecoder()
    out: list[Event | Comment] = []
    for i in range(len(data)):
        out += decoder.feed(data[i : i + 1])
    return out + decoder.flush()


def test_an_event_with_its_id_and_type() -> None:
    frame = sse.json_event({"a": 1}, event_type="resource.updated", event_id=42)
    assert frame == b'id: 42\nevent: resource.updated\ndata: {"a":1}\n\n'
    assert read(frame) == [Event('{"a":1}', "resource.updated", "42")]
    assert sse.json_event([1], event_type="message") == b"event: message\ndata: [1]\n\n"
    assert read(sse.event(b"x")) == [Event("x")]


def test_multi_line_data_is_one_data_line_each_and_reads_back_joined() -> None:
    frame = sse.event(b"a\nb\r\nc\rd\n", event_type="t")
    assert frame == b"event: t\ndata: a\ndata: b\ndata: c\ndata: d\ndata: \n\n"
    assert read(frame) == [Event("a\nb\nc\nd\n", "t")]


def test_comments_and_keep_alives() -> None:
    assert sse.comment("keep-alive") == b": keep-alive\n\n"
    assert read(sse.comment("keep-alive")) == [Comment("keep-alive")]
    assert read(sse.comment("two\nlines\r\nevent: x")) == [
        Comment("two"),
        Comment("lines"),
        Comment("event: x"),
    ]
    assert sse.retry(5000) == b"retry: 5000\n\n"


def test_data_cannot_end_its_event_or_write_another_field() -> None:
    """A server's text inside an event (a resource's JSON, an error message) with blank
    lines and field names in it is still one event of the type and id we gave."""
    attack = "x\n\nevent: admin\nid: 999\nretry: 1\ndata: forged\r\n\r\n:\rdata: y"
    for frame in (
        sse.event(attack.encode(), event_type="resource.updated", event_id=7),
        sse.json_event({"text": attack}, event_type="resource.updated", event_id=7),
    ):
        events = read(frame + sse.event(b"next", event_id=8))
        assert [(e.event, e.id) for e in events if isinstance(e, Event)] == [
            ("resource.updated", "7"),
            ("message", "8"),
        ]
        assert all(e.retry is None for e in events if isinstance(e, Event))
    assert read(sse.event(attack.encode()))[0] == Event(
        attack.replace("\r\n", "\n").replace("\r", "\n")
    )


@pytest.mark.parametrize("bad", ["a\nb", "a\rb", "a\r\n", "a\0b"])
def test_a_type_or_id_that_is_not_one_line_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="one line"):
        sse.event(b"x", event_type=bad)
    with pytest.raises(ValueError, match="one line"):
        sse.event(b"x", event_id=bad)


@pytest.mark.parametrize("bad", [-1, True, 1.5, "5"])
def test_retry_is_whole_milliseconds(bad: Any) -> None:
    with pytest.raises(ValueError):
        sse.retry(bad)


LINE_ENDS = re.compile(r"\r\n|\r")


@given(data=st.text(), event_id=st.integers(min_value=0, max_value=2**63))
def test_any_text_reads_back_as_one_event(data: str, event_id: int) -> None:
    """Whatever the text, a reader gets one event with our type and id, and the text with
    its line ends as LF (SSE's one line end inside data)."""
    frame = sse.event(data.encode("utf-8", "surrogatepass"), event_type="t", event_id=event_id)
    events = read(frame)
    assert len(events) == 1 and isinstance(events[0], Event)
    assert (events[0].event, events[0].id) == ("t", str(event_id))
    expected = LINE_ENDS.sub("\n", data).encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    assert events[0].data == expected


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@given(payload=JSON)
def test_any_json_is_one_data_line_and_reads_back_equal(payload: Any) -> None:
    frame = sse.json_event(payload, event_type="message")
    assert frame.count(b"\ndata: ") == 1 and frame.endswith(b"\n\n")
    assert frame.count(b"\n") == 3 and b"\r" not in frame
    (event,) = read(frame)
    assert isinstance(event, Event) and json.loads(event.data) == payload


HAND_WRITTEN = re.compile(r"""(?:\b[bf]?["'](?:\\n)?(?:id|event|data|retry)|\bb["']): """)
"""A string that starts an SSE field (``"data: "``, ``f"event: "``) or a comment (``b": "``)."""


def test_no_other_module_of_the_daemon_writes_sse_by_hand() -> None:
    """The REST API's stream and the face's write their frames through this encoder."""
    found = []
    for path in sorted((ROOT / "service").rglob("*.py")):
        if path == ROOT / "service" / "http" / "sse.py":
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if HAND_WRITTEN.search(line) and "SSE" not in line:
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert found == []
