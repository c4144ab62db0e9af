"""``/mcp``'s bounds, each attacked: message size, sessions, pending waits and listens,
and a session's notification queue. The API is served by uvicorn on a real unix socket
(``tests/api/live.py``) over a real SQLite store; the daemon keeps answering throughout."""

from __future__ import annotations

import json
from typing import Any

import httpx

from service.face import protocol as p
from service.face.http import MAX_MESSAGE_BYTES
from tests.api.live import LiveApi
from tests.support.http import uds_client
from tests.support.poll import until

URL = "http://127.0.0.1:1/mcp"
MODERN = {"MCP-Protocol-Version": p.MODERN}
META = {"_meta": {p.META_VERSION: p.MODERN, p.META_CAPS: {}}}


def client(live: LiveApi, timeout: float = 10) -> httpx.Client:
    return uds_client(
        str(live.socket_path),
        headers={"Accept": "application/json, text/event-stream"},
        timeout=httpx.Timeout(10, read=timeout),
    )


def rpc(method: str, params: dict[str, Any] | None = None, msg_id: int = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params or {}}


def modern(c: httpx.Client, method: str, params: dict[str, Any], **headers: str) -> httpx.Response:
    return c.post(
        "/mcp",
        json=rpc(method, {**params, **META}),
        headers={**MODERN, "Mcp-Method": method, **headers},
    )


def initialize(c: httpx.Client) -> httpx.Response:
    return c.post("/mcp", json=rpc("initialize", {"protocolVersion": "2025-06-18"}))


def test_an_oversized_message_gets_413_and_the_face_keeps_answering(live: LiveApi) -> None:
    with client(live) as c:
        big = json.dumps(rpc("tools/list", {"pad": "x" * MAX_MESSAGE_BYTES}))
        response = c.post("/mcp", content=big, headers={"Content-Type": "application/json"})
        assert response.status_code == 413
        assert response.json()["error"]["code"] == p.INVALID_REQUEST
        assert modern(c, "tools/list", {}).status_code == 200


def test_the_2026_validation_ladder_on_http(live: LiveApi) -> None:
    with client(live) as c:
        no_meta = c.post(
            "/mcp", json=rpc("server/discover"), headers={**MODERN, "Mcp-Method": "server/discover"}
        )
        assert (no_meta.status_code, no_meta.json()["error"]["code"]) == (400, p.INVALID_PARAMS)
        wrong_method = modern(c, "tools/list", {}, **{"Mcp-Method": "resources/list"})
        assert wrong_method.json()["error"]["code"] == p.HEADER_MISMATCH
        removed = modern(c, "ping", {})
        assert (removed.status_code, removed.json()["error"]["code"]) == (404, p.METHOD_NOT_FOUND)
        read = modern(c, "resources/read", {"uri": "a:b"})
        assert read.json()["error"]["code"] == p.HEADER_MISMATCH  # no Mcp-Name
        named = modern(c, "resources/read", {"uri": "a:b"}, **{"Mcp-Name": "a:b"})
        assert named.json()["error"]["code"] == p.INVALID_PARAMS
        assert named.json()["error"]["data"] == {"uri": "a:b"}
        assert named.json()["id"] == 1
        discover = modern(c, "server/discover", {}).json()["result"]
        assert discover["supportedVersions"] == [p.MODERN]
        assert c.get("/mcp").status_code == 405
        note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {}}
        assert c.post("/mcp", json=note, headers=MODERN).status_code == 202


def test_sessions_are_capped_and_a_deleted_one_frees_its_place(live: LiveApi) -> None:
    live.app.state.face_http.max_sessions = 3
    with client(live) as c:
        sessions = [initialize(c).headers["mcp-session-id"] for _ in range(3)]
        refused = initialize(c)
        assert refused.status_code == 503
        assert "Too many open sessions" in refused.json()["error"]["message"]
        assert c.delete("/mcp", headers={"Mcp-Session-Id": sessions[0]}).status_code == 200
        assert initialize(c).status_code == 200
        unknown = c.post(
            "/mcp", json=rpc("tools/list"), headers={"Mcp-Session-Id": "not-a-session"}
        )
        assert unknown.status_code == 404
        assert c.post("/mcp", json=rpc("tools/list")).status_code == 400


def test_pending_waits_and_listens_share_the_api_waiter_limit(live: LiveApi) -> None:
    live.app.state.api.max_waiters = 0
    with client(live) as c:
        wait = modern(
            c,
            "tools/call",
            {"name": "wait_for_change", "arguments": {"timeoutSeconds": 5}},
            **{"Mcp-Name": "wait_for_change"},
        )
        assert wait.status_code == 200
        assert "limit 0" in wait.json()["error"]["message"]
        listen = modern(
            c, "subscriptions/listen", {"notifications": {"resourcesListChanged": True}}
        )
        assert listen.json()["error"]["message"] == "Subscription limit reached"
        assert modern(c, "tools/list", {}).status_code == 200


def test_a_session_queue_drops_what_does_not_fit(live: LiveApi) -> None:
    face_http = live.app.state.face_http
    face_http.queue_limit = 5
    uri = "test://bounded"
    sub = live.call(lambda sup: sup.subscribe(URL, uri))[0]
    live.call(lambda sup: sup.publish(sub, "v1"))
    with client(live) as c:
        sid = initialize(c).headers["mcp-session-id"]
        headers = {"Mcp-Session-Id": sid}
        done = c.post("/mcp", json=rpc("resources/subscribe", {"uri": uri}, 2), headers=headers)
        assert done.status_code == 200 and done.json()["result"] == {}
        for n in range(12):
            live.call(lambda sup, n=n: sup.publish(sub, f"v{n + 2}"))
        session = face_http.sessions[sid].session

        async def dropped(_sup: Any) -> int:
            return int(session.dropped)

        deadline = 200
        while live.call(dropped) < 7 and deadline:
            deadline -= 1
            live.call(lambda sup: sup.store.last_event_id())
        assert live.call(dropped) == 7
        frames: list[dict[str, Any]] = []
        with c.stream("GET", "/mcp", headers=headers) as stream:
            for line in stream.iter_lines():
                if line.startswith("data: "):
                    frames.append(json.loads(line[6:]))
                if len(frames) == 5:
                    break
        assert all(f["method"] == "notifications/resources/updated" for f in frames)
        assert {f["params"]["uri"] for f in frames} == {uri}


def test_a_pending_wait_frees_its_slot_when_the_client_leaves(live: LiveApi) -> None:
    state = live.app.state.api
    with client(live, timeout=0.5) as c:
        try:
            modern(
                c,
                "tools/call",
                {"name": "wait_for_change", "arguments": {"timeoutSeconds": 120}},
                **{"Mcp-Name": "wait_for_change"},
            ).read()
        except httpx.ReadTimeout:
            pass
        else:
            raise AssertionError("the wait answered before its timeout")
    # the client gave up after 0.5 s and closed its connection: the slot is freed at once,
    # not after the 120 s the wait asked for
    until("the wait's slot is freed", lambda: state.waiters == 0, 10)  # another thread's counter
