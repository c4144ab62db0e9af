"""service.probe_follow.follow_server: ``probe --follow``'s loop against a scripted client.

The MCP client is replaced by a fake whose listens follow a script (acknowledged streams
with their events, or failures to connect), so the rules can be checked one by one: reads
after every ack and notification, an immediate re-listen after an acknowledged stream ends,
backoff only while connecting fails, the listen budget, the errors retrying cannot fix."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest

from service import probe_follow as follow_module
from service.backoff import Backoff
from service.mcp import wire
from service.mcp.errors import HttpStatusError, TransportError
from service.mcp.listen import Closed, Lost, Notified
from service.probe import ProbeOptions
from service.probe_follow import NotHonored, follow_server

pytestmark = pytest.mark.anyio

URL = "http://127.0.0.1:9/mcp"


class Stream:
    def __init__(self, honored: list[str], events: list[Any]) -> None:
        self.honored_uris = honored
        self._events = events

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Any]:
        for event in self._events:
            yield event


class FakeClient:
    """One per follow; ``script`` is shared: each listen takes the next entry."""

    script: ClassVar[list[Any]] = []
    texts: ClassVar[dict[str, list[str]]] = {}
    listens = 0
    capability: ClassVar[Any] = {"subscribe": True}

    def __init__(self, url: str, **_kw: Any) -> None:
        assert url == URL

    async def __aenter__(self) -> FakeClient:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        return None

    async def discover(self) -> Any:
        # A server that offers resource subscriptions (follow listens only to such a one).
        return SimpleNamespace(resources_capability=FakeClient.capability)

    async def read_resource(self, uri: str) -> dict[str, Any]:
        texts = FakeClient.texts[uri]
        text = texts.pop(0) if len(texts) > 1 else texts[0]
        return {"contents": [{"uri": uri, "text": text}]}

    @contextlib.asynccontextmanager
    async def listen(self, params: dict[str, Any]) -> AsyncIterator[Stream]:
        FakeClient.listens += 1
        entry = FakeClient.script.pop(0) if FakeClient.script else Lost("script over")
        if isinstance(entry, BaseException):
            raise entry
        honored, events = entry
        yield Stream(honored, events)


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch) -> type[FakeClient]:
    monkeypatch.setattr(follow_module, "McpClient", FakeClient)
    FakeClient.script, FakeClient.texts, FakeClient.listens = [], {}, 0
    return FakeClient


def updated(uri: str) -> Notified:
    return Notified(wire.RESOURCE_UPDATED, {"uri": uri})


async def run(max_events: int | None, **kw: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    await follow_server(
        ProbeOptions(url=URL, uris=["r://a", "r://b"]),
        out.append,
        backoff=Backoff(base_s=0.001, cap_s=0.001),
        max_events=max_events,
        relisten_jitter_s=0.0,
        **kw,
    )
    return out


async def test_reads_after_the_ack_and_each_notification_then_relistens_at_once(
    client: type[FakeClient],
) -> None:
    client.texts = {"r://a": ["a1", "a2", "a2"], "r://b": ["b1"]}
    client.script = [
        (["r://a", "r://b"], [updated("r://a"), Notified("other/method", {}), Closed({})]),
        (["r://a", "r://b"], []),
    ]
    out = await run(max_events=5)
    reads = [
        (e["resourceUri"], e["trigger"], e["generation"], e["changed"], e["text"])
        for e in out
        if e["type"] == "read"
    ]
    assert reads == [
        ("r://a", "acknowledged", 1, True, "a1"),
        ("r://b", "acknowledged", 1, True, "b1"),
        ("r://a", "notification", 1, True, "a2"),
        ("r://a", "acknowledged", 2, False, "a2"),  # nothing is replayed: read again
        ("r://b", "acknowledged", 2, False, "b1"),
    ]
    lost = [e for e in out if e["type"] == "lost"]
    assert len(lost) == 1 and lost[0]["retryInMs"] == 0 and "closed" in lost[0]["reason"]


async def test_connect_failures_back_off_and_an_ack_resets_the_attempts(
    client: type[FakeClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    attempts: list[int] = []
    original = Backoff.delay

    def spy(self: Backoff, attempt: int, **kw: Any) -> float:
        attempts.append(attempt)
        return original(self, attempt, **kw)

    monkeypatch.setattr(Backoff, "delay", spy)
    client.texts = {"r://a": ["a"], "r://b": ["b"]}
    refused = TransportError("connection refused")
    client.script = [
        refused,
        refused,
        (["r://a", "r://b"], [Lost("reset")]),
        refused,
        (["r://a", "r://b"], []),
    ]
    out = await run(max_events=4)
    assert attempts == [0, 1, 0]  # attempt 0 is the first retry; the ack reset the count
    assert [e["type"] for e in out] == [
        "lost",
        "lost",
        "read",
        "read",
        "lost",
        "lost",
        "read",
        "read",
    ]


async def test_an_unhonored_uri_ends_the_follow(client: type[FakeClient]) -> None:
    client.script = [(["r://a"], [])]
    with pytest.raises(NotHonored, match="r://b"):
        await run(max_events=None)


async def test_errors_retrying_cannot_fix_end_it_and_5xx_is_retried(
    client: type[FakeClient],
) -> None:
    client.texts = {"r://a": ["a"], "r://b": ["b"]}
    client.script = [HttpStatusError(503, "busy"), HttpStatusError(401, "no")]
    with pytest.raises(HttpStatusError) as caught:
        await run(max_events=None)
    assert caught.value.status == 401
    assert client.listens == 2


async def test_the_listen_budget_throttles_a_tight_close_loop(client: type[FakeClient]) -> None:
    client.texts = {"r://a": ["a"], "r://b": ["b"]}
    client.script = [(["r://a", "r://b"], [Closed({})]) for _ in range(5)]
    out: list[dict[str, Any]] = []
    throttled = asyncio.Event()

    def emit(event: dict[str, Any]) -> None:
        out.append(event)
        if event["type"] == "throttled":
            throttled.set()

    task = asyncio.ensure_future(
        follow_server(
            ProbeOptions(url=URL, uris=["r://a", "r://b"]),
            emit,
            relisten_per_minute=2,
            relisten_jitter_s=0.0,
        )
    )
    await asyncio.wait_for(throttled.wait(), timeout=10)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert client.listens == 2
    event = out[-1]
    assert event["type"] == "throttled" and "2 listens" in event["reason"]
    assert 50_000 <= event["retryInMs"] <= 60_000
