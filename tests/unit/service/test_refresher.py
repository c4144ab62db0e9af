"""A link's re-reads against a fake link (service.daemon.refresher.LinkReads): one read in
flight per URI plus one trailing read, server errors retried with backoff, an unknown URI not,
the bounds (two reads per link within the daemon-wide slots), and one reader task per link
instead of a task per re-read."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from service.backoff import Backoff
from service.daemon import refresher as refresher_module
from service.daemon.refresher import (
    READS_PER_LINK,
    ReadTarget,
    Refresher,
    read_error_code,
    retryable,
)
from service.mcp import wire
from service.mcp.errors import HttpStatusError, JsonRpcError, McpError, TransportError
from tests.support.poll import until_async

pytestmark = pytest.mark.anyio

A = "test://a"


@pytest.fixture(autouse=True)
def fast_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(refresher_module, "READ_RETRY", Backoff(base_s=0.001, jitter=0))
    monkeypatch.setattr(refresher_module, "STORAGE_RETRY", Backoff(base_s=0.001, jitter=0))


class FakeLink:
    """What the refresher needs of a link, recorded: reads answer from ``answers`` (a text, or
    an exception to raise), and wait for ``gate`` when one is set."""

    def __init__(self, answers: list[Any] | None = None, uris: tuple[str, ...] = (A,)) -> None:
        self.answers = list(answers or [])
        self.generation = 1
        self.stats: dict[str, int] = {}
        self.wanted = {uri: n for n, uri in enumerate(uris, start=1)}
        self.unread: set[int] = set()
        self.gate: asyncio.Event | None = None
        self.started: list[str] = []
        self.recorded: list[tuple[str, str | None, int, str | None]] = []
        self.errors: list[str] = []
        self.ok: list[int] = []
        self.in_flight = 0
        self.most_in_flight = 0
        self.commit_gate = False
        """True: commits stay under way until :meth:`commit`."""
        self.committing: list[tuple[asyncio.Future[Any], Any]] = []
        self.commit_error: Exception | None = None
        """The next commit fails with this (the store refused the read)."""

    def target(self, uri: str) -> ReadTarget | None:
        sid = self.wanted.get(uri)
        return None if sid is None else ReadTarget(sid, 1, uri)

    async def read(self, uri: str) -> dict[str, Any]:
        self.started.append(uri)
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            if self.gate is not None:
                await self.gate.wait()
            answer = self.answers.pop(0) if self.answers else f"{uri} v{len(self.started)}"
        finally:
            self.in_flight -= 1
        if isinstance(answer, BaseException):
            raise answer
        return {"contents": [{"uri": uri, "text": answer}]}

    def record(
        self,
        target: ReadTarget,
        generation: int,
        contents: list[dict[str, Any]],
        text: str | None,
        *,
        trigger: str | None,
        failing: bool,
    ) -> asyncio.Future[Any]:
        """Settles at once, or with :meth:`commit` while ``commit_gate`` is set; fails with
        ``commit_error`` (then not recorded)."""
        committed: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if self.commit_error is not None:
            committed.set_exception(self.commit_error)
            self.commit_error = None
            return committed
        self.recorded.append((target.uri, text, generation, trigger))
        outcome = (SimpleNamespace(revision=len(self.recorded)), None)
        if not self.commit_gate:
            committed.set_result(outcome)
        else:
            self.committing.append((committed, outcome))
        return committed

    def commit(self) -> None:
        """Settle every commit under way."""
        for committed, outcome in self.committing:
            if not committed.done():
                committed.set_result(outcome)
        self.committing.clear()

    def is_unread(self, target: ReadTarget) -> bool:
        return target.subscription_id in self.unread

    def read_ok(self, target: ReadTarget, generation: int) -> None:
        self.unread.discard(target.subscription_id)
        self.ok.append(generation)

    async def read_failed(self, target: ReadTarget, exc: McpError) -> None:
        self.errors.append(f"{read_error_code(exc)}: {exc}")


def texts(link: FakeLink) -> list[str | None]:
    return [text for _, text, _, _ in link.recorded]


async def settled(refresher: Refresher) -> None:
    await until_async("every read done", lambda: len(refresher) == 0, timeout=10)


def internal() -> JsonRpcError:
    return JsonRpcError(wire.INTERNAL_ERROR, "transient backend error")


async def test_internal_error_on_a_reread_is_retried_until_it_succeeds() -> None:
    link = FakeLink([internal(), internal(), "v2"])
    refresher = Refresher(link)
    refresher.trigger(A)
    await settled(refresher)
    assert texts(link) == ["v2"]
    assert link.errors == [], "two failures stay below the error threshold"


async def test_persistent_server_errors_show_error_and_keep_retrying() -> None:
    link = FakeLink([internal()] * 4 + ["v2"])
    refresher = Refresher(link)
    refresher.trigger(A)
    await settled(refresher)
    assert texts(link) == ["v2"]
    # shown from the third failure on, each time (the store logs an event only on a change)
    assert link.errors == ["SERVER_ERROR: transient backend error (JSON-RPC -32603)"] * 2
    assert A not in refresher.failing, "the good read cleared it"


async def test_unknown_uri_is_resource_not_found_and_not_retried() -> None:
    link = FakeLink([JsonRpcError(wire.INVALID_PARAMS, "Unknown resource: test://a"), "never"])
    refresher = Refresher(link)
    refresher.trigger(A)
    await settled(refresher)
    assert texts(link) == [] and link.started == [A]
    assert link.errors == ["RESOURCE_NOT_FOUND: Unknown resource: test://a (JSON-RPC -32602)"]
    assert A in refresher.failing, "the next acknowledgement writes it again"
    refresher.trigger(A)  # a later notification reads again, and a good read clears it
    await settled(refresher)
    assert texts(link) == ["never"] and A not in refresher.failing


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (JsonRpcError(wire.INTERNAL_ERROR, "x"), True),
        (JsonRpcError(-32000, "server busy"), True),
        (TransportError("reset", kind="read"), True),
        (HttpStatusError(503), True),
        (JsonRpcError(wire.INVALID_PARAMS, "x"), False),
        (JsonRpcError(wire.LEGACY_RESOURCE_NOT_FOUND, "x"), False),
        (JsonRpcError(wire.METHOD_NOT_FOUND, "x"), False),
        (JsonRpcError(wire.INTERNAL_ERROR, "x", http_status=401), False),
        (HttpStatusError(403), False),
    ],
)
def test_retryable(exc: McpError, expected: bool) -> None:
    assert retryable(exc) is expected


async def test_a_burst_costs_one_read_in_flight_and_one_trailing_read_after_the_last() -> None:
    link = FakeLink()
    link.gate = asyncio.Event()
    refresher = Refresher(link)
    assert refresher.trigger(A, "acknowledged")
    await until_async("the first read started", lambda: link.started == [A])
    coalesced = [refresher.trigger(A) for _ in range(50)]
    assert coalesced == [True] + [False] * 49, "one trailing read; the rest coalesce into it"
    link.gate.set()
    await settled(refresher)
    assert link.started == [A, A], "the running read and one after it, never more"
    # the trailing read says it was notified; it began after the last notification
    assert [trigger for *_, trigger in link.recorded] == ["acknowledged", "notification"]


async def test_a_notification_outranks_a_reread_in_the_trailing_read() -> None:
    link = FakeLink()
    link.gate = asyncio.Event()
    refresher = Refresher(link)
    refresher.trigger(A)
    await until_async("reading", lambda: link.started)
    refresher.trigger(A, "acknowledged")
    refresher.trigger(A, "notification")
    refresher.trigger(A, "acknowledged")
    link.gate.set()
    await settled(refresher)
    assert [trigger for *_, trigger in link.recorded] == ["notification", "notification"]


async def test_rereads_reuse_the_links_reader_instead_of_a_task_each() -> None:
    """The link's readers live while the link reads: 40 re-reads one after another create
    one task, and 20 rounds of two overlapping reads one more, where a task per re-read made
    80."""
    link = FakeLink()
    refresher = Refresher(link)
    loop = asyncio.get_running_loop()
    made: list[object] = []
    factory = loop.get_task_factory()

    def counting(loop: asyncio.AbstractEventLoop, coro: Any, **kw: Any) -> Any:
        made.append(coro)
        if factory is not None:
            return factory(loop, coro, **kw)
        return asyncio.Task(coro, loop=loop, **kw)

    loop.set_task_factory(counting)
    try:
        for n in range(40):
            refresher.trigger(A)
            await until_async("read", lambda n=n: len(link.recorded) == n + 1)
        assert len(made) == 1
        # reads that overlap: the second reader joins once and stays, like the first
        b = "test://b"
        link.wanted[b] = 2
        for _ in range(20):
            link.gate = asyncio.Event()
            refresher.trigger(A)
            refresher.trigger(b)
            await until_async("both reading", lambda: link.in_flight == 2)
            link.gate.set()
            await settled(refresher)
    finally:
        loop.set_task_factory(factory)
    assert len(made) == READS_PER_LINK
    await refresher.stop()


async def test_a_link_reads_at_most_its_share_and_leaves_the_global_slots_to_others() -> None:
    uris = tuple(f"test://{n}" for n in range(10))
    shared = asyncio.Semaphore(READS_PER_LINK + 1)
    link_a = FakeLink(uris=uris)
    link_b = FakeLink(uris=("test://b",))
    link_a.gate = link_b.gate = asyncio.Event()
    a = Refresher(link_a, shared)
    b = Refresher(link_b, shared)
    for uri in uris:
        a.trigger(uri, "acknowledged")
    await until_async("A's reads started", lambda: link_a.in_flight == READS_PER_LINK)
    b.trigger("test://b", "acknowledged")
    # ten reads of link A: two run, eight wait without holding a shared slot
    await until_async("B's read got the slot left", lambda: link_b.in_flight == 1)
    link_a.gate.set()
    await settled(a)
    await settled(b)
    assert link_a.most_in_flight == READS_PER_LINK and link_b.most_in_flight == 1
    assert sorted(u for u, *_ in link_a.recorded) == sorted(uris)
    await a.stop()
    await b.stop()


async def test_a_trigger_while_retrying_is_kept_and_read_under_the_new_generation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A reconnect re-triggers every URI while a failed re-read waits for its retry: the
    pending re-read is neither lost nor doubled, and it runs under the current generation."""
    monkeypatch.setattr(refresher_module, "READ_RETRY", Backoff(base_s=0.05, jitter=0))
    link = FakeLink([internal(), "v2"])
    refresher = Refresher(link)
    refresher.trigger(A)
    await until_async("waiting to retry", lambda: A in refresher._waiting)
    link.generation = 2  # the link reconnected...
    assert not refresher.trigger(A)  # ...and a notification came: kept for the retry
    await settled(refresher)
    assert link.recorded == [(A, "v2", 2, "notification")]
    assert link.started == [A, A] and link.errors == []


async def test_a_read_fenced_out_by_a_relisten_is_read_again_under_the_new_generation() -> None:
    link = FakeLink(["old", "new"])
    link.gate = asyncio.Event()
    refresher = Refresher(link)
    refresher.trigger(A, "acknowledged")
    await until_async("reading", lambda: link.started)
    link.generation = 2
    link.gate.set()
    await settled(refresher)
    assert [(text, gen) for _, text, gen, _ in link.recorded] == [("old", 1), ("new", 2)]


async def test_an_acknowledgement_ends_the_wait_before_a_retry(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A read failing while the link was down waits out a long backoff; a new listen's
    acknowledgement retries it at once instead (and the schedule starts over)."""
    monkeypatch.setattr(refresher_module, "READ_RETRY", Backoff(base_s=60.0, jitter=0))
    link = FakeLink([TransportError("refused"), "v1"])
    link.unread = {1}
    refresher = Refresher(link)
    refresher.trigger(A)
    await until_async("waiting to retry", lambda: A in refresher._waiting)
    assert refresher.trigger(A, "acknowledged")
    await settled(refresher)
    assert texts(link) == ["v1"] and link.errors == ["NETWORK_ERROR: refused"]


async def test_a_subscription_with_no_stored_read_shows_its_first_failure_at_once() -> None:
    """Nothing to fall back on: the first failed read is shown (subscribe returns with it),
    the read goes on being retried, and the first stored read is reported to the link."""
    link = FakeLink([TransportError("timed out", kind="timeout"), "v1"])
    link.unread = {1}
    refresher = Refresher(link)
    refresher.trigger(A)
    await settled(refresher)
    assert link.errors == ["REQUEST_TIMEOUT: timed out"]
    assert texts(link) == ["v1"] and link.ok == [1] and not link.unread


async def test_a_crash_in_a_read_is_classified_shown_and_retried() -> None:
    """An exception that is no McpError (a bug, or an answer a parser failed on) is
    INTERNAL_ERROR on the subscription, and the read is tried again."""
    link = FakeLink([RuntimeError("boom")] * 3 + ["v2"])
    refresher = Refresher(link)
    refresher.trigger(A)
    await settled(refresher)
    assert texts(link) == ["v2"]
    assert link.errors == ["INTERNAL_ERROR: read crashed: RuntimeError('boom')"]


async def test_a_failing_state_write_does_not_end_the_reader() -> None:
    link = FakeLink([internal()] * 3 + ["v2", "v3"])

    async def broken(target: ReadTarget, exc: McpError) -> None:
        raise RuntimeError("state write broke")

    link.read_failed = broken  # type: ignore[method-assign]
    refresher = Refresher(link)
    refresher.trigger(A)
    await settled(refresher)
    refresher.trigger(A)
    await settled(refresher)
    assert texts(link) == ["v2", "v3"]


async def test_a_read_the_store_refuses_is_read_again_until_it_is_stored() -> None:
    from sqlalchemy.exc import OperationalError

    link = FakeLink(["v1", "v2"])
    link.commit_error = OperationalError("INSERT", {}, Exception("database or disk is full"))
    refresher = Refresher(link)
    refresher.trigger(A)
    await settled(refresher)
    assert texts(link) == ["v2"], "fresh content, not the copy the store refused"
    assert link.errors == []


async def test_a_uri_no_longer_wanted_is_not_read_and_its_retry_is_dropped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(refresher_module, "READ_RETRY", Backoff(base_s=60.0, jitter=0))
    link = FakeLink([internal()], uris=(A, "test://b"))
    refresher = Refresher(link)
    refresher.trigger(A)
    await until_async("waiting to retry", lambda: A in refresher._waiting)
    refresher.forget(A)
    del link.wanted["test://b"]
    refresher.trigger("test://b")
    await settled(refresher)
    assert link.started == [A], "the unwanted URI is not read"
    await refresher.stop()


async def test_an_idle_links_reader_is_retired_by_the_tick_and_made_again_on_demand() -> None:
    """An idle link holds no task: the supervisor's tick ends the workers when nothing was
    read since the tick before; a link that read keeps them, and a trigger after retirement
    still reads."""
    link = FakeLink()
    refresher = Refresher(link)
    refresher.trigger(A)
    await settled(refresher)
    [worker] = refresher._workers
    refresher.retire_idle()  # it read since the last tick: kept
    await asyncio.sleep(0)
    assert refresher._workers == [worker] and not worker.task.done()
    refresher.retire_idle()  # nothing since: retired
    await until_async("the reader ended", worker.task.done)
    assert refresher._workers == []
    refresher.trigger(A)
    await settled(refresher)
    assert len(link.recorded) == 2 and refresher._workers[0] is not worker
    await refresher.stop()


async def test_a_crash_in_a_reads_failure_handling_reads_the_uri_again() -> None:
    """A bug past the read's own boundary (here the failure report itself raises before
    anything else): the URI is read again later, not dropped. It was dropped when
    classifying a failure imported a module in a daemon out of file descriptors."""
    link = FakeLink([internal(), "v2"])
    link.unread = {1}  # its first failure is reported at once: the report is what breaks
    calls = 0

    def broken_code(exc: McpError) -> str:
        nonlocal calls
        calls += 1
        raise OSError(24, "Too many open files")

    refresher = Refresher(link)
    original = refresher_module.read_error_code
    refresher_module.read_error_code = broken_code  # type: ignore[assignment]
    try:
        refresher.trigger(A)
        await until_async("the failure was classified", lambda: calls == 1)
    finally:
        refresher_module.read_error_code = original
    await settled(refresher)
    assert texts(link) == ["v2"], "read again after the crash"


async def test_a_reader_goes_on_to_the_next_uri_while_its_read_commits() -> None:
    """The workers hand a read to the store and take the next URI: three URIs are read while
    every commit is still under way (a worker that waited for its commit left the third
    unread until one settled, with two workers per link)."""
    uris = ("test://a", "test://b", "test://c")
    link = FakeLink(uris=uris)
    link.commit_gate = True
    refresher = Refresher(link)
    for uri in uris:
        refresher.trigger(uri)
    await until_async("all three read", lambda: len(link.started) == 3)
    assert len(link.committing) == 3
    assert len(refresher) == 3, "a URI whose read commits still counts as being read"
    link.commit()
    await settled(refresher)
    await refresher.stop()


async def test_a_uris_trailing_read_starts_only_once_its_read_is_committed() -> None:
    link = FakeLink()
    link.commit_gate = True
    refresher = Refresher(link)
    refresher.trigger(A)
    await until_async("committing", lambda: len(link.committing) == 1)
    assert refresher.trigger(A) is True, "a trailing read is asked for"
    assert refresher.trigger(A) is False, "and coalesced with"
    for _ in range(20):
        await asyncio.sleep(0)
    assert link.started == [A], "not read again while its last read commits"
    link.commit()
    await until_async("trailing read", lambda: len(link.started) == 2)
    link.commit_gate = False
    link.commit()
    await settled(refresher)
    assert texts(link) == [f"{A} v1", f"{A} v2"]
    await refresher.stop()


async def test_a_read_holds_its_slot_until_its_commit() -> None:
    shared = asyncio.Semaphore(1)
    link_a = FakeLink()
    link_b = FakeLink(uris=("test://b",))
    link_a.commit_gate = True
    a = Refresher(link_a, shared)
    b = Refresher(link_b, shared)
    a.trigger(A)
    await until_async("A commits", lambda: len(link_a.committing) == 1)
    b.trigger("test://b")
    for _ in range(20):
        await asyncio.sleep(0)
    assert link_b.started == [], "the one slot is A's until its commit"
    link_a.commit()
    await settled(b)
    assert link_b.started == ["test://b"]
    await a.stop()
    await b.stop()


async def test_stopping_leaves_the_commits_under_way_and_gives_their_slots_back() -> None:
    shared = asyncio.Semaphore(2)
    link = FakeLink(uris=("test://a", "test://b"))
    link.commit_gate = True
    refresher = Refresher(link, shared)
    refresher.trigger("test://a")
    refresher.trigger("test://b")
    await until_async("both commit", lambda: len(link.committing) == 2)
    await refresher.stop()
    link.commit_gate = False
    link.commit()
    for _ in range(2):  # both slots given back once their commits settled
        await asyncio.wait_for(shared.acquire(), 1)
    refresher.trigger("test://a")
    for _ in range(20):
        await asyncio.sleep(0)
    assert link.started == ["test://a", "test://b"], "a stopped refresher reads nothing more"
