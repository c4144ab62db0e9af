"""cli/localapi.py and the `mcpsubctl` daemon commands against a real served API."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli.ctl import main
from cli.localapi import (
    DaemonClient,
    DaemonError,
    DaemonUnavailable,
    Endpoint,
    resolve_endpoint,
    state_dir,
)
from tests.api.fakes import FakeSupervisor
from tests.api.live import LiveApi
from tests.support.poll import until_async

URL = "http://127.0.0.1:8089/mcp"
Capsys = pytest.CaptureFixture[str]
PROBE_KEYS = [
    "route", "serverUrl", "resourceUri", "listenAcknowledged", "honoredUris",
    "notificationReceived", "notificationCount", "closeReason", "errorCode", "initialText",
    "finalText", "recommendedNextAction", "resourceUris", "notificationUri", "eventId",
    "revision",
]  # fmt: skip


@pytest.fixture
def api_env(live: LiveApi, monkeypatch: pytest.MonkeyPatch) -> Iterator[LiveApi]:
    monkeypatch.setenv("MCPSUB_API", live.api)
    yield live


def run(capsys: Capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


async def _publish(sup: FakeSupervisor, text: str, trigger: str = "notification") -> None:
    subs = await until_async(  # the CLI may still be subscribing
        "a subscription to test://a", lambda: sup.store.find_subscriptions("test://a"), 10
    )
    # a stored read on an open link makes the subscription active
    await sup.publish(subs[0], text, trigger, activate=True)


def test_client_over_unix_socket(live: LiveApi) -> None:
    with DaemonClient(Endpoint(socket=live.socket_path)) as client:
        sub, created = client.subscribe(URL, "test://a")
        assert created and sub["uri"] == "test://a"
        assert client.subscribe(URL, "test://a")[1] is False
        assert [s["id"] for s in client.subscriptions()] == [sub["id"]]
        assert client.status()["counts"]["subscriptions"] == 1
        with pytest.raises(DaemonError) as info:
            client.subscribe("ftp://x", "test://a")
        assert info.value.error_code == "INVALID_URL" and info.value.status == 400
        with pytest.raises(DaemonError) as info:
            client.wait("test://a", url=None, after=None, timeout_ms=50)
        assert info.value.status == 408 and info.value.error_code == "NOTIFICATION_TIMEOUT"


def test_daemon_unavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Capsys
) -> None:
    monkeypatch.delenv("MCPSUB_API", raising=False)
    monkeypatch.setenv("MCPSUB_STATE_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(DaemonUnavailable) as info:
        DaemonClient.from_options().status()
    assert f"mcpsubd --state-dir {tmp_path / 'nowhere'}" in info.value.hint
    for argv in (["list"], ["status", "--json"], ["wait", "--uri", "test://a", "--json"]):
        code, out, err = run(capsys, *argv)
        assert code == 10, argv
        assert "DAEMON_UNAVAILABLE" in out and "mcpsubd --state-dir" in out + err
    code, out, _ = run(capsys, "wait", "--uri", "test://a", "--json")
    assert json.loads(out)["errorCode"] == "DAEMON_UNAVAILABLE"


def test_refused_socket_is_unavailable(tmp_path: Path) -> None:
    import socket

    path = tmp_path / "api.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))  # bound, never listening: connect() is refused
    try:
        with pytest.raises(DaemonUnavailable):
            DaemonClient(Endpoint(socket=path)).status()
    finally:
        sock.close()


def test_endpoint_resolution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MCPSUB_API", raising=False)
    monkeypatch.delenv("MCPSUB_STATE_DIR", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr("sys.platform", "linux")
    assert state_dir() == str(tmp_path / "xdg" / "mcpsub")
    assert resolve_endpoint().socket == str(tmp_path / "xdg" / "mcpsub" / "api.sock")
    assert "`mcpsubd`" in resolve_endpoint().start_hint()
    assert resolve_endpoint("unix:///run/x.sock").socket == "/run/x.sock"
    monkeypatch.setenv("MCPSUB_STATE_DIR", str(tmp_path / "st"))
    (tmp_path / "st").mkdir()
    (tmp_path / "st" / "api.token").write_text("file-token\n")
    assert resolve_endpoint("http://127.0.0.1:9").token == "file-token"
    monkeypatch.setenv("MCPSUB_API_TOKEN", "env-token")
    assert resolve_endpoint("http://127.0.0.1:9").token == "env-token"
    for bad in ("http://example.com:9", "https://127.0.0.1:9", "tcp://x", "unix:"):
        with pytest.raises(ValueError):
            resolve_endpoint(bad)


def test_tcp_with_token(
    tmp_path: Path, migrated_db: Path, monkeypatch: pytest.MonkeyPatch, capsys: Capsys
) -> None:
    live = LiveApi(tmp_path / "state", migrated_db, token="tok-123", tcp=True).start()
    try:
        monkeypatch.setenv("MCPSUB_STATE_DIR", str(tmp_path / "state"))
        monkeypatch.delenv("MCPSUB_API_TOKEN", raising=False)
        with pytest.raises(DaemonError) as info:
            DaemonClient.from_options(live.api).status()
        assert info.value.status == 401 and info.value.error_code == "API_TOKEN_REQUIRED"
        code, out, err = run(capsys, "status", "--api", live.api)
        assert code == 3 and "tok-123" not in out + err
        (tmp_path / "state" / "api.token").write_text("tok-123\n")
        assert DaemonClient.from_options(live.api).status()["counts"]["subscriptions"] == 0
        code, out, err = run(capsys, "status", "--api", live.api, "--json")
        assert code == 0 and json.loads(out)["lastEventId"] == 0
        assert "tok-123" not in out + err
    finally:
        live.stop()


def test_subscribe_list_show_read_unsubscribe(api_env: LiveApi, capsys: Capsys) -> None:
    # The fake supervisor never reads: a short first-state wait runs out (not the 30 s
    # default), and that is REQUEST_TIMEOUT (6), never 0 without a stored read.
    code, out, err = run(
        capsys, "subscribe", "--url", URL, "--uri", "test://a", "--uri", "test://b", "--json",
        "--timeout-ms", "300",
    )  # fmt: skip
    assert code == 6 and "no first read within 300 ms" in err
    assert json.loads(out)["errorCode"] == "REQUEST_TIMEOUT"
    subs = json.loads(out)["subscriptions"]
    assert [(s["uri"], s["created"]) for s in subs] == [("test://a", True), ("test://b", True)]
    code, out, _ = run(capsys, "subscribe", "--url", URL, "--uri", "test://a", "--no-wait")
    assert code == 0 and "existing" in out and "test://a" in out
    code, out, _ = run(capsys, "list")
    assert code == 0 and out.splitlines()[0].split() == ["ID", "STATE", "REV", "SERVER", "URI"]
    assert len(out.splitlines()) == 3
    code, out, _ = run(capsys, "read", "--uri", "test://a", "--json")
    assert code == 7 and json.loads(out)["errorCode"] == "NO_CONTENT_YET"
    api_env.call(lambda sup: _publish(sup, "hello\nworld"))
    code, out, _ = run(capsys, "read", "--uri", "test://a")
    assert code == 0 and out == "hello\nworld\n"
    code, out, _ = run(capsys, "show", str(subs[0]["id"]))
    assert code == 0 and "revision:" in out and "hello" in out
    code, out, _ = run(capsys, "show", str(subs[0]["id"]), "--json")
    assert json.loads(out)["current"]["text"] == "hello\nworld"
    code, out, _ = run(capsys, "show", "999")
    assert code == 7 and "SUBSCRIPTION_NOT_FOUND" in out
    code, out, _ = run(capsys, "status")
    assert code == 0 and "last event id:" in out
    code, out, _ = run(capsys, "events", "--json", "--since", "0", "--limit", "2")
    page = json.loads(out)
    assert [e["id"] for e in page["events"]] == [1, 2] and page["nextAfter"] == 2
    code, out, _ = run(capsys, "events", "--since", "2")
    assert code == 0 and "resource.updated" in out and "rev=1" in out
    code, out, _ = run(capsys, "events", "--type", "daemon.storage,delivery.dead")
    assert code == 0 and out == "no events\n"
    with DaemonClient(Endpoint(socket=api_env.socket_path)) as client:
        with pytest.raises(DaemonError) as info:
            client.events(types="resource.updatd")
        assert info.value.status == 400 and info.value.error_code == "INVALID_PARAMETER"
        assert "resource.updatd" in info.value.message
    code, out, _ = run(capsys, "unsubscribe", "--uri", "test://b", "--json")
    assert code == 0 and [s["uri"] for s in json.loads(out)["removed"]] == ["test://b"]
    code, out, _ = run(capsys, "unsubscribe", str(subs[0]["id"]))
    assert code == 0 and out.split("\n")[1].split()[:2] == [str(subs[0]["id"]), "removed"]
    code, out, _ = run(capsys, "unsubscribe", str(subs[0]["id"]), "--json")
    assert code == 7 and json.loads(out)["errorCode"] == "SUBSCRIPTION_NOT_FOUND"
    code, out, _ = run(capsys, "subscribe", "--url", "ftp://x", "--uri", "test://a")
    assert code == 2 and "INVALID_URL" in out


def test_events_follow(api_env: LiveApi, capsys: Capsys) -> None:
    api_env.call(lambda sup: sup.subscribe(URL, "test://a"))
    # Publish once the stream is open: a fixed delay races a slow CLI start (it hung under load).
    api_env.call_when_waiting(lambda sup: _publish(sup, "v1"))
    code, out, _ = run(capsys, "events", "--follow", "--json", "--max-events", "2")
    assert code == 0
    # the first stored read: the subscription turns active with it, then the revision
    state, event = (json.loads(line) for line in out.splitlines())
    assert (state["type"], state["data"]["state"], state["id"]) == (
        "subscription.state",
        "active",
        2,
    )
    assert event["type"] == "resource.updated" and event["id"] == 3
    code, out, _ = run(capsys, "events", "--follow", "--since", "0", "--max-events", "3")
    assert code == 0 and "subscription.created" in out and "resource.updated" in out


def test_wait_for_next_update(api_env: LiveApi, capsys: Capsys) -> None:
    api_env.call(lambda sup: sup.subscribe(URL, "test://a"))
    api_env.call(lambda sup: _publish(sup, "status: pending"))
    api_env.call_when_waiting(lambda sup: _publish(sup, "status: reviewed"))
    code, out, _ = run(capsys, "wait", "--uri", "test://a", "--json", "--timeout-ms", "5000")
    assert code == 0
    body = json.loads(out)
    assert list(body) == PROBE_KEYS
    assert body["route"] == "subscription" and body["errorCode"] is None
    assert body["initialText"] == "status: pending" and body["finalText"] == "status: reviewed"
    # events: 1 created, 2 state active (with the first stored read), 3 updated, 4 updated
    assert body["revision"] == 2 and body["eventId"] == 4 and body["serverUrl"] == URL
    assert body["honoredUris"] == ["test://a"] and body["listenAcknowledged"] is True
    assert body["notificationReceived"] is True and body["notificationCount"] == 1
    assert body["resourceUris"] == ["test://a"] and body["notificationUri"] == "test://a"
    api_env.call_when_waiting(lambda sup: _publish(sup, "status: done"))
    code, out, _ = run(capsys, "wait", "--uri", "test://a", "--timeout-ms", "5000")
    lines = out.splitlines()
    assert code == 0 and "route subscription" in lines and "error-code null" in lines
    assert lines[-3:-1] == ["event-id 5", "revision 3"]
    assert lines[-1].startswith("phase-summary route=subscription")
    assert lines[lines.index("final") + 1] == "status: done"
    assert not any(line.startswith("capabilities") for line in lines), "no `capabilities null`"
    code, out, _ = run(capsys, "wait", "--uri", "test://a", "--after", "3", "--json")
    assert code == 0 and json.loads(out)["finalText"] == "status: reviewed"


def test_wait_timeout_and_not_watched(api_env: LiveApi, capsys: Capsys) -> None:
    code, out, _ = run(capsys, "wait", "--uri", "test://a", "--json", "--timeout-ms", "100")
    body = json.loads(out)
    assert (
        code == 7
        and body["errorCode"] == "NOT_WATCHED"
        and "--url" in body["recommendedNextAction"]
    )
    api_env.call(lambda sup: sup.subscribe(URL, "test://a"))
    code, out, _ = run(capsys, "wait", "--uri", "test://a", "--json", "--timeout-ms", "200")
    body = json.loads(out)
    assert code == 6 and body["errorCode"] == "NOTIFICATION_TIMEOUT"
    assert body["route"] == "timeout" and body["notificationReceived"] is False
    assert list(body) == PROBE_KEYS
    code, out, _ = run(capsys, "wait", "--uri", "test://a", "--timeout-ms", "0")
    assert code == 2


def test_wait_subscribes_when_url_given(api_env: LiveApi, capsys: Capsys) -> None:
    """The first revision of a new subscription is its baseline, not an update."""
    api_env.call_later(0.2, lambda sup: _publish(sup, "first", trigger="acknowledged"))
    api_env.call_when_waiting(lambda sup: _publish(sup, "second"))
    code, out, err = run(
        capsys, "wait", "--uri", "test://a", "--url", URL, "--json", "--timeout-ms", "10000"
    )
    assert code == 0, out + err
    assert "subscribed" in err
    body = json.loads(out)
    assert list(body) == PROBE_KEYS
    assert (body["initialText"], body["finalText"], body["revision"]) == ("first", "second", 2)
    assert body["route"] == "subscription" and body["notificationReceived"] is True


def test_wait_reports_a_change_found_by_a_reread_as_pre_completion(
    api_env: LiveApi, capsys: Capsys
) -> None:
    """notificationReceived is true only when a notification led to the read."""
    api_env.call(lambda sup: sup.subscribe(URL, "test://a"))
    api_env.call(lambda sup: _publish(sup, "v1", trigger="acknowledged"))
    api_env.call_when_waiting(lambda sup: _publish(sup, "v2", trigger="acknowledged"))
    code, out, _ = run(capsys, "wait", "--uri", "test://a", "--json", "--timeout-ms", "10000")
    assert code == 0
    body = json.loads(out)
    assert body["route"] == "pre-completion"
    assert body["notificationReceived"] is False and body["notificationCount"] == 0
    assert body["notificationUri"] is None
    assert (body["initialText"], body["finalText"]) == ("v1", "v2")


def test_wait_direct_falls_back_to_probe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Capsys
) -> None:
    monkeypatch.setenv("MCPSUB_API", f"unix://{tmp_path / 'none.sock'}")
    code, out, err = run(
        capsys, "wait", "--uri", "test://a", "--url", "http://127.0.0.1:9/mcp", "--direct",
        "--json", "--timeout-ms", "2000",
    )  # fmt: skip
    assert "probing the server directly" in err
    assert code == 5 and json.loads(out)["errorCode"] == "CONNECTION_REFUSED"
