"""Every type the daemon writes to its event log: the one list the API, the CLI, completion
and the docs use.

``GET /v1/events?type=…`` and ``/v1/events/stream`` refuse any other name with 400
``INVALID_PARAMETER`` (a misspelt filter would otherwise match nothing, silently);
``mcpsubctl events --type`` offers and checks the same names; ``docs/api.md#events`` lists
them and ``tests/unit/service/test_eventtypes.py`` keeps the three and the writers in step.
"""

from __future__ import annotations

SUBSCRIPTION_CREATED = "subscription.created"
SUBSCRIPTION_DELETED = "subscription.deleted"
SUBSCRIPTION_STATE = "subscription.state"
RESOURCE_UPDATED = "resource.updated"
DAEMON_STORAGE = "daemon.storage"
WEBHOOK_DISABLED = "webhook.disabled"
DELIVERY_DEAD = "delivery.dead"

EVENT_TYPES: tuple[str, ...] = (
    SUBSCRIPTION_CREATED,
    SUBSCRIPTION_DELETED,
    SUBSCRIPTION_STATE,
    RESOURCE_UPDATED,
    DAEMON_STORAGE,
    WEBHOOK_DISABLED,
    DELIVERY_DEAD,
)


def unknown_types(names: list[str]) -> list[str]:
    """The names in ``names`` that are not event types (in their order)."""
    return [name for name in names if name not in EVENT_TYPES]
