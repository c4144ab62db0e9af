"""httpx clients for talking to our servers on a unix socket or loopback TCP.

httpx builds a new SSL context (reading the CA bundle) for every client it makes unless it is
given one, even for a plain-HTTP unix socket: the tests make a client per request and per poll,
so that cost was a large share of the test processes' CPU. The clients here share one default
context; it is never used for TLS to our servers (they speak plain HTTP), and a test that
checks TLS builds its own.
"""

from __future__ import annotations

import functools
import ssl
from typing import Any

import httpx


@functools.cache
def shared_context() -> ssl.SSLContext:
    """One default client context for every client of this process (never mutated)."""
    return ssl.create_default_context()


def uds_client(path: str, **kwargs: Any) -> httpx.Client:
    """A client for an HTTP server on the unix socket ``path`` (``base_url`` localhost)."""
    kwargs.setdefault("base_url", "http://localhost")
    return httpx.Client(transport=httpx.HTTPTransport(uds=path, verify=shared_context()), **kwargs)


def tcp_client(base_url: str, **kwargs: Any) -> httpx.Client:
    """A client for a loopback plain-HTTP server at ``base_url``."""
    return httpx.Client(base_url=base_url, verify=shared_context(), **kwargs)
