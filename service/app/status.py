"""What the daemon says about itself, done once for every front end: the stored figures
(``/v1/status``, ``/v1/overview``, ``/metrics``), the storage's health (``/readyz``) and the
last hour's activity (the console's overview).

The figures come in one reader hop, and from memory when the database does not answer within
:data:`STATUS_DEADLINE_S` (a frozen PostgreSQL): the storage then says failing, and the
history queries are left out (:meth:`Status.recent` is for fresh counts only).
"""

from __future__ import annotations

import time
from typing import Any, Final

from service.app import queries
from service.app.triggers import Triggers
from service.store.catalog import StatusCounts
from service.store.health import StorageHealth
from service.store.remembered import Answer
from service.store.store import Store

STATUS_DEADLINE_S: Final = 5.0
"""How long status and metrics wait for the database's counts before answering from memory."""
CHART_MINUTES: Final = 60
"""Minutes of revisions per minute in the overview's chart."""


class Status:
    def __init__(self, store: Store, triggers: Triggers) -> None:
        self.store = store
        self.triggers = triggers

    async def counts(self) -> Answer[StatusCounts]:
        """The stored figures, fresh or remembered (``fresh``, ``at``)."""
        return await self.store.status_counts_within(STATUS_DEADLINE_S)

    @property
    def storage(self) -> StorageHealth:
        """Whether the database takes writes (the daemon-level storage condition)."""
        return self.store.health

    def storage_json(self) -> dict[str, Any]:
        """The storage's health with the database's backend (``sqlite``, ``postgresql``)."""
        return {**self.store.health.to_json(), "backend": self.store.engine.dialect.name}

    async def recent(self) -> dict[str, Any]:
        """The last hour's revisions per minute, the replicas with the links each holds, and
        the triggers with their runs by state."""
        return {
            "revisionsPerMinute": await queries.revisions_per_minute(
                self.store, time.time(), CHART_MINUTES
            ),
            "replicas": await queries.lease_view(self.store),
            "triggers": await self.triggers.summary(),
        }
