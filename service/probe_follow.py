"""``mcpsubctl probe --follow``: keep one listen stream to an MCP server alive and report
every re-read. (Not the daemon's event-log follow, ``Changes.follow`` in
``service/app/changes.py``, which replays and streams stored changes.)

A notification is an invalidation, never a payload: after every acknowledgement (the first
and every one after a reconnect, since nothing is replayed) all URIs are read again, and
after every ``resources/updated`` the named URI is read. When to listen again is the
daemon's policy, :class:`service.mcp.relisten.RelistenPolicy`: a stream that lived and then
ended (graceful close, or a drop: proxies cut long responses) is re-listened at once with a
small jitter; while streams keep ending young the pause grows (jittered, capped);
full-jitter backoff grows only while (re)connecting fails and resets on every ack; a listen
budget per minute is the last guard. A refused listen is a failure to connect (the
daemon's links retry it too). Failures that retrying cannot fix (protocol unsupported,
auth, not honored) end the follow with an error.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from service.actions import extract_next_action
from service.backoff import Backoff
from service.failures import classify
from service.mcp import wire
from service.mcp.client import McpClient
from service.mcp.errors import (
    HttpStatusError,
    JsonRpcError,
    ListenEnded,
    McpError,
    ProtocolViolation,
    TransportError,
)
from service.mcp.listen import Closed, Failed, Lost, Notified
from service.mcp.relisten import End, Phase, RelistenPolicy
from service.probe import ProbeOptions, subscribe_offered, text_of


class NotHonored(McpError):
    error_code = "SUBSCRIPTION_NOT_HONORED"


class _StreamEnded(ListenEnded):
    """The acknowledged stream ended; ``end`` is how, for the relisten policy."""

    def __init__(self, message: str, end: End) -> None:
        super().__init__(message)
        self.end = end


def _retryable(exc: BaseException, *, acknowledged: bool) -> bool:
    """Whether the follow waits and listens again rather than ending with ``exc``.

    A listen the server refused (an HTTP or JSON-RPC error before the acknowledgement, as a
    full server's "Subscription limit reached") is retried with backoff, as the daemon's links
    do (:meth:`service.daemon.linkmachine.LinkMachine.listen_failed`); a refusal of our
    credentials is not. After the ack only a 5xx is: a read's own errors end the follow."""
    if isinstance(exc, (TransportError, ListenEnded, ProtocolViolation, TimeoutError)):
        return True
    if isinstance(exc, HttpStatusError) and exc.status >= 500:
        return True
    return (
        not acknowledged
        and isinstance(exc, (HttpStatusError, JsonRpcError))
        and exc.error_code != "AUTH_FAILED"
    )


async def follow_server(
    options: ProbeOptions,
    emit: Callable[[dict[str, Any]], None],
    *,
    backoff: Backoff | None = None,
    max_events: int | None = None,
    relisten_per_minute: int = 60,
    relisten_jitter_s: float = 0.25,
) -> None:
    """Run until cancelled, ``options.timeout_s`` passes, or ``max_events`` reads were emitted."""
    policy = RelistenPolicy(
        backoff or Backoff(base_s=1.0, cap_s=60.0),
        listens_per_minute=relisten_per_minute,
        relisten_jitter_s=relisten_jitter_s,
    )
    uris = options.uris
    emitted = 0
    generation = 0
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

    async def read(client: McpClient, uri: str, trigger: str) -> bool:
        """Read ``uri`` and report it; True when ``max_events`` is reached. A read the server
        answers with a 5xx is reported (``read-failed``) and the stream is kept: the stream
        is fine, and the next ack or notification reads again."""
        try:
            text = text_of(await client.read_resource(uri), uri)
        except HttpStatusError as exc:
            if exc.status < 500:
                raise
            emit(
                {
                    "type": "read-failed",
                    "serverUrl": options.url,
                    "resourceUri": uri,
                    "generation": generation,
                    "trigger": trigger,
                    "errorCode": classify(exc, mode="subscribe", compat=False).code,
                    "reason": str(exc),
                }
            )
            return False
        return report(uri, text, trigger)

    async with McpClient(
        options.url,
        token=options.token,
        client_name=options.client_name,
        ca_cert=options.ca_cert,
    ) as client:
        discovered = await client.discover()
        if not subscribe_offered(discovered.resources_capability):
            # Only a server whose resources.subscribe is true is asked to listen.
            raise NotHonored(
                "the server does not advertise resources.subscribe: it cannot honor a "
                "subscription, so none was requested"
            )
        while True:
            wait = policy.listening(time.monotonic())
            if wait > 0:
                used = policy.budget.used(time.monotonic())
                emit(
                    {
                        "type": "throttled",
                        "serverUrl": options.url,
                        "generation": generation,
                        "reason": f"{used} listens in the last minute",
                        "retryInMs": round(wait * 1000),
                    }
                )
                await asyncio.sleep(wait)
                continue
            try:
                async with client.listen({"resourceSubscriptions": list(uris)}) as stream:
                    ack = policy.acknowledged(time.monotonic(), uris, stream.honored_uris)
                    generation += 1
                    if ack.not_honored:
                        # Final: the stream closes as this block ends, and nothing is re-sent.
                        missing = [u for u in uris if u in ack.not_honored]
                        raise NotHonored(f"the server did not honor: {', '.join(missing)}")
                    for uri in uris:
                        if await read(client, uri, "acknowledged"):
                            return
                    async for event in stream:
                        if isinstance(event, Notified):
                            updated = event.method == wire.RESOURCE_UPDATED and event.uri
                            if updated and await read(client, event.uri or "", "notification"):
                                return
                        elif isinstance(event, Closed):
                            raise _StreamEnded("the server closed the listen stream", End.CLOSED)
                        elif isinstance(event, Lost):
                            raise _StreamEnded(f"listen stream ended: {event}", End.LOST)
                        elif isinstance(event, Failed):
                            raise _StreamEnded(f"listen stream ended: {event}", End.FAILED)
                    raise _StreamEnded("listen stream ended", End.LOST)
            except Exception as exc:
                if not _retryable(exc, acknowledged=policy.phase is Phase.OPEN):
                    raise
                if policy.phase is Phase.OPEN:
                    # Acknowledged, then ended: at once if it lived, else the policy's pause.
                    if isinstance(exc, _StreamEnded):
                        end = exc.end
                    else:
                        end = End.FAILED if isinstance(exc, ProtocolViolation) else End.LOST
                    decided = policy.ended(time.monotonic(), end)
                else:
                    decided = policy.failed()
                emit(
                    {
                        "type": "lost",
                        "serverUrl": options.url,
                        "generation": generation,
                        "reason": str(exc) or type(exc).__name__,
                        "retryInMs": round(decided.delay_s * 1000),
                        "pause": decided.why,
                    }
                )
                await asyncio.sleep(decided.delay_s)
