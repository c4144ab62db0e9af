"""What differs between the two backends, in one object chosen when the store opens.

Every statement the store runs is the same text on SQLite and PostgreSQL except the few
here: the database clock, the lease claim (PostgreSQL picks rows with ``FOR UPDATE SKIP
LOCKED`` so concurrent replicas skip each other; SQLite has one writer and reads then
writes), the renew that reports what changed, the count of live replicas, the event-order
lock and ``NOTIFY`` (PostgreSQL only: SQLite has one daemon, no one else to order against or
wake), and the two writes every event goes through: the revision write (one statement on
PostgreSQL, a round trip saved per read where the database is across a network) and the
event insert (which NOTIFYs the other replicas on PostgreSQL). Those two, and the other
statements of a revision, run on the driver itself (:meth:`Dialect.rows`, see
:mod:`service.store.driver`): sqlite3 on SQLite, asyncpg's prepared statements on
PostgreSQL. Callers hold the :class:`Dialect` the store chose when it opened
(``Store.dialect``, or :func:`dialect_for` for a URL) and never ask which backend is behind
it, nor re-derive it from a connection.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, Row, bindparam, text

from service.jsonencode import json_text
from service.store import driver
from service.store.database import Database
from service.store.driver import Sql, sql
from service.store.records import Event

EVENT_ORDER_KEY = 0x6D637375  # "mcsu"
"""The advisory lock that makes event ids commit-ordered (see :meth:`Dialect.order_events`)."""
EVENTS_CHANNEL = "mcpsub_events"
"""NOTIFY channel: the id of every committed event (other replicas' SSE and dispatchers)."""
LINKS_CHANNEL = "mcpsub_links"
"""NOTIFY channel: server ids whose subscriptions changed (the replica holding the link)."""
MIGRATION_LOCK = 0x6D63_7073_7562_6D69  # "mcpsubmi"
"""PostgreSQL advisory lock held by the transaction that migrates: replicas started at the
same instant on a fresh database (a deployment of three) ran the same ``CREATE TABLE`` at
once and all but one died with ``IntegrityError … pg_type_typname_nsp_index``."""

EventRow = tuple[int, str | None, str | None, dict[str, Any]]
"""One event of :meth:`Dialect.insert_events`: (subscription id, server URL, URI, data)."""
EVENTS_PER_STATEMENT = 1000
"""Rows per event insert: a bound on one statement's parameter (SQLite's text, asyncpg's
arrays) whatever the number of subscriptions."""
WrittenRevision = tuple[int, int, Event]
"""What a revision write returns: (revision id, revision number, its event)."""

FENCED_UPDATE = sql(
    "UPDATE subscriptions SET content_hash = :digest, revision = revision + 1, "
    "read_generation = :generation, last_read_at = :read_at, updated_at = :read_at "
    "WHERE id = :subscription_id AND server_id = :server_id "
    "AND (SELECT generation FROM servers WHERE id = :server_id) = :generation "
    "AND (content_hash IS NULL OR content_hash != :digest) "
    # what the revision and its event need, from the row just written (SQLite ≥ 3.35):
    # a separate SELECT for it was a quarter of the transaction's statements
    "RETURNING revision, uri, (SELECT url FROM servers WHERE id = :server_id) AS url"
)
INSERT_REVISION = sql(
    "INSERT INTO revisions (subscription_id, revision, content_hash, contents, text, generation, "
    "read_at) VALUES (:subscription_id, :revision, :digest, :contents, :text, :generation, :read_at) "
    "RETURNING id"
)
INSERT_EVENT = sql(
    "INSERT INTO events (type, subscription_id, server_url, uri, revision_id, revision, data, "
    "created_at) VALUES (:type, :subscription_id, :server_url, :uri, :revision_id, :revision, "
    ":data, :created_at) RETURNING id"
)
INSERT_EVENTS = sql(
    # One row per element of :rows, a JSON array of [subscription_id, server_url, uri, data];
    # rowids are given in the SELECT's order (one writer), so ids follow the list.
    "INSERT INTO events (type, subscription_id, server_url, uri, data, created_at) "
    "SELECT :type, json_extract(value, '$[0]'), json_extract(value, '$[1]'), "
    "json_extract(value, '$[2]'), json_extract(value, '$[3]'), :created_at "
    "FROM json_each(:rows) ORDER BY key RETURNING id, subscription_id"
)
INSERT_EVENTS_PG = sql(
    "WITH ev AS (INSERT INTO events (type, subscription_id, server_url, uri, data, created_at) "
    "SELECT :type, t.s, t.u, t.r, t.d, :created_at FROM unnest(CAST(:subscription_ids AS "
    "integer[]), CAST(:server_urls AS text[]), CAST(:uris AS text[]), CAST(:datas AS text[])) "
    "WITH ORDINALITY AS t(s, u, r, d, n) ORDER BY t.n RETURNING id, subscription_id) "
    f"SELECT ev.id, ev.subscription_id, pg_notify('{EVENTS_CHANNEL}', CAST(ev.id AS TEXT)) FROM ev"
)
TOUCH = sql(
    "UPDATE subscriptions SET last_read_at = :read_at WHERE id = :subscription_id "
    "AND (SELECT generation FROM servers WHERE id = :server_id) = :generation"
)
"""An unchanged (or fenced-out) read: only its read time, under the same fence."""


_RENEW = "UPDATE servers SET lease_until = {now} + :ttl WHERE lease_owner = :me"


class Dialect:
    """The SQLite dialect; :class:`PostgreSQL` overrides what differs."""

    name = "sqlite"
    replicated = False
    """Several replicas may share the database (leases, delivery claims and wake-ups mean
    something); SQLite has one daemon per database (its API socket makes sure of it)."""
    now = "((julianday('now') - 2440587.5) * 86400.0)"
    """The database's clock in seconds since the epoch: replicas on different hosts agree."""
    lock_row = ""
    """Appended to a ``SELECT`` whose rows the transaction goes on to update."""
    in_ids = "IN (SELECT value FROM json_each(:ids))"
    """``column {in_ids}``: the column is one of the list bound as ``ids``
    (:meth:`id_list`); one statement text for any length, so the driver prepares it once."""

    def id_list(self, ids: Sequence[int]) -> Any:
        """``ids`` as :attr:`in_ids` binds them: a JSON array on SQLite."""
        return json_text(list(ids))

    def rows(self, conn: Connection, statement: Sql, params: Mapping[str, Any]) -> list[Any]:
        """Run one of the hot statements on the driver under ``conn``, in its transaction;
        the rows it returns, as tuples (:mod:`service.store.driver`)."""
        return driver.sqlite_rows(conn, statement, params)

    def order_events(self, conn: Connection) -> None:
        """Make this transaction's event ids commit-ordered; call it first in every
        transaction that may insert an event. SQLite needs nothing: one writer."""

    def notify(self, conn: Connection, channel: str, payload: str) -> None:
        """Tell the other replicas at commit (``NOTIFY``); nobody to tell on SQLite."""

    insert_event_sql = INSERT_EVENT
    """The event insert, returning the id (PostgreSQL's also NOTIFYs it)."""

    def insert_event(
        self,
        conn: Connection,
        type_: str,
        created_at: float,
        *,
        subscription_id: int | None = None,
        server_url: str | None = None,
        uri: str | None = None,
        revision_id: int | None = None,
        revision: int | None = None,
        data: dict[str, Any] | None = None,
    ) -> Event:
        """The one event insert (every writer of events calls it, after :meth:`order_events`),
        announced to the other replicas at commit."""
        ((event_id, *_),) = self.rows(
            conn,
            self.insert_event_sql,
            {
                "type": type_,
                "subscription_id": subscription_id,
                "server_url": server_url,
                "uri": uri,
                "revision_id": revision_id,
                "revision": revision,
                "data": json_text(data or {}),
                "created_at": created_at,
            },
        )
        return Event(
            id=int(event_id),
            type=type_,
            subscription_id=subscription_id,
            server_url=server_url,
            uri=uri,
            revision_id=revision_id,
            revision=revision,
            data=data or {},
            created_at=created_at,
        )

    def write_revision(
        self,
        conn: Connection,
        params: dict[str, Any],
        contents_json: str,
        text_value: str | None,
        data: dict[str, Any],
    ) -> WrittenRevision | None:
        """The fenced update, the revision and its event, statement by statement (one
        writer); None when the fence or unchanged content stopped it."""
        updated = self.rows(conn, FENCED_UPDATE, params)
        if not updated:
            return None
        ((revision, uri, url),) = updated
        ((revision_id,),) = self.rows(
            conn,
            INSERT_REVISION,
            {**params, "revision": revision, "contents": contents_json, "text": text_value},
        )
        event = self.insert_event(
            conn,
            "resource.updated",
            float(params["read_at"]),
            subscription_id=int(params["subscription_id"]),
            server_url=url,
            uri=uri,
            revision_id=revision_id,
            revision=revision,
            data=data,
        )
        return int(revision_id), int(revision), event

    def insert_events(
        self, conn: Connection, type_: str, created_at: float, rows: Sequence[EventRow]
    ) -> list[Event]:
        """Events of one type and time for several subscriptions, each at most once, in one
        statement per :data:`EVENTS_PER_STATEMENT` (after :meth:`order_events`); ids follow
        ``rows``. A cold start's first reads mark 10,000 subscriptions ``active``: one
        :meth:`insert_event` each was 18 % of the writer thread's time (docs/benchmarks.md)."""
        events: list[Event] = []
        for start in range(0, len(rows), EVENTS_PER_STATEMENT):
            chunk = rows[start : start + EVENTS_PER_STATEMENT]
            ids = {sid: i for i, sid in self._insert_events(conn, type_, created_at, chunk)}
            if len(ids) != len(chunk):
                raise ValueError("insert_events: a subscription appears more than once")
            events += [
                Event(
                    id=int(ids[subscription_id]),
                    type=type_,
                    subscription_id=subscription_id,
                    server_url=server_url,
                    uri=uri,
                    revision_id=None,
                    revision=None,
                    data=data,
                    created_at=created_at,
                )
                for subscription_id, server_url, uri, data in chunk
            ]
        return events

    def _insert_events(
        self, conn: Connection, type_: str, created_at: float, rows: Sequence[EventRow]
    ) -> list[tuple[int, int]]:
        """(id, subscription_id) of each row inserted."""
        listed = [[sid, url, uri, json_text(data)] for sid, url, uri, data in rows]
        params = {"type": type_, "created_at": created_at, "rows": json_text(listed)}
        return [(int(i), int(s)) for i, s in self.rows(conn, INSERT_EVENTS, params)]

    def touch(self, conn: Connection, params: Mapping[str, Any]) -> None:
        """A read that wrote no revision: its read time, fenced like the revision write."""
        self.rows(conn, TOUCH, params)

    def migration_lock(self, conn: Connection) -> None:
        """Held by a migrating transaction; SQLite's write lock already serialises them."""

    def after_copy(self, conn: Connection, tables: Sequence[str]) -> None:
        """After rows were copied in with their ids (``mcpsubd migrate-db``): nothing on
        SQLite, whose next id follows the highest stored one by itself."""

    def live_replicas(self, conn: Connection, ttl: float) -> int:
        return 1

    def free_link(self) -> str:
        """A link this replica may claim: SQLite's one daemon claims every link it does not
        hold, whatever the previous owner's expiry (a previous run's leases are its own)."""
        return "(s.lease_owner IS NULL OR s.lease_owner != :me)"

    def claim(
        self, conn: Connection, pick: str, set_lease: str, params: dict[str, Any], only: bool
    ) -> list[tuple[Any, ...]]:
        """(id, url, generation, lease_epoch, previous owner) of the links ``pick`` selects,
        each updated with ``set_lease``. One writer: read, then write, in one transaction;
        the write is one statement for all of them (one per link was 10,000 statements at a
        10,000-link start, 1.8 s of the writer thread)."""
        select_stmt = text(pick)
        if only:
            select_stmt = select_stmt.bindparams(bindparam("only", expanding=True))
        previous = {int(row.id): row.previous for row in conn.execute(select_stmt, params)}
        if not previous:
            return []
        update = text(
            f"UPDATE servers SET {set_lease} WHERE id {self.in_ids} "
            "RETURNING id, COALESCE(url_secret, url) AS url, generation, lease_epoch"
        )
        # the pick's own parameters (``only`` is the pick's alone); a lease without a TTL
        # (SQLite's: one writer) binds none
        bound: dict[str, Any] = {key: params[key] for key in ("me", "ttl") if key in params}
        bound["ids"] = self.id_list(sorted(previous))
        return [
            (row.id, row.url, row.generation, row.lease_epoch, previous[int(row.id)])
            for row in conn.execute(update, bound)
        ]

    def renew_changes(
        self, conn: Connection, replica_id: str, ttl: float, running: Collection[int]
    ) -> Sequence[Row[Any]]:
        """Extend this replica's leases; rows (id, orphan) where they differ from
        ``running``: orphan 1 = leased but not running, 0 = running but not leased."""
        conn.execute(text(_RENEW.format(now=self.now)), {"me": replica_id, "ttl": ttl})
        return conn.execute(
            _CHANGES_SQLITE, {"me": replica_id, "running": json.dumps(sorted(running))}
        ).all()


_CHANGES_SQLITE = text(
    "WITH running AS (SELECT CAST(value AS INTEGER) AS id FROM json_each(:running)) "
    "SELECT id, 1 AS orphan FROM servers WHERE lease_owner = :me "
    "AND id NOT IN (SELECT id FROM running) "
    "UNION ALL SELECT id, 0 AS orphan FROM running WHERE id NOT IN "
    "(SELECT id FROM servers WHERE lease_owner = :me)"
)


INSERT_EVENT_PG = sql(
    # the insert and its NOTIFY in one round trip
    f"WITH ev AS ({INSERT_EVENT.text}) "
    f"SELECT ev.id, pg_notify('{EVENTS_CHANNEL}', CAST(ev.id AS TEXT)) FROM ev"
)


class PostgreSQL(Dialect):
    name = "postgresql"
    replicated = True
    now = "EXTRACT(EPOCH FROM clock_timestamp())::float8"
    lock_row = " FOR UPDATE"
    in_ids = "= ANY(CAST(:ids AS integer[]))"

    def id_list(self, ids: Sequence[int]) -> Any:
        return list(ids)

    insert_event_sql = INSERT_EVENT_PG

    def _insert_events(
        self, conn: Connection, type_: str, created_at: float, rows: Sequence[EventRow]
    ) -> list[tuple[int, int]]:
        params = {
            "type": type_,
            "created_at": created_at,
            "subscription_ids": [r[0] for r in rows],
            "server_urls": [r[1] for r in rows],
            "uris": [r[2] for r in rows],
            "datas": [json_text(r[3]) for r in rows],
        }
        return [(int(i), int(s)) for i, s, _ in self.rows(conn, INSERT_EVENTS_PG, params)]

    def rows(self, conn: Connection, statement: Sql, params: Mapping[str, Any]) -> list[Any]:
        return driver.asyncpg_rows(conn, statement, params)

    def order_events(self, conn: Connection) -> None:
        """A sequence hands out ids at INSERT, so two replicas' transactions can commit out
        of id order, and a follower that moved its cursor past a committed id would never see
        a lower one committed later. This transaction-scoped advisory lock is held until
        commit, so the next event-writing transaction draws its ids only after this one is
        visible: a visible id means every lower id is visible or rolled back. Taken *first*
        (before any row lock), no transaction waits for it while holding rows another holder
        could wait for."""
        self.rows(conn, ORDER_EVENTS, {})

    def notify(self, conn: Connection, channel: str, payload: str) -> None:
        self.rows(conn, NOTIFY, {"channel": channel, "payload": payload})

    def write_revision(
        self,
        conn: Connection,
        params: dict[str, Any],
        contents_json: str,
        text_value: str | None,
        data: dict[str, Any],
    ) -> WrittenRevision | None:
        """The whole revision write as one statement (:data:`RECORD_READ_PG`)."""
        written = self.rows(
            conn,
            RECORD_READ_PG,
            {**params, "contents": contents_json, "text": text_value, "data": json_text(data)},
        )
        if not written:
            return None
        ((event_id, server_url, uri, revision_id, revision, _notified),) = written
        event = Event(
            id=int(event_id),
            type="resource.updated",
            subscription_id=int(params["subscription_id"]),
            server_url=server_url,
            uri=uri,
            revision_id=int(revision_id),
            revision=int(revision),
            data=data,
            created_at=float(params["read_at"]),
        )
        return int(revision_id), int(revision), event

    def migration_lock(self, conn: Connection) -> None:
        """One migrating process at a time (replicas started together on a fresh database)."""
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK})

    def after_copy(self, conn: Connection, tables: Sequence[str]) -> None:
        """Each table's id sequence moves past the highest copied id."""
        for table in tables:
            conn.execute(
                text(
                    f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                    f"COALESCE((SELECT MAX(id) FROM {table}), 0) + 1, false)"
                )
            )

    def live_replicas(self, conn: Connection, ttl: float) -> int:
        return int(
            conn.execute(
                text(
                    f"SELECT COUNT(*) FROM replicas WHERE stopping = 0 "
                    f"AND heartbeat_at > {self.now} - :ttl"
                ),
                {"ttl": ttl},
            ).scalar_one()
        )

    def free_link(self) -> str:
        """Unowned, or its lease expired while its owner stopped heartbeating. An expired
        lease whose owner is still live (heartbeat within the TTL, not stopping) is left to
        that owner: after the database was frozen or unreachable every lease has expired in
        its clock at once, and the owner's next renew takes them back."""
        owner_live = (
            "EXISTS (SELECT 1 FROM replicas r WHERE r.id = s.lease_owner AND r.stopping = 0 "
            f"AND r.heartbeat_at > {self.now} - :ttl)"
        )
        return (
            f"(s.lease_owner IS NULL OR s.lease_until IS NULL "
            f"OR (s.lease_until < {self.now} AND NOT {owner_live}))"
        )

    def claim(
        self, conn: Connection, pick: str, set_lease: str, params: dict[str, Any], only: bool
    ) -> list[tuple[Any, ...]]:
        """One statement: concurrent claimers skip each other's rows instead of waiting."""
        statement = text(
            f"WITH picked AS ({pick} FOR UPDATE OF s SKIP LOCKED) "
            f"UPDATE servers SET {set_lease} FROM picked WHERE servers.id = picked.id "
            "RETURNING servers.id, COALESCE(servers.url_secret, servers.url) AS url, "
            "servers.generation, servers.lease_epoch, picked.previous"
        )
        if only:
            statement = statement.bindparams(bindparam("only", expanding=True))
        return [tuple(row) for row in conn.execute(statement, params)]

    def renew_changes(
        self, conn: Connection, replica_id: str, ttl: float, running: Collection[int]
    ) -> Sequence[Row[Any]]:
        return conn.execute(
            _RENEW_CHANGES_PG, {"me": replica_id, "ttl": ttl, "running": sorted(running)}
        ).all()


ORDER_EVENTS = sql(f"SELECT pg_advisory_xact_lock({EVENT_ORDER_KEY})")
NOTIFY = sql("SELECT pg_notify(:channel, :payload)")
_RENEW_CHANGES_PG = text(
    f"WITH renewed AS ({_RENEW.format(now=PostgreSQL.now)} RETURNING id), "
    "running AS (SELECT unnest(CAST(:running AS integer[])) AS id) "
    "SELECT id, 1 AS orphan FROM renewed WHERE id NOT IN (SELECT id FROM running) "
    "UNION ALL SELECT id, 0 AS orphan FROM running WHERE id NOT IN (SELECT id FROM renewed)"
)

RECORD_READ_PG = sql(
    # PostgreSQL: the whole revision write in one statement (one round trip instead of six
    # through the run_sync facade). ``ordered`` is the event-order lock (see order_events):
    # MATERIALIZED and joined into the UPDATE, so it is taken before the UPDATE locks the
    # subscription row, as the event-order rule requires. The generation fence is the same
    # condition as FENCED_UPDATE's; no row comes back when it fails or the content is unchanged.
    "WITH ordered AS MATERIALIZED ("
    f"SELECT pg_advisory_xact_lock({EVENT_ORDER_KEY}) AS locked), "
    "upd AS (UPDATE subscriptions SET content_hash = :digest, revision = revision + 1, "
    "read_generation = :generation, last_read_at = :read_at, updated_at = :read_at "
    "FROM ordered "
    "WHERE subscriptions.id = :subscription_id AND subscriptions.server_id = :server_id "
    "AND (SELECT generation FROM servers WHERE id = :server_id) = :generation "
    "AND (subscriptions.content_hash IS NULL OR subscriptions.content_hash != :digest) "
    "RETURNING subscriptions.id, subscriptions.revision, subscriptions.uri), "
    "rev AS (INSERT INTO revisions (subscription_id, revision, content_hash, contents, text, "
    "generation, read_at) SELECT upd.id, upd.revision, CAST(:digest AS VARCHAR), "
    "CAST(:contents AS TEXT), CAST(:text AS TEXT), CAST(:generation AS INTEGER), "
    "CAST(:read_at AS DOUBLE PRECISION) FROM upd RETURNING id, revision), "
    "ev AS (INSERT INTO events (type, subscription_id, server_url, uri, revision_id, revision, "
    "data, created_at) SELECT 'resource.updated', upd.id, v.url, upd.uri, rev.id, rev.revision, "
    "CAST(:data AS TEXT), CAST(:read_at AS DOUBLE PRECISION) FROM upd, rev, servers v "
    "WHERE v.id = :server_id RETURNING id, server_url, uri, revision_id, revision) "
    "SELECT ev.id, ev.server_url, ev.uri, ev.revision_id, ev.revision, "
    "pg_notify('mcpsub_events', CAST(ev.id AS TEXT)) FROM ev"
)
"""PostgreSQL: the whole revision write in one statement (see :meth:`PostgreSQL.write_revision`)."""

SQLITE = Dialect()
POSTGRESQL = PostgreSQL()


def each_dialect(template: str) -> dict[str, Sql]:
    """A statement whose text differs by backend only where ``template`` says ``{in_ids}``:
    made once per dialect, looked up by ``Dialect.name``."""
    return {d.name: sql(template.format(in_ids=d.in_ids)) for d in (SQLITE, POSTGRESQL)}


def dialect_for(database: Database) -> Dialect:
    """The dialect of a parsed database URL: chosen once, where the URL is opened."""
    return POSTGRESQL if database.is_postgresql else SQLITE
