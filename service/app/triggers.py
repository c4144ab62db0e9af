"""What a person does with the triggers, done once for every front end: the triggers
(``/v1/triggers``) and their runs (``/v1/triggers/runs``), read and changed.

Only a person makes or changes a trigger: the agent face has no tool, resource or route that
reaches this use case. Every body is checked here, field by field, before anything is
written. A change to a trigger wakes the runner through the repository's own hook
(``on_trigger_change``); a run sent again wakes it here. A trigger's ``--env NAME=VALUE``
values never leave the daemon: every answer names them only.
"""

from __future__ import annotations

import os
import shutil
from typing import Any, Final

from service.app import validate
from service.app.errors import (
    InvalidParameter,
    ProgramNotFound,
    RunInFlight,
    RunNotFound,
    TriggerLimit,
    TriggerNotFound,
)
from service.triggers.outbox import MODES, STATES, Run, Trigger
from service.triggers.process import Finished
from service.triggers.program_input import env_entry_problem
from service.triggers.repository import TooManyTriggers
from service.triggers.runner import TriggerRunner

RUN_STATES: Final = STATES
TRIGGER_MODES: Final = MODES
MAX_PAGE = 1000
"""Runs in one page of :meth:`Triggers.runs`."""
MAX_ARGS = 256
MAX_ARG_LENGTH = 32 * 1024
MAX_ENV = 64
MAX_NAME = 200
MAX_PATH = 4096
MAX_CONCURRENCY = 1000


# ---- input checks ------------------------------------------------------------------------
def program_path(value: Any, daemon_path: str) -> str:
    """An executable file: an absolute path, or a bare name found on the daemon's PATH (the
    absolute path is what is stored and run)."""
    program = validate.text(value, "program", MAX_PATH, required=True)
    assert program is not None
    if os.path.isabs(program):
        found = program if os.path.isfile(program) and os.access(program, os.X_OK) else None
    elif os.sep in program:
        raise ProgramNotFound("program must be an absolute path or a bare name", field="program")
    else:
        found = shutil.which(program, path=daemon_path)
    if found is None:
        raise ProgramNotFound(f"no executable {program!r} for the daemon", field="program")
    return os.path.abspath(found)


def arg_list(value: Any) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or len(value) > MAX_ARGS:
        raise InvalidParameter(f"args must be a list of at most {MAX_ARGS} strings", field="args")
    for item in value:
        # Arguments may hold newlines (a prompt); never NUL, which no argv can carry.
        if not isinstance(item, str) or len(item) > MAX_ARG_LENGTH or "\x00" in item:
            raise InvalidParameter(
                f"args entries must be strings without NUL, at most {MAX_ARG_LENGTH} long",
                field="args",
            )
        try:
            item.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidParameter("args entries must be valid UTF-8", field="args") from None
    return list(value)


def env_list(value: Any) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or len(value) > MAX_ENV:
        raise InvalidParameter(
            f"env must be a list of at most {MAX_ENV} NAME or NAME=VALUE entries", field="env"
        )
    for item in value:
        if not isinstance(item, str) or len(item) > MAX_ARG_LENGTH:
            raise InvalidParameter("env entries must be NAME or NAME=VALUE", field="env")
        problem = env_entry_problem(item)
        if problem:
            raise InvalidParameter(f"env: {problem}", field="env")
    return list(value)


def directory(value: Any) -> str | None:
    cwd = validate.text(value, "cwd", MAX_PATH)
    if cwd is None:
        return None
    if not os.path.isabs(cwd) or not os.path.isdir(cwd):
        raise InvalidParameter("cwd must be an existing directory's absolute path", field="cwd")
    return cwd


# ---- the use case ------------------------------------------------------------------------
class Triggers:
    def __init__(self, runner: TriggerRunner) -> None:
        self.runner = runner
        self.repo = runner.repo

    # ---- triggers
    async def create(self, body: dict[str, Any]) -> Trigger:
        """A new trigger from a request body: ``program`` with ``args`` (no shell) on every
        stored revision whose URI matches one of ``uriPatterns``."""
        settings = self.runner.settings
        program = program_path(body.get("program"), self.runner.daemon_path)
        args = arg_list(body.get("args"))
        uri_patterns = validate.uri_patterns(body.get("uriPatterns"), required=True)
        name = validate.text(body.get("name"), "name", MAX_NAME)
        mode = validate.choice(body.get("mode"), "mode", MODES, "all")
        # Above trigger_max_running it is allowed, and the daemon-wide cap is what holds.
        concurrency = validate.bounded_int(
            body.get("concurrency"), "concurrency", 1, MAX_CONCURRENCY, 1
        )
        timeout_s = validate.seconds(
            body.get("timeoutS"), "timeoutS", settings.max_timeout_s, settings.timeout_s
        )
        env = env_list(body.get("env"))
        cwd = directory(body.get("cwd"))
        try:
            return await self.repo.create_trigger(
                program=program,
                args=args,
                uri_patterns=uri_patterns,
                name=name,
                mode=mode,
                concurrency=concurrency,
                timeout_s=timeout_s,
                env=env,
                cwd=cwd,
                max_triggers=settings.max_triggers,
            )
        except TooManyTriggers as exc:
            raise TriggerLimit(str(exc)) from None

    async def trigger(self, trigger_id: int) -> Trigger:
        """TriggerNotFound when there is none."""
        found = await self.repo.get_trigger(trigger_id)
        if found is None:
            raise TriggerNotFound(f"no trigger {trigger_id}")
        return found

    async def triggers(self) -> list[Trigger]:
        return await self.repo.list_triggers()

    async def runs_of(self, trigger: Trigger) -> tuple[dict[str, int], Run | None]:
        """The trigger's runs by state, and its newest run."""
        counts = await self.repo.counts(trigger.id)
        last = await self.repo.list_runs(trigger_id=trigger.id, limit=1, newest_first=True)
        return counts, (last[0] if last else None)

    async def delete(self, trigger_id: int) -> Trigger:
        """The removed trigger, with its runs; a run of it in flight is ended."""
        removed = await self.repo.delete_trigger(trigger_id)
        if removed is None:
            raise TriggerNotFound(f"no trigger {trigger_id}")
        return removed

    async def set_enabled(self, trigger_id: int, enabled: bool) -> Trigger:
        """Paused (no new run starts; runs keep being recorded) or resumed."""
        changed = await self.repo.set_enabled(trigger_id, enabled)
        if changed is None:
            raise TriggerNotFound(f"no trigger {trigger_id}")
        return changed

    async def test(self, trigger_id: int) -> tuple[Finished, str, str]:
        """The program run once now with a synthetic change (nothing stored or retried): how
        it ended and the tails of its output, once the attempt has ended."""
        return await self.runner.test(await self.trigger(trigger_id))

    async def summary(self) -> dict[str, Any]:
        """How many triggers, how many paused, and the runs by state (the overview's)."""
        triggers = await self.repo.list_triggers()
        return {
            "total": len(triggers),
            "paused": sum(1 for t in triggers if not t.enabled),
            "runs": await self.repo.counts(),
        }

    # ---- runs
    async def runs(
        self,
        *,
        trigger_id: int | None = None,
        state: str | None = None,
        after: int = 0,
        limit: int = 100,
        newest_first: bool = False,
    ) -> list[Run]:
        """Runs with an id above ``after``, oldest first (or the newest ``limit``, newest
        first), at most :data:`MAX_PAGE`."""
        return await self.repo.list_runs(
            trigger_id=trigger_id,
            state=validate.state_in(state, RUN_STATES),
            after=after,
            limit=min(limit, MAX_PAGE),
            newest_first=newest_first,
        )

    async def run(self, run_id: int) -> Run:
        """RunNotFound when there is none."""
        found = await self.repo.get_run(run_id)
        if found is None:
            raise RunNotFound(f"no run {run_id}")
        return found

    async def run_attempts(self, run_id: int) -> tuple[Run, list[dict[str, Any]]]:
        """The run and each attempt: start, end, exit status or signal, duration, the
        redacted tails of its output."""
        found = await self.run(run_id)
        return found, await self.repo.attempts(run_id)

    async def retry(self, run_id: int) -> Run:
        """The run again now with a fresh retry budget (any state but running)."""
        found = await self.run(run_id)
        if found.state == "running":
            raise RunInFlight(f"run {run_id} is running now")
        again = await self.repo.retry(run_id)
        if again is None:  # removed with its trigger meanwhile
            raise RunNotFound(f"no run {run_id}")
        self.runner.wake()
        return again
