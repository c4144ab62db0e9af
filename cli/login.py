"""``--login`` / ``--logout`` for the drop-in (seed-behaviour §1.5, §5).

The device flow itself is :mod:`service.auth.login`; this module only prints the exact
lines scripts read. Token values are never printed.
"""

from __future__ import annotations

import asyncio
import os
import sys
from datetime import UTC, datetime

from cli.argscan import peek


def _out(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _iso(epoch_ms: int) -> str:
    moment = datetime.fromtimestamp(epoch_ms / 1000, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def run_login(args: list[str], *, program: str) -> int:
    url = peek(args, "url") or os.environ.get("MCP_PROBE_URL")
    if not url:
        _out("login-status failed\nerror-code SERVER_URL_UNKNOWN")
        return 1
    from service.auth.login import login
    from service.auth.oauth import DeviceCode
    from service.statusline import StatusLine

    status = StatusLine.for_terminal()

    def show(code: DeviceCode) -> None:
        _out(f"user-code {code.user_code}")
        _out(f"verification-uri {code.verification_uri}")
        if code.verification_uri_complete:
            _out(f"verification-uri-complete {code.verification_uri_complete}")
        target = code.verification_uri_complete or code.verification_uri
        sys.stderr.write(
            f"Open {target} in a browser and approve the code {code.user_code} "
            "to finish logging in; waiting for approval...\n"
        )
        sys.stderr.flush()
        status.start()
        status.phase(f"waiting for approval of the code {code.user_code}")

    try:
        try:
            result = asyncio.run(login(url, program=program, on_code=show))
        finally:
            status.stop()
    except Exception as exc:  # Ctrl-C is not caught here: every program exits 130 on it
        sys.stderr.write(f"login failed: {exc or type(exc).__name__}\n")
        _out("login-status failed")
        return 1
    _out("login-status success")
    _out(f"token-origin {result.origin}")
    _out(f"token-expires-at {_iso(result.expires_at_ms)}")
    return 0


def run_logout(args: list[str]) -> int:
    url = peek(args, "url") or os.environ.get("MCP_PROBE_URL")
    if not url:
        _out("logout-status failed\nerror-code SERVER_URL_UNKNOWN")
        return 1
    from service.auth.login import forget
    from service.auth.rules import origin_of

    try:
        origin_of(url)
    except ValueError:
        sys.stderr.write(f"logout failed: Invalid URL: {url}\n")
        _out("logout-status failed\nerror-code INVALID_URL")
        return 1
    try:
        forget(url)
    except Exception as exc:
        sys.stderr.write(f"logout failed: {exc or type(exc).__name__}\n")
        _out("logout-status failed")
        return 1
    _out("logout-status success")
    return 0
