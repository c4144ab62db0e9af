"""The daemon's shared idle pool (``lean.IdlePool``): per origin newest first, bounded in all
by closing what idled longest, whichever origin it belongs to. No sockets: a connection here
is a ``_Connection`` over a transport that only records its close."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from service.mcp.transports.lean import IdlePool, _Connection

A = ("127.0.0.1", 8000)
B = ("127.0.0.1", 8001)


class _Socket:
    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed


def _conn(name: str, idle_since: float) -> _Connection:
    conn = _Connection(f"http://{name}/mcp")
    conn.transport = cast(asyncio.Transport, _Socket())
    conn.idle_since = idle_since
    return conn


def _closed(conn: _Connection) -> bool:
    return cast(Any, conn.transport).closed is True


def test_an_origin_gives_its_newest_idle_connection_and_never_another_origins() -> None:
    pool = IdlePool(max_idle=10)
    old, new, other = _conn("a1", 1.0), _conn("a2", 2.0), _conn("b1", 3.0)
    pool.put(A, old)
    pool.put(A, new)
    pool.put(B, other)
    assert len(pool) == 3
    assert pool.take(A) is new
    assert pool.take(A) is old
    assert pool.take(A) is None  # B's is not A's
    assert pool.take(B) is other
    assert len(pool) == 0
    assert not any(_closed(c) for c in (old, new, other))


def test_past_the_bound_the_connection_idle_longest_is_closed_whatever_its_origin() -> None:
    pool = IdlePool(max_idle=2)
    first_a, b, second_a = _conn("a1", 1.0), _conn("b1", 2.0), _conn("a2", 3.0)
    pool.put(A, first_a)
    pool.put(B, b)
    pool.put(A, second_a)  # full: A's first, idle longest, goes
    assert _closed(first_a)
    assert len(pool) == 2
    assert pool.take(A) is second_a
    assert pool.take(A) is None
    assert pool.take(B) is b


def test_a_pool_of_size_zero_keeps_nothing() -> None:
    pool = IdlePool(max_idle=0)
    conn = _conn("a1", 1.0)
    pool.put(A, conn)
    assert _closed(conn)
    assert pool.take(A) is None


def test_close_idle_closes_one_origins_connections_idle_before_the_cut() -> None:
    pool = IdlePool(max_idle=10)
    a_old, a_new, b_old = _conn("a1", 1.0), _conn("a2", 5.0), _conn("b1", 1.0)
    for origin, conn in ((A, a_old), (A, a_new), (B, b_old)):
        pool.put(origin, conn)
    pool.close_idle(A, before=3.0)
    assert _closed(a_old)
    assert not _closed(a_new)
    assert not _closed(b_old)  # another origin's: its own links' ticks close it
    assert len(pool) == 2
    pool.close_all()
    assert _closed(a_new) and _closed(b_old)
    assert len(pool) == 0 and pool.take(A) is None and pool.take(B) is None
