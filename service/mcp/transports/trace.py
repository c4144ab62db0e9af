"""The wire transcript (``--trace FILE``): every JSON-RPC message and SSE event, in order.

Seed 003's "canonical transcript as a shared oracle": what a user attaches to a bug report
against a server. :class:`TracingTransport` wraps whichever transport was chosen (lean or
httpx) at the seam every MCP exchange crosses, so both are traced alike; a CLI turns it on
for its whole run with :func:`recording`, and :func:`~service.mcp.transports.choose.make_transport`
wraps each transport it makes while a recording is on.

The file is JSON Lines (docs/cli.md "Wire transcript"): one object per line with ``t`` (UTC,
milliseconds), ``ms`` (since the trace began), ``dir`` (``out``/``in``, or ``-`` for the
trace's own lines) and ``type``: ``request``, ``response``, ``stream-open``, ``sse``,
``sse-comment``, ``stream-end``, ``error``, ``trace-start``, ``trace-truncated``. Requests
and answers carry the headers that matter (:data:`REQUEST_HEADERS`, :data:`ANSWER_HEADERS`,
``mcp-*``) and the HTTP status. Secrets are cut before a line is written: the bearer token
(and every credential of the URL) wherever it appears, ``Authorization``'s credentials, the
value of every JSON key named like a credential, and every URL through
:func:`service.safetext.redact_urls`. The file is created 0600 and stops growing at
``max_bytes`` with one ``trace-truncated`` line.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

from service import jsondecode
from service.mcp.coding import ContentDecoder
from service.mcp.sse import Comment, Event, SSEDecoder
from service.mcp.transports.base import Answer, StreamAnswer, Transport
from service.safetext import is_secret_parameter, known_secrets, redact_known, url_credentials

DEFAULT_MAX_BYTES = 64 * 1024 * 1024
MAX_BYTES_VARIABLE = "MCPSUB_TRACE_MAX_BYTES"
"""Overrides :data:`DEFAULT_MAX_BYTES` (bytes; the file stops growing past it)."""
MAX_RAW_CHARS = 4096
"""A body that is not JSON is shown up to this many characters."""
REQUEST_HEADERS = frozenset({"authorization", "content-type", "accept"})
ANSWER_HEADERS = frozenset(
    {
        "content-type",
        "content-encoding",
        "content-length",
        "transfer-encoding",
        "www-authenticate",
        "retry-after",
        "location",
    }
)
NOT_SECRET_KEYS = frozenset({"progressToken", "nextCursor", "cursor"})
"""Protocol keys whose names look like credentials but are not."""


class Recorder:
    """One transcript file: lines appended in order, secrets cut, size bounded."""

    def __init__(self, fd: int, *, max_bytes: int, program: str) -> None:
        self._fd = fd
        self._max = max_bytes
        self._written = 0
        self._started = time.monotonic()
        self._secrets: tuple[str, ...] = ()
        self.truncated = False
        self.write("-", "trace-start", program=program, maxBytes=max_bytes)

    @classmethod
    def create(cls, path: str, *, program: str, max_bytes: int | None = None) -> Recorder:
        """Open ``path`` for a new transcript, 0600 (an existing file is emptied and made
        0600; a symbolic link is refused). ``OSError`` names what went wrong."""
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC
        flags |= getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(path, flags, 0o600)
        try:
            os.fchmod(fd, 0o600)
        except OSError:
            os.close(fd)
            raise
        return cls(fd, max_bytes=max_bytes or _max_bytes_from_env(), program=program)

    def learn_secrets(self, *values: str | None) -> None:
        """Credentials to cut wherever they appear (a token, a URL's userinfo)."""
        self._secrets = known_secrets(*self._secrets, *values)

    def write(self, direction: str, kind: str, **fields: Any) -> None:
        if self.truncated or self._fd < 0:
            return
        now = time.time()
        stamp = (
            time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z"
        )
        record = {
            "t": stamp,
            "ms": round((time.monotonic() - self._started) * 1000, 1),
            "dir": direction,
            "type": kind,
            **fields,
        }
        line = redact_known(_dumps(_cut_secret_keys(record)), self._secrets) + "\n"
        data = line.encode("utf-8", errors="replace")
        if self._written + len(data) > self._max:
            marker = _dumps(
                {"t": stamp, "dir": "-", "type": "trace-truncated", "maxBytes": self._max}
            )
            self._emit((marker + "\n").encode())
            self.truncated = True
            return
        self._emit(data)
        self._written += len(data)

    def _emit(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _max_bytes_from_env() -> int:
    raw = os.environ.get(MAX_BYTES_VARIABLE, "").strip()
    try:
        value = int(raw) if raw else DEFAULT_MAX_BYTES
    except ValueError:
        return DEFAULT_MAX_BYTES
    return value if value > 0 else DEFAULT_MAX_BYTES


def _dumps(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _cut_secret_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            key: (
                "***"
                if isinstance(item, str)
                and isinstance(key, str)
                and key not in NOT_SECRET_KEYS
                and is_secret_parameter(key)
                else _cut_secret_keys(item)
            )
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_cut_secret_keys(item) for item in value]
    return value


def _headers(headers: Mapping[str, str], wanted: frozenset[str]) -> dict[str, str]:
    shown: dict[str, str] = {}
    for name, value in headers.items():
        lower = name.lower()
        if lower in wanted or lower.startswith("mcp-"):
            if lower == "authorization":
                scheme, _, _ = value.partition(" ")
                value = f"{scheme} ***"
            shown[lower] = value
    return shown


def _body(content: bytes) -> dict[str, Any]:
    """A body as the transcript shows it: the JSON message, else its text (cut)."""
    text = content.decode("utf-8", errors="replace")
    try:
        return {"message": jsondecode.loads(text)}
    except jsondecode.InvalidJson:
        return {"raw": text[:MAX_RAW_CHARS], "bytes": len(content)}


class _EventReader:
    """SSE events of one body for the transcript, decoded apart from the client's own."""

    def __init__(self, recorder: Recorder, content_encoding: str | None, url: str) -> None:
        self._recorder = recorder
        self._url = url
        self._sse: SSEDecoder | None = SSEDecoder()
        try:
            self._content: ContentDecoder | None = ContentDecoder(content_encoding)
        except Exception as exc:
            self._content = None
            recorder.write("in", "error", what=f"cannot decode the stream for the trace: {exc}")

    def feed(self, chunk: bytes) -> None:
        if self._content is None or self._sse is None:
            return
        try:
            for piece in self._content.decode(chunk):
                for item in self._sse.feed(piece):
                    self._record(item)
        except Exception as exc:  # the transcript never breaks the exchange it records
            self._recorder.write("in", "error", what=f"trace stops decoding this stream: {exc}")
            self._sse = None

    def _record(self, item: Event | Comment) -> None:
        if isinstance(item, Comment):
            self._recorder.write("in", "sse-comment", url=self._url, text=item.text[:MAX_RAW_CHARS])
            return
        fields: dict[str, Any] = {"url": self._url, "event": item.event}
        if item.id is not None:
            fields["id"] = item.id
        self._recorder.write("in", "sse", **fields, **_body(item.data.encode()))


class _TracedStream:
    """A :class:`StreamAnswer` whose events are written to the transcript as they arrive."""

    def __init__(self, inner: StreamAnswer, recorder: Recorder, url: str) -> None:
        self._inner = inner
        self._recorder = recorder
        self._url = url
        self.status = inner.status
        self.headers = inner.headers
        self._ended = False

    async def chunks(self) -> AsyncIterator[bytes]:
        reader = _EventReader(self._recorder, self.headers.get("content-encoding"), self._url)
        try:
            async for chunk in self._inner.chunks():
                reader.feed(chunk)
                yield chunk
        except Exception as exc:
            self._end(f"broke: {exc}")
            raise
        self._end("the server ended the stream")

    async def read_all(self, limit: int) -> bytes:
        body = await self._inner.read_all(limit)
        self._recorder.write("in", "body", url=self._url, **_body(body))
        return body

    async def aclose(self) -> None:
        if not self._inner.is_closed:
            self._end("closed by this client")
        await self._inner.aclose()

    def _end(self, reason: str) -> None:
        if not self._ended:
            self._ended = True
            self._recorder.write("-", "stream-end", url=self._url, reason=reason)

    @property
    def is_closed(self) -> bool:
        return self._inner.is_closed


class TracingTransport:
    """A :class:`Transport` that writes every exchange of ``inner`` to ``recorder``."""

    def __init__(self, inner: Transport, recorder: Recorder) -> None:
        self._inner = inner
        self._recorder = recorder
        self.url = inner.url
        self.accept_encoding = inner.accept_encoding
        recorder.learn_secrets(*url_credentials(inner.url))

    def _request(self, content: bytes, headers: dict[str, str]) -> None:
        auth = headers.get("Authorization") or headers.get("authorization")
        if auth:
            self._recorder.learn_secrets(auth.partition(" ")[2].strip())
        self._recorder.write(
            "out", "request", url=self.url, headers=_headers(headers, REQUEST_HEADERS),
            **_body(content),
        )  # fmt: skip

    async def post(
        self, content: bytes, headers: dict[str, str], *, idempotent: bool = True
    ) -> Answer:
        self._request(content, headers)
        try:
            answer = await self._inner.post(content, headers, idempotent=idempotent)
        except Exception as exc:
            self._recorder.write("in", "error", url=self.url, what=f"{type(exc).__name__}: {exc}")
            raise
        shown = _headers(answer.headers, ANSWER_HEADERS)
        mime = answer.headers.get("content-type", "").split(";")[0].strip().lower()
        if mime == "text/event-stream":
            self._recorder.write(
                "in", "response", url=self.url, status=answer.status, headers=shown
            )
            _EventReader(self._recorder, None, self.url).feed(answer.body)
        else:
            self._recorder.write(
                "in",
                "response",
                url=self.url,
                status=answer.status,
                headers=shown,
                **_body(answer.body),
            )
        return answer

    async def open_stream(self, content: bytes, headers: dict[str, str]) -> StreamAnswer:
        self._request(content, headers)
        try:
            stream = await self._inner.open_stream(content, headers)
        except Exception as exc:
            self._recorder.write("in", "error", url=self.url, what=f"{type(exc).__name__}: {exc}")
            raise
        self._recorder.write(
            "in",
            "stream-open",
            url=self.url,
            status=stream.status,
            headers=_headers(stream.headers, ANSWER_HEADERS),
        )
        return _TracedStream(stream, self._recorder, self.url)

    def close_idle(self, before: float) -> None:
        self._inner.close_idle(before)

    async def aclose(self) -> None:
        await self._inner.aclose()


_current: Recorder | None = None


def current() -> Recorder | None:
    """The recording this process is making, if any (:func:`recording`)."""
    return _current


@contextlib.contextmanager
def recording(path: str | None, *, program: str) -> Iterator[Recorder | None]:
    """Trace every transport made inside the block into ``path`` (None: no trace).

    ``OSError`` from creating the file is raised before anything is sent."""
    global _current
    if not path:
        yield None
        return
    recorder = Recorder.create(path, program=program)
    previous, _current = _current, recorder
    try:
        yield recorder
    finally:
        _current = previous
        recorder.close()
