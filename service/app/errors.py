"""The application's errors: small records with a status, a stable ``errorCode`` and a hint.

They live below every front end because every front end raises or shows them: the checks in
:mod:`service.app.validate` raise them, the REST API answers them
(:mod:`service.api.error_handlers`), the shared HTTP limits raise the 408/413/503 ones, and the
MCP face turns them into tool errors. One JSON shape::

    {"errorCode": "INVALID_URL", "message": "...", "field": "url", "hint": "..."}

``field`` and ``hint`` appear only when known. Tokens and request headers never appear.
:class:`AgentError` is what the agent policy refuses with, by code (the REST API's agent
routes and the face raise and show the same one). Both
read a code's HTTP status and default hint from the one table, :mod:`service.errorcodes`: a
new error class names its ``error_code`` and nothing else.
"""

from __future__ import annotations

from typing import Any, ClassVar

from service import errorcodes


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
    """Base of every domain error a route may raise; never instantiate it directly. A subclass
    names its ``error_code``; its ``status`` and ``default_hint`` come from the code's row."""

    status: ClassVar[int] = 400
    error_code: ClassVar[str] = "BAD_REQUEST"
    default_hint: ClassVar[str | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "status" not in cls.__dict__:
            cls.status = errorcodes.http_status(cls.error_code)
        if "default_hint" not in cls.__dict__:
            cls.default_hint = errorcodes.default_hint(cls.error_code)

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


class InvalidUrl(ApiError):
    error_code = "INVALID_URL"


class InvalidUri(ApiError):
    error_code = "INVALID_URI"


class InvalidParameter(ApiError):
    error_code = "INVALID_PARAMETER"


class BodyTooLarge(ApiError):
    error_code = "BODY_TOO_LARGE"


class BodyTimeout(ApiError):
    error_code = "REQUEST_TIMEOUT"


class SubscriptionNotFound(ApiError):
    error_code = "SUBSCRIPTION_NOT_FOUND"


class NotWatched(ApiError):
    error_code = "NOT_WATCHED"


class AmbiguousUri(ApiError):
    error_code = "AMBIGUOUS_URI"


class NoContentYet(ApiError):
    error_code = "NO_CONTENT_YET"


class NotificationTimeout(ApiError):
    error_code = "NOTIFICATION_TIMEOUT"


class TooBusy(ApiError):
    error_code = "TOO_MANY_WAITERS"


class NotReady(ApiError):
    error_code = "NOT_READY"


class StorageFailing(ApiError):
    """The database refused the write (full disk, I/O error) or did not answer: nothing was
    stored. The same condition ``/readyz`` and ``/v1/status`` report."""

    error_code = "STORAGE_FAILING"


class AgentError(Exception):
    """A refusal the agent should see: a stable ``code`` and a one-line ``hint`` (``hint`` is
    always in its JSON: the code's default when the raiser names none, else null). Its code is
    ``error_code``, as on every other error class, so the API's one handler answers both."""

    def __init__(self, code: str, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.error_code = code
        self.message = message
        self.hint = hint if hint is not None else errorcodes.default_hint(code)

    @classmethod
    def of(cls, exc: ApiError) -> AgentError:
        """The same refusal, for an agent."""
        return cls(exc.error_code, exc.message, exc.hint)

    @property
    def status(self) -> int:
        """The HTTP status the REST API answers it with."""
        return errorcodes.http_status(self.error_code)

    def to_json(self) -> dict[str, Any]:
        return {"errorCode": self.error_code, "message": self.message, "hint": self.hint}


class WebhookNotFound(ApiError):
    error_code = "WEBHOOK_NOT_FOUND"


class DeliveryNotFound(ApiError):
    error_code = "DELIVERY_NOT_FOUND"


class PrivateTarget(ApiError):
    error_code = "PRIVATE_TARGET"


class InvalidSecret(ApiError):
    error_code = "INVALID_SECRET"


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
