"""How the REST API answers errors: :func:`install_handlers` maps the application's
:class:`~service.app.errors.ApiError` (and FastAPI's validation errors, Starlette's 404/405,
database failures, anything unexpected) to the one JSON shape of :mod:`service.app.errors`.
"""

from __future__ import annotations

import re
from typing import Any

import structlog
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from sqlalchemy.exc import SQLAlchemyError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from service.app.errors import AgentError, ApiError, StorageFailing, error_body

log = structlog.get_logger("mcpsubd.api")


_HTTP_CODES = {
    404: ("NOT_FOUND", "no such endpoint; see /openapi.json"),
    405: ("METHOD_NOT_ALLOWED", None),
}


def _field(loc: tuple[Any, ...] | list[Any]) -> str | None:
    parts = [str(p) for p in loc if p not in ("body", "query", "path", "header")]
    return ".".join(parts) or None


async def _api_error(_request: Request, exc: Exception) -> JSONResponse:
    """An error of the application's tree, a domain error or the agent policy's refusal: its
    own JSON and the status its code's row names."""
    assert isinstance(exc, ApiError | AgentError)
    return JSONResponse(exc.to_json(), status_code=exc.status)


async def _validation_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = list(exc.errors())
    first = errors[0] if errors else {}
    field = _field(first.get("loc", ()))
    message = str(first.get("msg", "invalid request"))
    if field:
        message = f"{field}: {message}"
    return JSONResponse(error_body("INVALID_PARAMETER", message, field=field), status_code=400)


def allowed_methods(request: Request) -> list[str]:
    """The methods the OpenAPI document lists for this path (Starlette's 405 names only the
    first route that matched the path, so ``GET`` + ``POST`` on one path answered
    ``Allow: POST``). A literal path (``/v1/deliveries/recover``) hides a templated one
    (``/v1/deliveries/{id}``)."""
    path = request.url.path
    static: set[str] = set()
    templated: set[str] = set()
    for template, operations in request.app.openapi().get("paths", {}).items():
        methods = {m.upper() for m in operations if m.isalpha()}
        if template == path:
            static |= methods
        elif "{" in template and re.fullmatch(re.sub(r"\{[^}]+\}", "[^/]+", template), path):
            templated |= methods
    return sorted(static or templated)


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    code, hint = _HTTP_CODES.get(exc.status_code, (f"HTTP_{exc.status_code}", None))
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        headers["Allow"] = ", ".join(allowed_methods(request))
    return JSONResponse(
        error_body(code, str(exc.detail), hint=hint),
        status_code=exc.status_code,
        headers=headers or None,
    )


async def _client_gone(request: Request, _exc: Exception) -> Response:
    """The client went away before its request (its body) arrived: nothing to answer and
    nothing wrong with the daemon, so one info line, not an error with a traceback (the
    ``Exception`` handler below re-raises for uvicorn to log). The answer goes nowhere."""
    log.info("client went away mid-request", method=request.method, path=request.url.path)
    return Response(status_code=400)


async def _database_error(request: Request, exc: Exception) -> JSONResponse:
    """A write the database refused is the daemon-level storage condition, answered 503 with
    the hint and no traceback; any other database error is a bug (500, logged with its
    stack by the server error middleware)."""
    from service.store.health import is_storage_failure, is_unanswered

    if is_storage_failure(exc) or is_unanswered(exc):
        failing = StorageFailing(f"the database refused the write: {_first_line(exc)}")
        return JSONResponse(failing.to_json(), status_code=failing.status)
    raise exc


def _first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]


async def _internal_error(_request: Request, _exc: Exception) -> JSONResponse:
    return JSONResponse(
        error_body("INTERNAL_ERROR", "internal error", hint="see the daemon log"),
        status_code=500,
    )


def install_handlers(app: FastAPI) -> None:
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(AgentError, _api_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(ClientDisconnect, _client_gone)
    app.add_exception_handler(SQLAlchemyError, _database_error)
    app.add_exception_handler(Exception, _internal_error)
