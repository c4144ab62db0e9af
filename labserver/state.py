"""All mutable state of one lab server process, and the seed's update cycle.

Update cycle (seed §6.4, kept exactly):

* Count open listen streams. When the count goes 0 → 1 a timer starts (any previous one
  is cleared); when it returns to 0 a pending timer is cancelled.
* When the timer fires (after ``updateDelaySeconds``) the review resource becomes version
  2 with the updated status, and ``notifications/resources/updated`` goes to every open
  stream honoring its URI, plus ``notifications/resources/list_changed`` to streams that
  asked for it when ``listChanged`` is advertised.
* A ``resources/read`` while *no* stream is open starts a new cycle: the review resource
  goes back to version 1, so back-to-back probes against one process each see 1 → 2.

State lives at app scope, one :class:`Lab` per process; requests only borrow it.
"""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any, Literal

from labserver.console import Console
from labserver.eventlog import EventLog
from labserver.hub import Hub, ListenStream
from labserver.labconfig import LabConfig, config_from_settings
from labserver.report import VerdictLine
from labserver.resources import REVIEW_URI, Resource, initial_review, review_text
from labserver.settings import Settings
from service._version import __version__

SERVER_NAME = "mcp-resource-subscribe-test"


class Lab:
    def __init__(self, settings: Settings, console: Console | None = None) -> None:
        self.settings = settings
        self.console = console or Console(settings.log_level)
        self.log = EventLog()
        self.verdict_line = VerdictLine(self.log, self.console)
        self.hub = Hub()
        self.config: LabConfig = config_from_settings(settings)
        self.resources: dict[str, Resource] = {}
        self.shutting_down = asyncio.Event()
        self._timer: asyncio.Task[None] | None = None
        self._reset_resources()

    @property
    def server_info(self) -> dict[str, str]:
        return {"name": SERVER_NAME, "version": __version__}

    # ---- resources -------------------------------------------------------------------
    def _reset_resources(self) -> None:
        self.resources = {REVIEW_URI: initial_review(self.settings.initial_status)}

    def review(self) -> Resource | None:
        return self.resources.get(REVIEW_URI)

    def read(self, uri: str) -> Resource | None:
        """A ``resources/read``; with no stream open it starts a new update cycle first."""
        resource = self.resources.get(uri)
        if resource is not None and uri == REVIEW_URI and len(self.hub) == 0:
            resource.version = 1
            resource.text = review_text(self.settings.initial_status, 1)
        return resource

    def put_resource(
        self,
        uri: str,
        text: str,
        *,
        name: str | None = None,
        mime_type: str | None = None,
        notify: bool = True,
    ) -> tuple[Resource, bool]:
        """Create or replace; returns the resource and whether it was created."""
        existing = self.resources.get(uri)
        if existing is None:
            resource = Resource(
                uri=uri, name=name or uri, text=text, mime_type=mime_type or "text/plain"
            )
            self.resources[uri] = resource
            self.publish_list_changed()
            return resource, True
        existing.text = text
        existing.version += 1
        if name is not None:
            existing.name = name
        if mime_type is not None:
            existing.mime_type = mime_type
        if notify:
            self.publish_updated(uri)
        return existing, False

    def delete_resource(self, uri: str) -> bool:
        if self.resources.pop(uri, None) is None:
            return False
        self.publish_list_changed()
        return True

    # ---- publishing ------------------------------------------------------------------
    def publish_updated(self, uri: str) -> None:
        self.console.info(f"[notification/send] notifications/resources/updated uri={uri}")
        self.hub.publish_updated(uri)

    def publish_list_changed(self) -> None:
        if not self.config.advertise_list_changed:
            return
        self.console.info("[notification/send] notifications/resources/list_changed")
        self.hub.publish_list_changed()

    def fire_review_update(self) -> Resource | None:
        """The seed's simulated review result: version 2, updated status, notify."""
        resource = self.review()
        if resource is None:
            return None
        resource.version = 2
        resource.text = review_text(self.settings.updated_status, 2)
        self.console.info(f"[resource/update] uri={REVIEW_URI} version=2")
        self.log.record("resource.updated", uri=REVIEW_URI, version=2)
        self.publish_updated(REVIEW_URI)
        self.publish_list_changed()
        return resource

    # ---- listen streams and the update timer -----------------------------------------
    def open_stream(self, stream: ListenStream) -> None:
        self.hub.add(stream)
        if len(self.hub) == 1:
            self._restart_timer()

    def close_stream(self, stream: ListenStream) -> None:
        if self.hub.remove(stream) and len(self.hub) == 0:
            self._cancel_timer()

    def _restart_timer(self) -> None:
        self._cancel_timer()
        # A fresh context: the update belongs to no client, not to the listen that armed it.
        self._timer = asyncio.get_running_loop().create_task(
            self._fire_after(self.config.update_delay_seconds), context=contextvars.Context()
        )

    def _cancel_timer(self) -> None:
        if self._timer is not None and not self._timer.done():
            self._timer.cancel()
        self._timer = None

    async def _fire_after(self, delay: float) -> None:
        await asyncio.sleep(delay)
        self._timer = None
        self.fire_review_update()

    async def end_streams(self, kind: Literal["close", "drop"], timeout: float = 2.0) -> int:
        """Close (gracefully) or drop every open stream; wait until their writers finish."""
        streams = self.hub.end_all(kind)
        waits = [asyncio.ensure_future(s.finished.wait()) for s in streams]
        if waits:
            _, pending = await asyncio.wait(waits, timeout=timeout)
            for task in pending:
                task.cancel()
        return len(streams)

    # ---- lifecycle -------------------------------------------------------------------
    def reset(self) -> None:
        """``/lab/reset``: initial resources and config, empty log; open streams survive."""
        self._cancel_timer()
        self.config = config_from_settings(self.settings)
        self._reset_resources()
        self.log.clear()
        self.verdict_line.forget()

    def begin_shutdown(self) -> None:
        """SIGTERM/SIGINT: end every listen stream gracefully and release held requests."""
        self.shutting_down.set()
        self._cancel_timer()
        self.hub.end_all("close")

    def state(self) -> dict[str, Any]:
        return {
            "streams": len(self.hub),
            "resources": [r.state() for r in self.resources.values()],
            "config": self.config.to_json(),
        }
