"""Open listen streams and fan-out of change notifications to them.

Each ``subscriptions/listen`` request becomes a :class:`ListenStream` with its own queue.
The stream is registered here *before* its acknowledgment is written, so an event raised
while the ack is on its way is queued behind it instead of lost (spec §3.2). Nothing is
buffered for streams that open later: notifications are cues, and clients refetch after
the ack.

The HTTP writer (:mod:`labserver.listen`) drains the queue; this module never touches a
socket.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any, Literal

from service.mcp import wire

CommandKind = Literal["message", "close", "drop", "disconnect"]


@dataclass(frozen=True, slots=True)
class Command:
    """One instruction for a stream writer: send a frame, close gracefully, or abort."""

    kind: CommandKind
    message: dict[str, Any] | None = None


def honored_filter(
    requested: dict[str, Any],
    *,
    advertise_subscribe: bool,
    advertise_list_changed: bool,
    dishonored: Collection[str] = (),
) -> dict[str, Any]:
    """The subset of a ``SubscriptionFilter`` this server agrees to deliver (spec §3.2):
    seed 001's "intersection of what was asked for and what this server can send".

    A type is honored only when the matching capability is advertised, like the TS SDK.
    ``toolsListChanged``/``promptsListChanged`` never are: the lab's tool list is fixed and
    it has no prompts. Any URI is honored, as both SDK servers do, whether the lab has it
    now or not: it may be created (``PUT /lab/resources``) and then changed, and a client
    that subscribed to a URI that does not exist learns that from its read
    (``RESOURCE_NOT_FOUND``), which says more than a refused subscription. URIs listed in
    ``dishonored`` are dropped one by one so clients can be tested against a partial ack.
    """
    honored: dict[str, Any] = {}
    if advertise_list_changed and requested.get("resourcesListChanged") is True:
        honored["resourcesListChanged"] = True
    uris = requested.get("resourceSubscriptions")
    if advertise_subscribe and isinstance(uris, list):
        honored["resourceSubscriptions"] = [uri for uri in uris if uri not in dishonored]
    return honored


def filter_error(requested: Any) -> str | None:
    """Why ``params.notifications`` is not a usable ``SubscriptionFilter``, or ``None``."""
    if not isinstance(requested, dict):
        return "params.notifications must be an object"
    for key in ("toolsListChanged", "promptsListChanged", "resourcesListChanged"):
        if key in requested and not isinstance(requested[key], bool):
            return f"params.notifications.{key} must be a boolean"
    uris = requested.get("resourceSubscriptions")
    if uris is not None and (
        not isinstance(uris, list) or not all(isinstance(u, str) for u in uris)
    ):
        return "params.notifications.resourceSubscriptions must be an array of strings"
    return None


@dataclass(eq=False)
class ListenStream:
    subscription_id: Any
    honored: dict[str, Any]
    withheld: list[str] = field(default_factory=list)
    """Asked-for URIs the lab's fault knobs (``dishonorUris``, ``advertiseSubscribe``) kept
    out of the ack."""
    queue: asyncio.Queue[Command] = field(default_factory=asyncio.Queue)
    finished: asyncio.Event = field(default_factory=asyncio.Event)

    def meta(self) -> dict[str, Any]:
        return {wire.META_SUBSCRIPTION_ID: self.subscription_id}

    def wants_uri(self, uri: str) -> bool:
        # Exact string match, like both SDK servers (spec §3.3).
        return uri in self.honored.get("resourceSubscriptions", ())

    def wants_list_changed(self) -> bool:
        return self.honored.get("resourcesListChanged") is True

    def carries_anything(self) -> bool:
        """Whether the honored filter leaves anything this stream could ever carry."""
        return self.wants_list_changed() or bool(self.honored.get("resourceSubscriptions"))


class Hub:
    def __init__(self) -> None:
        self.streams: list[ListenStream] = []

    def __len__(self) -> int:
        return len(self.streams)

    def add(self, stream: ListenStream) -> None:
        self.streams.append(stream)

    def remove(self, stream: ListenStream) -> bool:
        """Unregister; ``False`` if it was already gone (so callers count it once)."""
        if stream in self.streams:
            self.streams.remove(stream)
            return True
        return False

    def publish_updated(self, uri: str, *, via: str | None = None) -> int:
        """Queue ``notifications/resources/updated`` on every stream honoring ``uri``.

        ``via`` sends it instead to the streams honoring that URI: how a server reports a
        change of a sub-resource (``file:///dir/a.txt`` to a subscriber of ``file:///dir``),
        which spec §3.3 allows and clients must not drop.
        """
        sent = 0
        for stream in self.streams:
            if stream.wants_uri(via or uri):
                params = {"_meta": stream.meta(), "uri": uri}
                stream.queue.put_nowait(
                    Command("message", wire.notification(wire.RESOURCE_UPDATED, params))
                )
                sent += 1
        return sent

    def publish_list_changed(self) -> int:
        sent = 0
        for stream in self.streams:
            if stream.wants_list_changed():
                params = {"_meta": stream.meta()}
                stream.queue.put_nowait(
                    Command("message", wire.notification(wire.RESOURCES_LIST_CHANGED, params))
                )
                sent += 1
        return sent

    def end_all(self, kind: Literal["close", "drop"]) -> list[ListenStream]:
        streams = list(self.streams)
        for stream in streams:
            stream.queue.put_nowait(Command(kind))
        return streams
