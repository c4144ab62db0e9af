"""service.daemon.metrics.metrics_snapshot: /metrics' values from what the daemon runs."""

from __future__ import annotations

from service.daemon.linkstatus import LinkState
from service.daemon.metrics import metrics_snapshot


def test_links_and_open_streams_are_counted_from_states() -> None:
    states = iter([LinkState.OPEN, LinkState.BACKOFF, LinkState.OPEN, LinkState.IDLE])
    snapshot = metrics_snapshot(states, {}, {}, {}, {}, {})
    assert snapshot == {
        "streams_open": 2.0,
        "links": 4.0,
        "reconnects_total": 0.0,
        "reads_total": 0.0,
        "revisions_total": 0.0,
        "errors_total": 0.0,
    }


def test_sources_are_merged_webhooks_prefixed_and_gauges_read_now() -> None:
    reads = []

    def gauge() -> float:
        reads.append(1)
        return 7

    snapshot = metrics_snapshot(
        [],
        {"reads_total": 3, "revisions_total": 2},
        {"events_ring": 5},
        {"leases_held": 1.0},
        {"delivered_total": 9},
        {"rss_bytes": gauge},
    )
    assert snapshot["reads_total"] == 3.0 and snapshot["revisions_total"] == 2.0
    assert snapshot["events_ring"] == 5.0
    assert snapshot["leases_held"] == 1.0
    assert snapshot["webhook_delivered_total"] == 9.0 and "delivered_total" not in snapshot
    assert snapshot["rss_bytes"] == 7.0 and reads == [1]
    assert all(isinstance(v, float) for v in snapshot.values())
