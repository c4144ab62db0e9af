"""``wait`` and ``subscribe`` through the real mcpsubd and mcpsubctl, against the lab server:
a new subscription's first revision is its baseline, and a subscribe reports its first state."""

from __future__ import annotations

from typing import Any

from tests.support.cli import finish, run_cli, spawn_cli
from tests.support.daemon import Daemon
from tests.support.poll import until

REVIEW = "test://review/status"


def ctl_env(d: Daemon) -> dict[str, str]:
    return {"MCPSUB_STATE_DIR": str(d.state_dir)}


def test_wait_on_a_new_subscription_waits_for_the_change(
    lab_server_factory: Any, daemon_factory: Any
) -> None:
    """The lab changes the resource 2 s after a listen opens: v1 is the baseline, v2 the change.

    Before the fix, wait returned v1 itself (initialText null, notificationReceived true).
    """
    lab = lab_server_factory({"MCP_TEST_UPDATE_DELAY_SECONDS": "2"})
    d = daemon_factory()
    result = d.ctl("wait", "--url", lab.url, "--uri", REVIEW, "--json", "--timeout-ms", "20000")
    assert result.code == 0, result
    body = result.json
    assert body["initialText"].startswith("status: pending")
    assert body["finalText"].startswith("status: reviewed")
    assert body["route"] == "subscription" and body["notificationReceived"] is True
    assert body["notificationUri"] == REVIEW and body["resourceUris"] == [REVIEW]
    assert body["revision"] == 2
    probe_keys = list(
        # The keys only: the resource changed once already, so the probe's wait for a
        # change can only time out (the default budget made this test last 20 s).
        run_cli(
            "mcpsubctl", "probe", "--url", lab.url, "--uri", REVIEW, "--json", "--timeout-ms", "300"
        ).json
    )
    assert list(body) == [*probe_keys, "eventId", "revision"]
    lines = d.ctl("wait", "--uri", REVIEW, "--timeout-ms", "300")
    assert lines.code == 6
    assert lines.stdout.splitlines()[0] == 'capabilities {"subscribe":true,"listChanged":false}'


def test_subscribe_waits_for_the_first_state(lab_server_factory: Any, daemon_factory: Any) -> None:
    lab = lab_server_factory({"MCP_TEST_UPDATE_DELAY_SECONDS": "600"})
    d = daemon_factory()
    ok = d.ctl("subscribe", "--url", lab.url, "--uri", REVIEW, "--json")
    assert ok.code == 0, ok
    (sub,) = ok.json["subscriptions"]
    assert (sub["state"], sub["revision"], sub["stateCode"]) == ("active", 1, None)

    missing = d.ctl("subscribe", "--url", lab.url, "--uri", "test://nope", "--json")
    assert missing.code == 7, missing
    assert missing.json["errorCode"] == "RESOURCE_NOT_FOUND"
    assert "probe" in missing.json["recommendedNextAction"]
    lines = d.ctl("subscribe", "--url", lab.url, "--uri", "test://nope")
    assert lines.code == 7 and "error-code RESOURCE_NOT_FOUND" in lines.stdout.splitlines()
    show = d.ctl("show", str(missing.json["subscriptions"][0]["id"]), "--json")
    assert show.json["stateCode"] == "RESOURCE_NOT_FOUND"
    # The CLI prints the daemon's reading, word for word: nothing to drift apart.
    daemon_says = show.json["firstState"]
    assert daemon_says["errorCode"] == "RESOURCE_NOT_FOUND"
    assert daemon_says["hint"] == missing.json["recommendedNextAction"] == show.json["stateHint"]
    assert f"hint: {daemon_says['hint']}" in lines.stderr.splitlines()
    assert f"recommended-next-action {daemon_says['hint']}" in lines.stdout.splitlines()

    quick = d.ctl("subscribe", "--url", lab.url, "--uri", "test://later", "--no-wait", "--json")
    assert quick.code == 0 and quick.json["subscriptions"][0]["state"] == "pending"


def test_subscribe_reports_a_pre_2026_server(lab_server_factory: Any, daemon_factory: Any) -> None:
    lab = lab_server_factory({"MCP_TEST_UPDATE_DELAY_SECONDS": "600"})
    lab.configure(legacyMode="not-initialized")
    d = daemon_factory()
    result = d.ctl("subscribe", "--url", lab.url, "--uri", REVIEW, "--json")
    assert result.code == 4, result
    assert result.json["errorCode"] == "PROTOCOL_UNSUPPORTED"
    assert "2026-07-28" in result.json["recommendedNextAction"]
    sub_id = result.json["subscriptions"][0]["id"]
    daemon_says = d.api("GET", f"/v1/subscriptions/{sub_id}").json()["firstState"]
    assert (daemon_says["errorCode"], daemon_says["hint"]) == (
        "PROTOCOL_UNSUPPORTED", result.json["recommendedNextAction"],
    )  # fmt: skip
    wait = d.ctl("wait", "--uri", REVIEW, "--json", "--timeout-ms", "5000")
    assert (wait.code, wait.json["errorCode"]) == (4, "PROTOCOL_UNSUPPORTED")


def test_subscribe_reports_a_refused_connection(daemon_factory: Any) -> None:
    d = daemon_factory()
    proc = spawn_cli(
        "mcpsubctl", "subscribe", "--url", "http://127.0.0.1:9/mcp", "--uri", REVIEW, "--json",
        env=ctl_env(d),
    )  # fmt: skip
    result = finish(proc, timeout=30)
    assert result.code == 5, result
    assert result.json["errorCode"] == "CONNECTION_REFUSED"

    def link() -> dict[str, Any]:
        status: dict[str, Any] = d.api("GET", "/v1/status").json()["links"][0]
        return status

    # The test's backoff is 0.05-0.5 s: the link may be connecting again (its last error
    # kept) when asked; between two attempts it shows backoff.
    assert link()["lastErrorCode"] == "CONNECTION_REFUSED"
    until("the link in backoff", lambda: link()["state"] == "backoff")
    assert link()["lastErrorCode"] == "CONNECTION_REFUSED"
