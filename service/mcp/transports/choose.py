"""Which transport a URL gets, decided once where a client, a link or a target is made.

- :class:`~service.mcp.transports.lean.LeanHttp`: llhttp on an asyncio protocol, for plain
  ``http://`` with no proxy variable. It exists for CPU: through httpx a re-read costs several
  times what the exchange on a kept-alive socket needs (``results/hotpath.md``), and its idle
  listen streams cost nothing between frames. It never imports httpx (a large part of a
  probe's start-up).
- :class:`~service.mcp.transports.viahttpx.HttpxTransport`: httpx, for TLS and proxies.

Each is imported only when chosen.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from service.mcp.transports import trace
from service.mcp.transports.base import Transport, lean_usable
from service.netguard import AddressCheck

if TYPE_CHECKING:
    import ssl  # a probe on plain http:// never loads it (its start-up cost)

    from service.mcp.transports.lean import IdlePool


def default_tls() -> ssl.SSLContext:
    """The default trust (:mod:`service.tlstrust`: the system's store), loaded once by a
    caller that shares it between many transports."""
    from service.tlstrust import client_context

    return client_context()


def make_transport(
    url: str,
    *,
    timeout: float | None = 30.0,
    connect_timeout: float | None = None,
    max_connections: int = 10,
    max_idle: int = 2,
    ca_cert: str | None = None,
    tls: Callable[[], ssl.SSLContext] | None = None,
    address_check: AddressCheck | None = None,
    pool: IdlePool | None = None,
) -> Transport:
    """The transport for ``url``: lean on plain ``http://`` without a proxy, httpx otherwise.

    ``timeout`` bounds each socket operation on httpx (callers bound whole exchanges);
    ``connect_timeout`` (default: ``timeout``) bounds connecting on both. ``max_idle`` is how
    many kept-alive connections the lean transport keeps (memory per link at 1,000 links);
    httpx keeps up to ``max_connections``. ``tls`` (called when an httpx client is first made)
    shares one loaded CA bundle between many transports (see :func:`default_tls`); otherwise ``ca_cert`` names the CA file (default: the system's trust,
    :mod:`service.tlstrust`).
    ``address_check`` judges every address a host name resolves to before connecting
    (:mod:`service.netguard`, webhook targets). ``pool``: the lean transport keeps its idle
    connections there, shared per origin (:class:`~service.mcp.transports.lean.IdlePool`). While a wire transcript is being recorded
    (:func:`service.mcp.transports.trace.recording`), the transport is wrapped to write it.
    """
    chosen = _choose(
        url,
        timeout=timeout,
        connect_timeout=connect_timeout,
        max_connections=max_connections,
        max_idle=max_idle,
        ca_cert=ca_cert,
        tls=tls,
        address_check=address_check,
        pool=pool,
    )
    recorder = trace.current()
    return chosen if recorder is None else trace.TracingTransport(chosen, recorder)


def _choose(
    url: str,
    *,
    timeout: float | None,
    connect_timeout: float | None,
    max_connections: int,
    max_idle: int,
    ca_cert: str | None,
    tls: Callable[[], ssl.SSLContext] | None,
    address_check: AddressCheck | None,
    pool: IdlePool | None,
) -> Transport:
    connect = timeout if connect_timeout is None else connect_timeout
    if lean_usable(url):
        from service.mcp.transports.lean import LeanHttp

        return LeanHttp(
            url,
            connect_timeout=connect,
            max_idle=max_idle,
            address_check=address_check,
            pool=pool,
        )
    from service.mcp.transports.viahttpx import HttpxTransport

    return HttpxTransport(
        url,
        timeout=timeout,
        connect_timeout=connect,
        max_connections=max_connections,
        ca_cert=ca_cert,
        tls=tls,
        address_check=address_check,
    )
