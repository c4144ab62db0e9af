"""What differs between the two backends, in one object chosen when the store opens.

Every statement the store runs is the same text on SQLite and PostgreSQL except the few
here: the database clock, the lease claim (PostgreSQL picks rows with ``FOR UPDATE SKIP
LOCKED`` so concurrent replicas skip each other; SQLite has one writer and reads then
writes), the renew that reports what changed, the count of live replicas, the event-order
lock and ``NOTIFY`` (PostgreSQL only: SQLite has one daemon, no one else to order against or
wake). Callers hold a :class:`Dialect` and never ask which backend is behind it.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from typing import Any

from sqlalchemy import Connection, Row, bindparam, text

EVENT_ORDER_KEY = 0x6D637375  # "mcsu"
"""The advisory lock that makes event ids commit-ordered (see :meth:`Dialect.order_events`)."""

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

    def order_events(self, conn: Connection) -> None:
        """Make this transaction's event ids commit-ordered; call it first in every
        transaction that may insert an event. SQLite needs nothing: one writer."""

    def notify(self, conn: Connection, channel: str, payload: str) -> None:
        """Tell the other replicas at commit (``NOTIFY``); nobody to tell on SQLite."""

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
        each updated with ``set_lease``. One writer: read, then write, in one transaction."""
        select_stmt = text(pick)
        if only:
            select_stmt = select_stmt.bindparams(bindparam("only", expanding=True))
        update = text(
            f"UPDATE servers SET {set_lease} WHERE id = :id "
            "RETURNING id, COALESCE(url_secret, url) AS url, generation, lease_epoch"
        )
        claimed = []
        for picked in conn.execute(select_stmt, params).all():
            row = conn.execute(update, {**params, "id": picked.id}).one()
            claimed.append((row.id, row.url, row.generation, row.lease_epoch, picked.previous))
        return claimed

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


class PostgreSQL(Dialect):
    name = "postgresql"
    replicated = True
    now = "EXTRACT(EPOCH FROM clock_timestamp())::float8"
    lock_row = " FOR UPDATE"

    def order_events(self, conn: Connection) -> None:
        """A sequence hands out ids at INSERT, so two replicas' transactions can commit out
        of id order, and a follower that moved its cursor past a committed id would never see
        a lower one committed later. This transaction-scoped advisory lock is held until
        commit, so the next event-writing transaction draws its ids only after this one is
        visible: a visible id means every lower id is visible or rolled back. Taken *first*
        (before any row lock), no transaction waits for it while holding rows another holder
        could wait for."""
        conn.execute(ORDER_EVENTS)

    def notify(self, conn: Connection, channel: str, payload: str) -> None:
        conn.execute(_NOTIFY, {"channel": channel, "payload": payload})

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


ORDER_EVENTS = text(f"SELECT pg_advisory_xact_lock({EVENT_ORDER_KEY})")
_NOTIFY = text("SELECT pg_notify(:channel, :payload)")
_RENEW_CHANGES_PG = text(
    f"WITH renewed AS ({_RENEW.format(now=PostgreSQL.now)} RETURNING id), "
    "running AS (SELECT unnest(CAST(:running AS integer[])) AS id) "
    "SELECT id, 1 AS orphan FROM renewed WHERE id NOT IN (SELECT id FROM running) "
    "UNION ALL SELECT id, 0 AS orphan FROM running WHERE id NOT IN (SELECT id FROM renewed)"
)

SQLITE = Dialect()
POSTGRESQL = PostgreSQL()


def dialect_of(conn: Connection) -> Dialect:
    """The dialect of a connection, for the plain-SQL functions that receive only one."""
    return POSTGRESQL if conn.dialect.name == "postgresql" else SQLITE
