"""No pooled PostgreSQL connection is handed out while it is still inside a transaction.

A task cancelled while asyncpg sends the ``BEGIN`` that SQLAlchemy's adapter starts
implicitly (a link stopped in the middle of a database call, a status read given up after
its wait) leaves the asyncpg connection with its top transaction recorded (``_top_xact``)
and the server inside that transaction, while SQLAlchemy's adapter records none (it keeps
a transaction only once ``BEGIN`` returned, and catches ``Exception``, not the
cancellation). The pool's reset then has nothing to roll back, and the connection goes
back to the pool dirty. Its next user's ``BEGIN`` becomes ``SAVEPOINT`` inside the hidden
transaction, and its "commit" only releases the savepoint: everything it writes is
invisible to the other replicas, holds its row locks, and is rolled back when the
connection finally closes. Seen as a replica that took a lease (it logged "lease taken
over") whose take never committed, and the replicas' shares never evened out again.

SQLAlchemy's documented remedy for a connection that must not be used is a ``checkout``
listener that raises :class:`~sqlalchemy.exc.DisconnectionError`: the pool then discards
the connection (closing it, which ends the hidden transaction on the server) and hands out
another. The check is two attribute reads per checkout.
"""

from __future__ import annotations

from typing import Any

import structlog
from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DisconnectionError

log = structlog.get_logger("mcpsub.store")


def left_in_a_transaction(dbapi_connection: Any) -> bool:
    """Whether an asyncpg connection (under SQLAlchemy's adapter) is inside a transaction
    that nobody holding it knows of."""
    raw = getattr(dbapi_connection, "_connection", None)
    if raw is None:  # not asyncpg
        return False
    return getattr(raw, "_top_xact", None) is not None or bool(raw.is_in_transaction())


def install(engine: Engine) -> None:
    """Refuse dirty connections at checkout on ``engine`` (the async engine's sync_engine)."""

    def on_checkout(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
        if left_in_a_transaction(dbapi_connection):
            log.warning(
                "a pooled database connection was left inside a transaction by a cancelled "
                "call; closing it and using another"
            )
            raise DisconnectionError("connection left inside a transaction")

    event.listen(engine, "checkout", on_checkout)
