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
from tests.support.poll import until
from tests.webhooks.helpers import FAST, add_target, deliveries, put, subscribe
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

    result: dict[str, Any] = until(f"delivery of target {target_id} settles", check, 20)
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

    delivery = until("the allowed target's delivery is retried", retried, 20)
    assert "PRIVATE_TARGET" not in (delivery["lastError"] or ""), delivery
    assert "off this machine" in delivery["lastError"], delivery

    # The test ping takes the same path.
    ping = d.ctl("webhook", "test", str(refused["lean, link-local"]["id"]))
    assert ping.code == 5 and "PRIVATE_TARGET" in ping.stdout + ping.stderr, ping


EMBEDDING = {
    "IPv4-compatible": "::a9fe:a9fe",
    "NAT64": "64:ff9b::a9fe:a9fe",
    "NAT64 local-use /96": "64:ff9b:1::a9fe:a9fe",
    "NAT64 local-use /48": "64:ff9b:1:a9fe:a9:fe00::",
    "6to4": "2002:a9fe:a9fe::",
    "SIIT (RFC 6145)": "::ffff:0:a9fe:a9fe",
    "Teredo": "2001:0:4136:e378:8000:63bf:5601:5601",  # client 169.254.169.254, obfuscated
}


def test_ipv6_forms_embedding_a_metadata_address_are_refused_at_creation_and_at_connect(
    shared_lab: LabServer, uri: str, daemon_factory: Any, receiver: Receiver
) -> None:
    """The IPv6 forms that carry 169.254.169.254 to an IPv4 host are private targets too.
    Refused as literals (400) and as what a name
    resolves to (dead after one attempt, no connect: the shim would answer ENETUNREACH)."""
    names = {f"e{n}.test": address for n, address in enumerate(EMBEDDING.values())}
    env = {"MCPSUB_TEST_RESOLVE": ",".join(f"{k}={v}" for k, v in names.items())}
    put(shared_lab, uri, "v1")
    d = daemon_factory(env={**FAST, **env})
    for what, address in EMBEDDING.items():
        response = d.api("POST", "/v1/webhooks", json={"url": f"http://[{address}]:80/h"})
        assert response.status_code == 400, (what, response.text)
        body = response.json()
        assert body["errorCode"] == "PRIVATE_TARGET", (what, body)
        assert "embeds 169.254.169.254" in body["message"], (what, body)
    targets = {name: add_target(d, f"http://{name}:{receiver.port}/h") for name in names}
    subscribe(d, shared_lab.url, uri)
    for name, target in targets.items():
        delivery = _settled(d, target["id"])
        assert delivery["state"] == "dead" and delivery["attempts"] == 1, (name, delivery)
        assert delivery["lastError"].startswith(f"PRIVATE_TARGET: {name} resolved"), delivery
        assert "embeds 169.254.169.254, a cloud metadata address" in delivery["lastError"]
    assert len(d.api("GET", "/v1/webhooks").json()["webhooks"]) == len(names)
