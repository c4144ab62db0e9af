"""The real mcpsubd (subprocess, real SQLite file or PostgreSQL) against real lab servers."""

from __future__ import annotations

import signal
import stat
from typing import Any

import pytest

from tests.support.cli import run_cli
from tests.support.daemon import Daemon, free_port
from tests.support.lab import LabServer
from tests.support.poll import until

SLOW = {"MCP_TEST_UPDATE_DELAY_SECONDS": "600"}
BOTH_BACKENDS = pytest.mark.usefixtures("database_url")
"""Runs the test on SQLite and on PostgreSQL (see ``daemon_factory``)."""


def put(lab: LabServer, uri: str, text: str, notify: bool = True) -> None:
    lab.control(
        "PUT", "/lab/resources", json={"uri": uri, "text": text, "notify": notify}
    ).raise_for_status()


def subscribe(d: Daemon, url: str, uri: str) -> dict[str, Any]:
    response = d.api("POST", "/v1/subscriptions", json={"url": url, "uri": uri})
    assert response.status_code in (200, 201), response.text
    return response.json()


def content(d: Daemon, uri: str) -> dict[str, Any] | None:
    """``GET /v1/content`` of ``uri``, or None while it has no stored read."""
    response = d.api("GET", "/v1/content", params={"uri": uri})
    return response.json() if response.status_code == 200 else None


def wait_text(d: Daemon, uri: str, text: str, timeout: float = 15.0) -> dict[str, Any]:
    """``uri``'s content once its text is ``text`` (a stored read: nothing pushes it here)."""

    def reached() -> dict[str, Any] | None:
        shown = content(d, uri)
        return shown if shown is not None and shown["text"] == text else None

    found: dict[str, Any] = until(f"{uri} == {text!r}", reached, timeout)
    return found


def listens(lab: LabServer, event: str) -> list[dict[str, Any]]:
    return [e for e in lab.log() if e["event"] == event]


@BOTH_BACKENDS
def test_subscribe_update_and_wait(lab_server_factory, daemon_factory) -> None:
    lab = lab_server_factory(SLOW)
    put(lab, "test://doc/1", "draft")
    d = daemon_factory()
    sub = subscribe(d, lab.url, "test://doc/1")
    first = wait_text(d, "test://doc/1", "draft")
    assert first["revision"] == 1
    again = subscribe(d, lab.url, "test://doc/1")
    assert again["id"] == sub["id"], "subscribe is idempotent on (server, uri)"
    put(lab, "test://doc/1", "final")
    second = wait_text(d, "test://doc/1", "final")
    assert second["revision"] == 2
    assert second["generation"] >= first["generation"]


def test_three_uris_share_one_stream(lab_server_factory, daemon_factory) -> None:
    lab = lab_server_factory(SLOW)
    for n in (1, 2, 3):
        put(lab, f"test://q/{n}", f"q{n} v1")
    d = daemon_factory()
    for n in (1, 2, 3):
        subscribe(d, lab.url, f"test://q/{n}")
    for n in (1, 2, 3):
        wait_text(d, f"test://q/{n}", f"q{n} v1")

    def one_stream_for_all_three() -> bool:
        if lab.state()["streams"] != 1:
            return False
        acked = listens(lab, "listen.acknowledged")
        return sorted(acked[-1]["honored"]["resourceSubscriptions"]) == [
            "test://q/1",
            "test://q/2",
            "test://q/3",
        ]

    until("one listen stream honoring the three URIs", one_stream_for_all_three, 10)
    assert lab.state()["streams"] == 1
    status = d.api("GET", "/v1/status").json()
    assert len(status["links"]) == 1
    assert status["links"][0]["uris"] == ["test://q/1", "test://q/2", "test://q/3"]
    put(lab, "test://q/3", "q3 v2")
    wait_text(d, "test://q/3", "q3 v2")


@BOTH_BACKENDS
def test_adding_a_uri_is_make_before_break(lab_server_factory, daemon_factory) -> None:
    lab = lab_server_factory(SLOW)
    put(lab, "test://a", "a1")
    put(lab, "test://b", "b1")
    d = daemon_factory()
    subscribe(d, lab.url, "test://a")
    wait_text(d, "test://a", "a1")
    subscribe(d, lab.url, "test://b")
    wait_text(d, "test://b", "b1")
    log = lab.log()
    acks = [e for e in log if e["event"] == "listen.acknowledged"]
    closes = [e for e in log if e["event"] == "listen.closed"]
    assert len(acks) >= 2
    first_id = acks[0]["subscriptionId"]
    closed_first = [e for e in closes if e["subscriptionId"] == first_id]
    assert closed_first, "the old stream is closed after the change"
    assert acks[1]["seq"] < closed_first[0]["seq"], (
        "new stream acknowledged before the old one closed"
    )
    # Updates to the URI that was there all along still arrive.
    put(lab, "test://a", "a2")
    wait_text(d, "test://a", "a2")
    # Removing a URI keeps the other one watched.
    sub_b = next(
        s
        for s in d.api("GET", "/v1/subscriptions").json()["subscriptions"]
        if s["uri"] == "test://b"
    )
    assert d.api("DELETE", f"/v1/subscriptions/{sub_b['id']}").status_code == 200
    put(lab, "test://a", "a3")
    wait_text(d, "test://a", "a3")


@BOTH_BACKENDS
def test_twenty_drops_while_updating_reach_the_final_content(
    lab_server_factory, daemon_factory
) -> None:
    lab = lab_server_factory(SLOW)
    uri = "test://counter"
    put(lab, uri, "n=0")
    d = daemon_factory()
    subscribe(d, lab.url, uri)
    wait_text(d, uri, "n=0")
    for n in range(1, 21):
        put(lab, uri, f"n={n}", notify=n % 2 == 0)  # half the changes are never notified
        lab.control("POST", "/lab/streams/drop").raise_for_status()
    final = wait_text(d, uri, "n=20", timeout=30)
    texts = [
        row[0]
        for row in d.query(
            "SELECT text FROM revisions r JOIN subscriptions s ON s.id = r.subscription_id "
            "WHERE s.uri = :uri ORDER BY r.revision",
            uri=uri,
        )
    ]
    numbers = [int(t.split("=")[1]) for t in texts]
    assert numbers == sorted(numbers), f"a stale read overwrote newer content: {numbers}"
    generations = [row[0] for row in d.query("SELECT generation FROM revisions ORDER BY id")]
    assert generations == sorted(generations)
    assert final["generation"] > 1
    status = d.api("GET", "/v1/status").json()
    assert status["links"][0]["reconnects"] >= 1


def test_graceful_close_relistens(lab_server_factory, daemon_factory) -> None:
    lab = lab_server_factory(SLOW)
    put(lab, "test://g", "g1")
    d = daemon_factory()
    subscribe(d, lab.url, "test://g")
    wait_text(d, "test://g", "g1")
    opened = len(listens(lab, "listen.acknowledged"))
    lab.control("POST", "/lab/streams/close").raise_for_status()
    lab.wait_event("listen.acknowledged", count=opened + 1, timeout=10)
    put(lab, "test://g", "g2")
    wait_text(d, "test://g", "g2")


@BOTH_BACKENDS
def test_kill_9_and_restart_restores_everything(
    lab_server_factory, daemon_factory, tmp_path
) -> None:
    lab = lab_server_factory(SLOW)
    put(lab, "test://k", "k1")
    state = tmp_path / "state"
    d = daemon_factory(state)
    subscribe(d, lab.url, "test://k")
    wait_text(d, "test://k", "k1")
    d.kill()
    put(lab, "test://k", "k2 (changed while the daemon was down)")
    d2 = daemon_factory(state)
    wait_text(d2, "test://k", "k2 (changed while the daemon was down)")
    assert [s["uri"] for s in d2.api("GET", "/v1/subscriptions").json()["subscriptions"]] == [
        "test://k"
    ]


def test_not_honored_state(lab_server_factory, daemon_factory) -> None:
    lab = lab_server_factory(SLOW)
    put(lab, "test://n", "n1")
    lab.configure(dishonorUris=["test://n"])
    d = daemon_factory()
    sub = subscribe(d, lab.url, "test://n")

    def not_honored() -> bool:
        shown = d.api("GET", f"/v1/subscriptions/{sub['id']}").json()
        return "not_honored" in (shown.get("state"), shown.get("subscription", {}).get("state"))

    until("the subscription is not_honored", not_honored, 10)


def test_login_required_state(lab_server_factory, daemon_factory, tmp_path) -> None:
    lab = lab_server_factory({**SLOW, "MCP_TEST_AUTH_TOKEN": "only-this"})
    d = daemon_factory(env={"MCP_PROBE_TOKEN_STORE_PATH": str(tmp_path / "none.db")})
    sub = subscribe(d, lab.url, "test://review/status")

    def login_required() -> bool:
        links = d.api("GET", "/v1/status").json()["links"]
        return bool(links) and links[0]["state"] == "login_required"

    until("the link is login_required", login_required, 10)

    def subscription_state() -> list[str]:
        subs = d.api("GET", "/v1/subscriptions").json()["subscriptions"]
        return [s["state"] for s in subs if s["id"] == sub["id"]]

    # The link's state is its machine's, set before the subscription rows are written: read
    # once right after it, the row may still say pending (a CI run under load did).
    until(
        "the subscription is login_required", lambda: subscription_state() == ["login_required"], 10
    )


def test_sigterm_exits_0_quickly_and_files_are_private(lab_server_factory, daemon_factory) -> None:
    lab = lab_server_factory(SLOW)
    d = daemon_factory()
    subscribe(d, lab.url, "test://review/status")
    lab.wait_event("listen.acknowledged", timeout=10)
    assert stat.S_IMODE(d.state_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE(d.socket_path.stat().st_mode) == 0o600
    assert stat.S_IMODE((d.state_dir / "mcpsub.db").stat().st_mode) == 0o600
    # stop() sends SIGTERM and kills after 10 s, which would give -9: exit 0 means the daemon
    # left without waiting for the lab's pending 600 s update (no wall-clock assertion).
    assert d.stop() == 0
    lab.wait_event("listen.closed", timeout=5)


def test_ctrl_c_stops_cleanly_with_exit_0_as_help_says(daemon_factory) -> None:
    """Ctrl-C (SIGINT) while serving is a clean stop, exit 0, like SIGTERM."""
    d = daemon_factory()
    assert d.proc is not None
    d.proc.send_signal(signal.SIGINT)
    assert d.proc.wait(timeout=15) == 0
    assert not any("Traceback" in line for line in d.lines)
    helped = run_cli("mcpsubd", "--help")
    assert "0 stopped cleanly (SIGTERM, or Ctrl-C while serving)" in " ".join(helped.stdout.split())


def test_an_unknown_flag_exits_2_as_help_says() -> None:
    """Every exit code mcpsubd gives is in its --help: the help is true to the code."""
    bad = run_cli("mcpsubd", "--bogus")
    assert bad.code == 2 and "unrecognized arguments: --bogus" in bad.stderr
    assert "Traceback" not in bad.stderr
    helped = run_cli("mcpsubd", "--help")
    assert "2 unknown flag or command" in " ".join(helped.stdout.split())


def test_bad_input_is_rejected_and_the_daemon_keeps_serving(daemon_factory) -> None:
    d = daemon_factory()
    for body in (
        {"url": "ftp://x/mcp", "uri": "test://a"},
        {"url": "http://127.0.0.1:9/mcp", "uri": ""},
        {"uri": "test://a"},
    ):
        response = d.api("POST", "/v1/subscriptions", json=body)
        assert 400 <= response.status_code < 500, body
        assert "errorCode" in response.json()
    assert (
        d.api(
            "POST",
            "/v1/subscriptions",
            content=b"{nope",
            headers={"content-type": "application/json"},
        ).status_code
        == 400
    )
    assert d.api("DELETE", "/v1/subscriptions/999").status_code == 404
    assert d.api("GET", "/v1/subscriptions").json()["subscriptions"] == []
    assert d.api("GET", "/healthz").status_code == 200


def _state_of(d: Daemon, sub_id: int) -> str:
    subs = d.api("GET", "/v1/subscriptions").json()["subscriptions"]
    return next(s["state"] for s in subs if s["id"] == sub_id)


def _wait_state(d: Daemon, sub_id: int, state: str, timeout: float = 10.0) -> None:
    until(f"subscription {sub_id} is {state}", lambda: _state_of(d, sub_id) == state, timeout)


@BOTH_BACKENDS
def test_read_error_state_recovers(lab_server_factory, daemon_factory) -> None:
    lab = lab_server_factory(SLOW)
    put(lab, "test://gone", "here")
    d = daemon_factory()
    sub = subscribe(d, lab.url, "test://gone")
    wait_text(d, "test://gone", "here")
    _wait_state(d, sub["id"], "active")
    lab.http.request("DELETE", "/lab/resources", params={"uri": "test://gone"}).raise_for_status()
    lab.control("POST", "/lab/notify", json={"uri": "test://gone"}).raise_for_status()
    _wait_state(d, sub["id"], "error")
    put(lab, "test://gone", "back")
    lab.control("POST", "/lab/notify", json={"uri": "test://gone"}).raise_for_status()
    wait_text(d, "test://gone", "back")
    _wait_state(d, sub["id"], "active")


def test_keepalive_watchdog_treats_a_silent_stream_as_lost(
    lab_server_factory, daemon_factory
) -> None:
    quiet = lab_server_factory({**SLOW, "MCP_TEST_KEEPALIVE_SECONDS": "600"})
    chatty = lab_server_factory({**SLOW, "MCP_TEST_KEEPALIVE_SECONDS": "0.1"})
    for lab in (quiet, chatty):
        put(lab, "test://w", "w1")
    d = daemon_factory(env={"MCPSUB_KEEPALIVE_S": "0.3"})
    subscribe(d, quiet.url, "test://w")
    subscribe(d, chatty.url, "test://w")
    quiet.wait_event("listen.acknowledged", count=2, timeout=15)  # silence => re-listen
    links = {link["url"]: link for link in d.api("GET", "/v1/status").json()["links"]}
    assert links[quiet.url]["reconnects"] >= 1
    assert links[chatty.url]["reconnects"] == 0, "keep-alive comments count as proof of life"
    assert len(listens(chatty, "listen.acknowledged")) == 1


def test_ctl_status_text_shows_links_and_deliveries(lab_server_factory, daemon_factory) -> None:
    lab = lab_server_factory(SLOW)
    d = daemon_factory()
    subscribe(d, lab.url, "test://review/status")
    lab.wait_event("listen.acknowledged", timeout=10)
    result = d.ctl("status")
    assert result.code == 0, result.stderr
    assert "webhooks:       0 targets, 0 enabled" in result.stdout
    assert "deliveries:" in result.stdout
    assert lab.url in result.stdout
    assert d.ctl("status", "--json").json["links"][0]["url"] == lab.url


def test_a_failed_read_is_retried_until_it_succeeds(lab_server_factory, daemon_factory) -> None:
    """A read that fails in transit would leave stale content with no notification to come."""
    lab = lab_server_factory(SLOW)
    put(lab, "test://r", "r1")
    d = daemon_factory()
    sub = subscribe(d, lab.url, "test://r")
    wait_text(d, "test://r", "r1")
    lab.configure(failMethods={"resources/read": 503})
    put(lab, "test://r", "r2")  # notified, but every read fails for now
    _wait_state(d, sub["id"], "error", timeout=15)
    assert d.api("GET", "/v1/content", params={"uri": "test://r"}).json()["text"] == "r1"
    lab.configure(failMethods={})
    wait_text(d, "test://r", "r2", timeout=40)
    _wait_state(d, sub["id"], "active")


@pytest.mark.parametrize("scheme", ["http", "tcp"])
def test_both_spellings_of_the_tcp_api(daemon_factory, scheme: str) -> None:
    """The docs say http://127.0.0.1:PORT; tcp:// (the old spelling) works too,
    for mcpsubd and mcpsubctl alike, through the same MCPSUB_API value."""
    api = f"{scheme}://127.0.0.1:{free_port()}"
    d = daemon_factory(env={"MCPSUB_API": api})
    result = run_cli(
        "mcpsubctl", "status", "--json", env={"MCPSUB_API": api, "MCPSUB_API_TOKEN": d.token}
    )
    assert result.code == 0 and result.json["ready"] is True, result


@BOTH_BACKENDS
def test_a_restart_within_the_discover_ttl_listens_without_discovering_again(
    lab_server_factory, daemon_factory, tmp_path
) -> None:
    """The discover result is kept with the acknowledgement; a daemon started again while
    its ttlMs lasts listens at once. With the lab's default ttlMs 0 it discovers every time
    (the first start here)."""
    lab = lab_server_factory(SLOW)
    lab.configure(discoverTtlMs=3_600_000)
    put(lab, "test://t", "t1")
    state = tmp_path / "state"
    d = daemon_factory(state)
    subscribe(d, lab.url, "test://t")
    wait_text(d, "test://t", "t1")
    assert len(listens(lab, "discover")) == 1
    d.stop()
    put(lab, "test://t", "t2 (changed while the daemon was down)")
    d2 = daemon_factory(state)
    wait_text(d2, "test://t", "t2 (changed while the daemon was down)")
    assert len(listens(lab, "listen.acknowledged")) == 2
    assert len(listens(lab, "discover")) == 1
