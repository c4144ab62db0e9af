"""The dispatcher's pure decisions, and its loop against a real loopback receiver."""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
from pathlib import Path

import httpx
import pytest

from service.webhooks.dispatcher import (
    Dispatcher,
    WebhookSettings,
    attempt_outcome,
    next_attempt_time,
    parse_retry_after,
)
from tests.api.fakes import make_supervisor
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


async def test_loop_sleeps_while_an_attempt_is_in_flight(tmp_path: Path) -> None:
    """Regression: with a due row in flight the loop used to spin without sleeping."""
    rx = Receiver().start()
    rx.plan("/hold", Step(delay=1.0))
    sup = await make_supervisor(tmp_path / "state.db")
    dispatcher = Dispatcher(sup.store, WebhookSettings(schedule=(0.0, 0.2), jitter=0.0))
    try:
        _target, secret = await dispatcher.repo.create_target(rx.url("/hold"))
        rx.expect_secret("/hold", secret)
        sub, _ = await sup.subscribe("http://127.0.0.1:1/mcp", "test://a")
        passes = 0
        due = dispatcher.repo.due

        async def counting_due(*args, **kwargs):  # type: ignore[no-untyped-def]
            nonlocal passes
            passes += 1
            return await due(*args, **kwargs)

        dispatcher.repo.due = counting_due  # type: ignore[method-assign]
        dispatcher.start()
        await sup.publish(sub, "one")
        deadline = time.monotonic() + 5
        while (await dispatcher.repo.counts())["delivered"] < 1:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        assert passes < 15, f"{passes} dispatcher passes during one 1 s attempt"
    finally:
        await dispatcher.stop()
        rx.close()
        await sup.store.close()
    assert rx.verification_errors() == []


async def test_backlog_of_one_target_does_not_starve_another(tmp_path: Path) -> None:
    sup = await make_supervisor(tmp_path / "state.db")
    try:
        repo = sup.webhooks.repo
        busy, _ = await repo.create_target("http://127.0.0.1:9/busy")
        sub, _ = await sup.subscribe("http://127.0.0.1:1/mcp", "test://q/0")
        for n in range(30):
            other, _ = await sup.subscribe("http://127.0.0.1:1/mcp", f"test://q/{n + 1}")
            await sup.publish(other, f"v{n}")
        quiet, _ = await repo.create_target("http://127.0.0.1:9/quiet")
        await sup.publish(sub, "late")
        due = await repo.due(time.time() + 1, limit=10, per_target=4)
        assert {d.target_id for d in due} == {busy.id, quiet.id}
        assert sum(d.target_id == busy.id for d in due) == 4
        skip = {d.id for d in due}
        again = await repo.due(time.time() + 1, limit=10, per_target=4, exclude=skip)
        assert not skip & {d.id for d in again}
    finally:
        await sup.store.close()
