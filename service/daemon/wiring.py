"""The supervisor's side services, made in one place: the webhook dispatcher and the lease
keeper, both under this replica's id."""

from __future__ import annotations

from service.daemon.config import Settings
from service.daemon.leases import LeaseKeeper, LinkOwner, default_replica_id
from service.store import Store
from service.webhooks.dispatcher import Dispatcher


def side_services(
    store: Store, settings: Settings, owner: LinkOwner
) -> tuple[Dispatcher, LeaseKeeper, str]:
    """The dispatcher, the lease keeper (asking ``owner`` to run the links it leases) and the
    replica id both use (``settings.replica_id``, else the one kept in the state dir)."""
    webhooks = Dispatcher(store, settings.webhook_settings())
    replica_id = settings.replica_id or default_replica_id(settings.state_dir)
    leases = LeaseKeeper(store, owner, settings.lease_ttl_s, replica_id)
    webhooks.replica_id = replica_id
    return webhooks, leases, replica_id
