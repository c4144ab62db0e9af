"""The daemon's state behind a narrow async interface (SQLAlchemy Core; aiosqlite or asyncpg).

Writes are serialised by one asyncio lock: the daemon is the only writer of its database
(the CLI goes through the local API), so an in-process lock gives the same guarantee as
``BEGIN IMMEDIATE`` without lock-upgrade failures, while WAL lets readers run alongside.

The one subtle method is :meth:`Store.record_read`: a read's result becomes a revision only
if (a) the server link's generation is still the one the read started under and (b) the
content hash differs from the current one. Both are checked *inside* the ``UPDATE`` (the
fencing-token rule), and the revision row and its event are written in the same
transaction, so a crash can never leave one without the other.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import orjson
from sqlalchemy import (
    Connection,
    Engine,
    create_engine,
    delete,
    event,
    func,
    or_,
    select,
    update,
)
from sqlalchemy.engine import CursorResult
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from service.jsonencode import json_text
from service.safetext import redact_urls
from service.store import catalog, groupcommit, health, linkstate, pgpool, schema
from service.store.database import Database, database_errors, parse
from service.store.dialect import LINKS_CHANNEL, dialect_for
from service.store.health import StorageHealth
from service.store.records import Event, Revision, Server, Subscription, from_row, loads_object
from service.store.remembered import Answer, Remembered
from service.store.writelock import WriteLock
from service.store.writer import WriterThread

T = TypeVar("T")

SUBSCRIPTION_COLUMNS = (
    schema.subscriptions.c.id,
    schema.subscriptions.c.server_id,
    schema.servers.c.url,
    schema.subscriptions.c.uri,
    schema.subscriptions.c.state,
    schema.subscriptions.c.state_reason,
    schema.subscriptions.c.state_code,
    schema.subscriptions.c.content_hash,
    schema.subscriptions.c.revision,
    schema.subscriptions.c.last_read_at,
    schema.subscriptions.c.created_at,
    schema.subscriptions.c.created_by,
)


def content_hash(contents: Sequence[dict[str, Any]]) -> str:
    """SHA-256 of the canonical JSON of ``contents``: key order and spacing do not count.

    The canonical text is ``json.dumps(sort_keys=True, separators=(",", ":"),
    ensure_ascii=False)`` in UTF-8: stored hashes were made that way and must keep matching.
    orjson writes the same bytes for everything but floats (``1e-07`` is ``1e-7`` there) and
    integers past 64 bits (it refuses them), at a fraction of the cost, and every read is
    hashed; so contents without a float go through orjson, the rest through :mod:`json`."""
    items = list(contents)
    canonical: bytes | None = None
    if not _holds_float(items):
        try:
            canonical = orjson.dumps(items, option=orjson.OPT_SORT_KEYS)
        except (orjson.JSONEncodeError, TypeError):
            canonical = None
    if canonical is None:
        canonical = json.dumps(
            items, sort_keys=True, separators=(",", ":"), ensure_ascii=False
        ).encode()
    return hashlib.sha256(canonical).hexdigest()


def _holds_float(value: Any) -> bool:
    """Whether a float is anywhere in ``value`` (decoded JSON: dicts, lists, scalars)."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, float):
            return True
    return False


def sqlite_url(path: Path) -> str:
    return f"sqlite+aiosqlite:///{path}"


def _pk(result: CursorResult[Any]) -> int:
    key = result.inserted_primary_key
    if key is None:
        raise RuntimeError("insert returned no primary key")
    return int(key[0])


def _apply_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    # busy_timeout first: the others may need the lock.
    cursor.execute("PRAGMA busy_timeout=5000")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def _server(row: Any) -> Server:
    return from_row(Server, row)


def _subscription(row: Any) -> Subscription:
    return from_row(Subscription, row, server_url=row._mapping["url"])


def _revision(row: Any) -> Revision:
    contents = json.loads(row._mapping["contents"])
    return from_row(Revision, row, contents=contents if isinstance(contents, list) else [])


def _event(row: Any) -> Event:
    return from_row(Event, row, data=loads_object(row._mapping["data"]))


MAX_READ_BATCH = 256
"""Reads per group-commit transaction: bounds how long one commit holds the write lock (and,
on PostgreSQL, the event-order lock) while a burst drains."""

DISCOVER_SNAPSHOT_S = 60.0
"""How long one snapshot of the kept discover results answers links' first sessions: a
daemon's start (10,000 links pass the connect gate in ~30 s) within one snapshot."""

MAX_ACK_BATCH = 128
"""Acknowledgements per group-commit transaction (see :meth:`Store.listen_acknowledged`): each
is a few statements and its events, more than a read, so fewer than :data:`MAX_READ_BATCH`."""

_PendingRead = tuple[groupcommit.Read, "asyncio.Future[Any]"]
_Batch = list[_PendingRead]
_Ack = tuple[int, int, Sequence[linkstate.StateChange], str | None]
"""An acknowledgement to write: server id, expected generation, state changes, discover."""
_PendingAck = tuple[_Ack, "asyncio.Future[linkstate.Acknowledgement | None]"]

EventSink = Callable[[Connection, Event], object]
"""Runs inside the transaction that commits an event (e.g. the webhook outbox)."""


class KeptForCreator(Exception):
    """A conditional removal found the subscription made by someone else (a person took it
    over): nothing was deleted."""

    def __init__(self, subscription_id: int) -> None:
        super().__init__(f"subscription {subscription_id} is no longer the asker's to remove")
        self.subscription_id = subscription_id


class Store:
    def __init__(
        self, engine: AsyncEngine, sync_engine: Engine | None, database: Database | None = None
    ) -> None:
        self.engine = engine
        self.sync_engine = sync_engine
        """SQLite only: the writer thread's engine (PostgreSQL runs everything on asyncpg)."""
        self.database = database or Database("sqlite", str(engine.url))
        self.dialect = dialect_for(self.database)
        """What differs between the backends, chosen once (:mod:`service.store.dialect`)."""
        self._writer = WriterThread("mcpsub-db-writer")
        self._writer_conn: Connection | None = None
        """The writer thread's connection, kept between transactions (touched on that thread
        only, and by :meth:`close` once it stopped)."""
        self._write_lock = WriteLock()
        self._pending_reads: list[_PendingRead] = []
        """Reads waiting for the next group commit (see :meth:`record_read`)."""
        self._committing = False
        """A group commit is scheduled or under way: it takes the pending reads next."""
        self._committer: asyncio.Task[None] | None = None
        """The group commit's task, when it runs as one (PostgreSQL, the write lock taken,
        a batch that failed); SQLite's usual batch runs from loop callbacks instead."""
        self._commits_settled: asyncio.Future[None] | None = None
        """For :meth:`close`: set once no batch is in flight."""
        self._storage_note: asyncio.Task[None] | None = None
        """The write of the queued ``daemon.storage`` events after a batch (:meth:`_note_storage`)."""
        self._pending_acks: list[_PendingAck] = []
        """Acknowledgements waiting for the next group commit (:meth:`listen_acknowledged`)."""
        self._acker: asyncio.Task[None] | None = None
        """The acknowledgements' group commit, while one runs."""
        self._discover_waiting: dict[int, list[asyncio.Future[str | None]]] = {}
        """Links waiting for their kept discover result (see :meth:`stored_discover`)."""
        self._discover_loader: asyncio.Task[None] | None = None
        self._discover_snapshot: dict[int, str] | None = None
        """Server id -> kept discover result, for a while (see :meth:`_answer_discovers`)."""
        self.on_event: list[Any] = []
        """Callbacks ``(Event) -> None`` run after an event's transaction commits."""
        self._status: Remembered[catalog.StatusCounts] = Remembered(
            self.status_counts, catalog.StatusCounts({}, {}, 0, {}, 0, 0)
        )
        """The last status counts, for when the database does not answer in time."""
        self.health = StorageHealth()
        """Whether writes succeed (a full disk is a daemon-level condition, see health.py)."""
        self.event_sinks: list[EventSink] = []
        """Callbacks ``(Connection, Event)`` run inside the transaction that records a new
        revision: whoever needs a row committed with it (the webhook outbox) registers here,
        so the store imports nothing above it."""

    @classmethod
    def open(cls, url: str, *, idle_in_transaction_s: float | None = None) -> Store:
        """``url``: any form :func:`service.store.database.parse` accepts.

        ``idle_in_transaction_s`` (PostgreSQL): the server ends a session of ours that sits
        inside a transaction this long without a statement. A replica frozen in the middle of
        a transaction (SIGSTOP, a suspended VM, a debugger) otherwise holds its row locks and
        the event-order lock (:meth:`Dialect.order_events`) for as long as it is frozen, and
        every other replica's event write waits behind it: the whole cluster stalls. Our
        transactions send their statements back to back, so only a frozen process reaches it.
        """
        database = parse(url)
        if database.is_postgresql:
            connect_args: dict[str, Any] = {}
            if idle_in_transaction_s is not None:
                timeout_ms = str(max(1, round(idle_in_transaction_s * 1000)))
                connect_args["server_settings"] = {
                    "idle_in_transaction_session_timeout": timeout_ms
                }
            engine = create_async_engine(
                database.async_url, pool_pre_ping=True, connect_args=connect_args
            )
            store = cls(engine, None, database)
            health.install(store.engine.sync_engine, store.health)
            pgpool.install(store.engine.sync_engine)
            return store
        engine = create_async_engine(database.async_url)
        sync_engine = create_engine(
            database.async_url.replace("+aiosqlite", ""),
            connect_args={"check_same_thread": False},
        )
        event.listen(engine.sync_engine, "connect", _apply_pragmas)
        event.listen(sync_engine, "connect", _apply_pragmas)
        store = cls(engine, sync_engine, database)
        health.install(engine.sync_engine, store.health)
        health.install(sync_engine, store.health)
        return store

    async def close(self) -> None:
        if self._committing:  # its callers get the outcome or the error
            self._commits_settled = asyncio.get_running_loop().create_future()
            with contextlib.suppress(Exception):
                await self._commits_settled
        if self._acker is not None:  # the same for acknowledgements
            await asyncio.wait({self._acker})
        if self._storage_note is not None:  # and the storage events a batch left to write
            await asyncio.wait({self._storage_note})
        await self.engine.dispose()
        self._writer.shutdown()
        held, self._writer_conn = self._writer_conn, None
        if held is not None:
            with contextlib.suppress(Exception):
                held.close()
        if self.sync_engine is not None:
            self.sync_engine.dispose()

    # ---- transactions: what the repositories above the store use ------------------------
    async def write(self, fn: Callable[[Connection], T], *, events: bool = False) -> T:
        """``fn(connection)`` as one write transaction, serialised with every other write of
        this process (the daemon is its database's only writer on SQLite). ``events``: the
        transaction may insert events (:meth:`Dialect.insert_event`), so on PostgreSQL it
        takes the event-order lock first; hand what it inserted to :meth:`publish` after."""
        if events:

            def ordered(conn: Connection) -> T:
                self.dialect.order_events(conn)
                return fn(conn)

            async with self._write_lock:
                return await self.in_writer(ordered)
        async with self._write_lock:
            return await self.in_writer(fn)

    async def read(self, fn: Callable[[Connection], T]) -> T:
        """``fn(connection)`` on a reader (see :meth:`in_reader`)."""
        return await self.in_reader(fn)

    def publish(self, events: Sequence[Event]) -> None:
        """Run the ``on_event`` callbacks for events whose transaction committed."""
        for item in events:
            for callback in list(self.on_event):
                callback(item)

    # ---- servers and subscriptions ------------------------------------------------------
    async def add_subscription(
        self, url: str, uri: str, credential_key: str = ""
    ) -> tuple[Subscription, bool]:
        """Idempotent on (server, URI): returns the subscription and whether it is new."""
        return (await self.add_subscriptions(url, [uri], credential_key))[0]

    async def add_subscriptions(
        self,
        url: str,
        uris: Sequence[str],
        credential_key: str = "",
        *,
        created_by: str = "person",
    ) -> list[tuple[Subscription, bool]]:
        """:meth:`add_subscription` for several URIs of one server in one transaction (the
        batch form of ``POST /v1/subscriptions``); results in the order of ``uris``. A new
        subscription records ``created_by`` (``person`` or ``agent``)."""
        batch = [(url, uris, created_by)]
        return (await self.add_subscriptions_batch(batch, credential_key))[0]

    async def add_subscriptions_batch(
        self, requests: Sequence[catalog.Request], credential_key: str = ""
    ) -> list[list[tuple[Subscription, bool]]]:
        """Several ``(url, uris)`` requests in one transaction (the supervisor gathers the
        POSTs that arrive together): one writer hop and one commit for all of them, each
        request's results in the order of its URIs."""
        now = time.time()

        def transaction(conn: Connection) -> tuple[list[catalog.Added], list[Event], list[Any]]:
            return catalog.add_subscriptions(conn, self.dialect, requests, credential_key, now)

        outcomes, added, fetched = await self.write(transaction)
        subs = {int(row.id): _subscription(row) for row in fetched}
        self.publish(added)
        return [[(subs[i], created) for i, created in outcome.ids] for outcome in outcomes]

    async def remove_subscription(
        self, subscription_id: int, *, created_by: str | None = None
    ) -> Subscription | None:
        """Delete a subscription (None: there is none). ``created_by``: only if its creator is
        still that one, judged by the DELETE itself, so a person's takeover that commits
        between an agent's look and its delete keeps the row (PostgreSQL re-checks the
        condition on the row it waited for); else :class:`KeptForCreator`."""

        def transaction(conn: Connection) -> tuple[Any, list[Event]]:
            row = conn.execute(
                select(*SUBSCRIPTION_COLUMNS)
                .join(schema.servers)
                .where(schema.subscriptions.c.id == subscription_id)
            ).one_or_none()
            if row is None:
                return None, []
            condition = schema.subscriptions.c.id == subscription_id
            if created_by is not None:
                condition &= schema.subscriptions.c.created_by == created_by
            if conn.execute(delete(schema.subscriptions).where(condition)).rowcount != 1:
                still = conn.execute(
                    select(schema.subscriptions.c.id).where(
                        schema.subscriptions.c.id == subscription_id
                    )
                ).first()
                if still is None:
                    return None, []  # removed meanwhile by another replica
                raise KeptForCreator(subscription_id)
            # The replica holding this link re-reads its URI set.
            self.dialect.notify(conn, LINKS_CHANNEL, str(row.server_id))
            removed = self.dialect.insert_event(
                conn,
                "subscription.deleted",
                time.time(),
                subscription_id=subscription_id,
                server_url=row.url,
                uri=row.uri,
            )
            return row, [removed]

        row, events = await self.write(transaction, events=True)
        self.publish(events)
        return _subscription(row) if row is not None else None

    async def list_subscriptions(
        self, server_id: int | None = None, *, server_ids: Sequence[int] | None = None
    ) -> list[Subscription]:
        query = (
            select(*SUBSCRIPTION_COLUMNS).join(schema.servers).order_by(schema.subscriptions.c.id)
        )
        if server_id is not None:
            query = query.where(schema.subscriptions.c.server_id == server_id)
        if server_ids is not None:
            query = query.where(schema.subscriptions.c.server_id.in_(list(server_ids)))
        async with self.engine.connect() as conn:
            return [_subscription(row) for row in await conn.execute(query)]

    async def wanted_uris(self, server_ids: Sequence[int]) -> dict[int, dict[str, int]]:
        """Per link in ``server_ids``: URI -> subscription id, all a link is started or brought
        in line with. Three columns on a reader: a 10,000-link start built 100,000
        :class:`Subscription` records (two seconds of the event loop) to take these from."""
        subs = schema.subscriptions.c
        query = (
            select(subs.server_id, subs.uri, subs.id)
            .where(subs.server_id.in_(list(server_ids)))
            .order_by(subs.id)
        )

        def run(conn: Connection) -> dict[int, dict[str, int]]:
            wanted: dict[int, dict[str, int]] = {server_id: {} for server_id in server_ids}
            for server_id, uri, subscription_id in conn.execute(query):
                wanted[server_id][uri] = subscription_id
            return wanted

        return await self.in_reader(run)

    async def stored_discover(self, server_id: int) -> str | None:
        """The discover result kept for a link (``servers.discovered``, written with a listen's
        acknowledgement; :mod:`service.mcp.discovercache` judges it), or None. The links that
        ask in one loop turn (a daemon's start: every link at once) share one query; a
        database that does not answer is None for all of them: they discover."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[str | None] = loop.create_future()
        waiting = self._discover_waiting
        waiting.setdefault(server_id, []).append(future)
        if self._discover_loader is None or self._discover_loader.done():
            self._discover_loader = loop.create_task(self._load_discovers())
        return await future

    async def _load_discovers(self) -> None:
        """Answer every waiting link, round after round: a link that asks while a query is
        out (a standby link started during a hand-over) waits for the next round, which this
        same task runs; no round would run for it otherwise, and it would wait forever."""
        while self._discover_waiting:
            waiting, self._discover_waiting = self._discover_waiting, {}
            await self._answer_discovers(waiting)

    async def _answer_discovers(self, waiting: dict[int, list[asyncio.Future[str | None]]]) -> None:
        """Answer from one snapshot of every kept discover result, taken by the first round
        and reused for :data:`DISCOVER_SNAPSHOT_S`: at a start the links pass the connect
        gate a few at a time, so the rounds were hundreds of small queries (a thread hop and
        an ``IN`` list each: ~9 % of a 10,000-link start's samples). A result stored since
        the snapshot is missed and that link discovers; an older one is still judged by its
        own ``ttlMs`` (:mod:`service.mcp.discovercache`)."""
        found = self._discover_snapshot
        if found is None:
            column = schema.servers.c.discovered

            def query(conn: Connection) -> dict[int, str]:
                rows = conn.execute(select(schema.servers.c.id, column).where(column.is_not(None)))
                return {int(i): str(text) for i, text in rows}

            found = {}
            with contextlib.suppress(Exception):  # nothing kept: every link discovers
                found = self._discover_snapshot = await self.in_reader(query)
                asyncio.get_running_loop().call_later(
                    DISCOVER_SNAPSHOT_S, self._drop_discover_snapshot
                )
        for server_id, futures in waiting.items():
            for future in futures:
                if not future.done():
                    future.set_result(found.get(server_id))

    def _drop_discover_snapshot(self) -> None:
        self._discover_snapshot = None

    async def subscription_states(self) -> dict[str, int]:
        """How many subscriptions are in each state (one GROUP BY: ``/v1/status`` at 10,000
        subscriptions built every row just to count them)."""
        column = schema.subscriptions.c.state
        async with self.engine.connect() as conn:
            rows = await conn.execute(select(column, func.count()).group_by(column))
            return {str(state): int(count) for state, count in rows}

    async def get_subscription(self, subscription_id: int) -> Subscription | None:
        async with self.engine.connect() as conn:
            row = (
                await conn.execute(
                    select(*SUBSCRIPTION_COLUMNS)
                    .join(schema.servers)
                    .where(schema.subscriptions.c.id == subscription_id)
                )
            ).one_or_none()
        return _subscription(row) if row is not None else None

    async def find_subscriptions(self, uri: str, url: str | None = None) -> list[Subscription]:
        query = (
            select(*SUBSCRIPTION_COLUMNS)
            .join(schema.servers)
            .where(schema.subscriptions.c.uri == uri)
        )
        if url is not None:  # servers are stored by their shown URL (credentials redacted)
            query = query.where(schema.servers.c.url == redact_urls(url))
        async with self.engine.connect() as conn:
            return [
                _subscription(row)
                for row in await conn.execute(query.order_by(schema.subscriptions.c.id))
            ]

    async def get_server(self, server_id: int) -> Server | None:
        async with self.engine.connect() as conn:
            row = (
                await conn.execute(select(schema.servers).where(schema.servers.c.id == server_id))
            ).one_or_none()
        return _server(row) if row is not None else None

    # ---- link state ---------------------------------------------------------------------
    async def set_server_state(
        self,
        server_id: int,
        state: str,
        *,
        error: str | None = None,
        error_code: str | None = None,
        backoff_until: float | None = None,
        connected: bool = False,
        reconnect: bool = False,
        generation: int | None = None,
    ) -> bool:
        """False when fenced out: ``generation`` is no longer the link's (lease lost)."""
        values: dict[str, Any] = {
            "state": state,
            "last_error": None if error is None else redact_urls(error),
            "last_error_code": error_code,
            "backoff_until": backoff_until,
            "updated_at": time.time(),
        }
        if connected:
            values["connected_at"] = time.time()
        if reconnect:
            values["reconnects"] = schema.servers.c.reconnects + 1
        query = update(schema.servers).where(schema.servers.c.id == server_id)
        if generation is not None:
            query = query.where(schema.servers.c.generation == generation)
        statement = query.values(**values)
        return await self.write(lambda conn: bool(conn.execute(statement).rowcount))

    async def set_subscription_state(
        self,
        subscription_ids: Sequence[int],
        state: str,
        reason: str | None = None,
        *,
        code: str | None = None,
        generation: int | None = None,
    ) -> list[Event]:
        """Set the state; an event is logged for every subscription whose state changed.

        ``code`` is the stable error code of the state (``RESOURCE_NOT_FOUND``, …), kept in
        ``state_code`` and the event's data so scripts need not parse ``reason``.

        With ``generation`` the change is fenced like a revision: subscriptions whose link
        moved on (re-listened, or claimed by another replica) are left alone, and the check
        sits in the ``UPDATE`` itself.
        """
        if not subscription_ids:
            return []
        change = linkstate.StateChange(list(subscription_ids), state, reason, code)

        def transaction(conn: Connection) -> list[Event]:
            return linkstate.set_states(conn, self.dialect, change, generation, time.time())

        # One call on the writer thread (plain SQL): through the async engine this took one
        # awaited round trip per statement and per event (see service.store.linkstate).
        changed = await self.write(transaction, events=True)
        self.publish(changed)
        return changed

    async def listen_acknowledged(
        self,
        server_id: int,
        expected: int,
        changes: Sequence[linkstate.StateChange],
        discovered: str | None = None,
    ) -> linkstate.Acknowledgement | None:
        """A listen was acknowledged: the link's next generation (fenced on ``expected``), the
        server ``open`` and its subscriptions' states (``changes``, under the new generation),
        in one transaction. None when another replica claimed the link (nothing written).

        Group committed like the reads (:meth:`record_read`): the acknowledgements that arrive
        while the writer is busy go in its next transaction, each fenced on its own link. A
        start of 10,000 links acknowledged each in a transaction and a thread hop of its own.
        A failure that is not the storage's writes them one by one, so that only the failing
        one gets its error."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[linkstate.Acknowledgement | None] = loop.create_future()
        self._pending_acks.append(((server_id, expected, changes, discovered), future))
        if self._acker is None:
            self._acker = loop.create_task(self._commit_acks())
        return await future

    async def _commit_acks(self) -> None:
        try:
            while self._pending_acks:
                batch = [
                    item for item in self._pending_acks[:MAX_ACK_BATCH] if not item[1].done()
                ]  # a caller that left before its turn: not written, as before group commit
                del self._pending_acks[:MAX_ACK_BATCH]
                if batch:
                    await self._commit_ack_batch(batch)
        except BaseException:  # cancelled (the store is closing): fail the queue, not hang it
            for _ack, future in self._pending_acks:
                future.cancel()
            self._pending_acks.clear()
            raise
        finally:
            self._acker = None

    async def _commit_ack_batch(self, batch: list[_PendingAck]) -> None:
        dialect = self.dialect

        def transaction(
            conn: Connection, acks: Sequence[_Ack]
        ) -> list[linkstate.Acknowledgement | None]:
            return [linkstate.acknowledged(conn, dialect, *ack) for ack in acks]

        outcomes: list[linkstate.Acknowledgement | BaseException | None]
        try:
            async with self._write_lock:
                acks = [ack for ack, _future in batch]
                try:
                    outcomes = list(await self.in_writer(functools.partial(transaction, acks=acks)))
                except Exception as exc:
                    if len(batch) == 1 or health.is_storage_failure(exc):
                        for _ in batch[1:]:  # as many failed writes as transactions before
                            self.health.failed(exc)
                        raise
                    outcomes = []
                    for ack in acks:  # one transaction each: only the failing one fails
                        try:
                            alone = await self.in_writer(functools.partial(transaction, acks=[ack]))
                            outcomes.append(alone[0])
                        except Exception as one:
                            outcomes.append(one)
        except Exception as exc:
            for _ack, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        except BaseException:
            for _ack, future in batch:
                future.cancel()
            raise
        for ((server_id, _expected, _changes, discovered), future), outcome in zip(
            batch, outcomes, strict=True
        ):
            if isinstance(outcome, BaseException):
                if not future.done():
                    future.set_exception(outcome)
                continue
            if outcome is not None:
                self.publish(outcome.events)
                snapshot = self._discover_snapshot
                if discovered is not None and snapshot is not None:
                    snapshot[server_id] = discovered  # what this process wrote, it reads back
            if not future.done():
                future.set_result(outcome)

    # ---- content --------------------------------------------------------------------------
    async def record_read(
        self,
        subscription_id: int,
        server_id: int,
        generation: int,
        contents: list[dict[str, Any]],
        text: str | None,
        *,
        read_at: float | None = None,
        trigger: str | None = None,
        activate: bool = False,
    ) -> Revision | None:
        """Store a read as a new revision if it is new and its generation is current.

        ``trigger`` (``notification`` or ``acknowledged``) says what led to the read; it is
        kept in the event's data so ``wait`` reports ``notificationReceived`` honestly.
        ``activate``: mark the subscription ``active`` in the same transaction, under the same
        fence (its first stored read, or the first good one after failures).

        Returns the new revision, or None when the content is unchanged or the read is stale
        (its link has re-listened since it started: generation fencing).

        This is the daemon's hot path. The transaction runs on the writer thread with
        statements compiled once (:mod:`service.store.groupcommit`), and reads are *group
        committed*: every read recorded in the same loop tick, or while the writer is busy,
        goes to the writer in one hand-off and commits in one transaction
        (:meth:`_commit_reads`). One thread hop per read would be most of the daemon's time
        under a stream of reads on a loaded machine (``results/hotpath.md``). Each read is
        still fenced on its own row, and its revision, event and outbox rows commit together;
        a storage failure fails every read of the batch with the error its own transaction
        would have had.
        """
        future = self.submit_read(
            subscription_id,
            server_id,
            generation,
            contents,
            text,
            read_at=read_at,
            trigger=trigger,
            activate=activate,
        )
        outcome = await future
        return None if outcome is None else outcome[0]

    def submit_read(
        self,
        subscription_id: int,
        server_id: int,
        generation: int,
        contents: list[dict[str, Any]],
        text: str | None,
        *,
        read_at: float | None = None,
        trigger: str | None = None,
        activate: bool = False,
    ) -> asyncio.Future[tuple[Revision, Event] | None]:
        """:meth:`record_read` without the wait: the read joins the next group commit and the
        future settles with its outcome (the revision and its event, or None). The daemon's
        reader hands its read over and goes on to the next one while this commits.
        Cancelling the future before its batch is taken drops the read unwritten."""
        read = groupcommit.Read(
            subscription_id,
            server_id,
            generation,
            contents,
            json_text(contents),
            text,
            content_hash(contents),
            time.time() if read_at is None else read_at,
            trigger,
            activate,
        )
        loop = asyncio.get_running_loop()
        future: asyncio.Future[tuple[Revision, Event] | None] = loop.create_future()
        self._pending_reads.append((read, future))
        if not self._committing:
            self._committing = True
            if self.sync_engine is None:  # PostgreSQL: the transaction is awaited
                self._committer = loop.create_task(self._commit_reads())
            else:
                loop.call_soon(self._commit_pending)  # the reads of this turn go in one batch
        return future

    # ---- group commit ---------------------------------------------------------------------
    # SQLite's usual batch runs from loop callbacks: scheduled with ``call_soon`` (so every
    # read of the turn joins it), handed to the writer thread, settled from the thread's
    # hand-back (:meth:`WriterThread.submit`). Each read's caller wakes once, from its own
    # future. Whatever needs to await (PostgreSQL's transaction, the write lock held by
    # another write, a batch that failed and is written read by read) runs the same steps in
    # a task, :meth:`_commit_reads`.

    def _take_batch(self) -> _Batch:
        """The next batch: up to ``MAX_READ_BATCH`` pending reads, less those whose caller
        left before their turn (not written, as before group commit)."""
        batch = [item for item in self._pending_reads[:MAX_READ_BATCH] if not item[1].done()]
        del self._pending_reads[:MAX_READ_BATCH]
        return batch

    def _commit_pending(self) -> None:
        """On the loop, with ``_committing`` set: start the next batch, or stand down."""
        if self.sync_engine is None or not self._write_lock.try_acquire():
            self._committer = asyncio.get_running_loop().create_task(self._commit_reads())
            return
        batch: _Batch = []
        while self._pending_reads and not batch:
            batch = self._take_batch()
        if not batch:
            self._write_lock.release()
            self._stand_down()
            return
        reads = [read for read, _future in batch]
        sinks = self.event_sinks
        activated: list[Event] = []

        def transaction(conn: Connection) -> list[tuple[Revision, Event] | None]:
            return linkstate.record_reads(conn, self.dialect, reads, sinks, activated)

        def written(outcomes: Any, error: BaseException | None) -> None:
            self._write_lock.release()
            if error is None:
                self.health.succeeded()
                self._settle_batch(batch, outcomes, activated)
                self._continue()
            elif isinstance(error, Exception):  # write it read by read, as the task does
                self._committer = asyncio.get_running_loop().create_task(
                    self._commit_reads(failed=(batch, error))
                )
            else:  # not an error of the batch's (the thread is stopping): fail, do not hang
                for _read, future in batch:
                    future.cancel()
                self._continue()

        self._writer.submit(lambda: self._in_transaction(transaction), written)

    def _continue(self) -> None:
        if self._pending_reads:
            self._commit_pending()
        else:
            self._stand_down()

    def _stand_down(self) -> None:
        self._committing = False
        settled, self._commits_settled = self._commits_settled, None
        if settled is not None and not settled.done():
            settled.set_result(None)

    def _settle_batch(
        self, batch: _Batch, outcomes: list[tuple[Revision, Event] | None], activated: list[Event]
    ) -> None:
        """Publish what the batch committed, in event id order, then answer its callers
        (those that went away too: their revisions were committed all the same)."""
        events = activated + [outcome[1] for outcome in outcomes if outcome is not None]
        self.publish(sorted(events, key=lambda event: event.id) if activated else events)
        for (_read, future), outcome in zip(batch, outcomes, strict=True):
            if not future.done():
                future.set_result(outcome)
        if self.health.pending_events:
            self._note_storage()

    def _note_storage(self) -> None:
        """Write the queued ``daemon.storage`` events now that a write went through (in a task
        of its own: the batch's callers do not wait for it); one such task at a time."""
        if self._storage_note is None or self._storage_note.done():
            self._storage_note = asyncio.get_running_loop().create_task(
                self.record_storage_events()
            )

    async def _commit_reads(self, failed: tuple[_Batch, Exception] | None = None) -> None:
        """The group commit as a task, until no read is pending; ``failed``: first finish a
        batch whose transaction failed (:meth:`_write_reads`' second half)."""
        try:
            if failed is not None:
                await self._commit_batch(*failed)
            while self._pending_reads:
                batch = self._take_batch()
                if batch:
                    await self._commit_batch(batch)
        except BaseException:  # cancelled (the store is closing): fail the queue, not hang it
            for _read, future in self._pending_reads:
                future.cancel()
            self._pending_reads.clear()
            self._stand_down()
            raise
        self._stand_down()

    async def _commit_batch(self, batch: _Batch, failed: Exception | None = None) -> None:
        try:
            async with self._write_lock:
                if failed is None:
                    outcomes, activated = await self._write_reads(batch)
                else:
                    outcomes, activated = await self._write_reads_apart(batch, failed)
        except Exception as exc:
            for _read, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        except BaseException:
            for _read, future in batch:
                future.cancel()
            raise
        self._settle_batch(batch, outcomes, activated)

    async def _write_reads(
        self, batch: _Batch
    ) -> tuple[list[tuple[Revision, Event] | None], list[Event]]:
        """One transaction for the batch (callers hold the write lock); if it fails,
        :meth:`_write_reads_apart`.

        Returns each read's outcome and the ``subscription.state`` events of the reads that
        marked their subscription ``active`` (``Read.activate``)."""
        reads = [read for read, _future in batch]
        sinks = self.event_sinks
        activated: list[Event] = []
        try:
            written = await self.in_writer(
                lambda conn: linkstate.record_reads(conn, self.dialect, reads, sinks, activated)
            )
            return written, activated
        except Exception as exc:
            return await self._write_reads_apart(batch, exc)

    async def _write_reads_apart(
        self, batch: _Batch, failed: Exception
    ) -> tuple[list[tuple[Revision, Event] | None], list[Event]]:
        """After the batch's transaction failed with ``failed`` (callers hold the write lock).

        If it failed for a storage reason (disk full) every read fails with that error, and
        ``health`` counts one failed write per read, as when each had its own transaction.
        Any other failure is one read's: the reads are then written one transaction each,
        so the others are stored and only the failing read gets its error."""
        if len(batch) == 1:
            raise failed
        if health.is_storage_failure(failed):
            for _ in batch[1:]:
                self.health.failed(failed)
            raise failed
        sinks = self.event_sinks
        outcomes: list[tuple[Revision, Event] | None] = []
        committed: list[Event] = []
        for read, future in batch:
            activated: list[Event] = []

            def alone(
                conn: Connection, read: groupcommit.Read = read, activated: list[Event] = activated
            ) -> list[Any]:
                return linkstate.record_reads(conn, self.dialect, [read], sinks, activated)

            try:
                outcome = (await self.in_writer(alone))[0]
                committed += activated
            except Exception as exc:
                outcome = None
                if not future.done():
                    future.set_exception(exc)
            outcomes.append(outcome)
        return outcomes, committed

    async def in_writer(self, fn: Callable[[Connection], T]) -> T:
        """Run ``fn`` in one write transaction (callers hold the write lock).

        SQLite: on the writer thread with the sync engine (one thread hop per transaction).
        PostgreSQL: on a sync facade of an asyncpg connection (``run_sync``), so the same
        plain-SQL functions serve both backends."""
        if self.sync_engine is None:
            async with self.engine.begin() as aconn:
                result = await aconn.run_sync(fn)
            self.health.succeeded()
            return result
        result = await self._writer.run(lambda: self._in_transaction(fn))
        self.health.succeeded()
        return result

    def _in_transaction(self, fn: Callable[[Connection], T]) -> T:
        """On the writer thread: ``fn`` in a transaction on the connection the thread keeps.

        A pooled connection per transaction cost the hot path a checkout, a reset (a
        rollback) on checkin and the pool's bookkeeping, more than the commit itself; the
        one writer needs one connection. A transaction that fails hands its connection back
        closed, and the next starts on a fresh one: a failure (a full disk, an I/O error)
        may have left it in a state nobody should build on."""
        conn = self._writer_conn
        if conn is None or conn.closed or conn.invalidated:
            assert self.sync_engine is not None
            conn = self._writer_conn = self.sync_engine.connect()
        try:
            with conn.begin():
                return fn(conn)
        except BaseException:
            self._writer_conn = None
            with contextlib.suppress(Exception):
                conn.close()
            raise

    async def record_storage_events(self) -> None:
        """Write the ``daemon.storage`` events queued by :attr:`health` (best effort: while the
        disk is full they stay queued, and go out with the first write that succeeds)."""
        pending, self.health.pending_events = self.health.pending_events, []
        if not pending:
            return

        def transaction(conn: Connection) -> list[Event]:
            now = time.time()
            return [self.dialect.insert_event(conn, "daemon.storage", now, data=d) for d in pending]

        try:
            events = await self.write(transaction, events=True)
        except database_errors():
            self.health.pending_events = [*pending, *self.health.pending_events][
                -health.MAX_PENDING_EVENTS :
            ]
            return
        self.publish(events)

    async def in_reader(self, fn: Callable[[Connection], T]) -> T:
        """Run ``fn(connection)`` as a reader: on SQLite in a worker thread (WAL lets it run
        alongside the writer; one thread hop instead of one per statement), on PostgreSQL on
        a pooled asyncpg connection."""
        if self.sync_engine is None:
            async with self.engine.connect() as aconn:
                return await aconn.run_sync(fn)
        sync_engine = self.sync_engine

        def run() -> T:
            with sync_engine.connect() as conn:
                return fn(conn)

        return await asyncio.to_thread(run)

    async def current_revision(self, subscription_id: int) -> Revision | None:
        async with self.engine.connect() as conn:
            row = (
                await conn.execute(
                    select(schema.revisions)
                    .where(schema.revisions.c.subscription_id == subscription_id)
                    .order_by(schema.revisions.c.revision.desc())
                    .limit(1)
                )
            ).one_or_none()
        return _revision(row) if row is not None else None

    async def revision_before(self, subscription_id: int, revision: int) -> Revision | None:
        """The newest revision of the subscription older than ``revision`` (``wait``'s baseline
        when it returns ``revision``), or None when there is none (or it was pruned)."""
        async with self.engine.connect() as conn:
            row = (
                await conn.execute(
                    select(schema.revisions)
                    .where(
                        schema.revisions.c.subscription_id == subscription_id,
                        schema.revisions.c.revision < revision,
                    )
                    .order_by(schema.revisions.c.revision.desc())
                    .limit(1)
                )
            ).one_or_none()
        return _revision(row) if row is not None else None

    async def get_revision(self, revision_id: int) -> Revision | None:
        async with self.engine.connect() as conn:
            row = (
                await conn.execute(
                    select(schema.revisions).where(schema.revisions.c.id == revision_id)
                )
            ).one_or_none()
        return _revision(row) if row is not None else None

    # ---- events -------------------------------------------------------------------------
    async def events_after(
        self,
        after: int,
        *,
        limit: int = 100,
        types: Sequence[str] | None = None,
        uri: str | None = None,
        subscription_ids: Sequence[int] | None = None,
    ) -> list[Event]:
        query = select(schema.events).where(schema.events.c.id > after)
        if types:
            query = query.where(schema.events.c.type.in_(list(types)))
        if uri is not None:
            query = query.where(schema.events.c.uri == uri)
        if subscription_ids is not None:
            query = query.where(schema.events.c.subscription_id.in_(list(subscription_ids)))
        async with self.engine.connect() as conn:
            rows = await conn.execute(query.order_by(schema.events.c.id).limit(limit))
            return [_event(row) for row in rows]

    async def get_event(self, event_id: int) -> Event | None:
        async with self.engine.connect() as conn:
            row = (
                await conn.execute(select(schema.events).where(schema.events.c.id == event_id))
            ).one_or_none()
        return _event(row) if row is not None else None

    async def last_event_id(self) -> int:
        async with self.engine.connect() as conn:
            value = await conn.scalar(select(func.max(schema.events.c.id)))
        return int(value or 0)

    async def first_event_id(self) -> int:
        async with self.engine.connect() as conn:
            value = await conn.scalar(select(func.min(schema.events.c.id)))
        return int(value or 0)

    # ---- retention ----------------------------------------------------------------------
    async def prune(
        self, *, keep_revisions: int, max_age_s: float, keep_events: int
    ) -> dict[str, int]:
        """Bounded history: per subscription keep the newest ``keep_revisions`` revisions
        (the current one always), drop older than ``max_age_s``; keep ``keep_events`` events."""
        cutoff = time.time() - max_age_s
        revs = schema.revisions

        def transaction(conn: Connection) -> dict[str, int]:
            ranked = select(
                revs.c.id,
                func.row_number()
                .over(partition_by=revs.c.subscription_id, order_by=revs.c.revision.desc())
                .label("rank"),
            ).subquery()
            too_many = select(ranked.c.id).where(ranked.c.rank > keep_revisions)
            # Revisions are inserted in order, so the highest id is each URI's current one.
            current = select(func.max(revs.c.id)).group_by(revs.c.subscription_id)
            r1 = conn.execute(
                delete(revs).where(
                    or_(revs.c.id.in_(too_many), revs.c.read_at < cutoff),
                    revs.c.id.not_in(current),
                )
            )
            last = conn.scalar(select(func.max(schema.events.c.id)))
            r2 = conn.execute(
                delete(schema.events).where(
                    or_(
                        schema.events.c.id <= int(last or 0) - keep_events,
                        schema.events.c.created_at < cutoff,
                    )
                )
            )
            return {"revisions": int(r1.rowcount or 0), "events": int(r2.rowcount or 0)}

        return await self.write(transaction)

    async def counts(self) -> dict[str, int]:
        """Rows per table, read in one reader hop."""
        return await self.in_reader(catalog.row_counts)

    async def status_counts_within(self, deadline_s: float) -> Answer[catalog.StatusCounts]:
        """:meth:`status_counts` within ``deadline_s`` (half a second while the storage is
        failing already), else the last counts (:mod:`service.store.remembered`): status and
        metrics answer while the database does not. A PostgreSQL that does not answer marks
        the storage failing; a read that fails for another reason is raised (a bug)."""
        if self.health.failing:
            deadline_s = min(deadline_s, 0.5)
        answer = await self._status.get(deadline_s)
        error = answer.error
        if error is None:
            return answer
        if health.is_storage_failure(error) or health.is_unanswered(error):
            if self.database.is_postgresql or not isinstance(error, TimeoutError):
                self.health.failed(error)
            return answer
        raise error

    async def status_counts(self) -> catalog.StatusCounts:
        """Everything ``GET /v1/status`` counts (rows, states, deliveries, targets, the
        newest event id) in one reader hop: one statement per thread hop through the async
        driver would make a status wait for a thread once per count on a busy machine."""
        return await self.in_reader(catalog.status_counts)
