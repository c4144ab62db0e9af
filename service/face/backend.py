"""What the face needs from the daemon, as one small interface.

Shapes are the local API's JSON (``service/app/views.py``): a subscription is
``subscription_json`` plus an optional ``link`` (the link's status entry); content is
``content_json``; events are ``event_json``. Two implementations: ``remote.ApiBackend``
(``mcpsubctl mcp``, over the local API) and ``inproc.InProcessBackend`` (``/mcp``).
"""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["FaceBackend", "LookThenWait"]


class FaceBackend(Protocol):
    async def subscriptions(self) -> list[dict[str, Any]]:
        """Every subscription, each with its link's status under ``link`` when known."""
        ...

    async def identities(self) -> list[dict[str, Any]]:
        """``id``, ``uri`` and ``serverUrl`` of every subscription: what naming needs (cheap;
        a backend may keep it until a subscription is created or deleted)."""
        ...

    async def content(self, subscription: dict[str, Any]) -> dict[str, Any] | None:
        """The latest stored revision of one subscription (None before the first read)."""
        ...

    async def change(self, event: dict[str, Any]) -> dict[str, Any]:
        """For a ``resource.updated`` event: ``{"revision": content, "previous":
        {"revision", "text"} | None}`` (the revision the event recorded, and the one before)."""
        ...

    async def subscribe(self, url: str, uris: list[str]) -> list[dict[str, Any]]:
        """Subscribe within the agent policy; each result is a subscription after its first
        state is known, with ``errorCode``/``hint`` when it failed. Raises AgentError on a
        refusal (policy, bad input)."""
        ...

    async def unsubscribe(self, subscription_id: int) -> dict[str, Any] | None: ...

    async def events_after(
        self, after: int, limit: int, types: list[str] | None = None
    ) -> list[dict[str, Any]]: ...

    async def next_events(self, after: int, limit: int, timeout: float) -> list[dict[str, Any]]:
        """``events_after(after, limit)``, waiting up to ``timeout`` for the first when there
        is none yet; ``[]`` after ``timeout``."""
        ...

    async def last_event_id(self) -> int: ...

    async def wait_beyond(self, cursor: int, timeout: float) -> bool:
        """True as soon as an event newer than ``cursor`` may exist; False on timeout."""
        ...


class LookThenWait:
    """``next_events`` for a backend that has only ``events_after`` and ``wait_beyond`` (the
    local API's; the daemon's own face asks :class:`service.app.changes.Changes`)."""

    async def events_after(
        self, after: int, limit: int, types: list[str] | None = None
    ) -> list[dict[str, Any]]:
        raise NotImplementedError

    async def wait_beyond(self, cursor: int, timeout: float) -> bool:
        raise NotImplementedError

    async def next_events(self, after: int, limit: int, timeout: float) -> list[dict[str, Any]]:
        found = await self.events_after(after, limit)
        if found or not await self.wait_beyond(after, timeout):
            return found
        return await self.events_after(after, limit)
