"""A 2026-07-28 server built only from the official MCP Python SDK 2.x (``mcp.MCPServer``).

One text resource, ``test://review/status``; every change bumps its version and is published
as ``notifications/resources/updated`` on the SDK's subscription bus, which the SDK's own
``ListenHandler`` turns into frames on each ``subscriptions/listen`` stream.

* ``--auto-update-delay S`` (default 0.3; 0 = off): S seconds after a listen stream opens,
  the resource changes and the update is published (a wrapper around the SDK's
  ``InMemorySubscriptionBus`` sees the ListenHandler subscribe; that is the only hook).
* tool ``complete_review``: changes the resource now and publishes through
  ``ctx.notify_resource_updated(uri)``, the documented publisher API.

``--no-listen`` builds ``MCPServer(subscriptions=False)`` (listen unserved);
``--json-response`` asks the SDK for plain JSON answers instead of SSE where it may.

stdout: ``PORT <n>``, then ``LISTEN opened`` each time a listen stream subscribes.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable
from typing import Any

from _serve import parse_port, serve
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.subscriptions import InMemorySubscriptionBus, ResourceUpdated, ServerEvent

URI = "test://review/status"


class Review:
    def __init__(self) -> None:
        self.version = 1

    @property
    def text(self) -> str:
        status = "pending" if self.version == 1 else "reviewed"
        return f"status: {status}\nversion: {self.version}\n"


class AnnouncingBus(InMemorySubscriptionBus):
    """The SDK's in-memory bus, plus a hook on every listen stream that subscribes."""

    def __init__(self, on_subscribe: Callable[[], None]) -> None:
        super().__init__()
        self._on_subscribe = on_subscribe

    def subscribe(self, listener: Callable[[ServerEvent], None]) -> Callable[[], None]:
        unsubscribe = super().subscribe(listener)
        self._on_subscribe()
        return unsubscribe


def build(auto_update_delay: float, *, listen: bool = True, json_response: bool = False) -> Any:
    review = Review()
    tasks: set[asyncio.Task[None]] = set()

    async def bump_later() -> None:
        await asyncio.sleep(auto_update_delay)
        review.version += 1
        await bus.publish(ResourceUpdated(uri=URI))

    def on_subscribe() -> None:
        print("LISTEN opened", flush=True)
        if auto_update_delay > 0:
            task = asyncio.get_running_loop().create_task(bump_later())
            tasks.add(task)
            task.add_done_callback(tasks.discard)

    bus = AnnouncingBus(on_subscribe)
    server = MCPServer("sdk-peer", version="0.0.1", subscriptions=bus if listen else False)

    @server.resource(URI, name="review-status", mime_type="text/plain")
    def review_status() -> str:
        return review.text

    @server.tool()
    async def complete_review(ctx: Context) -> str:
        """Mark the review done and tell every listener."""
        review.version += 1
        await ctx.notify_resource_updated(URI)
        return f"version {review.version}"

    return server.streamable_http_app(stateless_http=True, json_response=json_response)


def main() -> None:
    def options(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--auto-update-delay", type=float, default=0.3)
        parser.add_argument(
            "--no-listen", action="store_true", help="MCPServer(subscriptions=False)"
        )
        parser.add_argument("--json-response", action="store_true", help="plain JSON answers")

    args = parse_port(__doc__ or "", options)
    app = build(args.auto_update_delay, listen=not args.no_listen, json_response=args.json_response)
    serve(app, args.port)


if __name__ == "__main__":
    main()
