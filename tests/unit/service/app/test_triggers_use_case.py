"""service.app.triggers.Triggers: the one door to the triggers and their runs. A body is
checked field by field before anything is written, a missing trigger or run is its code, a
run sent again wakes the runner and a running one is refused; over a real migrated SQLite
store and the API tests' fake supervisor (tests/api/fakes.py), whose runner is not started."""

from __future__ import annotations

import dataclasses
import shutil

import pytest

from service.app.errors import (
    InvalidParameter,
    ProgramNotFound,
    RunInFlight,
    RunNotFound,
    TriggerLimit,
    TriggerNotFound,
)
from service.app.triggers import Triggers
from tests.api.fakes import FakeSupervisor

pytestmark = pytest.mark.anyio

TRUE = shutil.which("true") or "/bin/true"


def _counting(sup: FakeSupervisor) -> tuple[Triggers, list[str]]:
    wakes: list[str] = []
    runner = sup.triggers
    runner.wake = lambda: wakes.append("wake")  # type: ignore[method-assign]
    return Triggers(runner), wakes


async def test_a_trigger_made_paused_tested_and_removed(fake_supervisor: FakeSupervisor) -> None:
    triggers, _ = _counting(fake_supervisor)
    made = await triggers.create({"program": "true", "uriPatterns": ["test://*"], "name": "t"})
    assert made.program == TRUE and made.enabled and made.mode == "all"
    assert [t.id for t in await triggers.triggers()] == [made.id]
    assert not (await triggers.set_enabled(made.id, False)).enabled
    assert (await triggers.set_enabled(made.id, True)).enabled
    counts, last = await triggers.runs_of(made)
    assert last is None and set(counts.values()) == {0}
    finished, _out, _err = await triggers.test(made.id)
    assert finished.ok and finished.exit_code == 0
    assert (await triggers.summary()) == {"total": 1, "paused": 0, "runs": counts}
    assert (await triggers.delete(made.id)).id == made.id
    for missing in (triggers.trigger, triggers.delete, triggers.test):
        with pytest.raises(TriggerNotFound):
            await missing(made.id)
    with pytest.raises(TriggerNotFound):
        await triggers.set_enabled(made.id, True)


async def test_a_run_sent_again_wakes_the_runner(fake_supervisor: FakeSupervisor) -> None:
    triggers, wakes = _counting(fake_supervisor)
    made = await triggers.create({"program": TRUE, "uriPatterns": ["*"]})
    sub, _ = await fake_supervisor.subscribe("http://127.0.0.1:1/mcp", "test://a")
    await fake_supervisor.publish(sub, "v1")
    (run,) = await triggers.runs(trigger_id=made.id)
    wakes.clear()
    again = await triggers.retry(run.id)
    assert again.id == run.id and again.state == "pending" and wakes == ["wake"]
    found, attempts = await triggers.run_attempts(run.id)
    assert found.id == run.id and attempts == []
    assert [r.id for r in await triggers.runs(state="pending", newest_first=True)] == [run.id]
    with pytest.raises(RunNotFound):
        await triggers.retry(run.id + 100)
    with pytest.raises(InvalidParameter):
        await triggers.runs(state="lost")

    claimed = await triggers.repo.claim(run.id, "replica", 60.0)
    assert claimed is not None and claimed.state == "running"
    wakes.clear()
    with pytest.raises(RunInFlight):
        await triggers.retry(run.id)
    assert wakes == []


@pytest.mark.parametrize(
    ("body", "error", "field"),
    [
        ({"program": "no-such-program-here", "uriPatterns": ["*"]}, ProgramNotFound, "program"),
        ({"program": "bin/true", "uriPatterns": ["*"]}, ProgramNotFound, "program"),
        ({"program": TRUE}, InvalidParameter, "uriPatterns"),
        ({"program": TRUE, "uriPatterns": ["*"], "args": ["a\x00"]}, InvalidParameter, "args"),
        ({"program": TRUE, "uriPatterns": ["*"], "env": ["MCPSUB_X=1"]}, InvalidParameter, "env"),
        ({"program": TRUE, "uriPatterns": ["*"], "cwd": "relative"}, InvalidParameter, "cwd"),
        (
            {"program": TRUE, "uriPatterns": ["*"], "concurrency": 1.5},
            InvalidParameter,
            "concurrency",
        ),
        ({"program": TRUE, "uriPatterns": ["*"], "timeoutS": 0}, InvalidParameter, "timeoutS"),
        ({"program": TRUE, "uriPatterns": ["*"], "mode": "some"}, InvalidParameter, "mode"),
        ({"program": TRUE, "uriPatterns": ["*"], "name": "a\nb"}, InvalidParameter, "name"),
    ],
)
async def test_a_refused_body_writes_nothing(
    fake_supervisor: FakeSupervisor, body: dict[str, object], error: type[Exception], field: str
) -> None:
    triggers, _ = _counting(fake_supervisor)
    with pytest.raises(error) as refused:
        await triggers.create(body)
    assert refused.value.field == field  # type: ignore[attr-defined]
    assert await triggers.triggers() == []


async def test_the_trigger_limit_is_its_code(fake_supervisor: FakeSupervisor) -> None:
    runner = fake_supervisor.triggers
    runner.settings = dataclasses.replace(runner.settings, max_triggers=1)
    triggers = Triggers(runner)
    await triggers.create({"program": TRUE, "uriPatterns": ["*"]})
    with pytest.raises(TriggerLimit):
        await triggers.create({"program": TRUE, "uriPatterns": ["*"]})
