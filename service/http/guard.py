"""DNS-rebinding and token guard for the daemon's whole app (``/v1``, ``/mcp``, ``/ui``), as one
pure ASGI middleware, added once around it by the composition root (``service/daemon/webapp.py``).

Order of checks (the first failure answers, the app is never reached):

0. ``Host``, ``Origin`` and ``Authorization`` may appear once each → else 400
   ``DUPLICATE_HEADER``.
1. ``Host`` must name the loopback (``localhost``, ``127.0.0.1``, ``[::1]``, any port) → 421.
   Requests over the unix socket carry whatever the client put in the URL; httpx and curl
   send ``localhost``.
2. A present ``Origin`` must be ``http(s)://`` + one of those hosts → 403. Browsers send it,
   so a page on another site cannot drive the API even through a rebinding DNS name.
3. With a token (loopback TCP mode), ``Authorization: Bearer <token>`` on everything except
   ``/healthz`` → 401, compared in constant time. The token is never logged or echoed.
   A browser shows the console's session cookie instead (:mod:`service.http.sessions`); a
   change (any method but GET/HEAD/OPTIONS) made with the cookie also needs the page's
   ``X-CSRF-Token`` → else 403 ``CSRF_TOKEN_REQUIRED``. Without either, the console's login
   page and assets are served, and a console page redirects to the login page.

A request made with the cookie lasts no longer than its session (:meth:`LocalGuard._in_session`):
when the session ends (logout, ``mcpsubctl ui --revoke-all``, expiry) while the request is
still open (an event stream, a long poll, the face's open answer), the guard ends it, whatever
route it is: a response under way is closed where it stands, one not begun is a 401
``SESSION_ENDED``. Expiry is looked at by one timer per open request, set for the moment the
session would expire.

Pure ASGI rather than ``BaseHTTPMiddleware`` so SSE responses stream untouched.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import time
from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.app.errors import error_body
from service.http.sessions import CSRF_HEADER, BrowserSessions, cookie_value

DEFAULT_ALLOWED_HOSTS: tuple[str, ...] = ("localhost", "127.0.0.1", "[::1]")
UNAUTHENTICATED_PATHS = frozenset({"/healthz", "/favicon.ico"})
CONSOLE = "/ui"
CONSOLE_PUBLIC = ("/ui/login", "/ui/static/")
"""The console's login page and its assets: served without a session."""
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
SINGLE_HEADERS = frozenset({"host", "origin", "authorization", "cookie", CSRF_HEADER})
"""Headers the guard decides on: a request carrying two of one is refused (400)."""


def split_host(value: str) -> str | None:
    """``host[:port]`` → lower-cased host (IPv6 keeps its brackets); None if malformed."""
    value = value.strip().lower()
    if not value:
        return None
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None
        host, rest = value[: end + 1], value[end + 1 :]
    else:
        host, _, port = value.partition(":")
        rest = ":" + port if port else ""
    if rest and not (rest.startswith(":") and rest[1:].isdigit()):
        return None
    return host


def origin_allowed(origin: str, hosts: frozenset[str]) -> bool:
    try:
        parts = urlsplit(origin)
        netloc_host = split_host(parts.netloc)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and netloc_host in hosts


def bearer_matches(header: str | None, token: str) -> bool:
    if header is None:
        return False
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(value.strip().encode(), token.encode())


class LocalGuard:
    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str | None,
        allowed_hosts: Iterable[str],
        sessions: BrowserSessions | None = None,
    ) -> None:
        self.app = app
        self._token = token
        if sessions is None and token is not None:
            sessions = BrowserSessions(token)
        self.sessions = sessions
        self.allowed_hosts = frozenset(h.lower() for h in allowed_hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers: dict[str, str] = {}
        for raw_name, raw_value in scope.get("headers", []):
            name = raw_name.decode("latin-1").lower()
            if name in SINGLE_HEADERS and name in headers:
                # Which copy would a proxy or the app believe? Refuse rather than guess.
                await _reject(send, 400, "DUPLICATE_HEADER", f"more than one {name} header")
                return
            headers.setdefault(name, raw_value.decode("latin-1"))
        host = split_host(headers.get("host", ""))
        if host not in self.allowed_hosts:
            await _reject(send, 421, "HOST_NOT_ALLOWED", "the Host header must name the loopback")
            return
        origin = headers.get("origin")
        if origin is not None and not origin_allowed(origin, self.allowed_hosts):
            await _reject(send, 403, "ORIGIN_NOT_ALLOWED", "cross-origin requests are refused")
            return
        # What the console needs: the sessions (login) and the page's CSRF token.
        state = scope.setdefault("state", {})
        state["sessions"] = self.sessions
        state["csrf"] = ""
        path = str(scope.get("path", ""))
        if (
            self._token is None
            or path in UNAUTHENTICATED_PATHS
            or bearer_matches(headers.get("authorization"), self._token)
        ):
            await self.app(scope, receive, send)
            return
        assert self.sessions is not None
        session = self.sessions.session_of(cookie_value(headers.get("cookie")))
        if session is not None:
            if scope.get("method") not in SAFE_METHODS and not self.sessions.csrf_matches(
                session, headers.get(CSRF_HEADER)
            ):
                await _reject(
                    send,
                    403,
                    "CSRF_TOKEN_REQUIRED",
                    "a change made with the console's cookie needs its X-CSRF-Token header",
                    hint="reload the console page; scripts use the bearer token instead",
                )
                return
            state["csrf"] = self.sessions.csrf_for(session)
            await self._in_session(session, scope, receive, send)
            return
        if path.startswith(CONSOLE_PUBLIC):
            await self.app(scope, receive, send)
            return
        if (path == CONSOLE or path.startswith(CONSOLE + "/")) and scope.get("method") == "GET":
            await _redirect(send, "/ui/login")
            return
        await _reject(
            send,
            401,
            "API_TOKEN_REQUIRED",
            "missing or wrong bearer token",
            hint="send Authorization: Bearer <the token in the state dir's api.token>",
            extra_headers=[(b"www-authenticate", b'Bearer realm="mcpsubd"')],
        )

    async def _in_session(self, handle: str, scope: Scope, receive: Receive, send: Send) -> None:
        """The app, for as long as session ``handle`` lives: when it ends, the request's task
        is cancelled and its answer closed (:class:`_Answer`). The request that ends its own
        session (logout) is not cut: it answers as usual."""
        sessions = self.sessions
        assert sessions is not None
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        cut = False
        timer: asyncio.TimerHandle | None = None

        def ended() -> None:
            nonlocal cut
            if not cut and asyncio.current_task() is not task:
                cut = True
                task.cancel()

        def look_again() -> None:
            nonlocal timer
            timer = None
            if sessions.alive(handle):  # used meanwhile: it expires later now
                arm()

        def arm() -> None:
            nonlocal timer
            when = sessions.expires_at(handle)
            if when is not None:
                timer = loop.call_later(max(0.0, when - time.time()) + 0.01, look_again)

        unwatch = sessions.watch(handle, ended)
        arm()
        answer = _Answer(send)
        try:
            await self.app(scope, receive, answer.send)
        except asyncio.CancelledError:
            if not cut or task.uncancel() > 0:
                raise  # not ours (shutdown), or another cancel came on top of ours
        else:
            if cut:  # the app swallowed our cancel
                task.uncancel()
        finally:
            unwatch()
            if timer is not None:
                timer.cancel()
        if cut:
            await answer.close(send)


class _Answer:
    """How far a response went, so a request cut short can be ended properly."""

    __slots__ = ("_send", "finished", "started")

    def __init__(self, send: Send) -> None:
        self._send = send
        self.started = False
        self.finished = False

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.started = True
        elif message["type"] == "http.response.body" and not message.get("more_body", False):
            self.finished = True
        await self._send(message)

    async def close(self, send: Send) -> None:
        """A 401 when nothing was answered yet; else the body's end (a chunked stream ends
        cleanly, the connection can be reused). The client may be gone: nothing to tell."""
        with contextlib.suppress(Exception):
            if not self.started:
                await _reject(
                    send,
                    401,
                    "SESSION_ENDED",
                    "the console session this request was made with has ended",
                    hint="log in to the console again (mcpsubctl ui)",
                )
            elif not self.finished:
                await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _redirect(send: Send, location: str) -> None:
    headers = [
        (b"location", location.encode()),
        (b"content-length", b"0"),
        (b"cache-control", b"no-store"),
    ]
    await send({"type": "http.response.start", "status": 303, "headers": headers})
    await send({"type": "http.response.body", "body": b""})


async def _reject(
    send: Send,
    status: int,
    code: str,
    message: str,
    *,
    hint: str | None = None,
    extra_headers: list[tuple[bytes, bytes]] | None = None,
) -> None:
    body = json.dumps(error_body(code, message, hint=hint)).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *(extra_headers or []),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
