"""A 2026-07-28 listen whose client stopped reading: its queue fills, and the stream ends
without the listen's result (an abrupt end: the client re-listens and re-reads) instead of
buffering without bound. ASGI driven directly, with an in-memory backend."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from service.face import protocol as p
from service.face.backend import LookThenWait
from service.face.handlers import Face
from service.face.http import FaceHttp
from service.http.limits import RequestLimits

URI = "test://x"


class MemoryBackend(LookThenWait):
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.changed = asyncio.Event()
        self.served_up_to = 0

    def add(self, n: int) -> None:
        for _ in range(n):
            event_id = len(self.events) + 1
            self.events.append(
                {"id": event_id, "type": "resource.updated", "subscriptionId": 1, "uri": URI}
            )
        self.changed.set()

    async def subscriptions(self) -> list[dict[str, Any]]:
        return [{"id": 1, "uri": URI, "serverUrl": "http://127.0.0.1:1/mcp", "state": "active"}]

    async def identities(self) -> list[dict[str, Any]]:
        return await self.subscriptions()

    async def events_after(
        self, after: int, limit: int, types: list[str] | None = None
    ) -> list[dict[str, Any]]:
        page = [e for e in self.events if e["id"] > after][:limit]
        if page:
            self.served_up_to = max(self.served_up_to, page[-1]["id"])
        return page

    async def last_event_id(self) -> int:
        return len(self.events)

    async def wait_beyond(self, cursor: int, timeout: float) -> bool:
        if len(self.events) > cursor:
            return True
        self.changed.clear()
        try:
            async with asyncio.timeout(timeout):
                await self.changed.wait()
        except TimeoutError:
            return False
        return True


def test_an_unread_listen_overflows_and_ends_without_its_result() -> None:
    async def scenario() -> None:
        backend = MemoryBackend()
        state = RequestLimits(keepalive_s=30)
        app = FaceHttp(Face(backend), state, queue_limit=3)  # type: ignore[arg-type]
        body = {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "subscriptions/listen",
            "params": {
                "_meta": {p.META_VERSION: p.MODERN, p.META_CAPS: {}},
                "notifications": {"resourceSubscriptions": [URI]},
            },
        }
        raw = json.dumps(body).encode()
        scope = {
            "type": "http", "method": "POST", "path": "/mcp", "query_string": b"",
            "headers": [
                (b"content-type", b"application/json"), (b"mcp-protocol-version", p.MODERN.encode()),
                (b"mcp-method", b"subscriptions/listen"),
            ],
        }  # fmt: skip
        sent: list[bytes] = []
        reading = asyncio.Event()
        got_ack = asyncio.Event()
        request_done = asyncio.Event()

        async def receive() -> dict[str, Any]:
            if not request_done.is_set():
                request_done.set()
                return {"type": "http.request", "body": raw, "more_body": False}
            await asyncio.Event().wait()  # the client never disconnects
            raise AssertionError

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.body" and message.get("body"):
                sent.append(message["body"])
                got_ack.set()
                await reading.wait()  # the client stops reading after the first frame

        task = asyncio.create_task(app(scope, receive, send))
        await asyncio.wait_for(got_ack.wait(), 5)
        assert b"notifications/subscriptions/acknowledged" in sent[0]
        backend.add(20)  # far more than the queue holds
        async with asyncio.timeout(5):
            while backend.served_up_to < 20:  # until the follower has pushed every event
                await asyncio.sleep(0)
        reading.set()  # the client reads again: it gets what was queued, then the end
        await asyncio.wait_for(task, 5)
        frames = [
            json.loads(b[len(b"event: message\ndata: ") :]) for b in sent if b.startswith(b"event")
        ]
        assert frames[0]["method"] == "notifications/subscriptions/acknowledged"
        updates = [f for f in frames if f.get("method") == "notifications/resources/updated"]
        assert len(updates) <= 3  # what the queue held at most; the rest was never buffered
        assert not any("result" in f for f in frames)  # no graceful result: an abrupt end

    asyncio.run(scenario())
