"""The values ``/metrics`` shows, gathered from the supervisor and what it runs (links,
event hub, lease keeper, webhook dispatcher, the gauges the daemon wires in)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from service.daemon.linkstatus import LinkState

if TYPE_CHECKING:
    from service.daemon.supervisor import Supervisor


def metrics_snapshot(supervisor: Supervisor) -> dict[str, float]:
    links = supervisor.links
    streams_open = sum(1 for link in links.values() if link.state is LinkState.OPEN)
    snapshot: dict[str, float] = {
        "streams_open": float(streams_open),
        "links": float(len(links)),
        "reconnects_total": 0.0,
        "reads_total": 0.0,
        "revisions_total": 0.0,
        "errors_total": 0.0,
    }
    snapshot.update({k: float(v) for k, v in supervisor.stats.items()})
    snapshot["event_ring_hits_total"] = float(supervisor.events.ring_hits)
    snapshot["event_ring_misses_total"] = float(supervisor.events.ring_misses)
    snapshot.update(supervisor.leases.stats)
    snapshot.update({f"webhook_{k}": float(v) for k, v in supervisor.webhooks.stats.items()})
    snapshot.update({k: float(read()) for k, read in supervisor.gauges.items()})
    return snapshot
