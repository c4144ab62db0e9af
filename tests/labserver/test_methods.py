"""discover, resources/list (pagination), resources/read, tools/list, tools/call."""

from typing import Any

from tests.labserver.helpers import REVIEW, SERVER_INFO, call
from tests.support.lab import LabServer


def result(response: Any) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/json")
    assert response.headers["x-accel-buffering"] == "no"
    payload: dict[str, Any] = response.json()["result"]
    assert payload["resultType"] == "complete"
    assert payload["_meta"][SERVER_INFO]["name"] == "mcp-resource-subscribe-test"
    return payload


def test_discover(lab_server: LabServer) -> None:
    from service._version import __version__

    response = call(lab_server.url, "server/discover", request_id="d-1")
    assert response.json()["id"] == "d-1"
    found = result(response)
    assert found["supportedVersions"] == ["2026-07-28"]
    assert found["capabilities"] == {
        "resources": {"subscribe": True, "listChanged": False},
        "tools": {},
    }
    assert isinstance(found["ttlMs"], int) and found["cacheScope"] in ("public", "private")
    assert found["_meta"][SERVER_INFO]["version"] == __version__


def test_list_changed_capability_follows_env(lab_server_factory: Any) -> None:
    lab = lab_server_factory({"MCP_TEST_SEND_LIST_CHANGED": "on"})
    caps = result(call(lab.url, "server/discover"))["capabilities"]
    assert caps["resources"] == {"subscribe": True, "listChanged": True}


def test_list_read_and_tools(lab_server: LabServer) -> None:
    listed = result(call(lab_server.url, "resources/list"))
    assert listed["resources"] == [
        {
            "uri": REVIEW,
            "name": "Review Status",
            "description": "A test resource that changes after subscription.",
            "mimeType": "text/plain",
        }
    ]
    assert "nextCursor" not in listed and "ttlMs" in listed and "cacheScope" in listed
    read = result(call(lab_server.url, "resources/read", {"uri": REVIEW}))
    assert read["contents"] == [
        {
            "uri": REVIEW,
            "mimeType": "text/plain",
            "text": "status: pending\nversion: 1\nmessage: Waiting for simulated review result.",
        }
    ]
    assert (read["ttlMs"], read["cacheScope"]) == (0, "private")
    tools = result(call(lab_server.url, "tools/list"))
    assert [t["name"] for t in tools["tools"]] == ["get_review_status", "echo_tool"]
    assert all(t["inputSchema"]["type"] == "object" for t in tools["tools"])
    status = result(call(lab_server.url, "tools/call", {"name": "get_review_status"}))
    assert status["content"] == [{"type": "text", "text": read["contents"][0]["text"]}]
    assert status["isError"] is False
    echo = result(
        call(lab_server.url, "tools/call", {"name": "echo_tool", "arguments": {"message": "hé"}})
    )
    assert (echo["content"][0]["text"], echo["isError"]) == ("hé", False)
    failing = result(
        call(
            lab_server.url, "tools/call", {"name": "echo_tool", "arguments": {"shouldError": True}}
        )
    )
    assert (failing["content"][0]["text"], failing["isError"]) == ("", True)
    lab_server.wait_for_line('[tools/call] echo_tool {"shouldError":true}')
    lines = lab_server.lines
    assert "[resources/list] requested" in lines
    assert f"[resources/read] uri={REVIEW} version=1" in lines
    assert "[tools/call] get_review_status" in lines
    assert '[tools/call] echo_tool {"message":"hé"}' in lines


def test_pagination_with_opaque_cursor(lab_server: LabServer) -> None:
    for n in range(4):
        assert (
            lab_server.control(
                "PUT", "/lab/resources", json={"uri": f"test://r/{n}", "text": "x"}
            ).status_code
            == 201
        )
    lab_server.configure(pageSize=2)
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        params = {"cursor": cursor} if cursor else {}
        page = result(call(lab_server.url, "resources/list", params))
        seen += [r["uri"] for r in page["resources"]]
        pages += 1
        cursor = page.get("nextCursor")
        if cursor is None:
            break
    assert pages == 3
    assert seen == [REVIEW] + [f"test://r/{n}" for n in range(4)]
    bad = call(lab_server.url, "resources/list", {"cursor": "not-a-cursor"}, request_id=6)
    assert bad.status_code == 400
    assert bad.json()["error"]["code"] == -32602 and bad.json()["id"] == 6


def test_healthz(lab_server: LabServer) -> None:
    response = lab_server.http.get("/healthz")
    assert (response.status_code, response.json()) == (200, {"ok": True})
