"""The rules of one ``subscriptions/listen`` stream as a table-driven state machine.

Theory of operation
-------------------
A listen stream is a POST whose SSE answer stays open. The server must first send
``notifications/subscriptions/acknowledged`` with the honored filter; after that it sends
notifications; it may end the stream gracefully with the JSON-RPC result for the listen id,
or refuse the listen with a JSON-RPC error instead of an acknowledgement. Every notification
(the acknowledgement included) carries the listen id as ``subscriptionId`` with its JSON
type kept: ``"1"`` is not ``1`` (spec §3.3, §8 gap 12).

::

    AWAITING_ACK --ack--> OPEN --notification--> OPEN
         |                  |--result--> CLOSED        (graceful: server ended it)
         |--error--> FAILED |--error---> FAILED
         |                  |--EOF-----> LOST          (abrupt: nothing is replayed)
         |--EOF----> LOST

Anything else is the server breaking the protocol: :class:`ProtocolViolation` is raised and
the state does not change, so the caller decides (the probe reports it, the daemon treats the
link as lost). The machine never touches a socket: feed it decoded JSON-RPC messages.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from service.mcp import wire
from service.mcp.errors import JsonRpcError, ProtocolViolation


class ListenState(enum.StrEnum):
    """A listen stream's state; a ``StrEnum`` so that it is written out as its value."""

    AWAITING_ACK = "awaiting_ack"
    OPEN = "open"
    CLOSED = "closed"
    FAILED = "failed"
    LOST = "lost"


@dataclass(frozen=True, slots=True)
class Acknowledged:
    honored: dict[str, Any]


@dataclass(slots=True)  # not frozen: a frozen init costs 5x, once per notification
class Notified:
    method: str
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def uri(self) -> str | None:
        uri = self.params.get("uri")
        return uri if isinstance(uri, str) else None


@dataclass(frozen=True, slots=True)
class Closed:
    """The server ended the stream gracefully with the empty result."""

    result: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Failed:
    """The server answered the listen with a JSON-RPC error (a refusal, before the ack)."""

    error: JsonRpcError


@dataclass(frozen=True, slots=True)
class Lost:
    """The transport ended without a result: EOF, reset, or the watchdog gave up."""

    reason: str


ListenEvent = Acknowledged | Notified | Closed | Failed | Lost


def same_id(a: Any, b: Any) -> bool:
    """JSON-RPC id equality with the JSON type kept (``True`` is not ``1``)."""
    return type(a) is type(b) and a == b


def _kind(message: dict[str, Any]) -> str:
    method = message.get("method")
    if isinstance(method, str):
        if "id" in message:
            return "request"
        return "ack" if method == wire.ACKNOWLEDGED else "notification"
    if "error" in message:
        return "error"
    if "result" in message:
        return "result"
    return "garbage"


class ListenMachine:
    __slots__ = ("acknowledged", "listen_id", "state")

    def __init__(self, listen_id: Any) -> None:
        self.listen_id = listen_id
        self.state = ListenState.AWAITING_ACK
        self.acknowledged = False
        """The acknowledgement arrived (even if a later frame broke the rules). Its honored
        filter goes out in :class:`Acknowledged` and is not kept: a daemon holds one machine
        per open stream for the stream's life, and needs the honored URIs once."""

    # -- the table --------------------------------------------------------------------------
    def receive(self, message: dict[str, Any]) -> ListenEvent:
        kind = _kind(message)
        handler = _TABLE.get((self.state, kind))
        if handler is None:
            raise ProtocolViolation(self._unexpected(kind, message))
        return handler(self, message)

    def eof(self, reason: str = "stream ended without a result") -> Lost:
        if self.state in (ListenState.AWAITING_ACK, ListenState.OPEN):
            self.state = ListenState.LOST
        return Lost(reason)

    # -- transitions ------------------------------------------------------------------------
    def _check_tag(self, message: dict[str, Any]) -> dict[str, Any]:
        params = message.get("params")
        if not isinstance(params, dict):
            raise ProtocolViolation(f"{message.get('method')}: notification without params")
        meta = params.get("_meta")
        tag = meta.get(wire.META_SUBSCRIPTION_ID) if isinstance(meta, dict) else None
        if tag is None:
            raise ProtocolViolation(f"{message.get('method')}: frame carries no subscriptionId")
        if not same_id(tag, self.listen_id):
            raise ProtocolViolation(
                f"{message.get('method')}: subscriptionId {tag!r} is not this listen's "
                f"id {self.listen_id!r}"
            )
        return params

    def _on_ack(self, message: dict[str, Any]) -> ListenEvent:
        params = self._check_tag(message)
        honored = params.get("notifications")
        if honored is not None and not isinstance(honored, dict):
            raise ProtocolViolation("acknowledgement: notifications is not an object")
        self.acknowledged = True
        self.state = ListenState.OPEN
        return Acknowledged(dict(honored or {}))

    def _on_notification(self, message: dict[str, Any]) -> ListenEvent:
        params = self._check_tag(message)
        return Notified(str(message["method"]), params)

    def _on_result(self, message: dict[str, Any]) -> ListenEvent:
        self._check_response_id(message)
        result = message.get("result")
        self.state = ListenState.CLOSED
        return Closed(result if isinstance(result, dict) else {})

    def _on_error(self, message: dict[str, Any]) -> ListenEvent:
        self._check_response_id(message)
        error = message.get("error") if isinstance(message.get("error"), dict) else {}
        assert isinstance(error, dict)
        code = error.get("code")
        self.state = ListenState.FAILED
        return Failed(
            JsonRpcError(
                code if isinstance(code, int) else wire.INTERNAL_ERROR,
                str(error.get("message", "")),
                error.get("data"),
                method=wire.LISTEN,
            )
        )

    def _check_response_id(self, message: dict[str, Any]) -> None:
        if not same_id(message.get("id"), self.listen_id):
            raise ProtocolViolation(
                f"response for id {message.get('id')!r} on the stream of listen {self.listen_id!r}"
            )

    def _unexpected(self, kind: str, message: dict[str, Any]) -> str:
        what = message.get("method") or kind
        if kind == "request":
            return f"server sent a JSON-RPC request ({what}) on a listen stream"
        if self.state is ListenState.AWAITING_ACK:
            return f"{what} arrived before the subscription was acknowledged"
        if kind == "ack":
            return "a second acknowledgement arrived on an open listen stream"
        return f"{what} is not allowed in state {self.state.value}"


_Handler = Callable[[ListenMachine, dict[str, Any]], ListenEvent]
_TABLE: dict[tuple[ListenState, str], _Handler] = {
    (ListenState.AWAITING_ACK, "ack"): ListenMachine._on_ack,
    (ListenState.AWAITING_ACK, "error"): ListenMachine._on_error,
    (ListenState.OPEN, "notification"): ListenMachine._on_notification,
    (ListenState.OPEN, "result"): ListenMachine._on_result,
    (ListenState.OPEN, "error"): ListenMachine._on_error,
}


def honored_uris(honored: dict[str, Any] | None) -> list[str]:
    uris = (honored or {}).get("resourceSubscriptions")
    return [u for u in uris if isinstance(u, str)] if isinstance(uris, list) else []
