"""The link under the lab's two stream faults that used to fail it (the lab's own verdicts):
streams closed right after their ack (a re-listen storm: 18 listens in 3 s), and an ack that
honors nothing (a useless stream held open). A real daemon against a real lab; the relisten
policy's own table is tested without sockets in tests/unit/service/mcp/test_relisten.py."""

from __future__ import annotations

import time
from typing import Any

from tests.daemon.test_daemon import put, subscribe
from tests.daemon.test_era import wait_link
from tests.support.poll import until

SLOW = {"MCP_TEST_UPDATE_DELAY_SECONDS": "600"}
URI = "test://policy/doc"
# The production backoff (the test default is 0.05 s base, 0.5 s cap, too fast to show).
PRODUCTION_BACKOFF = {"MCPSUB_BACKOFF_BASE_S": "1", "MCPSUB_BACKOFF_CAP_S": "30"}


def _verdict(lab: Any, name: str) -> dict[str, Any]:
    clients = lab.http.get("/lab/report").json()["clients"]
    return next(c for c in clients if c["key"].startswith(name))


def test_streams_closed_right_after_the_ack_are_backed_off_not_stormed(
    lab_server_factory: Any, daemon_factory: Any
) -> None:
    lab = lab_server_factory(SLOW)
    put(lab, URI, "v1")
    lab.configure(closeAfterAckMs=10)
    d = daemon_factory(env=PRODUCTION_BACKOFF)
    subscribe(d, lab.url, URI)
    link = wait_link(
        d, lambda ln: ln["state"] == "backoff" and ln["streamsEndedYoung"] >= 2, timeout=30
    )
    assert link["lastErrorCode"] == "SUBSCRIPTION_DISCONNECTED"
    assert "keep ending young" in link["lastError"], link
    shown = d.ctl("status")
    assert "keep ending young" in shown.stdout, shown.stdout
    # The third listen waited at least the policy's floor after the second (1 s at n=2).
    opened = until(
        "a third listen",
        lambda: (t := [e["time"] for e in lab.log() if e["event"] == "listen.opened"])[2:] and t,
        30,
    )
    assert opened[2] - opened[1] >= 1.0, opened
    assert "relisten-loop" not in [m["id"] for m in _verdict(lab, "mcpsubd")["mistakes"]]


def test_an_ack_that_honors_nothing_is_final(lab_server_factory: Any, daemon_factory: Any) -> None:
    lab = lab_server_factory(SLOW)
    put(lab, URI, "v1")
    lab.configure(dishonorUris=[URI])
    d = daemon_factory()
    sub = subscribe(d, lab.url, URI)
    link = wait_link(d, lambda ln: ln["state"] == "not_honored")
    assert link["lastErrorCode"] == "SUBSCRIPTION_NOT_HONORED"
    assert link["streamOpen"] is False
    started = time.monotonic()
    wait = d.ctl("wait", "--uri", URI, "--json", "--timeout-ms", "20000")
    assert (wait.code, wait.json["errorCode"]) == (8, "SUBSCRIPTION_NOT_HONORED"), wait
    assert time.monotonic() - started < 15, "answered from the state, not on its deadline"
    shown = d.api("GET", f"/v1/subscriptions/{sub['id']}").json()
    assert "not_honored" in (shown.get("state"), shown.get("subscription", {}).get("state"))
    events = d.api("GET", "/v1/events", params={"after": 0}).json()["events"]
    assert any(e.get("type") == "subscription.state" for e in events), events
    # No stream held and no listen loop: one listen, and the lab holds no stream for it.
    assert lab.state()["streams"] == 0
    assert len([e for e in lab.log() if e["event"] == "listen.opened"]) == 1
    assert _verdict(lab, "mcpsubd")["mistakes"] == []
    # A recheck listens again (once), and a lifted fault is then honored.
    lab.configure(dishonorUris=[])
    assert d.ctl("resubscribe", "--url", lab.url).code == 0
    wait_link(d, lambda ln: ln["state"] == "open" and ln["honoredUris"] == [URI])


def test_a_server_that_offers_no_subscriptions_is_not_asked_to_listen(
    lab_server_factory: Any, daemon_factory: Any
) -> None:
    """Seed 003: ``resources.subscribe`` not true at discover means no listen is sent; the
    subscription says SUBSCRIPTION_NOT_HONORED as one the ack left out would."""
    lab = lab_server_factory(SLOW)
    put(lab, URI, "v1")
    lab.configure(advertiseSubscribe=False)
    d = daemon_factory()
    sub = subscribe(d, lab.url, URI)
    link = wait_link(d, lambda ln: ln["state"] == "not_honored")
    assert link["lastErrorCode"] == "SUBSCRIPTION_NOT_HONORED"
    assert "resources.subscribe" in link["lastError"], link
    assert link["streamOpen"] is False
    until(
        "the subscription's not_honored state",
        lambda: d.api("GET", f"/v1/subscriptions/{sub['id']}").json().get("state") == "not_honored",
        20,
    )
    wait = d.ctl("wait", "--uri", URI, "--json", "--timeout-ms", "20000")
    assert (wait.code, wait.json["errorCode"]) == (8, "SUBSCRIPTION_NOT_HONORED"), wait
    assert [e for e in lab.log() if e["event"].startswith("listen")] == []
    # Offered again: a resubscribe discovers again and listens.
    lab.configure(advertiseSubscribe=True)
    assert d.ctl("resubscribe", "--url", lab.url).code == 0
    wait_link(d, lambda ln: ln["state"] == "open" and ln["honoredUris"] == [URI])
