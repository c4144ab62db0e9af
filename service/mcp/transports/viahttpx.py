"""The httpx transport: TLS, proxies, and anything :mod:`service.mcp.transports.lean` does not cover.

httpx's exceptions are translated into :class:`~service.mcp.errors.TransportError` here, the
one place they can enter (the original stays as ``__cause__``), so nothing above the
:mod:`~service.mcp.transports.base` seam imports httpx. Bodies are read raw and decoded by
:class:`~service.mcp.coding.LimitedBody`: httpx's own decoding inflates each chunk in one go,
which a compression bomb turns into hundreds of MiB before any check.

Importing this module imports httpx (with httpcore and anyio, a third of a one-shot probe's
start-up), so :func:`~service.mcp.transports.choose.make_transport` imports it only when it is chosen.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

import httpcore
import httpx

from service.mcp.coding import ACCEPT_ENCODING, LimitedBody
from service.mcp.errors import ProtocolViolation, TransportError
from service.mcp.transports.base import MAX_BODY_BYTES, Answer, invalid_host
from service.netguard import AddressCheck, AddressRefused, connect_checked
from service.safetext import redact_urls
from service.tlstrust import client_context


def transport_error(exc: httpx.HTTPError, url: str) -> TransportError:
    """An httpx failure as the one error both transports raise (kind connect/read/timeout)."""
    kind = (
        "timeout"
        if isinstance(exc, httpx.TimeoutException)
        else ("connect" if isinstance(exc, httpx.ConnectError) else "read")
    )
    detail = str(exc) or type(exc).__name__
    error = TransportError(f"{kind} error talking to {redact_urls(url)}: {detail}", kind=kind)
    error.__cause__ = exc
    return error


def _died_before_the_answer(exc: httpx.RemoteProtocolError) -> bool:
    """httpcore's words for a connection that closed after the request and before any byte
    of the answer (no other failure carries them)."""
    return "without sending a response" in str(exc)


def make_http_client(
    url: str,
    *,
    ca_cert: str | None = None,
    tls: Callable[[], ssl.SSLContext] | None = None,
    timeout: float | None = 30.0,
    connect_timeout: float | None = None,
    max_connections: int = 10,
) -> httpx.AsyncClient:
    """An httpx client for one server URL.

    For plain ``http://`` URLs (here only through a proxy) we skip loading a CA bundle;
    ``https://`` gets ``tls()`` when given (one loaded bundle shared by many links), else
    :func:`service.tlstrust.client_context`: the system's trust, or exactly the CA file the
    user named.
    """
    verify: ssl.SSLContext | bool
    if tls is not None:
        verify = tls()
    elif urlsplit(url).scheme == "http":
        verify = False
    else:
        verify = client_context(ca_cert)
    return httpx.AsyncClient(
        verify=verify,
        timeout=httpx.Timeout(
            timeout, connect=timeout if connect_timeout is None else connect_timeout
        ),
        follow_redirects=False,
        limits=httpx.Limits(
            max_connections=max_connections, max_keepalive_connections=max_connections
        ),
        trust_env=True,
    )


async def read_body(response: httpx.Response, limit: int = MAX_BODY_BYTES) -> bytes:
    """The decoded body, inflated piece by piece and refused the moment it passes ``limit``
    (:class:`BodyRefused`)."""
    body = LimitedBody(response.headers.get("content-encoding"), limit)
    try:
        async for chunk in response.aiter_raw():
            body.feed(chunk)
    except httpx.StreamConsumed:
        # Read before it got here (an in-memory transport): httpx decoded it already.
        body = LimitedBody(None, limit)
        body.feed(response.content)
    return body.finish()


class HttpxStream:
    """An httpx answer read as it arrives (:class:`~service.mcp.transports.base.StreamAnswer`)."""

    def __init__(self, response: httpx.Response, url: str) -> None:
        self._response = response
        self._url = url
        self.status = response.status_code
        self.headers: Mapping[str, str] = response.headers

    async def chunks(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._response.aiter_raw():
                yield chunk
        except httpx.HTTPError as exc:
            raise transport_error(exc, self._url) from exc

    async def read_all(self, limit: int) -> bytes:
        try:
            return await read_body(self._response, limit)
        except httpx.HTTPError as exc:
            raise transport_error(exc, self._url) from exc

    async def aclose(self) -> None:
        await self._response.aclose()

    @property
    def is_closed(self) -> bool:
        return self._response.is_closed


class HttpxTransport:
    """POSTs to one URL through an httpx client made on first use (a link that never
    connects costs nothing)."""

    accept_encoding = ACCEPT_ENCODING

    def __init__(
        self,
        url: str,
        *,
        timeout: float | None = 30.0,
        connect_timeout: float | None = None,
        max_connections: int = 10,
        max_body: int = MAX_BODY_BYTES,
        ca_cert: str | None = None,
        tls: Callable[[], ssl.SSLContext] | None = None,
        address_check: AddressCheck | None = None,
    ) -> None:
        self.url = url
        self._timeout = timeout
        self._connect_timeout = timeout if connect_timeout is None else connect_timeout
        self._max_connections = max_connections
        self._max_body = max_body
        self._ca_cert = ca_cert
        self._tls = tls
        self._address_check = address_check
        self._client: httpx.AsyncClient | None = None

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = make_http_client(
                self.url,
                ca_cert=self._ca_cert,
                tls=self._tls,
                timeout=self._timeout,
                connect_timeout=self._connect_timeout,
                max_connections=self._max_connections,
            )
            if self._address_check is not None:
                guard_httpx(self._client, self._address_check)
        return self._client

    async def post(
        self, content: bytes, headers: dict[str, str], *, idempotent: bool = True
    ) -> Answer:
        """As the lean transport: an idempotent request whose connection died before any byte
        of the answer is sent once more (httpcore does not retry it; a kept-alive connection
        the server closed while we sent is the usual cause)."""
        for attempt in (1, 2):
            try:
                async with self.client.stream(
                    "POST", self.url, content=content, headers=headers
                ) as response:
                    body = await read_body(response, self._max_body)
            except httpx.RemoteProtocolError as exc:
                if idempotent and attempt == 1 and _died_before_the_answer(exc):
                    continue
                raise self._our_error(exc) from exc
            except (httpx.HTTPError, httpx.InvalidURL, UnicodeError) as exc:
                raise self._our_error(exc) from exc
            return Answer(response.status_code, response.headers, body)
        raise AssertionError("unreachable: the second attempt returns or raises")

    async def open_stream(self, content: bytes, headers: dict[str, str]) -> HttpxStream:
        client = self.client
        try:
            request = client.build_request(
                "POST",
                self.url,
                content=content,
                headers=headers,
                timeout=httpx.Timeout(self._connect_timeout, read=None),
            )
            response = await client.send(request, stream=True)
        except (httpx.HTTPError, httpx.InvalidURL, UnicodeError) as exc:
            raise self._our_error(exc) from exc
        return HttpxStream(response, self.url)

    def _our_error(self, exc: Exception) -> Exception:
        """An httpx failure as the error every transport raises for it."""
        if isinstance(exc, httpx.LocalProtocolError):  # our request cannot be sent as it is
            return ProtocolViolation(f"cannot send this request: {exc}")
        if isinstance(exc, httpx.HTTPError):
            return transport_error(exc, self.url)
        return invalid_host(self.url, exc)  # a host IDNA cannot encode

    def close_idle(self, before: float) -> None:
        """Nothing to do: httpx's pool expires its idle connections itself (5 s)."""

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()


def guard_httpx(client: httpx.AsyncClient, check: AddressCheck) -> httpx.AsyncClient:
    """Make every connection ``client`` opens go through :func:`connect_checked`.

    httpx has no public hook for its network backend, so the backend of each connection pool
    (the direct one and every proxy mount) is wrapped in place."""

    class _Refused(httpcore.ConnectError):
        """httpx maps httpcore's ConnectError to its own; the AddressRefused rides along as
        the cause, where :func:`~service.netguard.refused_in` finds it."""

    class GuardedBackend(httpcore.AsyncNetworkBackend):
        def __init__(self, inner: httpcore.AsyncNetworkBackend) -> None:
            self._inner = inner

        async def connect_tcp(
            self,
            host: str,
            port: int,
            timeout: float | None = None,
            local_address: str | None = None,
            socket_options: Any = None,
        ) -> httpcore.AsyncNetworkStream:
            try:
                async with asyncio.timeout(timeout):
                    return await connect_checked(
                        host,
                        port,
                        check,
                        lambda address: self._inner.connect_tcp(
                            address, port, timeout, local_address, socket_options
                        ),
                    )
            except AddressRefused as exc:
                raise _Refused(str(exc)) from exc
            except TimeoutError as exc:
                raise httpcore.ConnectTimeout(f"connecting to {host} timed out") from exc
            except OSError as exc:  # gaierror: let it read as the inner backend's would
                raise httpcore.ConnectError(str(exc)) from exc

        async def connect_unix_socket(
            self, path: str, timeout: float | None = None, socket_options: Any = None
        ) -> httpcore.AsyncNetworkStream:
            return await self._inner.connect_unix_socket(path, timeout, socket_options)

        async def sleep(self, seconds: float) -> None:
            await self._inner.sleep(seconds)

    transports = [client._transport, *client._mounts.values()]
    for transport in transports:
        pool = getattr(transport, "_pool", None)
        if pool is not None and not isinstance(pool._network_backend, GuardedBackend):
            pool._network_backend = GuardedBackend(pool._network_backend)
    return client
