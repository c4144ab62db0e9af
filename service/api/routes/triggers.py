"""``/v1/triggers`` and ``/v1/triggers/runs``: programs the daemon runs on matching revisions.

Only a person makes or changes a trigger: these routes sit behind the guard like every
``/v1`` route (the unix socket's owner, or the token on TCP; the console's cookie with its
CSRF token), and the agent face has no tool, resource or route that reaches them. A
trigger's ``--env NAME=VALUE`` values never leave the daemon: every answer names them only.
"""

from __future__ import annotations

import math
import os
import shutil
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from starlette.exceptions import HTTPException as StarletteHTTPException

from service.api import openapi
from service.api.state import ApiState, api_state
from service.app import validate
from service.app.errors import ApiError, InvalidParameter
from service.app.views import camel
from service.triggers.outbox import MODES, STATES, Run, Trigger
from service.triggers.process import Finished
from service.triggers.program_input import env_entry_problem
from service.triggers.repository import TooManyTriggers
from service.triggers.runner import TriggerRunner

router = APIRouter(tags=["triggers"])
openapi.QUERY_ENUMS["/v1/triggers/runs", "state"] = STATES

MAX_LIMIT = 1000
MAX_PATTERNS = 100
MAX_ARGS = 256
MAX_ARG_LENGTH = 32 * 1024
MAX_ENV = 64
MAX_NAME = 200
MAX_CONCURRENCY = 1000
_NO_CONTROL = "^[^\\x00-\\x1f\\x7f-\\x9f]*$"

TriggerId = Annotated[int, Path(alias="id", ge=1, le=validate.MAX_ID, description="trigger id")]
RunId = Annotated[int, Path(alias="id", ge=1, le=validate.MAX_ID, description="run id")]


class TriggerNotFound(ApiError):
    error_code = "TRIGGER_NOT_FOUND"


class RunNotFound(ApiError):
    error_code = "RUN_NOT_FOUND"


class RunInFlight(ApiError):
    error_code = "RUN_IN_FLIGHT"


class TriggerLimit(ApiError):
    error_code = "TRIGGER_LIMIT"


class ProgramNotFound(ApiError):
    error_code = "PROGRAM_NOT_FOUND"


# ---- JSON shapes (pure) ---------------------------------------------------------------------
def trigger_json(trigger: Trigger) -> dict[str, Any]:
    """Everything about a trigger but the values of its environment."""
    return {camel(k): v for k, v in trigger.to_json().items()}


def run_json(run: Run) -> dict[str, Any]:
    return {camel(k): v for k, v in run.to_json().items()}


def finished_json(finished: Finished, stdout_tail: str, stderr_tail: str) -> dict[str, Any]:
    return {
        "ok": finished.ok,
        "startedAt": finished.started_at,
        "endedAt": finished.ended_at,
        "durationMs": finished.duration_ms,
        "exitCode": finished.exit_code,
        "signal": finished.signal,
        "timedOut": finished.timed_out,
        "error": finished.error,
        "stdoutTail": stdout_tail,
        "stderrTail": stderr_tail,
        "stdoutBytes": finished.stdout_bytes,
        "stderrBytes": finished.stderr_bytes,
    }


# ---- input checks -----------------------------------------------------------------------
def _text(value: Any, field: str, limit: int, *, required: bool = False) -> str | None:
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value):
        raise InvalidParameter(f"{field} must be a non-empty string", field=field)
    if len(value) > limit:
        raise InvalidParameter(f"{field} is longer than {limit} characters", field=field)
    problem = validate.text_problem(value)
    if problem:
        raise InvalidParameter(f"{field} {problem}", field=field)
    return value


def program_path(value: Any, daemon_path: str) -> str:
    """An executable file: an absolute path, or a bare name found on the daemon's PATH (the
    absolute path is what is stored and run)."""
    program = _text(value, "program", 4096, required=True)
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


def patterns(value: Any) -> list[str]:
    """The URI globs (required: ``[]`` or ``["*"]`` is every URI, said on purpose)."""
    field = "uriPatterns"
    if not isinstance(value, list) or len(value) > MAX_PATTERNS:
        raise InvalidParameter(
            f"{field} must list at most {MAX_PATTERNS} URI globs ('*' for every URI)", field=field
        )
    for item in value:
        if not isinstance(item, str) or not item or any(ch.isspace() for ch in item):
            raise InvalidParameter(
                f"{field} entries must be non-empty strings without spaces", field=field
            )
        problem = validate.text_problem(item)
        if problem or len(item) > validate.MAX_URI_LENGTH:
            raise InvalidParameter(f"{field} entry {problem or 'is too long'}", field=field)
    return list(value)


def whole(value: Any, field: str, low: int, high: int, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidParameter(f"{field} must be an integer from {low} to {high}", field=field)
    if isinstance(value, float) and not value.is_integer():
        raise InvalidParameter(f"{field} must be an integer from {low} to {high}", field=field)
    if not low <= value <= high:
        raise InvalidParameter(f"{field} must be an integer from {low} to {high}", field=field)
    return int(value)


def seconds(value: Any, field: str, high: float, default: float) -> float:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidParameter(f"{field} must be a number of seconds", field=field)
    number = float(value)
    if not math.isfinite(number) or not 0 < number <= high:
        raise InvalidParameter(f"{field} must be above 0 and at most {high:g}", field=field)
    return number


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
    cwd = _text(value, "cwd", 4096)
    if cwd is None:
        return None
    if not os.path.isabs(cwd) or not os.path.isdir(cwd):
        raise InvalidParameter("cwd must be an existing directory's absolute path", field="cwd")
    return cwd


def mode(value: Any) -> str:
    if value is None:
        return "all"
    if value not in MODES:
        raise InvalidParameter(f"mode must be one of {', '.join(MODES)}", field="mode")
    return str(value)


# ---- helpers ------------------------------------------------------------------------------
def _runner(state: ApiState) -> TriggerRunner:
    return state.supervisor.triggers


async def _trigger(runner: TriggerRunner, trigger_id: int) -> Trigger:
    found = await runner.repo.get_trigger(trigger_id)
    if found is None:
        raise TriggerNotFound(f"no trigger {trigger_id}")
    return found


async def _with_runs(runner: TriggerRunner, trigger: Trigger) -> dict[str, Any]:
    counts = await runner.repo.counts(trigger.id)
    last = await runner.repo.list_runs(trigger_id=trigger.id, limit=1, newest_first=True)
    return {
        **trigger_json(trigger),
        "runs": counts,
        "lastRun": run_json(last[0]) if last else None,
    }


def _body_schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "requestBody": {
            "required": bool(required),
            "content": {
                "application/json": {
                    "schema": {"type": "object", "required": required, "properties": properties}
                }
            },
        }
    }


_CREATE_BODY = _body_schema(
    {
        "program": {
            "type": "string",
            "minLength": 1,
            "maxLength": 4096,
            "pattern": _NO_CONTROL,
            "description": "an executable: absolute path, or a bare name on the daemon's PATH",
        },
        "args": {
            "type": "array",
            "maxItems": MAX_ARGS,
            "items": {"type": "string", "maxLength": MAX_ARG_LENGTH, "pattern": "^[^\\x00]*$"},
            "description": "an argument that is exactly {uri}, {revision}, {event_id}, {server},"
            " {attempt} or {run_id} is replaced by that value",
        },
        "uriPatterns": {"type": "array", "items": {"type": "string"}},
        "name": {"type": "string", "maxLength": MAX_NAME, "pattern": _NO_CONTROL},
        "mode": {"type": "string", "enum": list(MODES)},
        "concurrency": {"type": "integer", "minimum": 1, "maximum": MAX_CONCURRENCY},
        "timeoutS": {"type": "number", "exclusiveMinimum": 0, "maximum": 86400},
        "env": {
            "type": "array",
            "maxItems": MAX_ENV,
            "items": {
                "type": "string",
                "maxLength": MAX_ARG_LENGTH,
                "pattern": "^[A-Za-z_][A-Za-z0-9_]{0,127}(=[^\\x00]*)?$",
            },
            "description": "NAME (passed from the daemon's environment) or NAME=VALUE; "
            "not MCPSUB_*",
        },
        "cwd": {"type": "string", "description": "an existing directory's absolute path"},
    },
    ["program", "uriPatterns"],
)


# ---- runs (declared before /v1/triggers/{id}: "runs" is not an id) ---------------------------
@router.get("/v1/triggers/runs")
async def list_runs(
    request: Request,
    trigger: Annotated[int | None, Query(ge=1, le=validate.MAX_ID)] = None,
    state: Annotated[str | None, Query(description=" | ".join(STATES))] = None,
    after: Annotated[int, Query(ge=0, le=validate.MAX_ID)] = 0,
    limit: Annotated[int, Query(ge=1, description=f"capped at {MAX_LIMIT}")] = 100,
    newest: Annotated[bool, Query(description="the newest `limit` first instead")] = False,
) -> dict[str, Any]:
    """Runs with an id above ``after``, oldest first; pass ``nextAfter`` back. With
    ``newest=true``: the newest ``limit`` matching runs, newest first."""
    if state is not None and state not in STATES:
        raise InvalidParameter(f"state must be one of {', '.join(STATES)}", field="state")
    found = await _runner(api_state(request)).repo.list_runs(
        trigger_id=trigger,
        state=state,
        after=after,
        limit=min(limit, MAX_LIMIT),
        newest_first=newest,
    )
    if newest:
        next_after = max((r.id for r in found), default=after)
    else:
        next_after = found[-1].id if found else after
    return {"runs": [run_json(r) for r in found], "nextAfter": next_after}


@router.api_route(
    "/v1/triggers/runs", methods=["POST", "PUT", "PATCH", "DELETE"], include_in_schema=False
)
async def runs_other_methods() -> None:
    """Without this, ``DELETE /v1/triggers/runs`` would match ``/v1/triggers/{id}`` and
    answer 400 (``runs`` is not an id) instead of 405."""
    raise StarletteHTTPException(405)


@router.get("/v1/triggers/runs/{id}")
async def show_run(request: Request, run_id: RunId) -> dict[str, Any]:
    """One run in full: each attempt's start, end, exit status or signal, duration, and the
    redacted tails of its stdout and stderr."""
    runner = _runner(api_state(request))
    found = await runner.repo.get_run(run_id)
    if found is None:
        raise RunNotFound(f"no run {run_id}")
    return {**run_json(found), "attempts": await runner.repo.attempts(run_id)}


@router.post("/v1/triggers/runs/{id}/retry")
async def retry_run(request: Request, run_id: RunId) -> dict[str, Any]:
    """Run it again now with a fresh retry budget (a dead, failed, succeeded or superseded
    run; not one that is running)."""
    runner = _runner(api_state(request))
    found = await runner.repo.get_run(run_id)
    if found is None:
        raise RunNotFound(f"no run {run_id}")
    if found.state == "running":
        raise RunInFlight(f"run {run_id} is running now")
    again = await runner.repo.retry(run_id)
    runner.wake()
    assert again is not None
    return run_json(again)


# ---- triggers -----------------------------------------------------------------------------
@router.post(
    "/v1/triggers",
    status_code=201,
    openapi_extra=_CREATE_BODY,
    responses={
        400: {"description": "INVALID_JSON, INVALID_PARAMETER or PROGRAM_NOT_FOUND"},
        409: {"description": "TRIGGER_LIMIT"},
    },
)
async def create_trigger(request: Request) -> dict[str, Any]:
    """A new trigger: ``program`` with ``args`` (no shell) on every stored revision whose URI
    matches one of ``uriPatterns``."""
    state = api_state(request)
    runner = _runner(state)
    settings = runner.settings
    body = validate.json_object(await state.read_body(request))
    program = program_path(body.get("program"), runner.daemon_path)
    args = arg_list(body.get("args"))
    uri_patterns = patterns(body.get("uriPatterns"))
    name = _text(body.get("name"), "name", MAX_NAME)
    chosen_mode = mode(body.get("mode"))
    # Above trigger_max_running it is allowed, and the daemon-wide cap is what holds.
    concurrency = whole(body.get("concurrency"), "concurrency", 1, MAX_CONCURRENCY, 1)
    timeout_s = seconds(
        body.get("timeoutS"), "timeoutS", settings.max_timeout_s, settings.timeout_s
    )
    env = env_list(body.get("env"))
    cwd = directory(body.get("cwd"))
    try:
        created = await runner.repo.create_trigger(
            program=program,
            args=args,
            uri_patterns=uri_patterns,
            name=name,
            mode=chosen_mode,
            concurrency=concurrency,
            timeout_s=timeout_s,
            env=env,
            cwd=cwd,
            max_triggers=settings.max_triggers,
        )
    except TooManyTriggers as exc:
        raise TriggerLimit(str(exc)) from None
    return trigger_json(created)


@router.get("/v1/triggers")
async def list_triggers(request: Request) -> dict[str, Any]:
    """Every trigger with its runs by state and its newest run."""
    runner = _runner(api_state(request))
    triggers = await runner.repo.list_triggers()
    return {"triggers": [await _with_runs(runner, t) for t in triggers]}


@router.get("/v1/triggers/{id}")
async def show_trigger(request: Request, trigger_id: TriggerId) -> dict[str, Any]:
    runner = _runner(api_state(request))
    return await _with_runs(runner, await _trigger(runner, trigger_id))


@router.delete("/v1/triggers/{id}")
async def delete_trigger(request: Request, trigger_id: TriggerId) -> dict[str, Any]:
    """Remove a trigger and its runs; a run of it in flight is ended (its process group)."""
    removed = await _runner(api_state(request)).repo.delete_trigger(trigger_id)
    if removed is None:
        raise TriggerNotFound(f"no trigger {trigger_id}")
    return trigger_json(removed)


@router.post("/v1/triggers/{id}/pause")
async def pause_trigger(request: Request, trigger_id: TriggerId) -> dict[str, Any]:
    """No new run starts (runs keep being recorded, and start once it is resumed)."""
    return await _set_enabled(request, trigger_id, False)


@router.post("/v1/triggers/{id}/resume")
async def resume_trigger(request: Request, trigger_id: TriggerId) -> dict[str, Any]:
    return await _set_enabled(request, trigger_id, True)


async def _set_enabled(request: Request, trigger_id: int, enabled: bool) -> dict[str, Any]:
    changed = await _runner(api_state(request)).repo.set_enabled(trigger_id, enabled)
    if changed is None:
        raise TriggerNotFound(f"no trigger {trigger_id}")
    return trigger_json(changed)


@router.post("/v1/triggers/{id}/test")
async def test_trigger(request: Request, trigger_id: TriggerId) -> dict[str, Any]:
    """Run the program once now with a synthetic change; nothing is stored or retried. The
    answer comes when the attempt has ended (at most the trigger's timeout)."""
    runner = _runner(api_state(request))
    trigger = await _trigger(runner, trigger_id)
    finished, stdout_tail, stderr_tail = await runner.test(trigger)
    return {"triggerId": trigger_id, **finished_json(finished, stdout_tail, stderr_tail)}
