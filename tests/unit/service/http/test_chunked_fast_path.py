"""``StrictH11Connection.send`` frames a chunked body's pieces itself: the bytes and the
connection's states must be h11's own, for any pieces, and every other response framing
(a Content-Length body, an HTTP/1.0 client) must still go through h11's checks."""

from __future__ import annotations

import h11
import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.http.connections import StrictH11Connection


def _answering(conn: h11.Connection, version: bytes, headers: list[tuple[str, str]]) -> None:
    conn.receive_data(b"GET /v1/events/stream HTTP/" + version + b"\r\nHost: x\r\n\r\n")
    assert isinstance(conn.next_event(), h11.Request)
    conn.next_event()  # EndOfMessage
    conn.send(h11.Response(status_code=200, headers=headers))


@given(st.lists(st.binary(max_size=300), max_size=12))
def test_chunked_pieces_are_framed_as_h11_frames_them(pieces: list[bytes]) -> None:
    ours, reference = StrictH11Connection(h11.SERVER), h11.Connection(h11.SERVER)
    for conn in (ours, reference):
        _answering(conn, b"1.1", [("Transfer-Encoding", "chunked")])
    for piece in pieces:
        assert ours.send(h11.Data(data=piece)) == reference.send(h11.Data(data=piece))
        assert ours.our_state is reference.our_state is h11.SEND_BODY
    assert ours.send(h11.EndOfMessage()) == reference.send(h11.EndOfMessage())
    assert ours.our_state is reference.our_state is h11.DONE


def test_a_content_length_body_is_still_checked_by_h11() -> None:
    conn = StrictH11Connection(h11.SERVER)
    _answering(conn, b"1.1", [("Content-Length", "3")])
    assert conn.send(h11.Data(data=b"abc")) == b"abc"
    with pytest.raises(h11.LocalProtocolError):
        conn.send(h11.Data(data=b"d"))  # past the declared length


def test_an_http10_client_gets_the_body_unframed() -> None:
    conn = StrictH11Connection(h11.SERVER)
    _answering(conn, b"1.0", [])
    assert conn.send(h11.Data(data=b"data: x\n\n")) == b"data: x\n\n"


def test_a_piece_before_the_head_is_refused_as_before() -> None:
    conn = StrictH11Connection(h11.SERVER)
    conn.receive_data(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    conn.next_event()
    with pytest.raises(h11.LocalProtocolError):
        conn.send(h11.Data(data=b"x"))


def test_a_chunked_piece_skips_the_state_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """The point of the fast path: an SSE event costs no state-machine pass."""
    conn = StrictH11Connection(h11.SERVER)
    _answering(conn, b"1.1", [("Transfer-Encoding", "chunked")])
    passes: list[type] = []
    real = h11.Connection._process_event

    def counting(self: h11.Connection, role: object, event: object) -> None:
        passes.append(type(event))
        real(self, role, event)  # type: ignore[arg-type]

    monkeypatch.setattr(h11.Connection, "_process_event", counting)
    for _ in range(100):
        conn.send(h11.Data(data=b"data: x\n\n"))
    conn.send(h11.EndOfMessage())
    assert passes == [h11.EndOfMessage]
