"""Adding subscriptions and counting rows, as plain SQL compiled once (both backends).

``POST /v1/subscriptions`` and ``GET /v1/status`` run these. Built as SQLAlchemy Core
expressions on every call, the add would spend most of its Python per URI in SQL compilation
and caching, and the status counts would take one thread hop per statement; here the statements
are ``text()`` built at import (SQLAlchemy only binds parameters) and each function is one
call on a sync ``Connection``: the writer thread's (``Store.in_writer``) or a reader's
(``Store.in_reader``), so one request is one hop, whatever its size.

The SQL is standard (SQLite ≥ 3.35 and PostgreSQL): new ids come back with ``RETURNING``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, bindparam, text

from service.safetext import split_secret
from service.store.dialect import LINKS_CHANNEL, Dialect
from service.store.records import Event

FIND_SERVER = text("SELECT id FROM servers WHERE url = :url AND credential_key = :key")
INSERT_SERVER = text(
    "INSERT INTO servers (url, url_secret, credential_key, created_at, updated_at) "
    "VALUES (:url, :secret, :key, :now, :now) RETURNING id"
)
FIND_SUBSCRIPTIONS = text(
    "SELECT uri, id FROM subscriptions WHERE server_id = :server_id AND uri IN :uris"
).bindparams(bindparam("uris", expanding=True))
INSERT_SUBSCRIPTION = text(
    "INSERT INTO subscriptions (server_id, uri, created_at, updated_at, created_by) "
    "VALUES (:server_id, :uri, :now, :now, :by) RETURNING id"
)
CLAIM_FOR_PERSON = text(
    "UPDATE subscriptions SET created_by = 'person', updated_at = :now "
    "WHERE id IN :ids AND created_by <> 'person'"
).bindparams(bindparam("ids", expanding=True))
SUBSCRIPTION_ROWS = text(
    "SELECT s.id, s.server_id, v.url, s.uri, s.state, s.state_reason, s.state_code, "
    "s.content_hash, s.revision, s.last_read_at, s.created_at, s.created_by "
    "FROM subscriptions s JOIN servers v ON v.id = s.server_id WHERE s.id IN :ids"
).bindparams(bindparam("ids", expanding=True))

IN_CHUNK = 500
"""Values per ``IN (...)``: well under every backend's bound-parameter limit."""


def secret_credential_key(secret_url: str) -> str:
    """The ``credential_key`` of a server whose URL carries credentials: a digest of the full
    URL, so ``http://a:1@h/`` and ``http://a:2@h/`` (both shown as ``http://***@h/``) stay two
    servers with two links. Pure."""
    return "url:" + hashlib.sha256(secret_url.encode()).hexdigest()[:32]


def server_identity(url: str, credential_key: str) -> dict[str, Any]:
    """The ``servers`` columns that identify ``url``: the shown URL, the secret one (None when
    it has no credentials) and the credential key (``service.safetext.split_secret``)."""
    shown, secret = split_secret(url)
    if secret is not None and not credential_key:
        credential_key = secret_credential_key(secret)
    return {"url": shown, "secret": secret, "key": credential_key}


@dataclass(frozen=True, slots=True)
class Added:
    """One request's outcome: ``(subscription id, created)`` in the order of its URIs."""

    server_id: int
    ids: list[tuple[int, bool]]


Request = tuple[str, Sequence[str]] | tuple[str, Sequence[str], str]
"""``(url, uris)``, or ``(url, uris, created_by)`` (``person`` when not given)."""


def add_subscriptions(
    conn: Connection,
    dialect: Dialect,
    requests: Sequence[Request],
    credential_key: str,
    now: float,
) -> tuple[list[Added], list[Event], list[Any]]:
    """Every ``(url, uris[, created_by])`` of ``requests`` in this one transaction, idempotent
    on (server, URI): a URI already stored (or added earlier in the same call) is not new.
    It keeps the creator it has, except that a person who asks for what an agent made takes
    it over: the agent face may remove only what agents made, and a subscription a person
    asked for is not an agent's to remove.

    Returns each request's ids, the ``subscription.created`` events written, and the rows
    of every subscription named (``SUBSCRIPTION_ROWS`` columns)."""
    dialect.order_events(conn)  # it inserts events (PostgreSQL: commit-ordered ids)
    outcomes: list[Added] = []
    events: list[Event] = []
    servers: dict[str, int] = {}
    known: dict[tuple[int, str], int] = {}
    touched: set[int] = set()
    claimed: set[int] = set()
    for request in requests:
        url, uris = request[0], request[1]
        created_by = request[2] if len(request) > 2 else "person"
        server_id = servers.get(url)
        if server_id is None:
            params = {**server_identity(url, credential_key), "now": now}
            found = conn.execute(FIND_SERVER, params).scalar()
            if found is None:
                found = conn.execute(INSERT_SERVER, params).scalar_one()
            server_id = servers[url] = int(found)
        unknown = [uri for uri in dict.fromkeys(uris) if (server_id, uri) not in known]
        for start in range(0, len(unknown), IN_CHUNK):
            chunk = unknown[start : start + IN_CHUNK]
            for uri, sub_id in conn.execute(
                FIND_SUBSCRIPTIONS, {"server_id": server_id, "uris": chunk}
            ):
                known[(server_id, uri)] = int(sub_id)
        ids: list[tuple[int, bool]] = []
        for uri in uris:
            existing = known.get((server_id, uri))
            if existing is not None:
                ids.append((existing, False))
                if created_by == "person":
                    claimed.add(existing)
                continue
            new_id = int(
                conn.execute(
                    INSERT_SUBSCRIPTION,
                    {"server_id": server_id, "uri": uri, "now": now, "by": created_by},
                ).scalar_one()
            )
            known[(server_id, uri)] = new_id
            touched.add(server_id)
            ids.append((new_id, True))
            events.append(
                dialect.insert_event(
                    conn,
                    "subscription.created",
                    now,
                    subscription_id=new_id,
                    server_url=split_secret(url)[0],
                    uri=uri,
                )
            )
        outcomes.append(Added(server_id, ids))
    claims = sorted(claimed)
    for start in range(0, len(claims), IN_CHUNK):
        conn.execute(CLAIM_FOR_PERSON, {"ids": claims[start : start + IN_CHUNK], "now": now})
    for server_id in sorted(touched):  # the replica holding the link re-reads its set
        dialect.notify(conn, LINKS_CHANNEL, str(server_id))
    wanted = sorted({sub_id for outcome in outcomes for sub_id, _ in outcome.ids})
    rows: list[Any] = []
    for start in range(0, len(wanted), IN_CHUNK):
        rows.extend(conn.execute(SUBSCRIPTION_ROWS, {"ids": wanted[start : start + IN_CHUNK]}))
    return outcomes, events, rows


COUNT_TABLES = ("servers", "subscriptions", "revisions", "events")
STATE_COUNTS = text("SELECT state, count(*) FROM subscriptions GROUP BY state")
LAST_EVENT_ID = text("SELECT max(id) FROM events")
DELIVERY_COUNTS = text("SELECT state, count(*) FROM deliveries GROUP BY state")
TARGET_COUNTS = text(
    "SELECT count(*), coalesce(sum(CASE WHEN enabled != 0 THEN 1 ELSE 0 END), 0) "
    "FROM webhook_targets"
)
_COUNTS = {name: text(f"SELECT count(*) FROM {name}") for name in COUNT_TABLES}


def row_counts(conn: Connection) -> dict[str, int]:
    """Rows per table (``/metrics``' ``mcpsub_store_rows``)."""
    return {name: int(conn.execute(query).scalar() or 0) for name, query in _COUNTS.items()}


@dataclass(frozen=True, slots=True)
class StatusCounts:
    """Every figure ``GET /v1/status`` reads from the database, read in one go."""

    rows: dict[str, int]
    subscription_states: dict[str, int]
    last_event_id: int
    deliveries: dict[str, int]
    targets: int
    targets_enabled: int


def status_counts(conn: Connection) -> StatusCounts:
    targets, enabled = conn.execute(TARGET_COUNTS).one()
    return StatusCounts(
        rows=row_counts(conn),
        subscription_states={str(s): int(n) for s, n in conn.execute(STATE_COUNTS)},
        last_event_id=int(conn.execute(LAST_EVENT_ID).scalar() or 0),
        deliveries={str(s): int(n) for s, n in conn.execute(DELIVERY_COUNTS)},
        targets=int(targets or 0),
        targets_enabled=int(enabled or 0),
    )
