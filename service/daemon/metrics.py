"""The values ``/metrics`` shows, gathered from what the supervisor runs (links' states, its
counters, the event hub's ring, the lease keeper, the webhook dispatcher, the gauges the
daemon wires in). Given those values, not the supervisor: nothing here imports it."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from service.daemon.linkstatus import LinkState


def metrics_snapshot(
    states: Iterable[LinkState],
    counters: Mapping[str, float],
    events: Mapping[str, float],
    leases: Mapping[str, float],
    webhooks: Mapping[str, float],
    gauges: Mapping[str, Callable[[], float]],
) -> dict[str, float]:
    """``/metrics``' values: the links' states (``states``, one per link), the supervisor's
    ``counters``, the event ring's ``events``, the lease keeper's and the dispatcher's stats
    (``webhook_`` prefixed) and each gauge read now."""
    states = list(states)
    snapshot: dict[str, float] = {
        "streams_open": float(sum(1 for state in states if state is LinkState.OPEN)),
        "links": float(len(states)),
        "reconnects_total": 0.0,
        "reads_total": 0.0,
        "revisions_total": 0.0,
        "errors_total": 0.0,
    }
    snapshot.update({k: float(v) for k, v in counters.items()})
    snapshot.update({k: float(v) for k, v in events.items()})
    snapshot.update(leases)
    snapshot.update({f"webhook_{k}": float(v) for k, v in webhooks.items()})
    snapshot.update({k: float(read()) for k, read in gauges.items()})
    return snapshot
