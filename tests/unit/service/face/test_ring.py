"""The stdio face's memory of its event stream (pure)."""

from __future__ import annotations

from service.face.ring import EventRing


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
