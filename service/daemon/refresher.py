"""Re-read a resource when told it changed: one read in flight per URI, plus one trailing read.

A burst of N notifications for one URI costs at most two reads (the one running and one
after it), yet the last content is always read *after* the last notification. Each read
carries the link generation it started under; the store refuses to record a read whose
generation is no longer current, and the refresher then reads again under the new one, so
a stale read can neither overwrite newer content nor be the last word.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import structlog

from service.backoff import Backoff
from service.daemon import logs
from service.failures import classify_read_failure
from service.mcp import wire
from service.mcp.errors import JsonRpcError, McpError
from service.probe import ResourceNotText, text_of
from service.store import Store
from service.store.database import database_errors, describe

log = structlog.get_logger("mcpsubd.refresher")

READ_RETRY = Backoff(base_s=0.5, cap_s=30.0, jitter=0)
"""A failed read (the server refused, broke or timed out): retried alone, so no jitter."""
STORAGE_RETRY = Backoff(base_s=0.5, cap_s=5.0, jitter=0)
"""A read the database refused to store (full disk, I/O error), until a write goes through."""
READ_RETRIES_BEFORE_ERROR = 3
"""Failed attempts of one read in a row before the subscription shows ``error``."""

NOT_FOUND_CODES = frozenset({wire.INVALID_PARAMS, wire.LEGACY_RESOURCE_NOT_FOUND})
"""JSON-RPC codes that mean "no such resource" (spec: -32602; 2025-era servers: -32002)."""
PERMANENT_CODES = NOT_FOUND_CODES | {wire.PARSE_ERROR, wire.INVALID_REQUEST, wire.METHOD_NOT_FOUND}
"""Answers about our request itself: asking again cannot change them."""


def read_error_code(exc: McpError) -> str:
    """The stable code a failed read shows (``stateCode``): the CLI's classifier, one for all."""
    return classify_read_failure(exc).code


def retryable(exc: McpError) -> bool:
    """Whether reading again may succeed: transport trouble and server-side errors (``-32603``,
    ``-32000``…) may pass; "unknown URI", "bad request" and refused credentials do not."""
    if isinstance(exc, JsonRpcError):
        return exc.code not in PERMANENT_CODES and exc.error_code != "AUTH_FAILED"
    return exc.error_code != "AUTH_FAILED"


def _stronger(a: str | None, b: str | None) -> str | None:
    """A pending notification outranks a re-read: the revision then says it was notified."""
    return "notification" if "notification" in (a, b) else (a or b)


@dataclass
class ReadTarget:
    subscription_id: int
    server_id: int
    uri: str


class UriRefresher:
    def __init__(
        self,
        target: ReadTarget,
        store: Store,
        read: Callable[[str], Awaitable[dict[str, Any]]],
        current_generation: Callable[[], int],
        limiter: contextlib.AbstractAsyncContextManager[Any],
        stats: dict[str, int],
        on_error: Callable[[ReadTarget, McpError], Awaitable[None]],
        on_ok: Callable[[ReadTarget, int], Awaitable[None]] | None = None,
        on_idle: Callable[[UriRefresher], None] | None = None,
        unread: Callable[[ReadTarget], bool] | None = None,
        activation: Callable[[ReadTarget, bool], bool] | None = None,
    ) -> None:
        self.target = target
        self._store = store
        self._read = read
        self._generation = current_generation
        self._limiter = limiter
        self._stats = stats
        self._on_error = on_error
        self._on_ok = on_ok
        self._on_idle = on_idle
        """Called when a read ended with nothing pending and no failure to clear: the owner
        may forget this refresher (it holds no state then) and make a new one next time."""
        self._unread = unread
        """True while the subscription has no stored read: its first read's failure is shown
        at once (there is no content to fall back on), and its first stored read is reported
        through ``on_ok``."""
        self._activation = activation
        """Asked before a read is stored (with ``failing``): whether storing it makes the
        subscription ``active``, in the same transaction (no read stored yet, or failing,
        and the link open)."""
        self.failing = False
        self.error: McpError | None = None
        """The failure the subscription shows while ``failing`` (a re-listen writes it again)."""
        self._task: asyncio.Task[None] | None = None
        self._retry: asyncio.Future[bool] | None = None
        """Set while waiting to retry a failed read; an acknowledgement ends the wait."""
        self._dirty = False
        self._reason: str | None = None

    @property
    def busy(self) -> bool:
        return self._task is not None and not self._task.done()

    def trigger(self, reason: str = "notification") -> None:
        """Ask for a read; coalesces with a read already running.

        ``reason`` (``notification`` or ``acknowledged``) is recorded with the revision the
        read produces; a notification wins over a re-read when both are pending.
        """
        self._reason = _stronger(self._reason, reason)
        if self.busy:
            self._dirty = True
            if reason == "acknowledged" and self._retry is not None and not self._retry.done():
                # A new listen was acknowledged: the failures so far may have been the
                # link's own (a refused connection while it was down); try at once.
                self._retry.set_result(True)
            return
        self._dirty = False
        self._task = asyncio.get_running_loop().create_task(self._run())
        self._task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        """Drop the finished task: 10,000 idle refreshers kept 10,000 done tasks (~3 MB)."""
        if self._task is task:
            self._task = None
            if self._on_idle is not None and not self.failing:
                self._on_idle(self)

    async def _run(self) -> None:
        failures = 0
        storage_failures = 0
        while True:
            self._dirty = False
            generation = self._generation()
            reason, self._reason = self._reason, None
            try:
                async with self._limiter:
                    result = await self._read(self.target.uri)
                    self._stats["reads_total"] = self._stats.get("reads_total", 0) + 1
                    contents = [c for c in result.get("contents", []) if isinstance(c, dict)]
                    try:
                        text: str | None = text_of(result, self.target.uri)
                    except ResourceNotText:
                        text = None
                    activate = self._activation is not None and self._activation(
                        self.target, self.failing
                    )
                    revision = await self._store.record_read(
                        self.target.subscription_id,
                        self.target.server_id,
                        generation,
                        contents,
                        text,
                        read_at=time.time(),
                        trigger=reason,
                        activate=activate,
                    )
                stored = self._generation() == generation  # not fenced out by a re-listen
                unread = self._unread is not None and self._unread(self.target)
                if stored and (self.failing or unread):
                    self.failing, self.error = False, None
                    if self._on_ok is not None:
                        await self._report(self._on_ok(self.target, generation))
                if revision is not None:
                    self._stats["revisions_total"] = self._stats.get("revisions_total", 0) + 1
                    # debug: at info this line cost more than the revision's own SQL; the
                    # count is mcpsub_revisions_total in /metrics
                    if logs.enabled(logging.DEBUG):
                        log.debug(
                            "revision",
                            uri=self.target.uri,
                            revision=revision.revision,
                            generation=generation,
                        )
            except asyncio.CancelledError:
                raise
            except Exception as caught:
                if isinstance(caught, database_errors()):
                    # The read worked but could not be stored (disk full, I/O error): the store
                    # reports the daemon-level condition; keep this read pending and read again
                    # (fresh content, not the stale copy) until a write goes through.
                    self._stats["errors_total"] = self._stats.get("errors_total", 0) + 1
                    storage_failures += 1
                    log.warning(
                        "storing a read failed", uri=self.target.uri, error=describe(caught)
                    )
                    await asyncio.sleep(STORAGE_RETRY.delay(storage_failures - 1))
                    self._dirty = True
                    continue
                if isinstance(caught, McpError):
                    exc = caught
                else:
                    # A bug, caught at the task boundary: classified (INTERNAL_ERROR), shown on
                    # the subscription and retried like any failure; never a silent end.
                    log.exception("read crashed", uri=self.target.uri, error=str(caught))
                    exc = McpError(f"read crashed: {caught!r}"[:300])
                self._stats["errors_total"] = self._stats.get("errors_total", 0) + 1
                code = read_error_code(exc)
                log.warning("read failed", uri=self.target.uri, error=str(exc), code=code)
                if not retryable(exc):
                    self.failing, self.error = True, exc
                    await self._report(self._on_error(self.target, exc))
                    return
                # A transport failure (refused, reset, timeout), a server-side error (-32603)
                # or an answer over a bound: the content may be stale now and no notification
                # will say so again, so retry with backoff (READ_RETRY). A subscription with content shows the failure after a few
                # tries; one with nothing stored yet at the first (nothing to fall back on);
                # once shown, every later failure is shown too (its code may change: a
                # timeout, then a refused connection). The next good read clears it. A
                # re-listen after a reconnect finds this refresher busy and marks it dirty:
                # the pending re-read is kept, not lost.
                failures += 1
                unread = self._unread is not None and self._unread(self.target)
                if failures >= READ_RETRIES_BEFORE_ERROR or unread or self.failing:
                    self.failing, self.error = True, exc
                    await self._report(self._on_error(self.target, exc))
                if await self._wait_retry(READ_RETRY.delay(failures - 1)):
                    failures = 0  # a fresh listen: the schedule starts over
                self._dirty = True
                self._reason = _stronger(self._reason, reason)
                continue
            if self._generation() != generation:
                self._dirty = True  # fenced out: read again under the current generation
                self._reason = _stronger(self._reason, reason)
            if not self._dirty:
                return

    async def _wait_retry(self, seconds: float) -> bool:
        """Wait before retrying a failed read; True when an acknowledgement cut it short."""
        self._retry = asyncio.get_running_loop().create_future()
        try:
            done, _ = await asyncio.wait({self._retry}, timeout=seconds)
            return bool(done)
        finally:
            self._retry.cancel()
            self._retry = None

    @staticmethod
    async def _report(call: Awaitable[None]) -> None:
        """Run an owner's callback (it writes a state); its failure must not end the read
        task: the read is retried or done either way, and the next state write tries again."""
        try:
            await call
        except asyncio.CancelledError:
            raise
        except database_errors() as exc:
            log.warning("recording the subscription state failed", error=describe(exc))
        except Exception:
            log.exception("recording the subscription state crashed")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
