"""Webhook delivery end to end: the real mcpsubd, a real lab server, a real HTTP receiver.

Every request the receiver gets is verified with the ``standardwebhooks`` package (see
``receiver.py``); the retry schedule is compressed through ``MCPSUB_WEBHOOK_SCHEDULE``.
Each test runs on both backends.
"""

from __future__ import annotations

import socket
import time
from typing import Any

import pytest

from tests.support.daemon import Daemon
from tests.support.lab import LabServer
from tests.webhooks.helpers import (
    FAST,
    add_target,
    assert_secret_hidden,
    deliveries,
    put,
    subscribe,
    wait_deliveries,
    wait_revision,
)
from tests.webhooks.receiver import Receiver, Step

# Every test runs on SQLite and on PostgreSQL (the daemon takes ``database_url``).
pytestmark = pytest.mark.usefixtures("database_url")


def _setup(
    lab: LabServer,
    uri: str,
    daemon_factory: Any,
    receiver: Receiver,
    path: str = "/hook",
    **kw: Any,
) -> tuple[Daemon, dict[str, Any]]:
    put(lab, uri, "v1")
    d: Daemon = daemon_factory(env={**FAST, **kw.pop("env", {})})
    target = add_target(d, receiver.url(path), **kw)
    receiver.expect_secret(path, target["secret"])
    return d, target


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_failures_then_success_keep_webhook_id(
    shared_lab: LabServer, uri: str, daemon_factory: Any, receiver: Receiver
) -> None:
    """503 then 500 then 200 on one target, a closed port that opens later on another."""
    receiver.plan("/hook", Step(503), Step(500))
    env = {"MCPSUB_WEBHOOK_SCHEDULE": "0,0.2,0.4,0.3,0.3,0.3,0.3,0.3,0.3,0.3"}
    d, target = _setup(shared_lab, uri, daemon_factory, receiver, uriPatterns=["test://*"], env=env)
    port = _free_port()  # nothing listens there yet: connection refused
    down = add_target(d, f"http://127.0.0.1:{port}/late")
    sub = subscribe(d, shared_lab.url, uri)

    got = receiver.wait_count("/hook", 3)
    assert [r.status for r in got] == [503, 500, 200]
    assert len({r.webhook_id for r in got}) == 1, "webhook-id is stable across retries"
    assert len({r.headers["webhook-timestamp"] for r in got}) >= 1
    assert all(r.verified_with == [target["secret"]] for r in got)
    body = got[-1].json
    assert body["type"] == "resource.updated"
    assert body["id"] == got[-1].webhook_id
    assert body["uri"] == uri and body["revision"] == 1 and body["server"] == shared_lab.url
    assert body["contents"][0]["text"] == "v1"
    assert got[-1].headers["content-type"] == "application/json"
    assert got[-1].headers["user-agent"].startswith("mcpsub/")
    [delivery] = wait_deliveries(
        d, lambda ds: ds and ds[0]["state"] == "delivered", target=target["id"]
    )
    assert delivery["attempts"] == 3 and delivery["lastStatus"] == 200
    assert delivery["webhookId"] == got[0].webhook_id
    assert delivery["subscriptionId"] == sub["id"]

    [failing] = wait_deliveries(d, lambda ds: ds and ds[0]["attempts"] >= 2, target=down["id"])
    assert failing["state"] == "failed" and failing["lastStatus"] is None
    assert "Connect" in (failing["lastError"] or "")
    late = Receiver()
    late.expect_secret("/late", down["secret"])
    late.start(port)
    try:
        [arrived] = late.wait_count("/late", 1)
        assert arrived.webhook_id == failing["webhookId"]
        wait_deliveries(d, lambda ds: ds[0]["state"] == "delivered", target=down["id"])
    finally:
        late.close()
    assert late.verification_errors() == []
    status = d.api("GET", "/v1/status").json()
    assert status["deliveries"]["delivered"] == 2
    assert status["webhooks"] == {"targets": 2, "enabled": 2}
    assert_secret_hidden(d, target["secret"])


def test_status_codes_3xx_retry_after_410(
    shared_lab: LabServer, uri: str, daemon_factory: Any, receiver: Receiver
) -> None:
    receiver.plan("/redirect", Step(302, headers={"Location": receiver.url("/elsewhere")}))
    receiver.plan("/busy", Step(503, headers={"Retry-After": "1"}))
    receiver.plan("/gone", Step(410))
    d, redirect = _setup(shared_lab, uri, daemon_factory, receiver, path="/redirect")
    busy = add_target(d, receiver.url("/busy"))
    gone = add_target(d, receiver.url("/gone"))
    receiver.expect_secret("/busy", busy["secret"])
    receiver.expect_secret("/gone", gone["secret"])
    subscribe(d, shared_lab.url, uri)

    # 3xx: a failure, retried, and the Location is not followed
    got = receiver.wait_count("/redirect", 2)
    assert [r.status for r in got] == [302, 200]
    assert got[0].webhook_id == got[1].webhook_id
    [delivery] = wait_deliveries(
        d, lambda ds: ds and ds[0]["state"] == "delivered", target=redirect["id"]
    )
    assert delivery["attempts"] == 2 and delivery["lastStatus"] == 200
    assert receiver.received("/elsewhere") == [], "redirects are not followed"

    # Retry-After: 1 s wins over the schedule's 0.2 s
    first, second = receiver.wait_count("/busy", 2)
    gap = second.at - first.at
    assert 0.95 <= gap < 3.0, f"Retry-After says 1 s, the schedule 0.2 s; gap {gap:.3f} s"

    # 410 Gone: dead at once, target disabled, webhook.disabled event
    [dead] = wait_deliveries(d, lambda ds: ds and ds[0]["state"] == "dead", target=gone["id"])
    assert dead["lastStatus"] == 410 and dead["attempts"] == 1
    assert len(receiver.received("/gone")) == 1
    shown = d.api("GET", f"/v1/webhooks/{gone['id']}").json()
    assert shown["enabled"] is False and "410" in shown["disabledReason"]
    assert shown["deliveries"]["dead"] == 1
    events = d.api("GET", "/v1/events", params={"type": "webhook.disabled"}).json()["events"]
    assert [e["data"]["targetId"] for e in events] == [gone["id"]]
    assert d.api("GET", "/v1/status").json()["webhooks"] == {"targets": 3, "enabled": 2}
    # re-enabled: the dead delivery stays dead, new revisions go out
    assert d.api("POST", f"/v1/webhooks/{gone['id']}/enable").json()["enabled"] is True
    put(shared_lab, uri, "v2")
    got = receiver.wait_count("/gone", 2)
    assert got[-1].json["revision"] == 2 and got[-1].status == 200


def test_dead_letter_then_recover_and_retry(
    shared_lab: LabServer, uri: str, daemon_factory: Any, receiver: Receiver
) -> None:
    receiver.plan("/hook", then=Step(500))
    d, target = _setup(shared_lab, uri, daemon_factory, receiver)
    started = time.time()
    subscribe(d, shared_lab.url, uri)
    [dead] = wait_deliveries(d, lambda ds: ds and ds[0]["state"] == "dead")
    assert dead["attempts"] == 3, "three attempts: 0, 0.2, 0.4"
    assert len(receiver.received("/hook")) == 3
    events = d.api("GET", "/v1/events", params={"type": "delivery.dead"}).json()["events"]
    assert [e["data"]["deliveryId"] for e in events] == [dead["id"]]
    assert events[0]["data"]["webhookId"] == dead["webhookId"]
    assert d.api("GET", "/v1/status").json()["deliveries"]["dead"] == 1
    listed = d.ctl("deliveries", "list", "--state", "dead")
    assert listed.code == 0 and dead["webhookId"] in listed.stdout
    assert dead["lastError"] and listed.stdout.split("\n")[0].endswith("LAST ERROR")
    assert dead["lastError"] in listed.stdout  # not only with --json
    one = d.ctl("deliveries", "show", str(dead["id"]))
    assert one.code == 0 and f"last error:    {dead['lastError']}" in one.stdout.splitlines()

    receiver.plan("/hook", then=Step(200))
    since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started - 1))
    result = d.ctl("deliveries", "recover", "--target", str(target["id"]), "--since", since)
    assert result.code == 0, result.stderr
    assert result.stdout == (
        f"1 failed or dead delivery of target {target['id']} queued to be sent again\n"
    )
    got = receiver.wait_count("/hook", 4)
    assert got[-1].status == 200 and got[-1].webhook_id == dead["webhookId"]
    wait_deliveries(d, lambda ds: ds[0]["state"] == "delivered")
    listed = d.ctl("deliveries", "list", "--target", str(target["id"]), "--json")
    assert listed.code == 0 and listed.json["deliveries"][0]["state"] == "delivered"
    # retry sends even a delivered one again, with the same webhook-id
    retried = d.ctl("deliveries", "retry", str(dead["id"]), "--json")
    assert retried.code == 0, retried.stderr
    got = receiver.wait_count("/hook", 5)
    assert got[-1].webhook_id == dead["webhookId"]
    missing = d.ctl("deliveries", "retry", "999")
    assert missing.code == 7 and "DELIVERY_NOT_FOUND" in missing.stdout


def test_mode_latest_supersedes_while_failing(
    shared_lab: LabServer, uri: str, daemon_factory: Any, receiver: Receiver
) -> None:
    receiver.plan("/hook", then=Step(503))
    env = {"MCPSUB_WEBHOOK_SCHEDULE": "0,0.2,0.2,0.2,0.2"}
    d, target = _setup(shared_lab, uri, daemon_factory, receiver, mode="latest", env=env)
    subscribe(d, shared_lab.url, uri)
    receiver.wait_count("/hook", 1)
    for n in (2, 3):
        put(shared_lab, uri, f"v{n}")
        wait_revision(d, uri, n)
    wait_deliveries(
        d, lambda ds: len(ds) == 3 and all(x["state"] in ("dead", "superseded") for x in ds)
    )
    receiver.plan("/hook", then=Step(200))
    recovered = d.api(
        "POST", "/v1/deliveries/recover", json={"target": target["id"], "since": 0}
    ).json()
    assert recovered["recovered"] == 1
    final = wait_deliveries(d, lambda ds: any(x["state"] == "delivered" for x in ds))
    assert [x["state"] for x in final] == ["superseded", "superseded", "delivered"]
    ok = [r for r in receiver.received("/hook") if r.status == 200]
    assert [r.json["revision"] for r in ok] == [3]
    assert ok[0].json["contents"][0]["text"] == "v3"


def test_mode_all_delivers_every_revision_in_order(
    shared_lab: LabServer, uri: str, daemon_factory: Any, receiver: Receiver
) -> None:
    receiver.plan("/hook", Step(503))  # the first attempt fails: the others must queue behind
    env = {"MCPSUB_WEBHOOK_SCHEDULE": "0,0.5,0.5"}
    d, _ = _setup(shared_lab, uri, daemon_factory, receiver, env=env)
    subscribe(d, shared_lab.url, uri)
    receiver.wait_count("/hook", 1)
    for n in (2, 3, 4):
        put(shared_lab, uri, f"v{n}")
        wait_revision(d, uri, n)
    got = receiver.wait_for(lambda rs: sum(r.status == 200 for r in rs) >= 4, "/hook")
    assert [r.json["revision"] for r in got] == [1, 1, 2, 3, 4], "n+1 never goes before n"
    assert [r.json["contents"][0]["text"] for r in got[1:]] == ["v1", "v2", "v3", "v4"]
    states = wait_deliveries(d, lambda ds: all(x["state"] == "delivered" for x in ds))
    assert len(states) == 4


def test_kill_9_during_delivery_redelivers_same_id(
    shared_lab: LabServer, uri: str, daemon_factory: Any, receiver: Receiver
) -> None:
    receiver.plan("/hook", Step(hold=True))
    d, _ = _setup(shared_lab, uri, daemon_factory, receiver)
    subscribe(d, shared_lab.url, uri)
    [held] = receiver.wait_count("/hook", 1)
    d.kill()  # while the receiver holds the request open
    restarted: Daemon = daemon_factory(state_dir=d.state_dir, env=FAST)
    got = receiver.wait_count("/hook", 2)
    assert got[1].webhook_id == held.webhook_id
    assert got[1].status == 200
    [delivery] = wait_deliveries(restarted, lambda ds: ds and ds[0]["state"] == "delivered")
    assert delivery["webhookId"] == held.webhook_id


def test_slow_target_does_not_delay_fast_one(
    shared_lab: LabServer, uri: str, daemon_factory: Any, receiver: Receiver
) -> None:
    receiver.plan("/slow", then=Step(delay=3.0))
    d, slow = _setup(shared_lab, uri, daemon_factory, receiver, path="/slow")
    fast = add_target(d, receiver.url("/fast"))
    receiver.expect_secret("/fast", fast["secret"])
    subscribe(d, shared_lab.url, uri)
    receiver.wait_count("/slow", 1)
    receiver.wait_count("/fast", 1)
    committed = time.time()
    put(shared_lab, uri, "v2")  # the slow receiver still sleeps on revision 1
    [_, second] = receiver.wait_count("/fast", 2, timeout=2.5)
    assert second.json["revision"] == 2
    assert second.at - committed < 1.5, "the fast target waited for the slow one"
    assert len(receiver.received("/slow")) == 1
    assert [x["state"] for x in deliveries(d, target=slow["id"])] == ["pending", "pending"]


def test_thin_payload_over_the_size_cap(
    shared_lab: LabServer, uri: str, daemon_factory: Any, receiver: Receiver
) -> None:
    put(shared_lab, uri, "x" * 2000)
    d: Daemon = daemon_factory(env={**FAST, "MCPSUB_WEBHOOK_MAX_BODY_BYTES": "500"})
    target = add_target(d, receiver.url("/hook"))
    receiver.expect_secret("/hook", target["secret"])
    subscribe(d, shared_lab.url, uri)
    [got] = receiver.wait_count("/hook", 1)
    body = got.json
    assert body["truncated"] is True
    assert "contents" not in body
    assert body["contentPath"].startswith("/v1/content?uri=test%3A%2F%2Freview%2F")
    assert len(got.body) <= 500
    assert d.api("GET", body["contentPath"]).json()["text"] == "x" * 2000


def test_cli_and_secret_rotation(
    shared_lab: LabServer, uri: str, daemon_factory: Any, receiver: Receiver
) -> None:
    put(shared_lab, uri, "v1")
    d: Daemon = daemon_factory(env=FAST)
    added = d.ctl("webhook", "add", receiver.url("/hook"), "--uri", "test://review/*", "--json")
    assert added.code == 0, added.stdout + added.stderr
    target = added.json
    secret = target["secret"]
    assert "shown once" in added.stderr
    receiver.expect_secret("/hook", secret)
    subscribe(d, shared_lab.url, uri)
    receiver.wait_count("/hook", 1)

    for args in (("webhook", "list"), ("webhook", "list", "--json"), ("webhook", "show", "1")):
        shown = d.ctl(*args)
        assert shown.code == 0, shown.stderr
        assert receiver.url("/hook") in shown.stdout
        assert secret.removeprefix("whsec_") not in shown.stdout

    rotated = d.ctl("webhook", "rotate-secret", str(target["id"]), "--json")
    assert rotated.code == 0, rotated.stderr
    new_secret = rotated.json["secret"]
    assert new_secret != secret
    receiver.expect_secret("/hook", secret, new_secret)
    put(shared_lab, uri, "v2")
    got = receiver.wait_count("/hook", 2)
    assert got[1].verified_with == [secret, new_secret], "both secrets sign during the overlap"
    assert len(got[1].headers["webhook-signature"].split(" ")) == 2

    pinged = d.ctl("webhook", "test", str(target["id"]))
    assert pinged.code == 0 and pinged.stdout.startswith("ok 200"), pinged.stdout
    ping = receiver.wait_count("/hook", 3)[2]
    assert ping.json["type"] == "webhook.test"
    assert ping.verified_with == [secret, new_secret]

    disabled = d.ctl("webhook", "disable", str(target["id"]), "--json")
    assert disabled.code == 0 and disabled.json["enabled"] is False
    put(shared_lab, uri, "v3")
    wait_revision(d, uri, 3)
    assert len(deliveries(d)) == 2, "a disabled target gets no new deliveries"
    assert d.ctl("webhook", "enable", str(target["id"])).code == 0

    bad = d.ctl("webhook", "add", "ftp://127.0.0.1/x", "--json")
    assert bad.code == 2 and bad.json["errorCode"] == "INVALID_URL"
    bad = d.ctl("webhook", "add", receiver.url("/x"), "--secret", "whsec_short")
    assert bad.code == 2 and "INVALID_SECRET" in bad.stdout
    missing = d.ctl("webhook", "show", "99")
    assert missing.code == 7 and "WEBHOOK_NOT_FOUND" in missing.stdout

    removed = d.ctl("webhook", "remove", str(target["id"]))
    assert removed.code == 0
    assert d.ctl("webhook", "list").stdout.strip() == "no webhooks"
    for value in (secret, new_secret):
        assert_secret_hidden(d, value)
