"""The trigger runner sleeps through revisions while no trigger is enabled: a revision then
cannot have enqueued a run, and a pass per revision (two reader queries) was a fifth of the
daemon's CPU per re-read at one link (py-spy, docs/benchmarks.md). A trigger made through
this process wakes it again at once."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from service.store import Store
from service.triggers.runner import TriggerRunner, TriggerSettings
from tests.support.poll import until_async

pytestmark = pytest.mark.anyio
REVISION = SimpleNamespace(type="resource.updated", uri="test://a")


async def test_a_runner_without_triggers_is_not_woken_by_revisions(database_url: str) -> None:
    store = Store.open(database_url)
    runner = TriggerRunner(store, TriggerSettings(), {"PATH": "/usr/bin:/bin"})
    runner.start()
    try:
        await until_async("the first pass found no trigger", lambda: runner._no_triggers)
        store.publish([REVISION])
        assert not runner._wake.is_set()
        await runner.repo.create_trigger(
            program="/bin/true", args=[], uri_patterns=["test://*"], name=None, mode="each",
            concurrency=1, timeout_s=10.0, env=[], cwd=None, max_triggers=10,
        )  # fmt: skip
        assert not runner._no_triggers
        await until_async("a pass saw the trigger", lambda: not runner._wake.is_set())
        store.publish([REVISION])
        assert runner._wake.is_set()
    finally:
        await runner.stop()
        await store.close()
