"""The stdio face's memory of its event stream (pure)."""

from __future__ import annotations

from service.app.changes import Change
from service.app.views import change_json, event_json, revision_json
from service.face.ring import EventRing, RevisionMemory
from service.store.records import Event, Revision, Subscription


def ev(event_id: int, kind: str = "resource.updated") -> dict[str, object]:
    return {"id": event_id, "type": kind}


def test_the_ring_answers_only_what_it_can_prove() -> None:
    ring = EventRing(size=3)
    assert ring.after(0, 10) is None  # no stream yet
    ring.reset(10)
    assert ring.after(9, 10) is None  # before the stream's start: ask the API
    assert ring.after(10, 10) == []
    for n in (11, 12, 12, 13):
        ring.add(ev(n, "subscription.created" if n == 12 else "resource.updated"))
    assert [e["id"] for e in ring.after(10, 10) or []] == [11, 12, 13]
    assert [e["id"] for e in ring.after(11, 1) or []] == [12]
    assert [e["id"] for e in ring.after(10, 10, ["resource.updated"]) or []] == [11, 13]
    ring.add(ev(14))  # over the size: the oldest goes, and with it the proof for cursor 10
    assert ring.after(10, 10) is None
    assert [e["id"] for e in ring.after(11, 10) or []] == [12, 13, 14]
    ring.reset(None)  # the stream is gone
    ring.add(ev(15))
    assert ring.after(14, 10) is None


def updated(event_id: int, sub: int, revision: int, text: str | None) -> dict[str, object]:
    event: dict[str, object] = {
        "id": event_id,
        "type": "resource.updated",
        "subscriptionId": sub,
        "revision": revision,
        "uri": "test://a",
        "serverUrl": "http://127.0.0.1:1/mcp",
    }
    if text is not None:
        event["content"] = {"revision": revision, "text": text, "contents": [{"text": text}]}
    return event


def test_revision_memory_describes_a_change_only_when_both_sides_rode_along() -> None:
    memory = RevisionMemory(size=3)
    first = updated(5, 1, 1, "v1")
    memory.add(first)
    assert "content" not in first  # the ring and the tools see the API's event shape
    one = memory.change(first)
    assert one is not None and one["previous"] is None  # revision 1: nothing before it
    assert one["revision"]["text"] == "v1" and one["revision"]["eventId"] == 5
    two = updated(6, 1, 2, "v2")
    memory.add(two)
    change = memory.change(two)
    assert change is not None
    assert change["previous"] == {"revision": 1, "text": "v1"}
    assert change["revision"]["uri"] == "test://a" and change["revision"]["revision"] == 2
    # Revision 4 after a gap (3 never seen): the older side is unknown, ask the API.
    four = updated(9, 1, 4, "v4")
    memory.add(four)
    assert memory.change(four) is None
    # Too big to ride along: no content, ask the API; and the change after it too.
    five = updated(10, 1, 5, None)
    memory.add(five)
    assert memory.change(five) is None
    six = updated(11, 1, 6, "v6")
    memory.add(six)
    assert memory.change(six) is None
    # Same revision number on another subscription, or another event id: not this one.
    assert memory.change({**updated(11, 2, 6, None)}) is None
    assert memory.change({**updated(12, 1, 6, None)}) is None
    # Bounded: the oldest are forgotten (revisions 2, 4, 6 held; 7 pushes 2 out).
    seven = updated(12, 1, 7, "v7")
    memory.add(seven)
    assert len(memory.items) == 3 and memory.change(seven) is not None
    assert memory.change(two) is None
    # Content that names another revision than its event is not trusted.
    odd = updated(13, 1, 8, "v8")
    odd["content"] = {"revision": 7, "text": "v7"}
    memory.add(odd)
    assert memory.change(odd) is None


def test_a_remembered_change_is_the_daemons_own_answer() -> None:
    """What ``mcpsubctl mcp`` describes from its stream's content (``revision_json``, as
    ``include=content`` carries it) is what the daemon's face answers for the same event
    (``change_json``): same fields, same order."""
    sub = Subscription(
        id=1, server_id=1, server_url="http://127.0.0.1:1/mcp", uri="test://a",
        state="active", state_reason=None, state_code=None, content_hash="h2", revision=2,
        last_read_at=2.0, created_at=1.0,
    )  # fmt: skip
    revs = [
        Revision(id=10 + n, subscription_id=1, revision=n, content_hash=f"h{n}",
                 contents=[{"text": f"v{n}"}], text=f"v{n}", generation=3, read_at=float(n))
        for n in (1, 2)
    ]  # fmt: skip
    events = [
        Event(id=4 + n, type="resource.updated", subscription_id=1, server_url=sub.server_url,
              uri=sub.uri, revision_id=10 + n, revision=n, data={}, created_at=float(n))
        for n in (1, 2)
    ]  # fmt: skip
    memory = RevisionMemory()
    for event, rev in zip(events, revs, strict=True):
        memory.add({**event_json(event), "content": revision_json(rev)})
    held = memory.change(event_json(events[1]))
    assert held is not None
    daemon = change_json(Change(events[1], sub, revs[1], revs[0]))
    assert held == daemon and list(held["revision"]) == list(daemon["revision"])
