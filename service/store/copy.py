"""``mcpsubd migrate-db --to URL``: move a SQLite state into PostgreSQL (moving up).

Copies every durable table (servers, subscriptions, revisions, events, webhook targets with
their secrets, deliveries) with their ids, so event cursors, ``webhook-id``\\ s and
``Last-Event-ID``\\ s held by clients stay valid. Leases are not copied (the replicas claim the
links afresh) and neither are replica rows. The whole copy is one transaction on the target:
it lands completely or not at all. It refuses a target that holds any row, and it verifies
the row count of every table before it commits.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Table, func, insert, select
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine
from sqlalchemy.pool import NullPool

from service.store import schema
from service.store.database import parse
from service.store.dialect import dialect_for

TABLES: tuple[Table, ...] = (
    schema.servers,
    schema.subscriptions,
    schema.revisions,
    schema.events,
    schema.webhook_targets,
    schema.deliveries,
    schema.delivery_attempts,
    schema.triggers,
    schema.trigger_runs,
    schema.trigger_attempts,
)
"""In foreign-key order."""
RESET_ON_COPY = {"lease_owner": None, "lease_until": None, "lease_successor": None}
BATCH = 1000


class CopyError(Exception):
    """The copy cannot be made (the message says why); nothing was written."""


@dataclass(frozen=True)
class CopyReport:
    counts: dict[str, int]


async def _count(conn: AsyncConnection, table: Table) -> int:
    return int(await conn.scalar(select(func.count()).select_from(table)) or 0)


async def copy_database(
    source_url: str, target_url: str, progress: Callable[[str, int], None] | None = None
) -> CopyReport:
    """Copy ``source_url`` (migrated) into the empty, migrated ``target_url``."""
    source = create_async_engine(parse(source_url).async_url, poolclass=NullPool)
    target_database = parse(target_url)
    dialect = dialect_for(target_database)
    target = create_async_engine(target_database.async_url, poolclass=NullPool)
    try:
        async with source.connect() as src, target.begin() as dst:
            busy = {t.name: n for t in (*TABLES, schema.replicas) if (n := await _count(dst, t))}
            if busy:
                listed = ", ".join(f"{name} ({n})" for name, n in sorted(busy.items()))
                raise CopyError(f"the target is not empty: {listed}")
            counts: dict[str, int] = {}
            for table in TABLES:
                copied = 0
                result = await src.stream(select(table).order_by(table.c.id))
                async for chunk in result.partitions(BATCH):
                    rows: list[dict[str, Any]] = [
                        {**row._asdict(), **_resets(table)} for row in chunk
                    ]
                    await dst.execute(insert(table), rows)
                    copied += len(rows)
                counts[table.name] = copied
                if progress is not None:
                    progress(table.name, copied)
            await dst.run_sync(
                lambda conn: dialect.after_copy(conn, [table.name for table in TABLES])
            )
            for table in TABLES:
                source_n, target_n = await _count(src, table), await _count(dst, table)
                if source_n != counts[table.name] or target_n != counts[table.name]:
                    raise CopyError(
                        f"{table.name}: {source_n} rows in the source, {target_n} copied; "
                        "nothing was committed"
                    )
        return CopyReport(counts)
    finally:
        await source.dispose()
        await target.dispose()


def _resets(table: Table) -> dict[str, Any]:
    return {k: v for k, v in RESET_ON_COPY.items() if k in table.c}
