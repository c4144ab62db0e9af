"""The revision write's transaction, for the writer thread: the reads of a batch in order,
each through its dialect's revision write, with the sinks' rows (the webhook outbox).

``Store.record_read`` runs for every update of every watched resource, so its statements are
made once at import (in :mod:`service.store.dialect`) and run on the driver itself
(:mod:`service.store.driver`: sqlite3's statement cache, asyncpg's prepared statements), in
the transaction SQLAlchemy began. New ids come back with ``RETURNING`` (asyncpg has no
``lastrowid``); the fence is the ``generation`` condition inside the UPDATE.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection

from service.store.dialect import Dialect
from service.store.records import Event, Revision


@dataclass(slots=True)  # not frozen: a frozen init costs 5x, once per read
class Read:
    """One read to record: the arguments of :func:`record_read`, computed before the hop."""

    subscription_id: int
    server_id: int
    generation: int
    contents: list[dict[str, Any]]
    contents_json: str
    text: str | None
    digest: str
    read_at: float
    trigger: str | None = None
    activate: bool = False
    """Mark the subscription ``active`` in the same transaction (its first stored read, or
    the first after failures): see :func:`service.store.linkstate.record_reads`."""


def record_reads(
    conn: Connection,
    dialect: Dialect,
    reads: Sequence[Read],
    sinks: Sequence[Callable[[Connection, Event], object]] = (),
) -> list[tuple[Revision, Event] | None]:
    """Group commit: several reads in one transaction (``Store.record_read`` batches them).

    Each read runs exactly the statements :func:`record_read` runs for it, in the order
    given, so event ids follow that order and every row is fenced on its own: a read that is
    fenced out (or unchanged) only touches its row and yields None, leaving the others alone.
    On PostgreSQL the first read's statement takes the event-order lock for the whole batch
    (it is held to the commit; taking it again is a no-op)."""
    outcomes: list[tuple[Revision, Event] | None] = []
    for r in reads:
        outcome = record_read(
            conn, dialect, r.subscription_id, r.server_id, r.generation, r.contents, r.contents_json,
            r.text, r.digest, r.read_at, sinks, r.trigger,
        )  # fmt: skip
        outcomes.append(outcome)
    return outcomes


def record_read(
    conn: Connection,
    dialect: Dialect,
    subscription_id: int,
    server_id: int,
    generation: int,
    contents: list[dict[str, Any]],
    contents_json: str,
    text_value: str | None,
    digest: str,
    read_at: float,
    sinks: Sequence[Callable[[Connection, Event], object]] = (),
    trigger: str | None = None,
) -> tuple[Revision, Event] | None:
    """The fenced revision write; ``sinks`` add their rows (the webhook outbox) to the same
    transaction, so the revision, its event and its deliveries commit together."""
    params = {
        "digest": digest,
        "generation": generation,
        "read_at": read_at,
        "subscription_id": subscription_id,
        "server_id": server_id,
    }
    data = {"contentHash": digest, "generation": generation} | (
        {"trigger": trigger} if trigger else {}
    )
    written = dialect.write_revision(conn, params, contents_json, text_value, data)
    if written is None:
        dialect.touch(conn, params)
        return None
    revision_id, revision_number, event = written
    for sink in sinks:
        sink(conn, event)
    revision = Revision(
        id=revision_id,
        subscription_id=subscription_id,
        revision=revision_number,
        content_hash=digest,
        contents=contents,
        text=text_value,
        generation=generation,
        read_at=read_at,
    )
    return revision, event
