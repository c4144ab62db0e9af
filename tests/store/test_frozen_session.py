"""A replica frozen inside a transaction must not stall the others' writes for long
(PostgreSQL, ``Store.open(idle_in_transaction_s=…)``).

Seen in the replica tests: a replica stopped (SIGSTOP) right after its transaction took the
event-order lock held it for as long as it stayed stopped, and every other replica's
acknowledged listen waited behind it, 'connecting' for ever. Here the frozen replica is a
session of one store that takes the same lock and then says nothing, as a stopped process
does; another store's event write must go through once the server ends that session.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest
from sqlalchemy import Connection, text

from service.store import Store
from service.store.dialect import EVENT_ORDER_KEY
from tests.support.postgres import PgCluster

pytestmark = pytest.mark.anyio
IDLE_S = 0.5


async def test_a_frozen_transaction_gives_the_event_lock_up(pg_cluster: PgCluster) -> None:
    url = pg_cluster.fresh_database()
    frozen = Store.open(url, idle_in_transaction_s=IDLE_S)
    other = Store.open(url, idle_in_transaction_s=IDLE_S)
    try:
        conn = await frozen.engine.connect()
        try:
            await conn.execute(text(f"SELECT pg_advisory_xact_lock({EVENT_ORDER_KEY})"))
            # ... and then the process stops: no statement, no commit.

            def event(c: Connection) -> None:
                other.dialect.insert_event(c, "daemon.storage", time.time(), data={"t": 1})

            started = time.monotonic()
            async with asyncio.timeout(20):  # without the setting: until the session ends
                await other.write(event, events=True)
            waited = time.monotonic() - started
        finally:
            # The server ended that session; what its next use raises depends on when the
            # driver noticed (a closed connection, or an operation still in progress).
            with contextlib.suppress(Exception):
                await conn.close()
        assert waited < 10, f"the other replica's write waited {waited:.1f} s"
        # The pool replaced the ended session: the frozen store writes again.
        await frozen.write(event, events=True)
    finally:
        await frozen.close()
        await other.close()


async def test_the_setting_reaches_the_session(pg_cluster: PgCluster) -> None:
    store = Store.open(pg_cluster.fresh_database(), idle_in_transaction_s=15)
    try:
        shown = await store.read(
            lambda c: c.execute(text("SHOW idle_in_transaction_session_timeout")).scalar_one()
        )
        assert shown == "15s"
    finally:
        await store.close()
