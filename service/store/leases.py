"""Server-link leases: which replica runs which link, as plain SQL on either backend.

Several ``mcpsubd`` replicas on one PostgreSQL split the server links by lease. A replica
claims unowned or expired links with ``FOR UPDATE SKIP LOCKED`` (concurrent claimers skip each
other's rows instead of waiting), renews what it holds every third of the TTL, and releases
links on a graceful stop. Time is the database's clock, so replicas on different hosts agree
on expiry.

Fencing: a claim bumps ``lease_epoch`` *and* the link's ``generation`` in the same statement.
Every write a link makes is already conditional on its generation (the revision fence in
:mod:`service.store.groupcommit`, and the link's state writes), and a generation is only ever
bumped by the holder of the current lease (:data:`BUMP_FENCED`), so a replica that was paused
past its lease finds every write rejected by the database and gives the link up.

Make-before-break handover (PostgreSQL): a replica that stops, or holds more than its share,
*offers* links (``lease_successor = '*'``) and keeps running them. A replica below its share
*requests* offered links (``lease_successor = <its id>``, ``SKIP LOCKED`` so two requesters
never pick the same one), opens and acknowledges its own listen stream in standby, writing
nothing, and only then *takes* the lease (:func:`take`): owner, epoch and generation change in
one statement, so from that commit on every write of the previous owner is fenced, and the
previous owner is told over ``NOTIFY`` to close its stream. A plain claim (expired or unowned
link) clears any offer or request.

On SQLite there is one daemon per database (its API socket makes sure of it): it claims every
link it does not hold, whatever the previous owner's expiry (a previous run's leases are its
own), so leases cost nothing there.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from sqlalchemy import Connection, bindparam, text

from service.store.dialect import Dialect

LEASES_CHANNEL = "mcpsub_leases"
"""NOTIFY channel: a replica id (or ``*`` for every replica) whose lease keeper should run a
pass now: links were offered, or one of its links was taken."""
OFFERED = "*"


@dataclass(frozen=True, slots=True)
class Claimed:
    server_id: int
    url: str
    generation: int
    """The generation the link starts with; its writes are fenced on it."""
    epoch: int
    previous_owner: str | None


_HAS_SUBSCRIPTIONS = "EXISTS (SELECT 1 FROM subscriptions u WHERE u.server_id = s.id)"


def heartbeat(
    conn: Connection, dialect: Dialect, replica_id: str, host: str, pid: int, stopping: bool
) -> None:
    now = dialect.now
    conn.execute(
        text(
            f"INSERT INTO replicas (id, host, pid, started_at, heartbeat_at, stopping) "
            f"VALUES (:id, :host, :pid, {now}, {now}, :stopping) "
            f"ON CONFLICT (id) DO UPDATE SET heartbeat_at = {now}, stopping = :stopping"
        ),
        {"id": replica_id, "host": host, "pid": pid, "stopping": int(stopping)},
    )


@dataclass(frozen=True, slots=True)
class Renewed:
    """What a renew changed relative to the links the replica runs: only the differences
    come back from the database (a pass over 1,000 held links returned 1,000 rows)."""

    lost: list[int]
    """Running here, but no longer leased to us: another replica owns them now."""
    orphans: list[int]
    """Leased to us but not running here (a previous run of ours, or stopped locally)."""


def renew_changes(
    conn: Connection, dialect: Dialect, replica_id: str, ttl: float, running: Collection[int]
) -> Renewed:
    """Extend every lease this replica holds, and return only how the leases differ from
    ``running`` (the links the replica runs)."""
    rows = dialect.renew_changes(conn, replica_id, ttl, running)
    return Renewed(
        lost=sorted(int(r.id) for r in rows if not r.orphan),
        orphans=sorted(int(r.id) for r in rows if r.orphan),
    )


def balance(conn: Connection, dialect: Dialect, ttl: float) -> tuple[int, int]:
    """(live replicas, links with subscriptions): the fair share is links / replicas."""
    live = dialect.live_replicas(conn, ttl)
    links = int(
        conn.execute(
            text(f"SELECT COUNT(*) FROM servers s WHERE {_HAS_SUBSCRIPTIONS}")
        ).scalar_one()
    )
    return max(1, live), links


def claim(
    conn: Connection,
    dialect: Dialect,
    replica_id: str,
    ttl: float,
    limit: int,
    only: list[int] | None = None,
    mine_too: bool = False,
) -> list[Claimed]:
    """Take up to ``limit`` links that are unowned or whose lease expired while their owner
    stopped heartbeating (SQLite: every link not held by us), bumping epoch and generation;
    ``only`` restricts it to these ids. ``mine_too``: also links leased to this replica id
    (a previous run of ours).

    An expired lease whose owner is still live (heartbeat within the TTL, not stopping) is
    left to that owner: after the database was frozen or unreachable every lease has
    expired in its clock at once, and the owner's next renew takes them back."""
    if limit <= 0:
        return []
    free = dialect.free_link()
    if mine_too:
        free = f"({free} OR s.lease_owner = :me)"
    only_sql = " AND s.id IN :only" if only is not None else ""
    pick = (
        f"SELECT s.id, s.lease_owner AS previous FROM servers s WHERE {free} "
        f"AND {_HAS_SUBSCRIPTIONS}{only_sql} ORDER BY s.id LIMIT :limit"
    )
    params: dict[str, object] = {"me": replica_id, "ttl": ttl, "limit": limit}
    if only is not None:
        params["only"] = list(only)
    set_lease = (
        f"lease_owner = :me, lease_until = {dialect.now} + :ttl, lease_epoch = lease_epoch + 1, "
        "generation = generation + 1, lease_successor = NULL"
    )
    rows = dialect.claim(conn, pick, set_lease, params, only is not None)
    claimed = [Claimed(int(i), url, int(g), int(e), previous) for i, url, g, e, previous in rows]
    return sorted(claimed, key=lambda c: c.server_id)


URI_SET_DIGESTS = text(
    "SELECT s.server_id, COUNT(*) AS n, SUM(s.id) AS ids, SUM(LENGTH(s.uri)) AS chars "
    "FROM subscriptions s JOIN servers v ON v.id = s.server_id "
    "WHERE v.lease_owner = :me GROUP BY s.server_id"
)


def uri_set_digest(wanted: dict[str, int]) -> tuple[int, int, int]:
    """The in-memory side of :func:`uri_set_digests`: (count, sum of ids, sum of URI lengths)."""
    return len(wanted), sum(wanted.values()), sum(len(uri) for uri in wanted)


def uri_set_digests(conn: Connection, replica_id: str) -> dict[int, tuple[int, int, int]]:
    """Per link leased to ``replica_id``: (subscriptions, sum of their ids, sum of their URIs'
    lengths). One row per link instead of one per subscription: the lease keeper's periodic
    reconcile compares these with what its links hold and reloads only the links that differ.

    Subscription ids are never reused on PostgreSQL (a sequence); on SQLite the one replica
    applies every change its own API makes at once, so the digest only has to catch what
    another replica changed without a notification reaching us."""
    rows = conn.execute(URI_SET_DIGESTS, {"me": replica_id}).all()
    return {int(r.server_id): (int(r.n), int(r.ids), int(r.chars)) for r in rows}


def release(conn: Connection, replica_id: str, server_ids: list[int]) -> int:
    if not server_ids:
        return 0
    statement = text(
        "UPDATE servers SET lease_owner = NULL, lease_until = NULL "
        "WHERE lease_owner = :me AND id IN :ids"
    ).bindparams(bindparam("ids", expanding=True))
    return int(conn.execute(statement, {"me": replica_id, "ids": server_ids}).rowcount or 0)


def leave(conn: Connection, replica_id: str) -> None:
    """A graceful stop: release everything and deregister."""
    conn.execute(
        text("UPDATE servers SET lease_owner = NULL, lease_until = NULL WHERE lease_owner = :me"),
        {"me": replica_id},
    )
    conn.execute(text("DELETE FROM replicas WHERE id = :me"), {"me": replica_id})


def forget_dead(conn: Connection, dialect: Dialect, older_than_s: float) -> int:
    """Drop replica rows whose heartbeat stopped long ago (killed replicas)."""
    result = conn.execute(
        text(f"DELETE FROM replicas WHERE heartbeat_at < {dialect.now} - :age"),
        {"age": older_than_s},
    )
    return int(result.rowcount or 0)


def wake(conn: Connection, dialect: Dialect, whom: str) -> None:
    """Ask ``whom`` (a replica id, or ``*``: every replica) to run a lease pass at commit."""
    dialect.notify(conn, LEASES_CHANNEL, whom)


def offer(
    conn: Connection, dialect: Dialect, replica_id: str, server_ids: list[int] | None
) -> list[int]:
    """Offer these links (``None``: every link we hold) to any replica; we keep running them
    until one takes them. Returns the ids offered now (links already offered or requested
    keep their state)."""
    only = " AND id IN :ids" if server_ids is not None else ""
    statement = text(
        f"UPDATE servers SET lease_successor = '{OFFERED}' "
        f"WHERE lease_owner = :me AND lease_successor IS NULL{only} RETURNING id"
    )
    params: dict[str, object] = {"me": replica_id}
    if server_ids is not None:
        if not server_ids:
            return []
        statement = statement.bindparams(bindparam("ids", expanding=True))
        params["ids"] = list(server_ids)
    ids = sorted(int(r.id) for r in conn.execute(statement, params))
    if ids:
        wake(conn, dialect, OFFERED)
    return ids


def withdraw(conn: Connection, replica_id: str) -> int:
    """Take back offers nobody has requested yet (we are no longer above our share)."""
    result = conn.execute(
        text(
            "UPDATE servers SET lease_successor = NULL "
            f"WHERE lease_owner = :me AND lease_successor = '{OFFERED}'"
        ),
        {"me": replica_id},
    )
    return int(result.rowcount or 0)


@dataclass(frozen=True, slots=True)
class Requested:
    server_id: int
    url: str
    owner: str | None


def request(
    conn: Connection, dialect: Dialect, replica_id: str, ttl: float, limit: int
) -> list[Requested]:
    """Become the successor of up to ``limit`` offered links (PostgreSQL only): links offered
    by a live owner, or requested by a replica that is no longer live. The owner keeps
    running them until :func:`take`."""
    if limit <= 0 or not dialect.replicated:  # SKIP LOCKED below: PostgreSQL's statement
        return []
    now = dialect.now
    live = (
        f"SELECT 1 FROM replicas r WHERE r.id = s.lease_successor AND r.stopping = 0 "
        f"AND r.heartbeat_at > {now} - :ttl"
    )
    rows = conn.execute(
        text(
            "WITH picked AS (SELECT s.id, s.lease_owner FROM servers s "
            f"WHERE s.lease_successor IS NOT NULL AND s.lease_successor <> :me "
            f"AND (s.lease_successor = '{OFFERED}' OR NOT EXISTS ({live})) "
            f"AND s.lease_owner <> :me AND s.lease_until >= {now} AND {_HAS_SUBSCRIPTIONS} "
            "ORDER BY s.id LIMIT :limit FOR UPDATE OF s SKIP LOCKED) "
            "UPDATE servers SET lease_successor = :me FROM picked WHERE servers.id = picked.id "
            "RETURNING servers.id, COALESCE(servers.url_secret, servers.url) AS url, "
            "picked.lease_owner"
        ),
        {"me": replica_id, "ttl": ttl, "limit": limit},
    ).all()
    return sorted(
        (Requested(int(r.id), r.url, r.lease_owner) for r in rows), key=lambda r: r.server_id
    )


def requested(conn: Connection, replica_id: str) -> set[int]:
    """Links this replica is still the successor of (an offer can be withdrawn, a request
    overtaken by a plain claim after the owner's lease expired)."""
    rows = conn.execute(
        text("SELECT id FROM servers WHERE lease_successor = :me"), {"me": replica_id}
    )
    return {int(r.id) for r in rows}


def take(
    conn: Connection, dialect: Dialect, replica_id: str, ttl: float, server_id: int
) -> Claimed | None:
    """The successor's listen is acknowledged: take the lease. Owner, epoch and generation
    change in this one statement, so the previous owner's writes are fenced from its commit
    on; the previous owner is woken to close its stream. None when we are no longer the
    successor (the offer was withdrawn, or the link was claimed after its lease expired)."""
    now = dialect.now
    row = conn.execute(
        text(
            "SELECT lease_owner FROM servers WHERE id = :id AND lease_successor = :me"
            + dialect.lock_row
        ),
        {"id": server_id, "me": replica_id},
    ).one_or_none()
    if row is None:
        return None
    taken = conn.execute(
        text(
            f"UPDATE servers SET lease_owner = :me, lease_until = {now} + :ttl, "
            "lease_epoch = lease_epoch + 1, generation = generation + 1, lease_successor = NULL "
            "WHERE id = :id AND lease_successor = :me "
            "RETURNING id, COALESCE(url_secret, url) AS url, generation, lease_epoch"
        ),
        {"id": server_id, "me": replica_id, "ttl": ttl},
    ).one_or_none()
    if taken is None:
        return None
    if row.lease_owner not in (None, replica_id):
        wake(conn, dialect, row.lease_owner)
    return Claimed(
        int(taken.id), taken.url, int(taken.generation), int(taken.lease_epoch), row.lease_owner
    )
