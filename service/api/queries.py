"""Read-only look-ups the API needs and :class:`Store` does not (yet) offer.

Kept here, in SQLAlchemy Core against the same schema, so the store's interface stays
narrow; candidates to move into ``Store`` if another caller needs them.
"""

from __future__ import annotations

from sqlalchemy import select

from service.store import schema
from service.store.store import Store


async def event_id_for_revision(store: Store, subscription_id: int, revision_id: int) -> int | None:
    """Id of the ``resource.updated`` event that announced revision ``revision_id``."""
    events = schema.events
    query = (
        select(events.c.id)
        .where(
            events.c.subscription_id == subscription_id,
            events.c.type == "resource.updated",
            events.c.revision_id == revision_id,
        )
        .order_by(events.c.id.desc())
        .limit(1)
    )
    async with store.engine.connect() as conn:
        value = await conn.scalar(query)
    return int(value) if value is not None else None
