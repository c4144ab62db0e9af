"""``/v1/triggers`` and ``/v1/triggers/runs``: programs the daemon runs on matching revisions,
through :class:`service.app.triggers.Triggers` (each route parses, calls it, renders).

Only a person makes or changes a trigger: these routes sit behind the guard like every
``/v1`` route (the unix socket's owner, or the token on TCP; the console's cookie with its
CSRF token), and the agent face has no tool, resource or route that reaches them. A
trigger's ``--env NAME=VALUE`` values never leave the daemon: every answer names them only.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from starlette.exceptions import HTTPException as StarletteHTTPException

from service.api import openapi
from service.api.state import api_state
from service.app import validate
from service.app.triggers import (
    MAX_ARG_LENGTH,
    MAX_ARGS,
    MAX_CONCURRENCY,
    MAX_ENV,
    MAX_NAME,
    MAX_PAGE,
    MAX_PATH,
    RUN_STATES,
    TRIGGER_MODES,
)
from service.app.views import (
    finished_json,
    next_after,
    run_json,
    trigger_json,
    trigger_with_runs_json,
)

router = APIRouter(tags=["triggers"])
openapi.QUERY_ENUMS["/v1/triggers/runs", "state"] = RUN_STATES

_NO_CONTROL = "^[^\\x00-\\x1f\\x7f-\\x9f]*$"

TriggerId = Annotated[int, Path(alias="id", ge=1, le=validate.MAX_ID, description="trigger id")]
RunId = Annotated[int, Path(alias="id", ge=1, le=validate.MAX_ID, description="run id")]


_CREATE_BODY = openapi.body_schema(
    {
        "program": {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_PATH,
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
        "mode": {"type": "string", "enum": list(TRIGGER_MODES)},
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
    state: Annotated[str | None, Query(description=" | ".join(RUN_STATES))] = None,
    after: Annotated[int, Query(ge=0, le=validate.MAX_ID)] = 0,
    limit: Annotated[int, Query(ge=1, description=f"capped at {MAX_PAGE}")] = 100,
    newest: Annotated[bool, Query(description="the newest `limit` first instead")] = False,
) -> dict[str, Any]:
    """Runs with an id above ``after``, oldest first; pass ``nextAfter`` back. With
    ``newest=true``: the newest ``limit`` matching runs, newest first."""
    found = await api_state(request).triggers.runs(
        trigger_id=trigger, state=state, after=after, limit=limit, newest_first=newest
    )
    return {
        "runs": [run_json(r) for r in found],
        "nextAfter": next_after([r.id for r in found], after, newest_first=newest),
    }


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
    found, attempts = await api_state(request).triggers.run_attempts(run_id)
    return {**run_json(found), "attempts": attempts}


@router.post("/v1/triggers/runs/{id}/retry")
async def retry_run(request: Request, run_id: RunId) -> dict[str, Any]:
    """Run it again now with a fresh retry budget (a dead, failed, succeeded or superseded
    run; not one that is running)."""
    return run_json(await api_state(request).triggers.retry(run_id))


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
    body = validate.json_object(await state.read_body(request))
    return trigger_json(await state.triggers.create(body))


@router.get("/v1/triggers")
async def list_triggers(request: Request) -> dict[str, Any]:
    """Every trigger with its runs by state and its newest run."""
    triggers = api_state(request).triggers
    return {
        "triggers": [
            trigger_with_runs_json(t, *await triggers.runs_of(t)) for t in await triggers.triggers()
        ]
    }


@router.get("/v1/triggers/{id}")
async def show_trigger(request: Request, trigger_id: TriggerId) -> dict[str, Any]:
    triggers = api_state(request).triggers
    trigger = await triggers.trigger(trigger_id)
    return trigger_with_runs_json(trigger, *await triggers.runs_of(trigger))


@router.delete("/v1/triggers/{id}")
async def delete_trigger(request: Request, trigger_id: TriggerId) -> dict[str, Any]:
    """Remove a trigger and its runs; a run of it in flight is ended (its process group)."""
    return trigger_json(await api_state(request).triggers.delete(trigger_id))


@router.post("/v1/triggers/{id}/pause")
async def pause_trigger(request: Request, trigger_id: TriggerId) -> dict[str, Any]:
    """No new run starts (runs keep being recorded, and start once it is resumed)."""
    return trigger_json(await api_state(request).triggers.set_enabled(trigger_id, False))


@router.post("/v1/triggers/{id}/resume")
async def resume_trigger(request: Request, trigger_id: TriggerId) -> dict[str, Any]:
    return trigger_json(await api_state(request).triggers.set_enabled(trigger_id, True))


@router.post("/v1/triggers/{id}/test")
async def test_trigger(request: Request, trigger_id: TriggerId) -> dict[str, Any]:
    """Run the program once now with a synthetic change; nothing is stored or retried. The
    answer comes when the attempt has ended (at most the trigger's timeout)."""
    finished, stdout_tail, stderr_tail = await api_state(request).triggers.test(trigger_id)
    return {"triggerId": trigger_id, **finished_json(finished, stdout_tail, stderr_tail)}
