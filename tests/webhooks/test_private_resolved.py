"""The private-target rule at delivery time, after DNS: a webhook host *name* that resolves
to a link-local or metadata address is refused on the address actually connected to.

The daemon runs with the test resolver shim (``tests/support/shims``): ``MCPSUB_TEST_RESOLVE``
answers for the names below, locally, and any connect to an address that is not loopback
fails with ENETUNREACH before a packet leaves, so a daemon that forgot the check fails these
tests (a retried network error instead of ``PRIVATE_TARGET``) without reaching the network.
"""

from __future__ import annotations

from typing import Any

from tests.support.lab import LabServer
from tests.webhooks.helpers import FAST, add_target, deliveries, put, subscribe, wait_until
from tests.webhooks.receiver import Receiver

RESOLVE = {
    "MCPSUB_TEST_RESOLVE": "evil.test=169.254.10.10,meta.test=169.254.169.254,"
    "evil6.test=fe80::1,good.test=127.0.0.1"
}


def _settled(d: Any, target_id: int) -> dict[str, Any]:
    """The target's one delivery once it is dead (or delivered)."""

    def check() -> dict[str, Any] | None:
        found = deliveries(d, target=target_id)
        done = [x for x in found if x["state"] in ("dead", "delivered")]
        return done[0] if done else None

    result: dict[str, Any] = wait_until(check, 20, f"delivery of target {target_id} settles")
    return result


def test_a_name_resolving_to_a_private_address_is_refused_at_delivery(
    shared_lab: LabServer, uri: str, daemon_factory: Any, receiver: Receiver
) -> None:
    port = receiver.port
    put(shared_lab, uri, "v1")
    d = daemon_factory(env={**FAST, **RESOLVE})
    # Registration judges names only when they are well-known metadata names: these pass.
    refused = {
        "lean, link-local": add_target(d, f"http://evil.test:{port}/a"),
        "lean, metadata": add_target(d, f"http://meta.test:{port}/b"),
        "lean, IPv6 link-local": add_target(d, f"http://evil6.test:{port}/c"),
        "httpx (https), link-local": add_target(d, f"https://evil.test:{port}/d"),
    }
    good = add_target(d, f"http://good.test:{port}/good")  # a name that resolves to loopback
    receiver.expect_secret("/good", good["secret"])
    allowed = add_target(d, f"http://evil.test:{port}/allowed", allowPrivateTarget=True)
    assert allowed["allowPrivateTarget"] is True and good["allowPrivateTarget"] is False
    subscribe(d, shared_lab.url, uri)

    assert _settled(d, good["id"])["state"] == "delivered"
    assert [r.path for r in receiver.received()] == ["/good"]
    for what, target in refused.items():
        delivery = _settled(d, target["id"])
        # Permanent: dead after one attempt, not retried along the schedule.
        assert delivery["state"] == "dead" and delivery["attempts"] == 1, (what, delivery)
        error = delivery["lastError"]
        assert error.startswith("PRIVATE_TARGET: evil") or error.startswith(
            "PRIVATE_TARGET: meta.test"
        ), (what, error)
        assert "resolved to a refused address" in error and "--allow-private-target" in error
    assert "cloud metadata address" in _settled(d, refused["lean, metadata"]["id"])["lastError"]
    assert (
        "fe80::1 is a link-local"
        in _settled(d, refused["lean, IPv6 link-local"]["id"])["lastError"]
    )

    # Registered with allowPrivateTarget: no refusal; the connection is attempted (the shim
    # stops it, as a network would) and retried like any network error.
    def retried() -> dict[str, Any] | None:
        found = deliveries(d, target=allowed["id"])
        return found[0] if found and found[0]["attempts"] >= 2 else None

    delivery = wait_until(retried, 20, "the allowed target's delivery is retried")
    assert "PRIVATE_TARGET" not in (delivery["lastError"] or ""), delivery
    assert "off this machine" in delivery["lastError"], delivery

    # The test ping takes the same path.
    ping = d.ctl("webhook", "test", str(refused["lean, link-local"]["id"]))
    assert ping.code == 5 and "PRIVATE_TARGET" in ping.stdout + ping.stderr, ping
