"""service.probe pure parts: text_of, uri_matcher, NotificationQueue, ProbeResult."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from service.mcp.errors import (
    JsonRpcError,
    ListenClosed,
    ListenLost,
    McpError,
    ProtocolViolation,
)
from service.mcp.listen import Closed, Failed, Lost
from service.probe import (
    MAX_QUEUED_NOTIFICATIONS,
    NotificationQueue,
    ProbeResult,
    ResourceNotText,
    text_of,
    uri_matcher,
)

URI = "test://review/status"


# ---- text_of ---------------------------------------------------------------------------
def test_text_of_prefers_matching_uri() -> None:
    result = {
        "contents": [
            {"uri": "other://x", "text": "other"},
            {"uri": URI, "blob": "AAAA"},
            {"uri": URI, "text": "mine"},
        ]
    }
    assert text_of(result, URI) == "mine"


def test_text_of_falls_back_to_first_text() -> None:
    result = {"contents": [{"uri": "a://1", "blob": "AA"}, {"uri": "a://2", "text": "second"}]}
    assert text_of(result, URI) == "second"


def test_text_of_empty_text_is_text() -> None:
    assert text_of({"contents": [{"uri": URI, "text": ""}]}, URI) == ""


@pytest.mark.parametrize(
    "result",
    [
        {"contents": [{"uri": URI, "blob": "AAAA", "mimeType": "image/png"}]},
        {"contents": [{"uri": URI, "text": 5}]},
        {"contents": []},
        {"contents": "text"},
        {},
    ],
)
def test_text_of_without_text_raises(result: dict[str, Any]) -> None:
    with pytest.raises(ResourceNotText, match="Expected text resource content"):
        text_of(result, URI)


def test_uri_matcher() -> None:
    exact = uri_matcher([URI, "b://x"], exact=True)
    assert exact(URI) and exact("b://x")
    assert not exact(URI + "/sub")
    assert uri_matcher([URI], exact=False)("anything://at/all")


# ---- NotificationQueue -----------------------------------------------------------------
def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 2.0))


def test_non_matching_pushes_are_ignored() -> None:
    async def scenario() -> None:
        q = NotificationQueue(lambda u: u == URI)
        q.push("other://x")
        assert q.count == 0
        assert q.last_uri is None
        q.push(URI)
        assert q.count == 1
        assert await q.wait_after(0) == (1, URI)

    run(scenario())


def test_wait_after_returns_first_sequence_greater_than_n() -> None:
    async def scenario() -> None:
        q = NotificationQueue(lambda u: True)
        for uri in ("a://1", "a://2", "a://3"):
            q.push(uri)
        assert await q.wait_after(0) == (1, "a://1")
        assert await q.wait_after(1) == (2, "a://2")
        assert await q.wait_after(2) == (3, "a://3")
        assert q.last_uri == "a://3"
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(q.wait_after(3), 0.01)

    run(scenario())


def test_push_during_pending_wait_wakes_it() -> None:
    async def scenario() -> None:
        q = NotificationQueue(lambda u: True)
        q.push("a://old")
        waiter = asyncio.create_task(q.wait_after(1))
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert not waiter.done()
        q.push("a://new")
        assert await asyncio.wait_for(waiter, 1.0) == (2, "a://new")

    run(scenario())


def test_two_waiters_both_wake() -> None:
    async def scenario() -> None:
        q = NotificationQueue(lambda u: True)
        first = asyncio.create_task(q.wait_after(0))
        second = asyncio.create_task(q.wait_after(0))
        await asyncio.sleep(0)
        q.push("a://1")
        assert await asyncio.wait_for(asyncio.gather(first, second), 1.0) == [
            (1, "a://1"),
            (1, "a://1"),
        ]

    run(scenario())


@pytest.mark.parametrize(
    ("why", "error_type", "code", "close_reason"),
    [
        (Closed({}), ListenClosed, "SUBSCRIPTION_CLOSED", "graceful"),
        (Lost("eof"), ListenLost, "SUBSCRIPTION_DISCONNECTED", "remote"),
        (Failed(JsonRpcError(-32603, "x")), ListenLost, "SUBSCRIPTION_DISCONNECTED", "remote"),
    ],
)
def test_end_makes_pending_waiter_raise(
    why: Any, error_type: type, code: str, close_reason: str
) -> None:
    async def scenario() -> None:
        q = NotificationQueue(lambda u: True)
        waiter = asyncio.create_task(q.wait_after(0))
        await asyncio.sleep(0)
        q.end(why)
        with pytest.raises(error_type) as info:
            await asyncio.wait_for(waiter, 1.0)
        assert info.value.error_code == code
        assert info.value.close_reason == close_reason
        # Later waits fail at once too.
        with pytest.raises(error_type):
            await q.wait_after(0)

    run(scenario())


def test_lost_reason_is_in_message() -> None:
    async def scenario() -> None:
        q = NotificationQueue(lambda u: True)
        q.end(Lost("connection reset by peer"))
        with pytest.raises(ListenLost, match="connection reset by peer"):
            await q.wait_after(0)

    run(scenario())


def test_end_with_mcp_error_reraises_it() -> None:
    async def scenario() -> None:
        q = NotificationQueue(lambda u: True)
        violation = ProtocolViolation("bad frame")
        q.end(violation)
        with pytest.raises(McpError) as info:
            await q.wait_after(0)
        assert info.value is violation

    run(scenario())


def test_first_end_wins() -> None:
    async def scenario() -> None:
        q = NotificationQueue(lambda u: True)
        q.end(Closed({}))
        q.end(Lost("later"))
        with pytest.raises(ListenClosed):
            await q.wait_after(0)

    run(scenario())


def test_queued_items_are_delivered_before_the_end() -> None:
    async def scenario() -> None:
        q = NotificationQueue(lambda u: True)
        q.push("a://1")
        q.end(Lost("eof"))
        assert await q.wait_after(0) == (1, "a://1")
        with pytest.raises(ListenLost):
            await q.wait_after(1)

    run(scenario())


def test_queue_keeps_only_the_newest_100() -> None:
    async def scenario() -> None:
        assert MAX_QUEUED_NOTIFICATIONS == 100
        q = NotificationQueue(lambda u: True)
        for i in range(1, 151):
            q.push(f"a://{i}")
        assert q.count == 150
        assert await q.wait_after(0) == (51, "a://51")
        assert await q.wait_after(149) == (150, "a://150")

    run(scenario())


# ---- ProbeResult -----------------------------------------------------------------------
def test_probe_result_derived_fields() -> None:
    r = ProbeResult("http://x/mcp", URI, [URI])
    assert r.route == "timeout"
    assert r.notification_received is False
    assert r.recommended_next_action is None
    r.route = "subscription"
    r.final_text = '{"recommended_next_action":"READ_REVIEW_THREADS"}'
    assert r.notification_received is True
    assert r.recommended_next_action == "READ_REVIEW_THREADS"
    r.route = "pre-completion"
    assert r.notification_received is False
