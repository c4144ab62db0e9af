"""service.api.metrics: /metrics' Prometheus text from the daemon's snapshot."""

from __future__ import annotations

import time

from prometheus_client.parser import text_string_to_metric_families

from service.api.metrics import Metrics, SnapshotCollector, metric_name, uptime


def test_metric_names_are_prefixed_once_and_made_safe() -> None:
    assert metric_name("links") == "mcpsub_links"
    assert metric_name("mcpsub_links") == "mcpsub_links"
    assert metric_name("webhook.delivered-total") == "mcpsub_webhook_delivered_total"


def test_uptime_takes_a_wall_or_a_monotonic_start() -> None:
    assert 9.0 <= uptime(time.time() - 10) <= 60.0
    assert 9.0 <= uptime(time.monotonic() - 10) <= 60.0
    assert uptime(time.time() + 100) == 0.0  # never negative


def test_render_counters_gauges_rows_and_last_event() -> None:
    snapshot = {"reads_total": 3.0, "links": 2.0, "webhook_dead_total": 1.0}
    metrics = Metrics(SnapshotCollector(lambda: snapshot, lambda: True, time.monotonic))
    body = metrics.render({"events": 5, "servers": 1}, 42).decode()
    families = {f.name: f for f in text_string_to_metric_families(body)}
    assert families["mcpsub_reads"].type == "counter"
    assert families["mcpsub_reads"].samples[0].value == 3.0
    assert families["mcpsub_webhook_dead"].type == "counter"
    assert families["mcpsub_links"].type == "gauge"
    assert families["mcpsub_links"].samples[0].value == 2.0
    assert families["mcpsub_ready"].samples[0].value == 1.0
    assert families["mcpsub_last_event_id"].samples[0].value == 42.0
    rows = {s.labels["table"]: s.value for s in families["mcpsub_store_rows"].samples}
    assert rows == {"events": 5.0, "servers": 1.0}
    assert families["mcpsub_uptime_seconds"].samples[0].value >= 0.0


def test_each_scrape_reads_the_snapshot_again() -> None:
    snapshot = {"links": 1.0}
    ready = [False]
    metrics = Metrics(SnapshotCollector(lambda: snapshot, lambda: ready[0], time.monotonic))
    assert "mcpsub_ready 0.0" in metrics.render({}, 0).decode()
    snapshot["links"] = 5.0
    ready[0] = True
    body = metrics.render({}, 0).decode()
    assert "mcpsub_links 5.0" in body and "mcpsub_ready 1.0" in body
