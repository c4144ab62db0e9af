"""Floods and flaky reads against a real mcpsubd, next to an honest subscription.

A notification flood must cost bounded memory (coalesced per URI, counted when for URIs
nobody subscribed, logged once per interval), a keep-alive flood must cost nothing, and a
server error on a re-read must be retried instead of losing the update.
"""

from __future__ import annotations

import json

from tests.hostile.helpers import (
    daemon_peak_mib,
    metric,
    put,
    subscribe,
    subscription,
    text_of,
    wait_text,
)
from tests.support.poll import until

FLOOD = 60_000
PEAK_BOUND_MIB = 150
FAST_STREAMS = {"MCPSUB_STREAM_MAX_FRAMES_PER_S": "50000"}
"""Pacing stays on, at a rate that keeps these tests short (the bench uses the default)."""


def test_notification_flood_is_bounded_and_the_honest_link_keeps_working(
    lab_server_factory, daemon_factory, hostile_factory
) -> None:
    hostile = hostile_factory({"HOSTILE_FLOOD": str(FLOOD)})
    lab = lab_server_factory()
    put(lab, "test://honest", "h0")
    d = daemon_factory(env=FAST_STREAMS)
    subscribe(d, lab.url, "test://honest")
    wait_text(d, "test://honest", "h0")
    subscribe(d, hostile.url("flood"), "hostile://flood/doc")
    n = 0
    while text_of(d, "hostile://flood/doc") != "final":
        n += 1
        put(lab, "test://honest", f"h{n}")
        wait_text(d, "test://honest", f"h{n}", timeout=10)
        assert n < 500, "the flood never finished"
    assert hostile.stats().get("flood.done", 0) >= 1
    # "final" may be read before the daemon reached the end of the flood (the server's
    # writes finish into socket buffers): wait for the counter to see every one.
    until(
        "every unsubscribed update counted",
        lambda: metric(d, "mcpsub_notifications_unsubscribed_total") >= FLOOD // 2,
    )
    assert metric(d, "mcpsub_notifications_coalesced_total") > 0
    reads = hostile.stats().get("flood.served", 0)
    assert reads < FLOOD // 100, f"{reads} reads for {FLOOD // 2} coalescible updates"
    ignored = [line for line in d.lines if "unsubscribed URIs ignored" in line]
    assert 1 <= len(ignored) <= 2, "logged once per interval, not once per notification"
    assert json.loads(ignored[0])["count"] >= 1
    assert daemon_peak_mib(d) < PEAK_BOUND_MIB, daemon_peak_mib(d)


def test_keepalive_flood_costs_nothing(lab_server_factory, daemon_factory, hostile_factory) -> None:
    hostile = hostile_factory({"HOSTILE_FLOOD": str(FLOOD * 2)})
    lab = lab_server_factory()
    put(lab, "test://honest", "h0")
    d = daemon_factory(env=FAST_STREAMS)
    subscribe(d, lab.url, "test://honest")
    subscribe(d, hostile.url("keepalive-flood"), "hostile://keepalive-flood/doc")
    put(lab, "test://honest", "h1")
    wait_text(d, "test://honest", "h1")
    wait_text(d, "hostile://keepalive-flood/doc", "final", timeout=60)
    assert daemon_peak_mib(d) < PEAK_BOUND_MIB, daemon_peak_mib(d)


def test_server_errors_on_rereads_are_retried_not_lost(daemon_factory, hostile_factory) -> None:
    hostile = hostile_factory({"HOSTILE_FLAKY": "2"})
    d = daemon_factory()
    sub = subscribe(d, hostile.url("flaky"), "hostile://flaky/doc")
    wait_text(d, "hostile://flaky/doc", "initial")
    hostile.set("flaky", "v2")
    wait_text(d, "hostile://flaky/doc", "v2")
    until("active", lambda: subscription(d, sub["id"])["state"] == "active")
    assert hostile.stats()["flaky.failed"] == 4, "each new text failed twice before it was read"


def test_unknown_uri_is_resource_not_found(daemon_factory, hostile_factory) -> None:
    hostile = hostile_factory()
    d = daemon_factory()
    sub = subscribe(d, hostile.url("notfound"), "hostile://notfound/doc")
    shown = until(
        "error state",
        lambda: (s := subscription(d, sub["id"]))["state"] == "error" and s,
    )
    assert shown["stateReason"].startswith("RESOURCE_NOT_FOUND: ")
