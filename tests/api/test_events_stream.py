"""GET /v1/events/stream over a real unix socket: replay, resume, reset, keep-alive."""

from __future__ import annotations

import json
import stat
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import delete

from service.store import schema
from tests.api.fakes import FakeSupervisor
from tests.api.live import LiveApi
from tests.support.http import uds_client
from tests.support.poll import until

URL = "http://127.0.0.1:8089/mcp"


def parse_sse(lines: Iterator[str]) -> Iterator[tuple[int | None, str, dict[str, Any]]]:
    """An independent reading of the wire (the CLI uses httpx-sse): comments and ``retry:``
    skipped, the id of *this* frame only (a reset frame carries none), JSON data."""
    event_id: int | None = None
    event_type = "message"
    data: list[str] = []
    for line in lines:
        if line == "":
            if data:
                try:
                    payload = json.loads("\n".join(data))
                except ValueError:
                    payload = {"raw": "\n".join(data)}
                yield (
                    event_id,
                    event_type,
                    payload if isinstance(payload, dict) else {"value": payload},
                )
            event_id, event_type, data = None, "message", []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "id":
            event_id = int(value) if value.isdigit() else None
        elif name == "event":
            event_type = value
        elif name == "data":
            data.append(value)


def _client(live: LiveApi) -> httpx.Client:
    return uds_client(str(live.socket_path), timeout=httpx.Timeout(5.0))


def _seed(live: LiveApi, texts: list[str]) -> None:
    async def go(sup: FakeSupervisor) -> None:
        sub, _ = await sup.subscribe(URL, "test://a")
        for text in texts:
            await sup.publish(sub, text)

    live.call(go)


def _frames(lines: Iterator[str], count: int) -> list[str]:
    """Raw SSE lines until ``count`` blank-line-terminated frames were read."""
    seen: list[str] = []
    for line in lines:
        seen.append(line)
        if line == "" and sum(1 for x in seen if x == "") >= count:
            break
    return seen


def test_socket_is_private(live: LiveApi) -> None:
    mode = live.socket_path.stat().st_mode
    assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o600


def test_stream_replays_then_follows(live: LiveApi) -> None:
    _seed(live, ["v1"])  # events 1 (created), 2 (updated)
    with (
        _client(live) as client,
        client.stream("GET", "/v1/events/stream", params={"after": 0}) as response,
    ):
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["x-accel-buffering"] == "no"
        assert response.headers["cache-control"] == "no-cache"
        lines = response.iter_lines()
        assert next(lines) == "retry: 5000"
        frames = list(parse_sse(_drop_retry(lines, 2)))
        assert [(i, t) for i, t, _ in frames] == [
            (1, "subscription.created"), (2, "resource.updated")
        ]  # fmt: skip
        assert frames[1][2]["uri"] == "test://a" and frames[1][2]["revision"] == 1
        live.call_later(0.1, lambda sup: _publish(sup, "v2"))
        more = list(parse_sse(_drop_retry(lines, 1)))
        assert more[0][0] == 3 and more[0][2]["revision"] == 2


async def _publish(sup: FakeSupervisor, text: str) -> None:
    sub = (await sup.store.find_subscriptions("test://a"))[0]
    await sup.publish(sub, text)


def _drop_retry(lines: Iterator[str], count: int) -> Iterator[str]:
    """Yield SSE lines (keep-alive comments included) until ``count`` events were seen."""
    events = 0
    for line in lines:
        yield line
        if line.startswith("event:"):
            events += 1
        if line == "" and events >= count:
            return


@pytest.mark.parametrize("how", ["header", "query", "after"])
def test_resume_from_cursor(live: LiveApi, how: str) -> None:
    _seed(live, ["v1", "v2", "v3"])  # ids 1..4
    headers = {"Last-Event-ID": "2"} if how == "header" else {}
    params = {"last_event_id": "2"} if how == "query" else {"after": "2"} if how == "after" else {}
    with (
        _client(live) as client,
        client.stream("GET", "/v1/events/stream", headers=headers, params=params) as response,
    ):
        frames = list(parse_sse(_drop_retry(response.iter_lines(), 2)))
    assert [i for i, _, _ in frames] == [3, 4]


def test_header_wins_over_query(live: LiveApi) -> None:
    _seed(live, ["v1", "v2"])  # ids 1..3
    with (
        _client(live) as client,
        client.stream(
            "GET", "/v1/events/stream", headers={"Last-Event-ID": "2"}, params={"after": "0"}
        ) as response,
    ):
        frames = list(parse_sse(_drop_retry(response.iter_lines(), 1)))
    assert frames[0][0] == 3


def test_reset_when_cursor_predates_history(live: LiveApi) -> None:
    _seed(live, ["v1", "v2", "v3", "v4"])  # ids 1..5

    async def prune(sup: FakeSupervisor) -> None:
        async with sup.store.engine.begin() as conn:
            await conn.execute(delete(schema.events).where(schema.events.c.id <= 3))

    live.call(prune)
    with (
        _client(live) as client,
        client.stream("GET", "/v1/events/stream", headers={"Last-Event-ID": "1"}) as response,
    ):
        frames = list(parse_sse(_drop_retry(response.iter_lines(), 3)))
    assert frames[0][1] == "reset" and frames[0][0] is None
    assert frames[0][2] == {"requestedAfter": 1, "firstEventId": 4, "lastEventId": 5}
    assert [i for i, _, _ in frames[1:]] == [4, 5]


def test_reset_when_cursor_is_from_the_future(live: LiveApi) -> None:
    _seed(live, ["v1"])  # ids 1..2
    with (
        _client(live) as client,
        client.stream("GET", "/v1/events/stream", headers={"Last-Event-ID": "99"}) as response,
    ):
        lines = response.iter_lines()
        frames = list(parse_sse(_drop_retry(lines, 1)))
        assert frames[0][1] == "reset" and frames[0][2]["lastEventId"] == 2
        live.call_later(0.1, lambda sup: _publish(sup, "v2"))
        assert next(iter(parse_sse(_drop_retry(lines, 1))))[0] == 3


def test_keepalive_comment_and_live_default(live: LiveApi) -> None:
    _seed(live, ["v1"])
    with _client(live) as client, client.stream("GET", "/v1/events/stream") as response:
        lines = response.iter_lines()
        assert next(lines) == "retry: 5000"
        assert next(lines) == ""
        started = time.monotonic()
        assert next(lines) == ": keep-alive"  # nothing replayed without a cursor
        assert 0.2 < time.monotonic() - started < 10


def test_filters_and_bad_cursor(live: LiveApi) -> None:
    _seed(live, ["v1"])
    with _client(live) as client:
        with client.stream(
            "GET", "/v1/events/stream", params={"after": 0, "type": "resource.updated"}
        ) as response:
            frames = list(parse_sse(_drop_retry(response.iter_lines(), 1)))
        assert frames[0][1] == "resource.updated"
        bad = client.get("/v1/events/stream", headers={"Last-Event-ID": "abc"})
        assert bad.status_code == 400 and bad.json()["field"] == "Last-Event-ID"


def test_disconnect_releases_the_stream(live: LiveApi) -> None:
    with _client(live) as client:
        for _ in range(3):
            with client.stream("GET", "/v1/events/stream") as response:
                assert next(response.iter_lines()) == "retry: 5000"
        app_state = live.server.config.app.state.api
        until("every stream's slot is freed", lambda: app_state.waiters == 0, 5)
        assert client.get("/healthz").json() == {"ok": True}


def test_caught_up_stream_reads_from_memory(live: LiveApi) -> None:
    _seed(live, ["v1"])  # ids 1..2
    with (
        _client(live) as client,
        client.stream("GET", "/v1/events/stream", params={"after": 2}) as response,
    ):
        lines = response.iter_lines()
        live.call_later(0.1, lambda sup: _publish(sup, "v2"))
        assert next(iter(parse_sse(_drop_retry(lines, 1))))[0] == 3
        hits = live.call(_ring_hits)
        live.call_later(0.1, lambda sup: _publish(sup, "v3"))
        frame = next(iter(parse_sse(_drop_retry(lines, 1))))
        assert frame[0] == 4 and frame[2]["revision"] == 3
    assert live.call(_ring_hits) > hits


async def _ring_hits(sup: FakeSupervisor) -> int:
    return sup.events.ring_hits


def test_event_committed_without_notice_is_still_streamed(live: LiveApi) -> None:
    """An event row the hub never heard of (a gap in its ring) comes from the table."""
    _seed(live, ["v1"])  # ids 1..2
    with (
        _client(live) as client,
        client.stream("GET", "/v1/events/stream", params={"after": 2}) as response,
    ):
        lines = response.iter_lines()
        live.call_later(0.1, lambda sup: _publish(sup, "v2"))  # id 3, from memory
        assert next(iter(parse_sse(_drop_retry(lines, 1))))[0] == 3

        async def silent_then_published(sup: FakeSupervisor) -> None:
            async with sup.store.engine.begin() as conn:
                await conn.execute(
                    schema.events.insert().values(
                        type="subscription.created",
                        subscription_id=1,
                        server_url=URL,
                        uri="test://a",
                        data="{}",
                        created_at=time.time(),
                    )
                )  # id 4: committed, never published
            await _publish(sup, "v3")  # id 5

        live.call_later(0.1, silent_then_published)
        frames = list(parse_sse(_drop_retry(lines, 2)))
        assert [i for i, _, _ in frames] == [4, 5]


def test_include_content_carries_small_revisions_only(live: LiveApi) -> None:
    """``include=content``: each resource.updated event carries its revision's text while
    its JSON fits 32 KiB, from the table (replay) and from memory (caught up); a bigger
    one rides without it; any other ``include`` is a 400."""
    big = "x" * (40 * 1024)
    _seed(live, ["v1", big])
    params = {"after": 0, "include": "content", "type": "subscription.created,resource.updated"}
    with (
        _client(live) as client,
        client.stream("GET", "/v1/events/stream", params=params) as response,
    ):
        lines = response.iter_lines()
        frames = list(parse_sse(_drop_retry(lines, 3)))
        assert "content" not in frames[0][2]
        content = frames[1][2]["content"]
        assert content["revision"] == 1 and content["text"] == "v1"
        assert content["contents"][0]["text"] == "v1" and content["contentHash"]
        kept = client.get(f"/v1/subscriptions/{frames[1][2]['subscriptionId']}/revisions/1")
        assert content == {
            k: v for k, v in kept.json().items() if k not in ("subscriptionId", "uri")
        }
        assert frames[2][2]["revision"] == 2 and "content" not in frames[2][2]
        live.call_later(0.1, lambda sup: _publish(sup, "v3"))
        frame = next(iter(parse_sse(_drop_retry(lines, 1))))
        assert frame[2]["revision"] == 3 and frame[2]["content"]["text"] == "v3"
    with (
        _client(live) as client,
        client.stream(
            "GET", "/v1/events/stream", params={"after": 0, "type": params["type"]}
        ) as response,
    ):
        plain = list(parse_sse(_drop_retry(response.iter_lines(), 2)))
        assert (
            plain[1][2]["revision"] == 1 and "content" not in plain[1][2]
        )  # not asked for: the event's own shape
    with _client(live) as client:
        bad = client.get("/v1/events/stream", params={"include": "secrets"})
        assert bad.status_code == 400 and bad.json()["errorCode"] == "INVALID_PARAMETER"
