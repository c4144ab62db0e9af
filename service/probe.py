"""The one-shot subscribe probe: wait for the next real change of a resource, then exit.

This is the algorithm of the TypeScript ``mcp-resource-subscriber`` (seed-behaviour §3.5),
which agent scripts depend on, expressed over our client:

1. discover, keep the ``resources`` capability;
2. unless skipped, check the URI is listed (all pages) → ``RESOURCE_NOT_FOUND``;
3. read the initial text;
4. listen with ``resourceSubscriptions`` → ``SUBSCRIPTION_FAILED`` if refused;
5. every requested URI must be honored → ``SUBSCRIPTION_NOT_HONORED``;
6. read again right after the ack (the update may have happened before we listened:
   the *pre-completion* route), then wait for notifications and re-read, for as long as the
   text says ``POLL_AFTER``.

A background task drains the listen stream into :class:`NotificationQueue` the whole time,
so a notification that arrives while we are reading is counted and never lost: a waiter asks
for "the first notification after sequence N", not "the next one from now".
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from service.actions import is_non_terminal
from service.mcp import wire
from service.mcp.client import ListenStream, McpClient
from service.mcp.errors import (
    HttpStatusError,
    JsonRpcError,
    ListenClosed,
    ListenEnded,
    ListenLost,
    McpError,
    ProtocolViolation,
    TransportError,
)
from service.mcp.listen import Closed, Failed, ListenEvent, Lost, Notified
from service.proberesult import ProbeResult as ProbeResult

MAX_QUEUED_NOTIFICATIONS = 100
"""Notifications kept for a waiter; older ones are dropped (only the newest matter)."""


class ProbeTimeout(McpError):
    error_code = "NOTIFICATION_TIMEOUT"


class ResourceNotText(McpError):
    """``resources/read`` returned no text content for the URI."""


@dataclass(frozen=True)
class ProbeOptions:
    url: str
    uris: list[str]
    token: str | None = None
    timeout_s: float = 15.0
    skip_list_check: bool = False
    exact_uri_match: bool = True
    """The drop-in counts only notifications for the exact URI; mcpsubctl takes sub-resources."""
    bound_all_phases: bool = False
    """mcpsubctl: the budget covers discovery, list and reads too, not only the wait."""
    name_violations: bool = False
    """mcpsubctl: a listen that breaks the protocol while opening (a wrong subscriptionId or
    response id, a second ack) raises and is classified ``PROTOCOL_ERROR``; the drop-in keeps
    the seed's ``SUBSCRIPTION_FAILED`` for it."""
    client_name: str = "mcpsub"
    ca_cert: str | None = None
    request_timeout_s: float = 60.0
    on_phase: Callable[[str], None] | None = None
    """Told what the probe is doing ("listening on … (acknowledged)"), for a terminal's status
    line; never affects the result."""


def _phase(options: ProbeOptions, text: str) -> None:
    if options.on_phase is not None:
        options.on_phase(text)


class NotificationQueue:
    """Matching ``resources/updated`` notifications with sequence numbers, plus how it ended."""

    def __init__(self, matches: Callable[[str], bool]) -> None:
        self._matches = matches
        self.count = 0
        self.last_uri: str | None = None
        self._items: list[tuple[int, str]] = []
        self.ended: ListenEvent | McpError | None = None
        self._changed = asyncio.Event()

    def push(self, uri: str) -> None:
        if not self._matches(uri):
            return
        self.count += 1
        self._items.append((self.count, uri))
        self.last_uri = uri
        del self._items[:-MAX_QUEUED_NOTIFICATIONS]
        self._changed.set()

    def end(self, why: ListenEvent | McpError) -> None:
        if self.ended is None:
            self.ended = why
        self._changed.set()

    async def wait_after(self, seq: int) -> tuple[int, str]:
        """The first notification with sequence > ``seq``; raises if the stream ended first."""
        while True:
            for item in self._items:
                if item[0] > seq:
                    return item
            if self.ended is not None:
                raise _ended_error(self.ended)
            self._changed.clear()
            await self._changed.wait()


def _ended_error(why: ListenEvent | McpError) -> McpError:
    if isinstance(why, McpError):
        return why
    if isinstance(why, Closed):
        return ListenClosed("the server closed the listen stream before the awaited update")
    if isinstance(why, Failed):
        return ListenLost(f"the server ended the listen stream with an error: {why.error}")
    reason = why.reason if isinstance(why, Lost) else str(why)
    return ListenLost(f"the listen stream was disconnected before the awaited update ({reason})")


async def _drain(stream: ListenStream, queue: NotificationQueue) -> None:
    try:
        while True:
            event = await stream.next_event()
            if isinstance(event, Notified):
                if event.method == wire.RESOURCE_UPDATED and event.uri is not None:
                    queue.push(event.uri)
                continue
            queue.end(event)
            return
    except McpError as exc:
        queue.end(exc)
    except Exception as exc:  # never end silently: the waiter would wait for its deadline
        queue.end(McpError(f"listen reader crashed: {exc!r}"[:300]))


def text_of(result: dict[str, Any], uri: str) -> str:
    """The text of a read result: the content for ``uri`` first, else the first text."""
    contents = result.get("contents")
    texts = (
        [c for c in contents if isinstance(c, dict) and isinstance(c.get("text"), str)]
        if isinstance(contents, list)
        else []
    )
    for content in texts:
        if content.get("uri") == uri:
            return str(content["text"])
    if texts:
        return str(texts[0]["text"])
    raise ResourceNotText(f"Expected text resource content for {uri}")


def subscribe_offered(capabilities: Any) -> bool:
    """The server's ``resources`` capability says it honors resource subscriptions (pure).

    Only an explicit ``true`` counts (seed 003): ``resources/list`` working, or the
    capability being absent, says nothing about subscriptions."""
    return isinstance(capabilities, dict) and capabilities.get("subscribe") is True


def uri_matcher(uris: list[str], exact: bool) -> Callable[[str], bool]:
    wanted = set(uris)
    if exact:
        return lambda uri: uri in wanted
    # Spec §3.3: an update may name a sub-resource of what we subscribed to.
    return lambda uri: True


class _Deadline:
    def __init__(self, seconds: float) -> None:
        self.at = time.monotonic() + seconds

    def remaining(self) -> float:
        return max(0.0, self.at - time.monotonic())


async def run_probe(options: ProbeOptions, result: ProbeResult | None = None) -> ProbeResult:
    """Run the probe; protocol-level outcomes land in the result, other errors raise.

    Raises :class:`McpError` subclasses for what the TypeScript CLI reports as route
    ``failed`` (auth, protocol, network, internal). ``result`` may be passed in so the caller
    still sees what was learnt before the failure.
    """
    uris = options.uris
    result = result or ProbeResult(options.url, uris[0], list(uris))
    overall = _Deadline(options.timeout_s) if options.bound_all_phases else None
    # Plain http:// with no proxy: every request and the listen go through the lean
    # transport and httpx is never imported (a third of a probe's wall time).
    async with McpClient(
        options.url,
        token=options.token,
        client_name=options.client_name,
        ca_cert=options.ca_cert,
        timeout=options.request_timeout_s,
    ) as client:

        async def bounded(coro: Any) -> Any:
            if overall is None:
                return await coro
            try:
                async with asyncio.timeout(overall.remaining()):
                    return await coro
            except TimeoutError as exc:
                raise ProbeTimeout(
                    f"--timeout-ms elapsed after {round(options.timeout_s, 1):g} s"
                ) from exc

        _phase(options, f"discovering {options.url}")
        discovered = await bounded(client.discover())
        result.capabilities = discovered.resources_capability

        if options.skip_list_check:
            result.resource_found = True
        else:
            _phase(options, "checking resources/list")
            listed = {r.get("uri") for r in await bounded(client.list_resources())}
            missing = [u for u in uris if u not in listed]
            result.resource_found = not missing
            if missing:
                result.route = "timeout"
                result.error_code = "RESOURCE_NOT_FOUND"
                result.error_message = f"resource not listed by the server: {', '.join(missing)}"
                return result

        _phase(options, f"reading {', '.join(uris)}")
        initial = {u: text_of(await bounded(client.read_resource(u)), u) for u in uris}
        result.initial_text = initial[uris[0]] or None

        if not subscribe_offered(result.capabilities):
            # Seed 003: subscription support is `resources.subscribe` explicitly true; a
            # client must not send a listen the server did not offer and hope.
            result.route = "timeout"
            result.error_code = "SUBSCRIPTION_NOT_HONORED"
            result.error_message = (
                "the server does not advertise resources.subscribe: it cannot honor a "
                "subscription, so none was requested"
            )
            return result

        deadline = overall or _Deadline(options.timeout_s)
        queue = NotificationQueue(uri_matcher(uris, options.exact_uri_match))
        stream = client.listen({"resourceSubscriptions": list(uris)})
        drain: asyncio.Task[None] | None = None
        try:
            try:
                _phase(options, f"opening the listen stream for {', '.join(uris)}")
                async with asyncio.timeout(deadline.remaining()):
                    await stream.open()
            except (
                TimeoutError,
                JsonRpcError,
                HttpStatusError,
                ProtocolViolation,
                TransportError,
            ) as exc:
                # A refusal is a refusal whether it came as JSON-RPC or as a proxy's
                # plain-text 503 (a publisher at its stream limit, seed 001).
                if isinstance(exc, (JsonRpcError, HttpStatusError)) and (
                    exc.error_code == "AUTH_FAILED"
                ):
                    raise
                if isinstance(exc, ProtocolViolation) and options.name_violations:
                    # The ack may have arrived before the frame that broke the rules.
                    if stream.acknowledged and stream.machine is not None:
                        result.listen_acknowledged = True
                        result.honored_uris = stream.honored_uris
                    result.close_reason = "local"
                    raise
                if isinstance(exc, TransportError) and exc.kind == "connect":
                    raise
                result.route = "timeout"
                result.error_code = "SUBSCRIPTION_FAILED"
                result.error_message = (
                    "subscriptions/listen was not acknowledged in time"
                    if isinstance(exc, TimeoutError)
                    else f"subscriptions/listen failed: {exc}"
                )
                return result
            result.listen_acknowledged = True
            result.honored_uris = stream.honored_uris
            not_honored = [u for u in uris if u not in result.honored_uris]
            if not_honored:
                await stream.aclose()
                result.close_reason = "local"
                result.route = "timeout"
                result.error_code = "SUBSCRIPTION_NOT_HONORED"
                result.error_message = f"the server did not honor: {', '.join(not_honored)}"
                return result
            _phase(options, f"listening on {', '.join(uris)} (acknowledged)")
            drain = asyncio.create_task(_drain(stream, queue))
            try:
                await _wait_for_change(client, options, result, queue, initial, deadline)
            except ProtocolViolation as exc:
                if options.name_violations or exc is not queue.ended or queue.count:
                    raise
                # The drop-in: the frame that broke the rules (a second ack) came in a later
                # piece of the stream than the ack, so open() returned first. It is the same
                # violation open() raises when both come in one piece, and gets the same
                # answer; which one happens is only how TCP cut the bytes.
                result.listen_acknowledged = False
                result.honored_uris = []
                result.final_text = None
                result.route = "timeout"
                result.error_code = "SUBSCRIPTION_FAILED"
                result.error_message = f"subscriptions/listen failed: {exc}"
                result.close_reason = "local"
        except ListenEnded as exc:
            result.route = result.route if result.route == "subscription" else "timeout"
            result.error_code = exc.error_code
            result.error_message = str(exc)
            result.close_reason = exc.close_reason
        finally:
            if drain is not None:
                drain.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await drain
            if result.close_reason is None and stream.streamed:
                result.close_reason = "local"
            await stream.aclose()
            result.notification_count = queue.count
    return result


async def _wait_for_change(
    client: McpClient,
    options: ProbeOptions,
    result: ProbeResult,
    queue: NotificationQueue,
    initial: dict[str, str],
    deadline: _Deadline,
) -> None:
    uris = options.uris

    async def read(uri: str) -> str:
        async with asyncio.timeout(deadline.remaining()):
            return text_of(await client.read_resource(uri), uri)

    async def wait(seq: int) -> tuple[int, str]:
        async with asyncio.timeout(deadline.remaining()):
            return await queue.wait_after(seq)

    try:
        # Pre-completion: the change may already have happened before the listen began.
        seq = 0
        changed: str | None = None
        for uri in uris:
            text = await read(uri)
            if text != initial[uri]:
                changed, result.final_text = uri, text
                break
        if changed is not None:
            result.resource_uri = changed
            result.initial_text = initial[changed] or None
            if queue.count > 0:
                # A notification arrived while we were reading: it explains the change.
                seq = queue.count
                result.notification_uri = queue.last_uri
                result.route = "subscription"
            elif not is_non_terminal(result.final_text):
                result.route = "pre-completion"
        while changed is None or is_non_terminal(result.final_text):
            seq, uri = await wait(seq)
            result.route = "subscription"
            result.notification_uri = uri
            result.resource_uri = changed = uri
            if uri in initial:
                result.initial_text = initial[uri] or None
            result.final_text = await read(uri)
    except TimeoutError:
        result.error_code = "NOTIFICATION_TIMEOUT"
        result.error_message = f"no matching update within {round(options.timeout_s, 1):g} s"
