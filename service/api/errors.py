"""Errors of the local API: small records with a status, a stable ``errorCode`` and a hint.

Routes raise :class:`ApiError` subclasses; :func:`install_handlers` maps them (and
FastAPI's validation errors, Starlette's 404/405, anything unexpected) to one JSON shape::

    {"errorCode": "INVALID_URL", "message": "...", "field": "url", "hint": "..."}

``field`` and ``hint`` appear only when known. Tokens and request headers never appear.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

import structlog
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from sqlalchemy.exc import SQLAlchemyError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

log = structlog.get_logger("mcpsubd.api")


def error_body(
    code: str, message: str, *, field: str | None = None, hint: str | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {"errorCode": code, "message": message}
    if field is not None:
        body["field"] = field
    if hint is not None:
        body["hint"] = hint
    return body


class ApiError(Exception):
    """Base of every domain error a route may raise; never instantiate it directly."""

    status: ClassVar[int] = 400
    error_code: ClassVar[str] = "BAD_REQUEST"
    default_hint: ClassVar[str | None] = None

    def __init__(
        self,
        message: str,
        *,
        field: str | None = None,
        hint: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.hint = hint if hint is not None else self.default_hint
        self.extra = extra or {}

    def to_json(self) -> dict[str, Any]:
        body = error_body(self.error_code, self.message, field=self.field, hint=self.hint)
        body.update(self.extra)
        return body


class InvalidJson(ApiError):
    error_code = "INVALID_JSON"
    default_hint = 'send a JSON object such as {"url": "http://host/mcp", "uri": "scheme:path"}'


class InvalidUrl(ApiError):
    error_code = "INVALID_URL"
    default_hint = "url must be an absolute http:// or https:// URL with a host"


class InvalidUri(ApiError):
    error_code = "INVALID_URI"
    default_hint = "uri must be a resource URI with a scheme (e.g. test://x) and no spaces"


class InvalidParameter(ApiError):
    error_code = "INVALID_PARAMETER"


class BodyTooLarge(ApiError):
    status = 413
    error_code = "BODY_TOO_LARGE"


class BodyTimeout(ApiError):
    status = 408
    error_code = "REQUEST_TIMEOUT"
    default_hint = "send the whole body at once"


class SubscriptionNotFound(ApiError):
    status = 404
    error_code = "SUBSCRIPTION_NOT_FOUND"
    default_hint = "list the subscriptions with `mcpsubctl list` (GET /v1/subscriptions)"


class NotWatched(ApiError):
    status = 404
    error_code = "NOT_WATCHED"
    default_hint = "subscribe first: `mcpsubctl subscribe --url URL --uri URI`"


class NoContentYet(ApiError):
    status = 404
    error_code = "NO_CONTENT_YET"
    default_hint = "the daemon has not read this resource yet; retry or use `mcpsubctl wait`"


class NotificationTimeout(ApiError):
    status = 408
    error_code = "NOTIFICATION_TIMEOUT"
    default_hint = "no update arrived in time; wait again with after=<the returned after>"


class TooBusy(ApiError):
    status = 503
    error_code = "TOO_MANY_WAITERS"
    default_hint = "too many open streams and long-polls; close some and retry"


class NotReady(ApiError):
    status = 503
    error_code = "NOT_READY"
    default_hint = "the daemon is still starting; retry in a moment"


class StorageFailing(ApiError):
    """The database refused the write (full disk, I/O error) or did not answer: nothing was
    stored. The same condition ``/readyz`` and ``/v1/status`` report."""

    status = 503
    error_code = "STORAGE_FAILING"
    default_hint = (
        "nothing was stored; free space in the state directory's filesystem (or bring the "
        "database back) and retry; `mcpsubctl status` shows the storage state"
    )


_HTTP_CODES = {
    404: ("NOT_FOUND", "no such endpoint; see /openapi.json"),
    405: ("METHOD_NOT_ALLOWED", None),
}


def _field(loc: tuple[Any, ...] | list[Any]) -> str | None:
    parts = [str(p) for p in loc if p not in ("body", "query", "path", "header")]
    return ".".join(parts) or None


async def _api_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
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
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(ClientDisconnect, _client_gone)
    app.add_exception_handler(SQLAlchemyError, _database_error)
    app.add_exception_handler(Exception, _internal_error)
