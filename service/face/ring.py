"""The events one ``/v1/events/stream`` connection delivered, kept so ``mcpsubctl mcp``
answers "events after this cursor" from memory instead of a request (pure).

The daemon's stream sends every committed event after the cursor it was opened with, in id
order, so everything received since then is complete: the ring answers for any cursor at or
after its ``start`` and says ``None`` otherwise (the caller then asks the API). Events not
received yet are simply not there; the caller waits for the stream and asks again.

:class:`RevisionMemory` keeps the revision contents the same stream carries
(``?include=content``), so a ``wait_for_change`` describes a change without a request.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Sequence
from typing import Any, Final

RING_SIZE: Final = 4096


class EventRing:
    def __init__(self, size: int = RING_SIZE) -> None:
        self.size = size
        self.start: int | None = None
        """Every event with an id above this was received (None: nothing is proven)."""
        self.items: deque[dict[str, Any]] = deque()

    def reset(self, start: int | None) -> None:
        """A new stream from ``start`` (None when the stream is gone or was reset)."""
        self.start = start
        self.items.clear()

    def add(self, event: dict[str, Any]) -> None:
        if self.start is None:
            return
        event_id = int(event["id"])
        if event_id <= (int(self.items[-1]["id"]) if self.items else self.start):
            return  # a repeat (the stream resumed): already held or before the start
        self.items.append(event)
        if len(self.items) > self.size:
            self.start = int(self.items.popleft()["id"])

    def after(
        self, cursor: int, limit: int, types: Sequence[str] | None = None
    ) -> list[dict[str, Any]] | None:
        if self.start is None or cursor < self.start:
            return None
        found: list[dict[str, Any]] = []
        for event in reversed(self.items):  # a caught-up follower needs only the last few
            if int(event["id"]) <= cursor:
                break
            found.append(event)
        found.reverse()
        if types:
            found = [e for e in found if e.get("type") in types]
        return found[:limit]


MEMORY_SIZE: Final = 64
"""Revisions whose content the stream carried, kept to describe the next change (each at
most the daemon's 32 KiB inline bound, so a few MB at worst)."""


class RevisionMemory:
    """The revisions a ``?include=content`` stream carried, by (subscription, revision), so a
    change is described without a request when both of its sides are held (pure).

    Revision numbers are consecutive per subscription (``revision + 1`` on each stored
    read, starting at 1, unique per subscription), so the revision before ``R`` is ``R - 1``
    by its key alone: no completeness of the stream needs proving. Anything else (the
    older side never seen, content too big to ride along, a revision 1 with nothing
    before) is ``None`` and the caller asks the API.
    """

    def __init__(self, size: int = MEMORY_SIZE) -> None:
        self.size = size
        self.items: OrderedDict[tuple[int, int], tuple[int, dict[str, Any]]] = OrderedDict()

    def add(self, event: dict[str, Any]) -> None:
        """Keep the content a ``resource.updated`` event carries (taken off the event, so
        what the ring and the tools hand out keeps the API's event shape)."""
        content = event.pop("content", None)
        key = _key(event)
        if key is None or not isinstance(content, dict) or content.get("revision") != key[1]:
            return
        self.items[key] = (int(event["id"]), content)
        self.items.move_to_end(key)
        while len(self.items) > self.size:
            self.items.popitem(last=False)

    def change(self, event: dict[str, Any]) -> dict[str, Any] | None:
        """``{"revision": content, "previous": {"revision", "text"} | None}`` for a
        ``resource.updated`` event, as ``FaceBackend.change`` answers; None if not held."""
        key = _key(event)
        held = None if key is None else self.items.get(key)
        if key is None or held is None or held[0] != event["id"]:
            return None
        sub_id, revision = key
        if revision == 1:
            previous = None
        else:
            before = self.items.get((sub_id, revision - 1))
            if before is None:
                return None
            previous = {"revision": revision - 1, "text": before[1].get("text")}
        # ``content_json``'s shape, as the daemon's own face answers (the stream's content
        # is ``revision_json``).
        content = {
            "subscriptionId": sub_id,
            "serverUrl": event.get("serverUrl"),
            "uri": event.get("uri"),
            **held[1],
            "eventId": event["id"],
        }
        return {"revision": content, "previous": previous}


def _key(event: dict[str, Any]) -> tuple[int, int] | None:
    sub_id, revision = event.get("subscriptionId"), event.get("revision")
    if event.get("type") != "resource.updated":
        return None
    if not isinstance(sub_id, int) or not isinstance(revision, int) or revision < 1:
        return None
    return sub_id, revision
