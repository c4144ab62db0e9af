"""The /lab control surface: every endpoint, fault injection, log and wait."""

import threading
import time
from typing import Any

import httpx

from tests.labserver.helpers import REVIEW, SUB_ID, call, listen, read_text
from tests.support.lab import LabServer


def test_control_is_404_when_disabled(lab_server_factory: Any) -> None:
    lab = lab_server_factory({"MCP_TEST_CONTROL": "false"})
    assert lab.control("GET", "/lab/state").status_code == 404
    assert lab.control("PATCH", "/lab/config", json={}).status_code == 404


def test_state_config_and_reset(lab_server: LabServer) -> None:
    state = lab_server.state()
    assert state["streams"] == 0
    assert state["resources"][0]["uri"] == REVIEW and state["resources"][0]["version"] == 1
    config = lab_server.control("GET", "/lab/config").json()
    assert config == state["config"]
    assert config["updateDelaySeconds"] == 0.05 and config["pageSize"] == 50
    assert config["legacyMode"] is None and config["maxSubscriptions"] == 100
    patched = lab_server.configure(readDelayMs=5, pageSize=7)
    assert (patched["readDelayMs"], patched["pageSize"]) == (5, 7)
    bad = lab_server.control("PATCH", "/lab/config", json={"pageSize": "big"})
    assert bad.status_code == 400 and "pageSize" in bad.json()["error"]
    assert lab_server.control("GET", "/lab/config").json()["pageSize"] == 7
    lab_server.control("PUT", "/lab/resources", json={"uri": "test://n", "text": "t"})
    call(lab_server.url, "server/discover")
    reset = lab_server.control("POST", "/lab/reset").json()
    assert reset["config"] == config
    assert [r["uri"] for r in reset["resources"]] == [REVIEW]
    assert lab_server.log() == []


def test_put_update_and_delete_notify(lab_server: LabServer) -> None:
    lab_server.configure(updateDelaySeconds=60, advertiseListChanged=True)
    asked = {"resourceSubscriptions": ["test://doc"], "resourcesListChanged": True}
    with listen(lab_server.url, asked) as stream:
        stream.next_message()  # ack
        created = lab_server.control(
            "PUT", "/lab/resources", json={"uri": "test://doc", "text": "one", "name": "Doc"}
        )
        assert created.status_code == 201 and created.json()["created"] is True
        assert stream.next_message()["method"] == "notifications/resources/list_changed"
        replaced = lab_server.control(
            "PUT", "/lab/resources", json={"uri": "test://doc", "text": "two"}
        )
        assert replaced.json() == {
            "uri": "test://doc",
            "text": "two",
            "version": 2,
            "created": False,
        }
        update = stream.next_message()
        assert update["params"] == {"_meta": {SUB_ID: "listen-1"}, "uri": "test://doc"}
        lab_server.control(
            "PUT", "/lab/resources", json={"uri": "test://doc", "text": "quiet", "notify": False}
        )
        assert read_text(lab_server.url, "test://doc") == "quiet"
        deleted = lab_server.control("DELETE", "/lab/resources?uri=test://doc")
        assert deleted.status_code == 200
        assert stream.next_message()["method"] == "notifications/resources/list_changed"
    sent = [e for e in lab_server.log() if e["event"] == "notification.sent"]
    assert [e["method"].rsplit("/", 1)[1] for e in sent] == [
        "list_changed",
        "updated",
        "list_changed",
    ]
    missing = lab_server.control("DELETE", "/lab/resources?uri=test://doc")
    assert missing.status_code == 404
    assert lab_server.control("PUT", "/lab/resources", json={"uri": "x"}).status_code == 400


def test_burst_notifies_each_time(lab_server: LabServer) -> None:
    lab_server.configure(updateDelaySeconds=60)
    with listen(lab_server.url) as stream:
        stream.next_message()
        done = lab_server.control(
            "POST", "/lab/burst", json={"uri": REVIEW, "count": 5, "text": "burst {n}"}
        )
        assert done.status_code == 200
        assert done.json()["text"] == "burst 5"
        updates = [stream.next_message() for _ in range(5)]
        assert read_text(lab_server.url) == "burst 5"
    assert {u["params"]["uri"] for u in updates} == {REVIEW}
    # With no stream open, a read starts a new seed cycle: back to version 1.
    assert read_text(lab_server.url).startswith("status: pending\nversion: 1\n")
    assert (
        lab_server.control(
            "POST", "/lab/burst", json={"uri": "test://none", "count": 1}
        ).status_code
        == 404
    )


def test_update_fires_the_seed_update_now(lab_server: LabServer) -> None:
    lab_server.configure(updateDelaySeconds=60)
    with listen(lab_server.url) as stream:
        stream.next_message()
        state = lab_server.control("POST", "/lab/update", json={}).json()
        assert state["version"] == 2 and state["text"].startswith("status: reviewed")
        assert stream.next_message()["params"]["uri"] == REVIEW


def test_wait_long_polls_and_times_out(lab_server: LabServer) -> None:
    timer = threading.Timer(0.2, lambda: call(lab_server.url, "server/discover"))
    timer.start()
    try:
        entries = lab_server.wait_event("discover", timeout=5)
    finally:
        timer.join()
    assert entries[0]["event"] == "discover"
    started = time.monotonic()
    response = lab_server.control("GET", "/lab/wait?event=never&count=1&timeoutMs=100")
    assert response.status_code == 408
    assert time.monotonic() - started < 10  # the 100 ms timeout, not forever
    since = entries[0]["seq"]
    assert lab_server.log(since=since) == [e for e in lab_server.log() if e["seq"] > since]


def test_legacy_modes(lab_server: LabServer) -> None:
    lab_server.configure(legacyMode="method-not-found")
    response = call(lab_server.url, "server/discover", request_id=4)
    assert response.status_code == 200
    assert response.json()["error"]["code"] == -32601 and response.json()["id"] == 4
    lab_server.configure(legacyMode="missing-session")
    response = call(lab_server.url, "server/discover")
    assert response.status_code == 400
    assert response.json()["error"] == {
        "code": -32600,
        "message": "Bad Request: Missing session ID",
    }
    lab_server.configure(legacyMode="unsupported-version")
    response = call(lab_server.url, "server/discover")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == -32022
    assert error["data"] == {"supported": ["2025-11-25", "2025-06-18"], "requested": "2026-07-28"}
    lab_server.configure(legacyMode="not-initialized")
    response = call(lab_server.url, "server/discover", request_id=9)
    assert response.status_code == 400
    assert response.headers["content-type"].startswith("application/json")
    # TypeScript SDK 1.x: no session yet; the id is null, not the request's.
    assert response.json() == {
        "jsonrpc": "2.0",
        "error": {"code": -32000, "message": "Bad Request: Server not initialized"},
        "id": None,
    }
    lab_server.configure(legacyMode="discover-2025")
    response = call(lab_server.url, "server/discover", request_id=5)
    assert response.status_code == 200
    result = response.json()["result"]
    assert result["supportedVersions"] == ["2025-11-25", "2025-06-18"]
    assert call(lab_server.url, "resources/list").status_code == 400
    lab_server.configure(legacyMode="not-found")
    response = call(lab_server.url, "server/discover")
    assert response.status_code == 404
    assert response.text == "Not Found"
    assert response.headers["content-type"].startswith("text/plain")
    lab_server.configure(legacyMode=None)
    assert call(lab_server.url, "server/discover").status_code == 200


def test_fail_methods_answer_plain_status(lab_server: LabServer) -> None:
    lab_server.configure(failMethods={"resources/read": 503})
    response = call(lab_server.url, "resources/read", {"uri": REVIEW})
    assert response.status_code == 503
    assert response.headers["content-type"].startswith("text/plain")
    assert call(lab_server.url, "resources/list").status_code == 200


def test_silent_methods_hold_until_the_client_gives_up(lab_server: LabServer) -> None:
    lab_server.configure(silentMethods=["tools/call"])
    started = time.monotonic()
    try:
        call_timeout = httpx.Timeout(10, read=0.3)
        httpx.post(
            lab_server.url,
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {
                    "_meta": {
                        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                        "io.modelcontextprotocol/clientCapabilities": {},
                    },
                    "name": "echo_tool",
                },
            },
            headers={
                "MCP-Protocol-Version": "2026-07-28",
                "Mcp-Method": "tools/call",
                "Mcp-Name": "echo_tool",
            },
            timeout=call_timeout,
        )
        raise AssertionError("a silent method answered")
    except httpx.ReadTimeout:
        pass
    assert time.monotonic() - started >= 0.3
    assert lab_server.wait_event("request.held")[0]["method"] == "tools/call"
    assert call(lab_server.url, "tools/list").status_code == 200


def test_read_and_call_delays(lab_server: LabServer) -> None:
    lab_server.configure(readDelayMs=200, callDelayMs=200)
    started = time.monotonic()
    read_text(lab_server.url)
    call(lab_server.url, "tools/call", {"name": "get_review_status"})
    assert time.monotonic() - started >= 0.4
