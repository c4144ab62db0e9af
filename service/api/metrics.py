"""Prometheus exposition for ``GET /metrics``: a per-app registry filled at scrape time.

The supervisor's :meth:`metrics_snapshot` is the single source: keys ending in ``_total``
become counters, everything else gauges, all prefixed ``mcpsub_``. Store row counts and the
last event id are gathered (async) by the route just before the scrape and handed in.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from typing import Protocol

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

PREFIX = "mcpsub_"
_UNSAFE = re.compile(r"[^a-zA-Z0-9_]")


def metric_name(key: str) -> str:
    name = _UNSAFE.sub("_", key)
    return name if name.startswith(PREFIX) else PREFIX + name


class SnapshotCollector(Collector):
    def __init__(
        self,
        snapshot: Callable[[], dict[str, float]],
        ready: Callable[[], bool],
        started_at: Callable[[], float],
        histograms: Callable[[], dict[str, Histogram]] | None = None,
    ) -> None:
        self._snapshot = snapshot
        self._histograms = histograms
        self._ready = ready
        self._started_at = started_at
        self.store_counts: dict[str, int] = {}
        self.last_event_id = 0

    def collect(self) -> Iterable[Metric]:
        for key, value in sorted(self._snapshot().items()):
            name = metric_name(key)
            if name.endswith("_total"):
                yield CounterMetricFamily(name[: -len("_total")], key, value=float(value))
            else:
                yield GaugeMetricFamily(name, key, value=float(value))
        ready = float(self._ready())
        yield GaugeMetricFamily(PREFIX + "ready", "1 once links are started", value=ready)
        yield GaugeMetricFamily(
            PREFIX + "uptime_seconds",
            "seconds since the daemon started",
            value=uptime(self._started_at()),
        )
        rows = GaugeMetricFamily(PREFIX + "store_rows", "rows per table", labels=["table"])
        for table, count in sorted(self.store_counts.items()):
            rows.add_metric([table], float(count))
        yield rows
        yield GaugeMetricFamily(
            PREFIX + "last_event_id", "id of the newest event", value=float(self.last_event_id)
        )
        for key, histogram in sorted((self._histograms or dict)().items()):
            cumulative = [(f"{bound:g}", float(n)) for bound, n in zip(histogram.buckets,
                                                                     histogram.counts, strict=True)]  # fmt: skip
            yield HistogramMetricFamily(
                metric_name(key),
                key,
                buckets=[*cumulative, ("+Inf", float(histogram.total))],
                sum_value=histogram.sum_s,
            )


class Histogram(Protocol):
    """Cumulative bucket counts (seconds), as ``service.triggers.runner.Durations`` keeps."""

    @property
    def buckets(self) -> tuple[float, ...]: ...
    @property
    def counts(self) -> list[int]: ...
    @property
    def total(self) -> int: ...
    @property
    def sum_s(self) -> float: ...


def uptime(started_at: float) -> float:
    # Accept a wall-clock or a monotonic start time: monotonic clocks count from boot and
    # stay far below 1e9 s, wall-clock timestamps far above.
    now = time.time() if started_at > 1e9 else time.monotonic()
    return max(0.0, now - started_at)


class Metrics:
    def __init__(self, collector: SnapshotCollector) -> None:
        self.collector = collector
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(collector)

    def render(self, store_counts: dict[str, int], last_event_id: int) -> bytes:
        self.collector.store_counts = store_counts
        self.collector.last_event_id = last_event_id
        return generate_latest(self.registry)
