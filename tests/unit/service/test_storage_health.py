"""The storage condition's pure parts: one failing period per outage however the
writes interleave, "did not answer" told apart from a bug, and the remembered status counts
a frozen database cannot hold up."""

from __future__ import annotations

import asyncio
import time

import pytest
from sqlalchemy.exc import OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from service.store import remembered
from service.store.health import StorageHealth, is_storage_failure, is_unanswered
from service.store.remembered import Remembered

pytestmark = pytest.mark.anyio


def _full() -> OperationalError:
    import sqlite3

    return OperationalError("INSERT", None, sqlite3.OperationalError("database or disk is full"))


def test_writes_that_fit_between_failures_do_not_end_the_period() -> None:
    health = StorageHealth(recovery_s=60.0)
    for _ in range(5):  # a full disk: a renew fits, a revision does not
        health.failed(_full())
        health.succeeded()
        assert health.failing
    health.last_failure = time.monotonic() - 61  # a minute of writes without a failure
    health.succeeded()
    assert not health.failing
    assert [e["state"] for e in health.pending_events] == ["failing", "ok"]
    assert health.recoveries_total == 1


def test_without_a_recovery_time_the_first_success_ends_the_period() -> None:
    health = StorageHealth()
    health.failed(_full())
    health.succeeded()
    assert not health.failing


def test_a_database_that_does_not_answer_is_not_a_bug() -> None:
    assert is_storage_failure(_full()) and not is_unanswered(_full())
    assert is_unanswered(PoolTimeout("QueuePool limit of size 5 overflow 10 reached"))
    assert is_unanswered(TimeoutError("the database did not answer within 1 s"))
    assert is_unanswered(OperationalError("SELECT 1", None, ConnectionRefusedError(111, "x")))
    assert not is_unanswered(OperationalError("SELECT", None, ValueError("syntax error")))


async def test_an_unanswered_read_is_answered_from_memory_and_shared() -> None:
    started = 0
    release = asyncio.Event()

    async def read() -> int:
        nonlocal started
        started += 1
        await release.wait()
        return started

    counts = Remembered(read, 0)
    release.set()
    first = await counts.get(1.0)
    assert (first.value, first.fresh, first.error) == (1, True, None)
    release.clear()
    late = await counts.get(0.01)  # the database froze
    assert (late.value, late.fresh) == (1, False) and isinstance(late.error, TimeoutError)
    assert late.at is not None
    counts._started -= remembered.JOIN_AFTER_S  # the read has been stuck for a while
    again = await counts.get(0.01)
    assert not again.fresh and started == 2, "a stuck read is shared, not started again"
    release.set()
    thawed = await counts.get(1.0)
    assert thawed.fresh and thawed.value == 2


async def test_a_failing_read_keeps_the_last_answer() -> None:
    async def broken() -> int:
        raise _full()

    counts = Remembered(broken, 7)
    answer = await counts.get(1.0)
    assert (answer.value, answer.fresh, answer.at) == (7, False, None)
    assert is_storage_failure(answer.error or Exception())


async def test_an_unanswered_lease_renew_names_its_deadline_rounded() -> None:
    """The renew deadline is what is left of the TTL (e.g. 0.8734 s): the message a user sees
    in the log, ``mcpsubctl status`` and the ``daemon.storage`` event shows it rounded."""
    from service.daemon.leases import LeaseKeeper

    keeper = LeaseKeeper(store=None, owner=None, ttl_s=1.0, replica_id="r")  # type: ignore[arg-type]
    never = asyncio.Event()

    async def unanswered() -> set[int]:
        await never.wait()
        return set()

    keeper.renew = unanswered  # type: ignore[method-assign]
    keeper.valid_until = time.monotonic() + 0.9734  # the deadline: ~0.8734 s from now
    with pytest.raises(TimeoutError) as caught:
        await keeper._renew_by_deadline()
    assert str(caught.value) == "the database did not answer the lease renew within 0.9 s"
    assert keeper._renewing is not None  # still in flight: awaited by the next attempt
    keeper._renewing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await keeper._renewing
