"""Re-read a link's resources when told they changed: per URI one read in flight plus one
trailing read, served by the link's long-lived reader.

A burst of N notifications for one URI costs at most two reads (the one running and one
after it), yet the last content is always read *after* the last notification. Each read
carries the link generation it started under; the store refuses to record a read whose
generation is no longer current, and the refresher then reads again under the new one, so
a stale read can neither overwrite newer content nor be the last word.

Shape: one :class:`Refresher` per link, given the link whole as a :class:`LinkReads` (what a
read needs of its link: read, record, what to report). A trigger puts the URI in the ready
set (coalesced: a URI is there once, with the stronger reason) and wakes the link's reader,
a task that takes URIs from the set one after another and sleeps between them; while it
reads and another URI is ready, a second one joins it (``READS_PER_LINK`` in flight per
link, each holding one of the daemon-wide ``read_concurrency`` slots from its request until
its revision is committed). They live while the link reads: the supervisor's tick retires
them once a tick passed without a read. So a re-read costs no task of its own, and no timer
but the client's shared deadline (:mod:`service.mcp.deadline`); a failed read waits for its
retry on a timer of its own, and only then.

A worker hands a read's content to the store's group commit and goes on to the next URI; it
does not wait for the commit. The commit's outcome comes back as a callback on the store's
future (:meth:`Refresher._recorded`), which finishes the URI: until then the URI counts as
being read, so its trailing read starts only after this one's revision is stored, and the
slot bounds the reads and commits in flight daemon-wide. A worker that waited for its
commit spent three quarters of each cycle there: at 2,000 changes/s over 10 links a change
waited ~12 ms on average (~50 ms in the tail) for one of its link's two workers while they
waited for the writer, and a change still unread when the next one came was coalesced.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, Protocol

import structlog

from service.backoff import Backoff
from service.daemon import logs
from service.daemon.inbox import LeanEvent
from service.failures import classify_read_failure
from service.mcp import wire
from service.mcp.errors import JsonRpcError, McpError
from service.probe import ResourceNotText, text_of
from service.store.database import database_errors, describe
from service.store.records import Event, Revision

log = structlog.get_logger("mcpsubd.refresher")

READ_RETRY = Backoff(base_s=0.5, cap_s=30.0, jitter=0)
"""A failed read (the server refused, broke or timed out): retried alone, so no jitter."""
STORAGE_RETRY = Backoff(base_s=0.5, cap_s=5.0, jitter=0)
"""A read the database refused to store (full disk, I/O error), until a write goes through."""
READ_RETRIES_BEFORE_ERROR = 3
"""Failed attempts of one read in a row before the subscription shows ``error``."""
READS_PER_LINK = 2
"""Reads in flight per link: the link's reader and one helper (``read_concurrency`` bounds all links together). A listen
acknowledgement re-reads every URI of the link at once; unbounded, each of those reads would
open its own connection, and connecting is a large share of a cold start. Two, and the link's
transport keeps a connection alive for each (``Supervisor._new_transport``)."""

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


@dataclass(frozen=True, slots=True)
class ReadTarget:
    subscription_id: int
    server_id: int
    uri: str


class LinkReads(Protocol):
    """What a link's reads need of the link: the one object a :class:`Refresher` is given."""

    @property
    def generation(self) -> int:
        """The link's generation now: a read records under the one it started with."""
        ...

    @property
    def stats(self) -> dict[str, int]:
        """The daemon's counters (``/metrics``)."""
        ...

    def target(self, uri: str) -> ReadTarget | None:
        """What a read of ``uri`` is for now; None: the link no longer wants it."""
        ...

    async def read(self, uri: str) -> dict[str, Any]:
        """One ``resources/read``, bounded by the request timeout."""
        ...

    def record(
        self,
        target: ReadTarget,
        generation: int,
        contents: list[dict[str, Any]],
        text: str | None,
        *,
        trigger: str | None,
        failing: bool,
    ) -> asyncio.Future[tuple[Revision, Event] | None]:
        """Hand the read to the store (fenced on ``generation``); the future is the commit's
        outcome: the new revision and its event, or None (unchanged or fenced out).
        ``failing``: the subscription shows a failed read now."""
        ...

    def is_unread(self, target: ReadTarget) -> bool:
        """The subscription has no stored read: its first failure is shown at once."""
        ...

    def read_ok(self, target: ReadTarget, generation: int) -> None:
        """A read was stored under ``generation`` after the subscription had none, or was
        failing."""
        ...

    async def read_failed(self, target: ReadTarget, exc: McpError) -> None:
        """Show the failure on the subscription."""
        ...


class _Retry:
    """A failed read waiting for its retry: the timer, and the reason to read with."""

    __slots__ = ("handle", "reason")

    def __init__(self, handle: asyncio.TimerHandle, reason: str | None) -> None:
        self.handle = handle
        self.reason = reason


class _Worker:
    """One of a link's reading tasks, and how to wake it."""

    __slots__ = ("retiring", "signal", "sleeping", "task")

    task: asyncio.Task[None]

    def __init__(self) -> None:
        self.signal = LeanEvent()
        self.sleeping = False
        self.retiring = False


class Refresher:
    """The re-reads of one link (see the module)."""

    __slots__ = (
        "_attempts",
        "_busy",
        "_link",
        "_ready",
        "_slot",
        "_stopped",
        "_taken",
        "_taken_at_tick",
        "_tasks",
        "_waiting",
        "_workers",
        "failing",
    )

    def __init__(self, link: LinkReads, slot: asyncio.Semaphore | None = None) -> None:
        self._link = link
        self._slot = slot
        """The daemon-wide read slots: one is held from a read's request to its commit."""
        self._tasks: set[asyncio.Task[None]] | None = None
        """A failed commit's handling, which awaits (its state write): kept until it ends
        (made on the first: a daemon holds thousands of refreshers)."""
        self._stopped = False
        self._ready: dict[str, str | None] = {}
        """URI -> reason: to be read, oldest first; a URI is here once."""
        self._busy: dict[str, str | None] = {}
        """URI being read -> the trailing read's reason (None: no trailing read)."""
        self._waiting: dict[str, _Retry] = {}
        """URI -> its retry after a failure."""
        self._attempts: dict[str, tuple[int, int]] = {}
        """URI -> failed reads and refused stores in a row, while there are any."""
        self.failing: dict[str, McpError] = {}
        """URI -> the failure its subscription shows (a re-listen writes it again)."""
        self._workers: list[_Worker] = []
        """The link's reader, then its helper: ``READS_PER_LINK`` at most, each a task that
        sleeps between reads until it is woken or retired."""
        self._taken = 0
        """URIs taken by the workers, for :meth:`retire_idle`."""
        self._taken_at_tick = 0

    def __len__(self) -> int:
        """URIs with a read pending, running (or committing) or waiting for its retry."""
        return len(self._ready) + len(self._busy) + len(self._waiting)

    def trigger(self, uri: str, reason: str = "notification") -> bool:
        """Ask for a read of ``uri``; coalesces with one already pending (False then).

        ``reason`` (``notification`` or ``acknowledged``) is recorded with the revision the
        read produces; a notification wins over a re-read when both are pending.
        """
        busy = self._busy
        if uri in busy:
            trailing = busy[uri]
            busy[uri] = _stronger(trailing, reason)
            return trailing is None
        retry = self._waiting.get(uri)
        if retry is not None:
            retry.reason = _stronger(retry.reason, reason)
            if reason != "acknowledged":
                return False
            # A new listen was acknowledged: the failures so far may have been the link's
            # own (a refused connection while it was down); try at once, schedule anew.
            retry.handle.cancel()
            del self._waiting[uri]
            self._attempts.pop(uri, None)
            reason = retry.reason or reason
        ready = self._ready
        if uri in ready:
            ready[uri] = _stronger(ready[uri], reason)
            return False
        ready[uri] = reason
        self._kick()
        return True

    def forget(self, uri: str) -> None:
        """The link no longer wants ``uri``: drop what is pending for it (a read running
        finishes; its subscription is gone from the store by then)."""
        self._ready.pop(uri, None)
        retry = self._waiting.pop(uri, None)
        if retry is not None:
            retry.handle.cancel()
        self._attempts.pop(uri, None)
        self.failing.pop(uri, None)

    async def stop(self) -> None:
        """End every read. A read handed to the store is still committed (fenced like any:
        a link that lost its lease or its subscription writes nothing), unheeded; its slot
        goes back when it settles."""
        self._stopped = True
        for retry in self._waiting.values():
            retry.handle.cancel()
        self._waiting.clear()
        self._ready.clear()
        workers, self._workers = self._workers, []
        tasks = [worker.task for worker in workers] + list(self._tasks or ())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def retire_idle(self) -> None:
        """The supervisor's periodic tick: when nothing was read since the last tick, the
        sleeping workers end, so an idle link holds no task; the next trigger starts one
        again. A busy link keeps its workers, and its re-reads make no task."""
        if self._taken == self._taken_at_tick:
            for worker in self._workers:
                if worker.sleeping:
                    worker.retiring = True
                    worker.signal.set()
        self._taken_at_tick = self._taken

    # -- the reader ---------------------------------------------------------------------------
    def _kick(self) -> None:
        """A URI is ready: wake a sleeping worker, or start one while fewer than
        ``READS_PER_LINK`` run."""
        if self._stopped:
            return
        for worker in self._workers:
            if worker.sleeping:
                worker.sleeping = False  # woken: the next URI needs another worker
                worker.signal.set()
                return
        if len(self._workers) < READS_PER_LINK:
            worker = _Worker()
            self._workers.append(worker)
            worker.task = asyncio.get_running_loop().create_task(self._run(worker))

    async def _run(self, worker: _Worker) -> None:
        ready = self._ready
        busy = self._busy
        try:
            while True:
                if not ready:
                    if worker.retiring:
                        return
                    worker.sleeping = True
                    worker.signal.clear()
                    await worker.signal.wait()
                    worker.sleeping = False
                    continue
                worker.retiring = False
                self._taken += 1
                uri = next(iter(ready))
                reason = ready.pop(uri)
                busy[uri] = None
                committing = False
                try:
                    committing = await self._read(uri, reason)
                except asyncio.CancelledError:
                    busy.pop(uri, None)
                    raise
                except Exception:
                    # A bug past the read's own boundary (in its failure handling): the URI
                    # is read again later, never dropped (it would stay unread for good).
                    log.exception("read crashed", uri=uri)
                    self._finish(uri, reason, crashed=True, kick=False)
                    continue
                if not committing:
                    self._finish(uri, reason, kick=False)
        finally:
            worker.sleeping = False
            if worker in self._workers:
                self._workers.remove(worker)

    def _finish(
        self, uri: str, reason: str | None, *, crashed: bool = False, kick: bool = True
    ) -> None:
        """The URI's read is over: its trailing read (if one was asked for) becomes ready
        (``kick``: wake a worker for it; a worker finishing its own read takes it itself)."""
        trailing = self._busy.pop(uri, None)
        if uri in self._waiting:
            return
        if crashed:
            self._retry_after_crash(uri, _stronger(reason, trailing))
        elif trailing is not None:
            self._ready[uri] = _stronger(self._ready.get(uri), trailing)
            if kick:
                self._kick()

    async def _read(self, uri: str, reason: str | None) -> bool:
        """One read of ``uri``, handed to the store; True: its commit is under way and
        :meth:`_recorded` finishes the URI. False: over here (not wanted, or failed)."""
        link = self._link
        target = link.target(uri)
        if target is None:
            self.forget(uri)
            return False
        stats = link.stats
        generation = link.generation
        slot = self._slot
        if slot is not None:
            await slot.acquire()
        try:
            result = await link.read(uri)
            stats["reads_total"] = stats.get("reads_total", 0) + 1
            contents = [c for c in result.get("contents", []) if isinstance(c, dict)]
            try:
                text: str | None = text_of(result, uri)
            except ResourceNotText:
                text = None
            committed = link.record(
                target, generation, contents, text, trigger=reason, failing=uri in self.failing
            )
        except BaseException as caught:
            if slot is not None:
                slot.release()
            if not isinstance(caught, Exception):
                raise
            await self._failed(uri, target, reason, caught)
            return False
        committed.add_done_callback(
            functools.partial(self._recorded, uri, target, reason, generation)
        )
        return True

    def _recorded(
        self,
        uri: str,
        target: ReadTarget,
        reason: str | None,
        generation: int,
        committed: asyncio.Future[tuple[Revision, Event] | None],
    ) -> None:
        """The commit of ``uri``'s read is settled (a loop callback): stored, fenced out,
        or failed; then the URI is finished."""
        if self._slot is not None:
            self._slot.release()
        if self._stopped:
            return
        if committed.cancelled():  # the store is closing: nothing more is read into it
            self._busy.pop(uri, None)
            return
        error = committed.exception()
        if error is not None:
            task = asyncio.get_running_loop().create_task(
                self._commit_failed(uri, target, reason, error)
            )
            if self._tasks is None:
                self._tasks = set()
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            return
        try:
            self._stored(uri, target, reason, generation, committed.result())
        except Exception:
            # A bug in what follows a commit: the URI is read again later, never dropped.
            log.exception("read crashed", uri=uri)
            self._finish(uri, reason, crashed=True)
            return
        self._finish(uri, reason)

    def _stored(
        self,
        uri: str,
        target: ReadTarget,
        reason: str | None,
        generation: int,
        outcome: tuple[Revision, Event] | None,
    ) -> None:
        link = self._link
        self._attempts.pop(uri, None)
        if link.generation != generation:
            # Fenced out by a re-listen: read again under the current generation.
            self._busy[uri] = _stronger(self._busy[uri], reason or "acknowledged")
            return
        if uri in self.failing or link.is_unread(target):
            self.failing.pop(uri, None)
            link.read_ok(target, generation)
        if outcome is not None:
            stats = link.stats
            stats["revisions_total"] = stats.get("revisions_total", 0) + 1
            # debug: at info this line cost more than the revision's own SQL; the count is
            # mcpsub_revisions_total in /metrics
            if logs.enabled(logging.DEBUG):
                revision = outcome[0].revision
                log.debug("revision", uri=uri, revision=revision, generation=generation)

    async def _commit_failed(
        self, uri: str, target: ReadTarget, reason: str | None, error: BaseException
    ) -> None:
        """The store refused the read (or failed on it): handled as a failed read, then the
        URI is finished."""
        crashed = False
        try:
            caught = error if isinstance(error, Exception) else McpError(repr(error)[:300])
            await self._failed(uri, target, reason, caught)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("read crashed", uri=uri)
            crashed = True
        if not self._stopped:
            self._finish(uri, reason, crashed=crashed)

    async def _failed(
        self, uri: str, target: ReadTarget, reason: str | None, caught: Exception
    ) -> None:
        link = self._link
        stats = link.stats
        stats["errors_total"] = stats.get("errors_total", 0) + 1
        reads, stores = self._attempts.get(uri, (0, 0))
        if isinstance(caught, database_errors()):
            # The read worked but could not be stored (disk full, I/O error): the store
            # reports the daemon-level condition; keep this read pending and read again
            # (fresh content, not the stale copy) until a write goes through.
            log.warning("storing a read failed", uri=uri, error=describe(caught))
            self._attempts[uri] = (reads, stores + 1)
            self._retry(uri, reason, STORAGE_RETRY.delay(stores))
            return
        if isinstance(caught, McpError):
            exc = caught
        else:
            # A bug, caught at the read's boundary: classified (INTERNAL_ERROR), shown on the
            # subscription and retried like any failure; never a silent end.
            log.exception("read crashed", uri=uri, error=str(caught))
            exc = McpError(f"read crashed: {caught!r}"[:300])
        code = read_error_code(exc)
        log.warning("read failed", uri=uri, error=str(exc), code=code)
        if not retryable(exc):
            self._attempts.pop(uri, None)
            self.failing[uri] = exc
            await _report(link.read_failed(target, exc))
            return
        # A transport failure (refused, reset, timeout), a server-side error (-32603) or an
        # answer over a bound: the content may be stale now and no notification will say so
        # again, so retry with backoff (READ_RETRY). A subscription with content shows the
        # failure after a few tries; one with nothing stored yet at the first (nothing to
        # fall back on); once shown, every later failure is shown too (its code may change:
        # a timeout, then a refused connection). The next good read clears it. A re-listen
        # meanwhile cuts the wait short (``trigger(uri, "acknowledged")``).
        reads += 1
        self._attempts[uri] = (reads, stores)
        if reads >= READ_RETRIES_BEFORE_ERROR or uri in self.failing or link.is_unread(target):
            self.failing[uri] = exc
            await _report(link.read_failed(target, exc))
        self._retry(uri, reason, READ_RETRY.delay(reads - 1))

    def _retry(self, uri: str, reason: str | None, delay: float) -> None:
        trailing = self._busy.get(uri)
        handle = asyncio.get_running_loop().call_later(delay, self._retry_due, uri)
        self._waiting[uri] = _Retry(handle, _stronger(reason, trailing))
        self._busy[uri] = None

    def _retry_after_crash(self, uri: str, reason: str | None) -> None:
        reads, stores = self._attempts.get(uri, (0, 0))
        self._attempts[uri] = (reads + 1, stores)
        handle = asyncio.get_running_loop().call_later(
            READ_RETRY.delay(reads), self._retry_due, uri
        )
        self._waiting[uri] = _Retry(handle, reason)

    def _retry_due(self, uri: str) -> None:
        retry = self._waiting.pop(uri, None)
        if retry is None:
            return
        if uri in self._busy:
            self._busy[uri] = _stronger(self._busy[uri], retry.reason)
            return
        self._ready[uri] = _stronger(self._ready.get(uri), retry.reason)
        self._kick()


async def _report(call: Awaitable[None]) -> None:
    """Run a link's report (it writes a state); its failure must not end the reader: the
    read is retried or done either way, and the next state write tries again."""
    try:
        await call
    except asyncio.CancelledError:
        raise
    except database_errors() as exc:
        log.warning("recording the subscription state failed", error=describe(exc))
    except Exception:
        log.exception("recording the subscription state crashed")
