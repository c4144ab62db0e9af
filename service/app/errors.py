"""The application's errors: small records with a status, a stable ``errorCode`` and a hint.

They live below every front end because every front end raises or shows them: the checks in
:mod:`service.app.validate` raise them, the REST API answers them (its handlers,
:mod:`service.api.errors`), the shared HTTP limits raise the 408/413/503 ones, and the MCP
face turns them into tool errors. One JSON shape::

    {"errorCode": "INVALID_URL", "message": "...", "field": "url", "hint": "..."}

``field`` and ``hint`` appear only when known. Tokens and request headers never appear.
:class:`AgentError` is what the agent policy refuses with (the face's ``FaceError``).
"""

from __future__ import annotations

from typing import Any, ClassVar


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


class AgentError(Exception):
    """A refusal the agent should see: a stable ``code`` and a one-line ``hint`` (``hint`` is
    always in its JSON, null when unknown). The face calls it ``FaceError``."""

    def __init__(self, code: str, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.hint = hint

    def to_json(self) -> dict[str, Any]:
        return {"errorCode": self.code, "message": self.message, "hint": self.hint}
