"""``mcpsubctl probe --follow``: keep one listen stream alive and report every re-read.

A notification is an invalidation, never a payload: after every acknowledgement (the first
and every one after a reconnect, since nothing is replayed) all URIs are read again, and
after every ``resources/updated`` the named URI is read. The daemon's rule (issue 10 §3):
a stream that ends after its ack (graceful close, or a drop: proxies cut long responses)
is re-listened at once with a small jitter; full-jitter backoff grows only while
(re)connecting fails and resets on every ack; a listen budget per minute stops a server
that acks and closes in a tight loop. Failures that retrying cannot fix (protocol
unsupported, auth, not honored) end the follow with an error.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from typing import Any

from service.actions import extract_next_action
from service.backoff import Backoff, ListenBudget
from service.mcp import wire
from service.mcp.client import McpClient
from service.mcp.errors import (
    HttpStatusError,
    ListenEnded,
    McpError,
    ProtocolViolation,
    TransportError,
)
from service.mcp.listen import Closed, Failed, Lost, Notified
from service.probe import ProbeOptions, text_of


class NotHonored(McpError):
    error_code = "SUBSCRIPTION_NOT_HONORED"


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, (TransportError, ListenEnded, ProtocolViolation, TimeoutError)):
        return True
    return isinstance(exc, HttpStatusError) and exc.status >= 500


async def follow(
    options: ProbeOptions,
    emit: Callable[[dict[str, Any]], None],
    *,
    backoff: Backoff | None = None,
    max_events: int | None = None,
    relisten_per_minute: int = 60,
    relisten_jitter_s: float = 0.25,
) -> None:
    """Run until cancelled, ``options.timeout_s`` passes, or ``max_events`` reads were emitted."""
    backoff = backoff or Backoff(base_s=1.0, cap_s=60.0)
    budget = ListenBudget(relisten_per_minute)
    uris = options.uris
    emitted = 0
    generation = 0
    attempt = 0
    last: dict[str, str] = {}

    def report(uri: str, text: str, trigger: str) -> bool:
        nonlocal emitted
        emit(
            {
                "type": "read",
                "serverUrl": options.url,
                "resourceUri": uri,
                "generation": generation,
                "trigger": trigger,
                "changed": last.get(uri) != text,
                "text": text,
                "recommendedNextAction": extract_next_action(text),
                "readAt": time.time(),
            }
        )
        last[uri] = text
        emitted += 1
        return max_events is not None and emitted >= max_events

    async with McpClient(
        options.url,
        token=options.token,
        client_name=options.client_name,
        ca_cert=options.ca_cert,
    ) as client:
        await client.discover()
        while True:
            wait = budget.wait_s(time.monotonic())
            if wait > 0:
                emit(
                    {
                        "type": "throttled",
                        "serverUrl": options.url,
                        "generation": generation,
                        "reason": f"{budget.used(time.monotonic())} listens in the last minute",
                        "retryInMs": round(wait * 1000),
                    }
                )
                await asyncio.sleep(wait)
                continue
            budget.record(time.monotonic())
            acked = False
            try:
                async with client.listen({"resourceSubscriptions": list(uris)}) as stream:
                    acked = True
                    attempt = 0
                    generation += 1
                    missing = [u for u in uris if u not in stream.honored_uris]
                    if missing:
                        raise NotHonored(f"the server did not honor: {', '.join(missing)}")
                    for uri in uris:
                        if report(
                            uri, text_of(await client.read_resource(uri), uri), "acknowledged"
                        ):
                            return
                    async for event in stream:
                        if isinstance(event, Notified):
                            if event.method == wire.RESOURCE_UPDATED and event.uri:
                                text = text_of(await client.read_resource(event.uri), event.uri)
                                if report(event.uri, text, "notification"):
                                    return
                        elif isinstance(event, Closed):
                            raise ListenEnded("the server closed the listen stream")
                        elif isinstance(event, (Lost, Failed)):
                            raise ListenEnded(f"listen stream ended: {event}")
                    raise ListenEnded("listen stream ended")
            except Exception as exc:
                if not _retryable(exc):
                    raise
                if acked:
                    # The stream had been acknowledged: not a failure, re-listen at once.
                    delay = random.uniform(0.0, relisten_jitter_s)
                else:
                    attempt += 1
                    delay = backoff.delay(attempt)
                emit(
                    {
                        "type": "lost",
                        "serverUrl": options.url,
                        "generation": generation,
                        "reason": str(exc) or type(exc).__name__,
                        "retryInMs": round(delay * 1000),
                    }
                )
                await asyncio.sleep(delay)
