"""The use cases the front ends call, made once by the composition root
(:mod:`service.daemon.webapp`) from the daemon's parts and handed to every front end: the same
objects answer ``/v1``, ``/mcp`` and ``/ui``."""

from __future__ import annotations

from dataclasses import dataclass

from service.app.changes import Changes
from service.app.status import Status
from service.app.subscriptions import Subscriptions
from service.app.supervisor_protocol import SupervisorLike
from service.app.triggers import Triggers
from service.app.webhooks import Webhooks
from service.store.store import Store
from service.triggers.runner import TriggerRunner
from service.webhooks.dispatcher import Dispatcher


@dataclass(frozen=True)
class DaemonParts:
    """What the use cases work on besides the supervisor, handed over by the composition root
    (which made them and gave the same ones to the supervisor): the front ends reach the
    database, the webhook dispatcher and the trigger runner only through a use case."""

    store: Store
    dispatcher: Dispatcher
    runner: TriggerRunner


@dataclass(frozen=True)
class UseCases:
    subscriptions: Subscriptions
    changes: Changes
    webhooks: Webhooks
    triggers: Triggers
    status: Status

    @classmethod
    def build(
        cls,
        supervisor: SupervisorLike,
        parts: DaemonParts,
        *,
        agent_origins: tuple[str, ...] | None = None,
        agent_unsubscribe: str = "own",
    ) -> UseCases:
        store = parts.store
        triggers = Triggers(parts.runner)
        return cls(
            subscriptions=Subscriptions(
                supervisor,
                store,
                agent_origins=agent_origins,
                agent_unsubscribe=agent_unsubscribe,
            ),
            changes=Changes(store, supervisor.events),
            webhooks=Webhooks(parts.dispatcher),
            triggers=triggers,
            status=Status(store, triggers),
        )
