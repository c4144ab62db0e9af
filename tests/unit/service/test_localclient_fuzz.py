"""``service.localclient.ResponseReader`` against h11, the HTTP/1.1 the daemon itself speaks.

The reader is the one every client of the local API reads answers with (the CLIs, the hook,
the stdio face). For any bytes, split anywhere, it must read what h11 reads (status, reason,
headers, body) or refuse with its own bounded errors; for a well-formed answer within its
bounds it must read it. Each bound is attacked on its own: the head, the number of headers,
a chunk-size line, the body (announced, chunked, to the end of the connection); a peer that
trickles or stays silent is in tests/api/test_localapi.py (a real socket).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import h11
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service import localclient
from service.localclient import (
    MAX_CHUNK_LINE,
    MAX_HEADER_BYTES,
    MAX_HEADERS,
    Closed,
    ProtocolError,
    ResponseReader,
    TooLarge,
)

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
Parsed = tuple[int, str, dict[str, str], bytes]


def h11_reads(data: bytes) -> Parsed | None:
    """What h11 reads from ``data`` then EOF, as an answer to a GET; None if it refuses."""
    conn = h11.Connection(h11.CLIENT, max_incomplete_event_size=10 * MAX_HEADER_BYTES)
    conn.send(h11.Request(method="GET", target="/", headers=[("Host", "localhost")]))
    conn.send(h11.EndOfMessage())
    conn.receive_data(data)
    conn.receive_data(b"")
    head: tuple[int, str, dict[str, str]] | None = None
    body = bytearray()
    try:
        while True:
            event = conn.next_event()
            if isinstance(event, h11.Response):
                headers: dict[str, str] = {}
                for name, value in event.headers:
                    key, text = name.decode(), value.decode("latin-1")
                    headers[key] = f"{headers[key]}, {text}" if key in headers else text
                head = (event.status_code, event.reason.decode("latin-1"), headers)
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                assert head is not None
                return (*head, bytes(body))
            else:  # informational, closed, NEED_DATA at EOF
                return None
    except h11.RemoteProtocolError:
        return None


def ours(data: bytes, cuts: list[int], max_body: int | None = None) -> Parsed:
    """What ``ResponseReader`` reads from ``data`` fed in pieces cut at ``cuts``, then EOF;
    raises its errors."""
    reader = ResponseReader(max_body)
    body = bytearray()
    edges = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    pieces = [data[a:b] for a, b in itertools.pairwise(edges)] + [b""]
    for piece in pieces:
        reader.feed(piece)
        if not reader.head():
            continue
        while (chunk := reader.data()) is not None:
            assert chunk
            body += chunk
        if reader.done:
            break
    assert reader.done, "fed everything and EOF: done or refused"
    headers = dict(reader.headers)
    if "transfer-encoding" in headers:
        headers["transfer-encoding"] = headers["transfer-encoding"].lower()  # as h11 keeps it
    return reader.status, reader.reason, headers, bytes(body)


# ---- well-formed answers ---------------------------------------------------------------------
names = st.sampled_from(["x-a", "X-Thing", "content-type", "server", "date", "x_b", "etag"])
values = st.text(
    alphabet=st.characters(min_codepoint=0x21, max_codepoint=0xFF, blacklist_characters="\x7f"),
    max_size=30,
).map(lambda s: s.encode("latin-1"))
bodies = st.binary(max_size=300)


@st.composite
def answers(draw: st.DrawFn) -> bytes:
    """One HTTP/1.1 answer a correct server could send: any framing, CRLF or bare LF."""
    status = draw(st.integers(200, 599))
    reason = draw(st.sampled_from([b"OK", b"", b"Not Found", b" spaced  reason ", b"\xe9t\xe9"]))
    eol = draw(st.sampled_from([b"\r\n", b"\n"]))
    headers = draw(st.lists(st.tuples(names, values), max_size=6))
    body = draw(bodies)
    framing = draw(st.sampled_from(["length", "chunked", "eof"]))
    if status in (204, 304):
        body, framing = b"", "length"
    head = [b"HTTP/1.1 %d %s" % (status, reason) if reason else b"HTTP/1.1 %d" % status]
    head += [n.encode() + b":" + draw(st.sampled_from([b"", b" ", b"\t "])) + v for n, v in headers]
    if framing == "length":
        head.append(b"Content-Length: %d" % len(body))
        encoded = body
    elif framing == "chunked":
        head.append(
            draw(st.sampled_from([b"Transfer-Encoding: chunked", b"transfer-encoding: Chunked"]))
        )
        cuts = sorted(draw(st.lists(st.integers(0, len(body)), max_size=5)))
        encoded = b""
        for a, b in zip([0, *cuts], [*cuts, len(body)], strict=False):
            if b > a:
                ext = draw(st.sampled_from([b"", b";name=value", b"  "]))
                encoded += b"%x%s\r\n%s\r\n" % (b - a, ext, body[a:b])
        trailer = draw(st.sampled_from([b"", b"x-trailer: 1\r\n"]))
        encoded += b"0\r\n" + trailer + b"\r\n"
    else:
        encoded = body
    return eol.join(head) + eol + eol + encoded


@FUZZ
@given(answers(), st.lists(st.integers(0, 2000), max_size=8))
def test_a_well_formed_answer_is_read_as_h11_reads_it(data: bytes, cuts: list[int]) -> None:
    reference = h11_reads(data)
    assert reference is not None, data
    assert ours(data, cuts) == reference


# ---- anything: the same reading, or a refusal -------------------------------------------------
noise = st.sampled_from(
    [b"\r\n", b"\n", b"\r", b":", b" ", b"\t", b"\x00", b"0", b"f", b";", b"\x0b", b"\x1f",
     b"\xff", b"HTTP/1.1 ", b"HTTP/1.0 ", b"100", b"chunked", b"Content-Length: 3",
     b"Transfer-Encoding: chunked", b"Transfer-Encoding: gzip", b"Content-Length: 3, 3",
     b"\r\n\r\n", b"0\r\n\r\n", b"ffffffffffffffffff\r\n"]
)  # fmt: skip


@st.composite
def mangled(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(answers()))
    for _ in range(draw(st.integers(1, 3))):
        head = max(data.find(b"\n\n"), data.find(b"\n\r\n"), 0)
        at = draw(st.one_of(st.integers(0, head), st.integers(0, len(data))))  # the head often
        action = draw(st.sampled_from(["insert", "replace", "delete", "cut"]))
        if action == "insert":
            data[at:at] = draw(st.one_of(noise, st.binary(min_size=1, max_size=2)))
        elif action == "replace" and at < len(data):
            data[at] = draw(st.integers(0, 255))
        elif action == "delete":
            del data[at : at + draw(st.integers(1, 8))]
        elif action == "cut":
            del data[at:]
    return bytes(data)


@FUZZ
@given(st.one_of(mangled(), st.binary(max_size=200)), st.lists(st.integers(0, 2000), max_size=8))
def test_any_bytes_are_read_as_h11_reads_them_or_refused(data: bytes, cuts: list[int]) -> None:
    try:
        read = ours(data, cuts)
    except (ProtocolError, TooLarge):
        return  # a clear refusal (what h11 makes of it does not matter)
    assert read == h11_reads(data), data


@pytest.mark.parametrize(
    "template",
    [
        b"HTTP/1.1 200 O%sK\r\nx-a: b\r\nContent-Length: 1\r\n\r\nz",  # reason
        b"HTTP/1.1 200 OK\r\nx-%sa: b\r\nContent-Length: 1\r\n\r\nz",  # header name
        b"HTTP/1.1 200 OK\r\nx-a: b%sc\r\nContent-Length: 1\r\n\r\nz",  # header value
        b"HTTP/1.1 200 OK\r\nx-a: b%s\r\nContent-Length: 1\r\n\r\nz",  # value's end
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1%s\r\nz\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;e%s\r\nz\r\n0\r\n\r\n",
    ],
    ids=["reason", "name", "value", "value-end", "chunk-size", "chunk-extension"],
)
def test_every_byte_in_every_field(template: bytes) -> None:
    """Each of the 256 bytes at each place: h11's reading or a refusal (exhaustive)."""
    for byte in range(256):
        data = template % bytes([byte])
        try:
            read = ours(data, [])
        except ProtocolError:
            continue
        assert read == h11_reads(data), data


# ---- each bound ------------------------------------------------------------------------------
def _endless(first: bytes, piece: bytes) -> Iterator[bytes]:
    yield first
    while True:
        yield piece


@pytest.mark.parametrize(
    ("first", "piece", "error"),
    [
        (b"HTTP/1.1 200 OK\r\nx-pad: ", b"a" * 4096, ProtocolError),  # an endless header
        (b"HTTP/1.1 200 OK\r\n", b"x: y\r\n", ProtocolError),  # endless small headers
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1", b"0" * 64, ProtocolError),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", b"400\r\n" + b"x" * 1024 + b"\r\n", TooLarge),
        (b"HTTP/1.1 200 OK\r\n\r\n", b"x" * 4096, TooLarge),  # to the end of the connection
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nx: ", b"a" * 4096, ProtocolError),
    ],
    ids=["header-line", "header-count", "chunk-line", "chunked-body", "eof-body", "trailers"],
)  # fmt: skip
def test_every_bound_refuses_before_holding_more(
    first: bytes, piece: bytes, error: type[Exception]
) -> None:
    reader = ResponseReader(max_body=1 << 20)
    held = 0
    with pytest.raises(error):
        for data in _endless(first, piece):
            reader.feed(data)
            held = max(held, len(reader._buf))
            if reader.head():
                while reader.data() is not None:
                    pass
    assert held <= MAX_HEADER_BYTES + len(piece) + len(first)


def test_the_bounds_are_exact() -> None:
    head = b"HTTP/1.1 200 OK\r\n"
    pad = b"x-pad: " + b"a" * (MAX_HEADER_BYTES - len(head) - 2 - 7 - 2) + b"\r\n\r\n"
    assert len(head + pad) == MAX_HEADER_BYTES
    assert ours(head + pad + b"body", []) == (200, "OK", {"x-pad": "a" * (len(pad) - 11)}, b"body")
    with pytest.raises(ProtocolError, match="too long"):
        ours(head + b"x" + pad, [])
    many = head + b"".join(b"h%d: v\r\n" % i for i in range(MAX_HEADERS)) + b"\r\n"
    assert len(ours(many, [])[2]) == MAX_HEADERS
    with pytest.raises(ProtocolError, match="too many"):
        ours(head + b"extra: 1\r\n" + many[len(head) :], [])
    chunked = head + b"Transfer-Encoding: chunked\r\n\r\n"
    ext = b";" + b"e" * (MAX_CHUNK_LINE - 4)  # the line and its CRLF: the bound
    assert ours(chunked + b"1" + ext + b"\r\nA\r\n0\r\n\r\n", [])[3] == b"A"
    with pytest.raises(ProtocolError, match="too long"):
        ours(chunked + b"1" + ext + b"e\r\nA\r\n0\r\n\r\n", [])
    body = head + b"Content-Length: 10\r\n\r\n" + b"x" * 10
    assert ours(body, [], max_body=10)[3] == b"x" * 10
    with pytest.raises(TooLarge):
        ours(body, [], max_body=9)
    announced = ResponseReader(max_body=100)
    announced.feed(head + b"Content-Length: 999999999999\r\n\r\n")
    with pytest.raises(TooLarge):  # refused on the announcement, before any body byte
        announced.head()
    with pytest.raises(ProtocolError, match="Content-Length"):  # 21 digits: not a number
        ours(head + b"Content-Length: " + b"1" * 21 + b"\r\n\r\n", [])
    announced_chunk = ResponseReader(max_body=100)
    announced_chunk.feed(chunked + b"65\r\n")  # 101 bytes announced: refused before any
    assert announced_chunk.head()
    with pytest.raises(TooLarge):
        announced_chunk.data()
    assert ours(chunked + b"0" * 15 + b"1\r\nA\r\n0\r\n\r\n", [])[3] == b"A"  # 16 digits
    with pytest.raises(ProtocolError, match="chunk size"):  # 17: not a size we read
        ours(chunked + b"0" * 16 + b"1\r\nA\r\n0\r\n\r\n", [])
    assert ours(chunked + b"3\r\nabc\r\n0\r\n\r\n", [], max_body=3)[3] == b"abc"
    with pytest.raises(TooLarge):
        ours(chunked + b"3\r\nabc\r\n1\r\nd\r\n0\r\n\r\n", [], max_body=3)


def test_the_end_of_the_connection() -> None:
    with pytest.raises(Closed):
        ours(b"", [])
    for cut in (b"HTTP/1.1 200 OK\r\n", b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab"):
        with pytest.raises(ProtocolError) as info:
            ours(cut, [])
        assert not isinstance(info.value, Closed)
    with pytest.raises(localclient.Gone):  # between two chunks of a stream: the peer left
        ours(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n", [])
    with pytest.raises(ProtocolError, match="informational"):
        ours(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", [])
