"""The dispatcher's pure decisions, and its loop against a real loopback receiver.

The store-backed tests run on both backends (``database_url``: SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
import email.utils
import json
import random
import time
from typing import Any

import httpx
import pytest

from service.webhooks.dispatcher import (
    Dispatcher,
    WebhookSettings,
    attempt_outcome,
    next_attempt_time,
    parse_retry_after,
)
from service.webhooks.repository import AttemptResult, WebhookRepository
from tests.api.fakes import make_supervisor
from tests.support.poll import until_async
from tests.webhooks.receiver import Receiver, Step

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("status", "ok", "disable"),
    [(200, True, False), (204, True, False), (301, False, False), (302, False, False),
     (404, False, False), (410, False, True), (500, False, False)],
)  # fmt: skip
def test_attempt_outcome(status: int, ok: bool, disable: bool) -> None:
    outcome = attempt_outcome(status, httpx.Headers(), time.time())
    assert outcome.ok is ok
    assert (outcome.disable_reason is not None) is disable


def test_retry_after_seconds_and_date() -> None:
    now = time.time()
    assert parse_retry_after("7", now) == 7.0
    date = email.utils.formatdate(now + 60, usegmt=True)
    parsed = parse_retry_after(date, now)
    assert parsed is not None and 58 <= parsed <= 61
    assert parse_retry_after("soon", now) is None
    headers = httpx.Headers({"retry-after": "3"})
    assert attempt_outcome(429, headers, now).retry_after_s == 3.0
    assert attempt_outcome(503, headers, now).retry_after_s == 3.0
    assert attempt_outcome(500, headers, now).retry_after_s is None


def test_schedule_jitter_and_retry_after() -> None:
    settings = WebhookSettings(schedule=(0.0, 5.0, 300.0), jitter=0.2)
    rng = random.Random(1)
    for _ in range(50):
        at = next_attempt_time(settings, 1, 1000.0, None, rng)
        assert at is not None and 1004.0 <= at <= 1006.0
    assert next_attempt_time(settings, 1, 1000.0, 60.0, rng) == 1060.0
    assert next_attempt_time(settings, 3, 1000.0, None, rng) is None, "schedule spent: dead"


async def test_loop_sleeps_while_an_attempt_is_in_flight(database_url: str) -> None:
    """Regression: with a due row in flight the loop used to spin without sleeping."""
    rx = Receiver().start()
    rx.plan("/hold", Step(delay=1.0))
    sup = await make_supervisor(database_url)
    dispatcher = Dispatcher(sup.store, WebhookSettings(schedule=(0.0, 0.2), jitter=0.0))
    try:
        _target, secret = await dispatcher.repo.create_target(rx.url("/hold"))
        rx.expect_secret("/hold", secret)
        sub, _ = await sup.subscribe("http://127.0.0.1:1/mcp", "test://a")
        passes = 0
        due_work = dispatcher.repo.due_work

        async def counting_due(*args, **kwargs):  # type: ignore[no-untyped-def]
            nonlocal passes
            passes += 1
            return await due_work(*args, **kwargs)

        dispatcher.repo.due_work = counting_due  # type: ignore[method-assign]
        dispatcher.start()
        await sup.publish(sub, "one")

        async def delivered() -> bool:
            return (await dispatcher.repo.counts())["delivered"] >= 1

        await until_async("the delivery", delivered, 5)
        assert passes < 15, f"{passes} dispatcher passes during one 1 s attempt"
    finally:
        await dispatcher.stop()
        rx.close()
        await sup.store.close()
    assert rx.verification_errors() == []


async def test_backlog_of_one_target_does_not_starve_another(database_url: str) -> None:
    sup = await make_supervisor(database_url)
    try:
        repo = sup.webhooks.repo
        busy, _ = await repo.create_target("http://127.0.0.1:9/busy")
        sub, _ = await sup.subscribe("http://127.0.0.1:1/mcp", "test://q/0")
        for n in range(30):
            other, _ = await sup.subscribe("http://127.0.0.1:1/mcp", f"test://q/{n + 1}")
            await sup.publish(other, f"v{n}")
        quiet, _ = await repo.create_target("http://127.0.0.1:9/quiet")
        await sup.publish(sub, "late")
        # The query production passes run (DUE_WORK, through due_work).
        work, _next = await repo.due_work(time.time() + 1, limit=10, per_target=4)
        due = [item.delivery for item in work]
        assert {d.target_id for d in due} == {busy.id, quiet.id}
        assert sum(d.target_id == busy.id for d in due) == 4
        skip = {d.id for d in due}
        again, _next = await repo.due_work(time.time() + 1, limit=10, per_target=4, exclude=skip)
        assert not skip & {item.delivery.id for item in again}
    finally:
        await sup.store.close()


async def test_one_pass_query_builds_what_an_attempt_needs(database_url: str) -> None:
    """``due_work`` (one query) gives the same body as reading revision and event one by
    one, and both secrets while a rotation overlaps."""
    sup = await make_supervisor(database_url)
    dispatcher = Dispatcher(sup.store, WebhookSettings())
    try:
        repo = dispatcher.repo
        target, first_secret = await repo.create_target("http://127.0.0.1:9/hook")
        sub, _ = await sup.subscribe("http://127.0.0.1:1/mcp", "test://w/é")
        await sup.publish(sub, 'ünïcode "quoted"')
        second_secret = await repo.rotate_secret(target.id)
        [item], next_due = await repo.due_work(time.time() + 1)
        assert next_due is None
        assert item.url == "http://127.0.0.1:9/hook" and item.mode == "all"
        assert item.secrets == (second_secret, first_secret)
        expected = await dispatcher.body(item.delivery)
        assert json.loads(item.body) == json.loads(expected)
        assert json.loads(item.body)["contents"][0]["text"] == 'ünïcode "quoted"'
        small = await repo.due_work(time.time() + 1, max_body_bytes=200)
        assert json.loads(small[0][0].body)["truncated"] is True
    finally:
        await dispatcher.stop()
        await sup.store.close()


async def test_a_batch_of_outcomes_in_one_transaction(database_url: str) -> None:
    """Success, dead letter and 410 in one write: states, counters, events after commit."""
    sup = await make_supervisor(database_url)
    try:
        repo = WebhookRepository(sup.store)
        ok, _ = await repo.create_target("http://127.0.0.1:9/ok")
        gone, _ = await repo.create_target("http://127.0.0.1:9/gone")
        changed: list[tuple[int, bool]] = []
        repo.on_target_change.append(
            lambda target_id, removed: changed.append((target_id, removed))
        )
        for n in range(2):
            sub, _ = await sup.subscribe("http://127.0.0.1:1/mcp", f"test://b/{n}")
            await sup.publish(sub, "v")
        notified: list[Any] = []
        sup.store.on_event.append(notified.append)
        rows = await repo.list_deliveries()
        by_target = {t: [d for d in rows if d.target_id == t] for t in (ok.id, gone.id)}
        applied = await repo.apply_outcomes(
            [
                AttemptResult(by_target[ok.id][0], True, 204),
                AttemptResult(by_target[ok.id][1], False, 500, "HTTP 500", None),  # spent
                AttemptResult(by_target[gone.id][0], False, 410, "410 Gone", None, "gone"),
            ],
            disable_after_s=86400.0,
        )
        states = {d.id: d.state for d in await repo.list_deliveries()}
        assert states[by_target[ok.id][0].id] == "delivered"
        assert states[by_target[ok.id][1].id] == "dead"
        assert states[by_target[gone.id][0].id] == "dead"
        assert states[by_target[gone.id][1].id] == "pending"
        assert applied.failures == {ok.id: 1, gone.id: 1}
        assert applied.disabled == {gone.id}
        assert [e.type for e in notified] == ["delivery.dead", "delivery.dead", "webhook.disabled"]
        assert changed == [(gone.id, False)]
        target = await repo.get_target(gone.id)
        assert target is not None and not target.enabled and target.disabled_reason == "gone"
    finally:
        await sup.store.close()


async def test_a_target_failing_for_longer_than_the_limit_is_disabled(database_url: str) -> None:
    """The 5-day rule (here 5 s): failures alone do not disable, a long failing streak does."""
    from sqlalchemy import text

    sup = await make_supervisor(database_url)
    try:
        repo = WebhookRepository(sup.store)
        target, _ = await repo.create_target("http://127.0.0.1:9/down")
        sub, _ = await sup.subscribe("http://127.0.0.1:1/mcp", "test://d")
        for n in range(2):
            await sup.publish(sub, f"v{n}")
        first, second = await repo.list_deliveries()
        fail = AttemptResult(first, False, 500, "HTTP 500", time.time() + 60)
        applied = await repo.apply_outcomes([fail], disable_after_s=5.0)
        assert applied.disabled == set(), "one failure is not a failing streak"
        async with sup.store.engine.begin() as conn:  # the streak began 10 s ago
            await conn.execute(
                text("UPDATE webhook_targets SET failing_since = :t WHERE id = :id"),
                {"t": time.time() - 10, "id": target.id},
            )
        applied = await repo.apply_outcomes(
            [AttemptResult(second, False, 500, "HTTP 500", time.time() + 60)], disable_after_s=5.0
        )
        assert applied.disabled == {target.id}
        found = await repo.get_target(target.id)
        assert found is not None and not found.enabled
        assert found.disabled_reason is not None and "failed for" in found.disabled_reason
    finally:
        await sup.store.close()


async def test_breaker_opens_after_consecutive_failures_then_probes(database_url: str) -> None:
    rx = Receiver().start()
    rx.plan("/flaky", then=Step(status=500))
    sup = await make_supervisor(database_url)
    settings = WebhookSettings(
        schedule=(0.0,) * 20, jitter=0.0, breaker_failures=2, breaker_open_s=1.0
    )
    dispatcher = Dispatcher(sup.store, settings)
    try:
        _target, secret = await dispatcher.repo.create_target(rx.url("/flaky"))
        rx.expect_secret("/flaky", secret)
        dispatcher.start()
        sub, _ = await sup.subscribe("http://127.0.0.1:1/mcp", "test://flaky")
        await sup.publish(sub, "v1")
        # two failures in a row: the breaker opens
        await until_async("two failures", lambda: len(rx.received("/flaky")) >= 2, 10)
        await until_async(  # half-open probes resume after the pause
            "a probe after the breaker's pause", lambda: len(rx.received("/flaky")) >= 4, 10
        )
        # Judged on the receiver's own clock, so a slow machine cannot skip the check: at most
        # one attempt (already on its way when the breaker opened) lands inside the 1 s open
        # window that follows the second failure.
        got = rx.received("/flaky")
        assert got[3].at - got[1].at >= 1.0 - 0.05, "attempts went on while the breaker was open"
    finally:
        await dispatcher.stop()
        rx.close()
        await sup.store.close()


async def test_remote_events_wake_the_dispatcher_only_when_a_target_can_want_them(
    database_url: str,
) -> None:
    """On PostgreSQL every replica hears every event of the cluster (NOTIFY). With no enabled
    target they cannot have enqueued anything: no pass for them; once a target exists, they
    wake the loop (the deliveries may be ours to make)."""
    sup = await make_supervisor(database_url)
    dispatcher = Dispatcher(sup.store, WebhookSettings())
    passes = asyncio.Event()
    due_work = dispatcher.repo.due_work

    async def counted(*args: Any, **kwargs: Any) -> Any:
        passes.set()
        return await due_work(*args, **kwargs)

    dispatcher.repo.due_work = counted  # type: ignore[method-assign]
    dispatcher.start()
    try:
        await asyncio.wait_for(passes.wait(), 10)
        # the first pass finds no target
        await until_async("a pass with no target", lambda: dispatcher._no_targets, 5)
        dispatcher._wake.clear()
        dispatcher.remote_events()
        assert not dispatcher._wake.is_set(), "woken for events no target can want"
        await dispatcher.repo.create_target("http://127.0.0.1:9/hook")
        dispatcher._wake.clear()
        dispatcher.remote_events()
        assert dispatcher._wake.is_set()
    finally:
        await dispatcher.stop()
        await sup.store.close()


async def test_an_attempt_past_the_timeout_names_it_as_set(database_url: str) -> None:
    """The error a user reads in ``deliveries list``/``show``: the setting as written."""
    rx = Receiver().start()
    rx.plan("/slow", Step(delay=3.0))
    sup = await make_supervisor(database_url)
    dispatcher = Dispatcher(sup.store, WebhookSettings(timeout_s=1.0))
    try:
        target, secret = await dispatcher.repo.create_target(rx.url("/slow"))
        rx.expect_secret("/slow", secret)
        outcome = await dispatcher.send_test(target.id)
        assert not outcome.ok and outcome.error == "ReadTimeout: no answer in 1 s"  # not "1.0 s"
    finally:
        await dispatcher.stop()
        rx.close()
        await sup.store.close()
