"""Authentication failures. ``error_code`` values are the stable strings of seed §2."""

from __future__ import annotations

from service.mcp.errors import McpError

DEFAULT_PROGRAM = "mcp-resource-subscriber"


def login_hint(url: str, program: str = DEFAULT_PROGRAM) -> str:
    if program == "mcpsubctl":
        command = f"mcpsubctl login {url}"
    else:
        command = f"{program} --login --url {url}"
    return f"run `{command}` and approve the device code, then retry"


class AuthError(McpError):
    """Base class of the failures of token resolution and login."""

    error_code = "AUTH_FAILED"


class AuthLoginRequired(AuthError):
    """No usable cached credentials: the user has to run ``--login`` again."""

    error_code = "AUTH_LOGIN_REQUIRED"

    def __init__(self, message: str, *, url: str, program: str = DEFAULT_PROGRAM) -> None:
        super().__init__(message, hint=login_hint(url, program))
        self.url = url


class AuthTimeout(AuthError):
    """The refresh path (lock wait, discovery, refresh grant) ran out of budget."""

    error_code = "AUTH_TIMEOUT"


class AuthRefreshFailed(AuthError):
    """The refresh grant failed in a retriable way; the cached refresh token is kept."""

    error_code = "AUTH_REFRESH_FAILED"


class LockTimeout(AuthTimeout):
    """The token store's write lock could not be taken in time."""


class OAuthError(AuthError):
    """An OAuth error answer (RFC 6749 §5.2 / RFC 8628 §3.5) or a malformed one."""

    error_code = "AUTH_REFRESH_FAILED"

    def __init__(self, error: str, description: str | None = None, status: int | None = None):
        text = error + (f": {description}" if description else "")
        if status is not None:
            text += f" (HTTP {status})"
        super().__init__(text)
        self.error = error
        self.description = description
        self.status = status


class AuthServerUnreachable(AuthError):
    """No HTTP exchange with the authorization server; the cause is kept as ``__cause__``.

    Its ``error_code`` is the generic one so that the network classification (which walks
    ``__cause__``) decides between CONNECTION_REFUSED, DNS_LOOKUP_FAILED, TLS_CERT_UNTRUSTED.
    """

    error_code = "INTERNAL_ERROR"

    def __init__(self, origin: str) -> None:
        super().__init__(f"Failed to reach authorization server at {origin}")
        self.origin = origin
