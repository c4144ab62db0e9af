"""``subscriptions/listen``: refusal or acceptance, then the long-lived SSE stream.

The stream is written by a small ASGI response of our own rather than starlette's
``StreamingResponse`` because the lab needs three ways to end it, and tests tell them
apart:

* **graceful** (control or shutdown): the JSON-RPC result for the listen id, then the end
  of the HTTP body (spec §3.5);
* **dropped** (control, fault injection): return without finishing the body, so uvicorn
  closes the connection mid-chunked-stream and the client sees a broken body, not EOF;
* **client**: a task waits on ASGI ``receive()`` for ``http.disconnect``, so a client that
  goes away is noticed at once, not at the next keep-alive write, and the stream count
  behind the update timer stays right.

Frames are ``event: message`` + ``data: <json>`` with no ``id:`` (no resumability in
2026-07-28); keep-alives are ``: keepalive`` comments.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from labserver.handlers import RpcError, invalid_params
from labserver.hub import Command, ListenStream, filter_error, honored_filter
from labserver.state import Lab
from labserver.validation import McpRequest
from service.mcp import wire

SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"connection", b"keep-alive"),
    (b"x-accel-buffering", b"no"),
]
SUBSCRIPTION_LIMIT_REACHED = "Subscription limit reached"


def sse_frame(message: dict[str, Any]) -> bytes:
    data = json.dumps(message, separators=(",", ":"), ensure_ascii=False)
    return f"event: message\ndata: {data}\n\n".encode()


def open_listen(lab: Lab, request: McpRequest) -> ListenResponse:
    """Refuse (raise :class:`RpcError`) or register a stream and return its response.

    Registration happens here, synchronously with the cap check, so two concurrent
    listens cannot both squeeze under the limit.
    """
    requested = request.params.get("notifications")
    problem = filter_error(requested)
    if problem is not None or not isinstance(requested, dict):
        raise invalid_params(f"Invalid params: {problem}")
    sid = request.request_id
    lab.log.record("listen.opened", subscriptionId=sid, filter=requested)
    config = lab.config
    if config.refuse_listen:
        lab.log.record("listen.refused", subscriptionId=sid, injected=True)
        # The fault knob: in-band on HTTP 200 before any ack, like both SDKs (spec §3.4).
        raise RpcError(wire.INTERNAL_ERROR, SUBSCRIPTION_LIMIT_REACHED, status=200)
    if len(lab.hub) >= config.max_subscriptions:
        lab.log.record("listen.refused", subscriptionId=sid)
        # Seed 001's limit: "exceeding returns 503 + -32603".
        raise RpcError(wire.INTERNAL_ERROR, SUBSCRIPTION_LIMIT_REACHED, status=503)
    honored = honored_filter(
        requested,
        advertise_subscribe=config.advertise_subscribe,
        advertise_list_changed=config.advertise_list_changed,
        dishonored=config.dishonor_uris,
    )
    # What the lab's own fault knobs kept out of the ack (the verdicts do not blame the
    # client for it); URIs the lab does not have are the client's business.
    uris = requested.get("resourceSubscriptions") or []
    withheld = [
        uri
        for uri in uris
        if isinstance(uri, str) and (uri in config.dishonor_uris or not config.advertise_subscribe)
    ]
    stream = ListenStream(subscription_id=sid, honored=honored, withheld=withheld)
    lab.open_stream(stream)
    return ListenResponse(lab, stream)


class ListenResponse(Response):
    def __init__(self, lab: Lab, stream: ListenStream) -> None:  # no body: we stream
        self.lab = lab
        self.stream = stream
        self.status_code = 200
        self.background = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        stream, lab = self.stream, self.lab
        loop = asyncio.get_running_loop()
        watcher = loop.create_task(self._watch_disconnect(receive))
        timers: list[asyncio.TimerHandle] = []
        reason = "client"
        try:
            await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
            if lab.config.ack_delay_ms:
                await asyncio.sleep(lab.config.ack_delay_ms / 1000)
            ack = wire.notification(
                wire.ACKNOWLEDGED, {"_meta": stream.meta(), "notifications": stream.honored}
            )
            await self._send(send, sse_frame(ack))
            lab.log.record(
                "listen.acknowledged",
                subscriptionId=stream.subscription_id,
                honored=stream.honored,
                withheld=stream.withheld,
            )
            if not stream.carries_anything():
                # Seed 001: nothing could ever push on it, so holding the slot open would
                # only invite exhaustion; the final result follows the ack at once.
                stream.queue.put_nowait(Command("close"))
            for delay_ms, kind in (
                (lab.config.drop_after_ack_ms, "drop"),
                (lab.config.close_after_ack_ms, "close"),
            ):
                if delay_ms is not None:
                    timers.append(
                        loop.call_later(delay_ms / 1000, stream.queue.put_nowait, Command(kind))  # type: ignore[arg-type]
                    )
            reason = await self._pump(send)
        finally:
            watcher.cancel()
            for timer in timers:
                timer.cancel()
            lab.close_stream(stream)
            lab.log.record("listen.closed", subscriptionId=stream.subscription_id, reason=reason)
            stream.finished.set()

    async def _pump(self, send: Send) -> str:
        """Write queued frames until the stream ends; returns the close reason."""
        stream, lab = self.stream, self.lab
        while True:
            try:
                command = await asyncio.wait_for(
                    stream.queue.get(), timeout=lab.config.keepalive_seconds
                )
            except TimeoutError:
                await self._send(send, b": keepalive\n\n")
                continue
            if command.kind == "message" and command.message is not None:
                await self._send(send, sse_frame(command.message))
                params = command.message.get("params", {})
                fields = {"uri": params["uri"]} if "uri" in params else {}
                lab.log.record(
                    "notification.sent",
                    subscriptionId=stream.subscription_id,
                    method=command.message["method"],
                    **fields,
                )
            elif command.kind == "close":
                result = {
                    "resultType": "complete",
                    "_meta": {**stream.meta(), wire.META_SERVER_INFO: lab.server_info},
                }
                await self._send(
                    send, sse_frame(wire.result_response(stream.subscription_id, result))
                )
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                return "graceful"
            elif command.kind == "drop":
                # Returning without the final body message makes uvicorn close the socket
                # mid-stream: the client sees a truncated chunked body.
                return "dropped"
            else:
                return "client"

    async def _send(self, send: Send, data: bytes) -> None:
        await send({"type": "http.response.body", "body": data, "more_body": True})

    async def _watch_disconnect(self, receive: Receive) -> None:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                self.stream.queue.put_nowait(Command("disconnect"))
                return
