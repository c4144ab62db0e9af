"""Serve the console: login (token form or one-time link), the page shells and the assets.

A shell is a static template with four values filled in, each HTML-escaped: the title, the
page's name, the CSRF token and the page body (a static file of ours). Everything a server
or a user wrote reaches the page through the script, as text nodes, never as markup.
"""

from __future__ import annotations

import html
import re
from functools import cache
from importlib import resources
from urllib.parse import parse_qs

from fastapi import Request, Response
from fastapi.responses import RedirectResponse

from service.http.sessions import COOKIE, SESSION_MAX_AGE_S, BrowserSessions

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    # The one-time login link carries its ticket in the URL: never hand it to another site.
    # (not no-referrer: Chromium then sends "Origin: null" on the login form's POST, which
    # the guard refuses as a foreign origin.)
    "Referrer-Policy": "same-origin",
}
PAGES = {
    "": ("overview", "Overview"),
    "/": ("overview", "Overview"),
    "/links": ("links", "Links and subscriptions"),
    "/webhooks": ("webhooks", "Webhooks"),
    "/triggers": ("triggers", "Triggers"),
    "/events": ("events", "Events"),
}
SUBSCRIPTION_PAGE = re.compile(r"^/subscriptions/([1-9][0-9]{0,17})$")
STATIC = {
    "console.js": "text/javascript; charset=utf-8",
    "console.css": "text/css; charset=utf-8",
    "favicon.svg": "image/svg+xml",
}
MAX_LOGIN_BODY = 4096


@cache
def _asset(folder: str, name: str) -> str:
    return (resources.files("service.console") / folder / name).read_text(encoding="utf-8")


def render(page: str, title: str, csrf: str, body: str) -> str:
    """The shell with its values filled in, each escaped (pure)."""
    values = {
        "{{title}}": html.escape(title),
        "{{page}}": html.escape(page),
        "{{csrf}}": html.escape(csrf),
        "{{body}}": body,
    }
    text = _asset("templates", "shell.html")
    for key, value in values.items():
        text = text.replace(key, value)
    return text


def _html(text: str, status: int = 200) -> Response:
    return Response(
        text,
        status_code=status,
        media_type="text/html; charset=utf-8",
        headers={**SECURITY_HEADERS, "Cache-Control": "no-store"},
    )


def _sessions(request: Request) -> BrowserSessions | None:
    sessions = request.scope.get("state", {}).get("sessions")
    return sessions if isinstance(sessions, BrowserSessions) else None


def _logged_in(sessions: BrowserSessions) -> Response:
    response = RedirectResponse("/ui/", status_code=303, headers={"Cache-Control": "no-store"})
    response.set_cookie(
        COOKIE,
        sessions.new_session(),
        max_age=SESSION_MAX_AGE_S,
        path="/",
        httponly=True,
        samesite="strict",
    )
    return response


def _login_page(message: str = "", status: int = 200) -> Response:
    body = _asset("templates", "login.html").replace("{{message}}", html.escape(message))
    return _html(render("login", "Log in", "", body), status)


async def login(request: Request) -> Response:
    sessions = _sessions(request)
    if sessions is None:  # the unix socket: the file's mode is the access control
        return RedirectResponse("/ui/", status_code=303)
    if request.method == "POST":
        raw = b""
        async for chunk in request.stream():
            raw += chunk
            if len(raw) > MAX_LOGIN_BODY:
                return _login_page("That is too long for a token.", 413)
        token = parse_qs(raw.decode("utf-8", "replace")).get("token", [""])[0]
        if token and sessions.token_matches(token):
            return _logged_in(sessions)
        return _login_page(
            "That token is not right. It is in the state directory's api.token.", 401
        )
    ticket = request.query_params.get("ticket")
    if ticket is not None:
        if sessions.redeem(ticket):
            return _logged_in(sessions)
        return _login_page("This login link was used already or has expired.", 401)
    return _login_page()


def logout(request: Request) -> Response:
    """End the session on the server (its cookie is refused from now on, wherever a copy of
    it is), then clear it in the browser."""
    sessions = _sessions(request)
    if sessions is not None:
        sessions.end(request.cookies.get(COOKIE))
    response = RedirectResponse("/ui/login", status_code=303)
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
    return response


def favicon() -> Response:
    """``/favicon.ico``, which browsers ask for whatever the page names: the console's icon
    (an SVG: Chromium and Firefox show it whatever the path says)."""
    return static("favicon.svg")


def static(name: str) -> Response:
    media_type = STATIC.get(name)
    if media_type is None:
        return Response("not found", status_code=404, media_type="text/plain")
    return Response(
        _asset("static", name),
        media_type=media_type,
        headers={**SECURITY_HEADERS, "Cache-Control": "no-cache"},
    )


async def handle(request: Request, rest: str) -> Response:
    """Route ``/ui`` + ``rest`` (the guard has already checked the session or token)."""
    if rest == "/login":
        return await login(request)
    if rest.startswith("/static/"):
        return static(rest.removeprefix("/static/"))
    if rest == "/logout" and request.method == "POST":
        return logout(request)
    if request.method == "POST":
        return Response("method not allowed", status_code=405, headers={"Allow": "GET, HEAD"})
    csrf = str(request.scope.get("state", {}).get("csrf", ""))
    if rest in PAGES:
        page, title = PAGES[rest]
    elif SUBSCRIPTION_PAGE.match(rest):
        page, title = "subscription", "Subscription"
    else:
        return _html(render("missing", "Not found", csrf, _asset("templates", "missing.html")), 404)
    return _html(render(page, title, csrf, _asset("templates", f"{page}.html")))
