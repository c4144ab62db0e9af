"""What the composition root (:class:`service.daemon.run.DaemonRun`) hands the supervisor: the
webhook dispatcher, the lease keeper and the trigger runner, under this replica's id.

The supervisor supervises links and builds nothing else; the lease keeper
needs the supervisor as its :class:`LinkOwner`, so it is handed over as a function of that
owner, called once by the supervisor's constructor.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import NamedTuple

from service.daemon.config import Settings
from service.daemon.leases import LeaseKeeper, LinkOwner, default_replica_id
from service.store import Store
from service.triggers.runner import TriggerRunner
from service.webhooks.dispatcher import Dispatcher


class SupervisorCollaborators(NamedTuple):
    """What the supervisor is given, in its constructor's order:
    ``Supervisor(store, settings, *supervisor_collaborators(store, settings))``."""

    webhooks: Dispatcher
    leases: Callable[[LinkOwner], LeaseKeeper]
    triggers: TriggerRunner


def supervisor_collaborators(store: Store, settings: Settings) -> SupervisorCollaborators:
    """The dispatcher, the trigger runner and the lease keeper's maker (given the owner that
    runs the links it leases), under the replica id all three use (``settings.replica_id``,
    else the one kept in the state dir)."""
    replica_id = settings.replica_id or default_replica_id(settings.state_dir)
    webhooks = Dispatcher(store, settings.webhook_settings())
    webhooks.replica_id = replica_id
    # A trigger's program sees an allowlist of this environment (service.triggers).
    triggers = TriggerRunner(store, settings.trigger_settings(), os.environ)
    triggers.replica_id = replica_id

    def leases(owner: LinkOwner) -> LeaseKeeper:
        return LeaseKeeper(store, owner, settings.lease_ttl_s, replica_id)

    return SupervisorCollaborators(webhooks, leases, triggers)
