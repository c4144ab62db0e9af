"""subscriptions/listen over real HTTP: ack, update cycle, filters, keep-alive, limits."""

import asyncio
import time
from typing import Any

import httpx
import pytest

from tests.labserver.helpers import (
    REVIEW,
    SERVER_INFO,
    SUB_ID,
    Stream,
    body,
    call,
    headers,
    listen,
    read_text,
)
from tests.support.lab import LabServer

REVIEWED = "status: reviewed\nversion: 2\nmessage: Simulated review result is now available."
PENDING = "status: pending\nversion: 1\nmessage: Waiting for simulated review result."


def ack_of(stream: Stream, sid: Any = "listen-1") -> dict[str, Any]:
    assert stream.response.status_code == 200
    assert stream.response.headers["content-type"].startswith("text/event-stream")
    assert stream.response.headers["cache-control"] == "no-cache, no-transform"
    assert stream.response.headers["x-accel-buffering"] == "no"
    ack = stream.next_message()
    assert ack["method"] == "notifications/subscriptions/acknowledged"
    assert ack["params"]["_meta"][SUB_ID] == sid
    honored: dict[str, Any] = ack["params"]["notifications"]
    return honored


def test_full_cycle_listen_ack_update_reread(lab_server: LabServer) -> None:
    assert read_text(lab_server.url) == PENDING
    with listen(lab_server.url, request_id=7) as stream:
        assert ack_of(stream, 7) == {"resourceSubscriptions": [REVIEW]}
        update = stream.next_message()
        assert update == {
            "jsonrpc": "2.0",
            "method": "notifications/resources/updated",
            "params": {"_meta": {SUB_ID: 7}, "uri": REVIEW},
        }
        assert read_text(lab_server.url) == REVIEWED
    lab_server.wait_event("listen.closed")
    events = [e["event"] for e in lab_server.log()]
    ack = events.index("listen.acknowledged")
    sent = events.index("notification.sent")
    reread = len(events) - 1 - events[::-1].index("resources.read")
    assert ack < sent < reread
    lab_server.wait_for_line(f"[resources/read] uri={REVIEW} version=2")
    lines = lab_server.lines
    expected = [
        f"[resources/read] uri={REVIEW} version=1",
        f"[resource/update] uri={REVIEW} version=2",
        f"[notification/send] notifications/resources/updated uri={REVIEW}",
        f"[resources/read] uri={REVIEW} version=2",
    ]
    positions = [lines.index(line) for line in expected]
    assert positions == sorted(positions)
    assert not any("list_changed" in line for line in lines)


def test_repeated_probes_each_see_the_update(lab_server: LabServer) -> None:
    for round_ in range(3):
        assert read_text(lab_server.url) == PENDING, round_
        with listen(lab_server.url, request_id=round_) as stream:
            ack_of(stream, round_)
            assert stream.next_message()["method"] == "notifications/resources/updated"
            assert read_text(lab_server.url) == REVIEWED
        lab_server.wait_event("listen.closed", count=round_ + 1)
        assert lab_server.state()["streams"] == 0


def test_string_and_number_ids_keep_their_type(lab_server: LabServer) -> None:
    with listen(lab_server.url, request_id="1") as stream:
        assert ack_of(stream, "1") is not None
        assert stream.next_message()["params"]["_meta"][SUB_ID] == "1"


def test_list_changed_sent_only_when_enabled_and_asked(lab_server_factory: Any) -> None:
    lab = lab_server_factory({"MCP_TEST_SEND_LIST_CHANGED": "true"})
    asked = {
        "resourceSubscriptions": [REVIEW],
        "resourcesListChanged": True,
        "toolsListChanged": True,
        "promptsListChanged": True,
    }
    with listen(lab.url, asked) as stream:
        assert ack_of(stream) == {"resourcesListChanged": True, "resourceSubscriptions": [REVIEW]}
        assert stream.next_message()["method"] == "notifications/resources/updated"
        changed = stream.next_message()
        assert changed["method"] == "notifications/resources/list_changed"
        assert changed["params"] == {"_meta": {SUB_ID: "listen-1"}}
    lab.wait_for_line("[notification/send] notifications/resources/list_changed")


def test_list_changed_not_honored_when_disabled(lab_server: LabServer) -> None:
    asked = {"resourceSubscriptions": [REVIEW], "resourcesListChanged": True}
    with listen(lab_server.url, asked) as stream:
        assert ack_of(stream) == {"resourceSubscriptions": [REVIEW]}
        assert stream.next_message()["method"] == "notifications/resources/updated"
        lab_server.control("POST", "/lab/update")  # a second update: still no list_changed
        assert stream.next_message()["method"] == "notifications/resources/updated"
    methods = {e.get("method") for e in lab_server.log() if e["event"] == "notification.sent"}
    assert methods == {"notifications/resources/updated"}


def test_updates_only_for_honored_uris(lab_server: LabServer) -> None:
    lab_server.configure(updateDelaySeconds=60)
    lab_server.control("PUT", "/lab/resources", json={"uri": "test://other", "text": "a"})
    with listen(lab_server.url, {"resourceSubscriptions": ["test://other"]}) as stream:
        ack_of(stream)
        lab_server.control("POST", "/lab/update")  # review changes: not for this stream
        lab_server.control("PUT", "/lab/resources", json={"uri": "test://other", "text": "b"})
        update = stream.next_message()
        assert update["params"]["uri"] == "test://other"
    sent = [e for e in lab_server.log() if e["event"] == "notification.sent"]
    assert [e["uri"] for e in sent] == ["test://other"]


def test_no_buffering_for_late_streams(lab_server: LabServer) -> None:
    lab_server.configure(updateDelaySeconds=60, keepaliveSeconds=0.05)
    lab_server.control("PUT", "/lab/resources", json={"uri": "test://x", "text": "1"})
    lab_server.control("PUT", "/lab/resources", json={"uri": "test://x", "text": "2"})
    with listen(lab_server.url, {"resourceSubscriptions": ["test://x"]}) as stream:
        ack_of(stream)
        assert stream.next_event().comment == ": keepalive"


def test_keepalive_comment_arrives(lab_server_factory: Any) -> None:
    lab = lab_server_factory(
        {"MCP_TEST_KEEPALIVE_SECONDS": "0.1", "MCP_TEST_UPDATE_DELAY_SECONDS": "60"}
    )
    with listen(lab.url) as stream:
        ack_of(stream)
        started = time.monotonic()
        event = stream.next_event()
        assert event.message is None and event.comment == ": keepalive"
        assert time.monotonic() - started < 10  # the 0.1 s keep-alive, not the 60 s update


def test_subscription_cap(lab_server_factory: Any) -> None:
    lab = lab_server_factory(
        {"MCP_TEST_MAX_SUBSCRIPTIONS": "1", "MCP_TEST_UPDATE_DELAY_SECONDS": "60"}
    )
    with listen(lab.url, request_id="first") as stream:
        ack_of(stream, "first")
        with listen(lab.url, request_id="second") as refused:
            # Seed 001: "exceeding returns 503 + -32603".
            assert refused.response.status_code == 503
            assert refused.response.headers["content-type"].startswith("application/json")
            refused.response.read()
            payload = refused.response.json()
        assert payload["id"] == "second"
        assert payload["error"] == {"code": -32603, "message": "Subscription limit reached"}
    lab.wait_event("listen.closed")
    with listen(lab.url, request_id="third") as again:
        ack_of(again, "third")
    assert [e["subscriptionId"] for e in lab.log() if e["event"] == "listen.refused"] == ["second"]


def test_client_disconnect_unregisters_and_cancels_the_timer(lab_server: LabServer) -> None:
    lab_server.configure(updateDelaySeconds=0.5)
    with listen(lab_server.url) as stream:
        ack_of(stream)
        assert lab_server.state()["streams"] == 1
    closed = lab_server.wait_event("listen.closed")
    assert closed[0]["reason"] == "client"
    assert lab_server.state()["streams"] == 0
    assert read_text(lab_server.url) == PENDING
    # A second listen starts a timer of its own. Had the first not been cancelled, it would
    # fire first (0.5 s after the first listen opened); the one update must come a whole
    # delay after the second listen opened. Waiting on that event proves it, without a sleep.
    with listen(lab_server.url) as again:
        ack_of(again)
        [updated] = lab_server.wait_event("resource.updated", timeout=5)
    opened = [e for e in lab_server.log() if e["event"] == "listen.opened"]
    assert len(opened) == 2
    assert updated["time"] >= opened[1]["time"] + 0.5 - 0.05, (updated, opened)
    assert len([e for e in lab_server.log() if e["event"] == "resource.updated"]) == 1


@pytest.mark.parametrize("subscribe", [True, False])
def test_dishonored_and_unadvertised_uris(lab_server: LabServer, subscribe: bool) -> None:
    lab_server.configure(dishonorUris=["test://nope"], advertiseSubscribe=subscribe)
    asked = {"resourceSubscriptions": [REVIEW, "test://nope"]}
    with listen(lab_server.url, asked) as stream:
        honored = ack_of(stream)
    assert honored == ({"resourceSubscriptions": [REVIEW]} if subscribe else {})
    caps = call(lab_server.url, "server/discover").json()["result"]["capabilities"]
    assert caps["resources"]["subscribe"] is subscribe


def test_graceful_close_sends_the_result(lab_server: LabServer) -> None:
    lab_server.configure(updateDelaySeconds=60)
    with listen(lab_server.url, request_id=11) as stream:
        ack_of(stream, 11)
        assert lab_server.control("POST", "/lab/streams/close").json() == {"closed": 1}
        final = stream.next_message()
        assert final["id"] == 11
        assert final["result"]["resultType"] == "complete"
        assert final["result"]["_meta"][SUB_ID] == 11
        assert final["result"]["_meta"][SERVER_INFO]["name"] == "mcp-resource-subscribe-test"
        with pytest.raises(EOFError):
            stream.next_event()
    assert lab_server.wait_event("listen.closed")[0]["reason"] == "graceful"


def test_drop_breaks_the_stream_without_a_result(lab_server: LabServer) -> None:
    lab_server.configure(updateDelaySeconds=60)
    with listen(lab_server.url) as stream:
        ack_of(stream)
        assert lab_server.control("POST", "/lab/streams/drop").json() == {"dropped": 1}
        with pytest.raises(httpx.RemoteProtocolError):
            stream.next_event()
    assert lab_server.wait_event("listen.closed")[0]["reason"] == "dropped"
    assert lab_server.state()["streams"] == 0


def test_drop_and_close_after_ack_modes(lab_server: LabServer) -> None:
    lab_server.configure(updateDelaySeconds=60, dropAfterAckMs=50)
    with listen(lab_server.url) as stream:
        ack_of(stream)
        with pytest.raises(httpx.RemoteProtocolError):
            stream.next_event()
    lab_server.configure(dropAfterAckMs=None, closeAfterAckMs=50)
    with listen(lab_server.url, request_id="c") as stream:
        ack_of(stream, "c")
        assert stream.next_message()["id"] == "c"
    reasons = [e["reason"] for e in lab_server.wait_event("listen.closed", count=2)]
    assert reasons == ["dropped", "graceful"]


def test_ack_delay_and_refusal(lab_server: LabServer) -> None:
    lab_server.configure(ackDelayMs=300, updateDelaySeconds=0)
    started = time.monotonic()
    with listen(lab_server.url) as stream:
        ack_of(stream)
        assert time.monotonic() - started >= 0.3
        # The update fired while the ack was delayed: it is queued behind the ack, not lost.
        assert stream.next_message()["method"] == "notifications/resources/updated"
    lab_server.configure(refuseListen=True)
    with listen(lab_server.url, request_id=2) as refused:
        refused.response.read()
        assert refused.response.json()["error"]["code"] == -32603


def test_the_seed_limit_is_100_streams_and_the_101st_gets_503(lab_server_factory: Any) -> None:
    lab = lab_server_factory({"MCP_TEST_UPDATE_DELAY_SECONDS": "600"})
    wanted = {"notifications": {"resourceSubscriptions": [REVIEW]}}

    async def flood() -> tuple[list[int], dict[str, Any]]:
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=0)
        async with httpx.AsyncClient(timeout=30, limits=limits) as client:
            opened: list[httpx.Response] = []
            try:
                for n in range(100):
                    request = client.build_request(
                        "POST",
                        lab.url,
                        headers=headers("subscriptions/listen"),
                        json=body("subscriptions/listen", wanted, n),
                    )
                    opened.append(await client.send(request, stream=True))
                extra = await client.post(
                    lab.url,
                    headers=headers("subscriptions/listen"),
                    json=body("subscriptions/listen", wanted, "extra"),
                )
                return [r.status_code for r in opened] + [extra.status_code], extra.json()
            finally:
                for response in opened:
                    await response.aclose()

    statuses, refusal = asyncio.run(flood())
    assert statuses == [200] * 100 + [503]
    assert refusal == {
        "jsonrpc": "2.0",
        "id": "extra",
        "error": {"code": -32603, "message": "Subscription limit reached"},
    }


@pytest.mark.parametrize(
    "asked",
    [{}, {"toolsListChanged": True}, {"resourceSubscriptions": [REVIEW]}],
    ids=["empty", "unsupported-type", "all-dishonored"],
)
def test_a_listen_that_can_carry_nothing_is_closed_after_its_ack(
    lab_server: LabServer, asked: dict[str, Any]
) -> None:
    lab_server.configure(updateDelaySeconds=60, keepaliveSeconds=0.05, dishonorUris=[REVIEW])
    with listen(lab_server.url, asked, request_id=5) as stream:
        assert ack_of(stream, 5) in ({}, {"resourceSubscriptions": []})
        # The final result comes next, not a keep-alive (seed 001: holding the slot open
        # would only invite exhaustion).
        final = stream.next_event()
        assert final.message is not None and final.message["id"] == 5, final
        assert final.message["result"]["resultType"] == "complete"
        with pytest.raises(EOFError):
            stream.next_event()
    assert lab_server.wait_event("listen.closed")[0]["reason"] == "graceful"
    assert lab_server.state()["streams"] == 0
