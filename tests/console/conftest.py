"""One real daemon on loopback TCP (with its token) and one real lab server per module,
and the system Chromium (tests/support/browser.py)."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.browser import VIEWPORT, browser, screenshots  # noqa: F401
from tests.support.daemon import Daemon
from tests.support.lab import LabServer
from tests.support.poll import until


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def lab() -> Iterator[LabServer]:
    with LabServer() as server:
        yield server


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    state = tmp_path_factory.mktemp("console-state")
    env = {
        "MCPSUB_API": f"tcp://127.0.0.1:{free_port()}",
        # A failed delivery waits for the person to retry it (no automatic retry in a test).
        "MCPSUB_WEBHOOK_SCHEDULE": "0,600",
        "MCPSUB_TRIGGER_ATTEMPTS": "1",  # likewise a failed trigger run: dead at once
    }
    started = Daemon(state, env).start()
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture
def context(browser: Any) -> Iterator[Any]:  # noqa: F811
    ctx = browser.new_context(viewport=VIEWPORT)
    ctx.set_default_timeout(5000)
    try:
        yield ctx
    finally:
        ctx.close()


@pytest.fixture
def logged_in(context: Any, daemon: Daemon) -> Any:
    """A page logged in through the login form, as a person would."""
    page = context.new_page()
    page.goto(f"{daemon.tcp_url}/ui/")
    page.get_by_label("API token").fill(daemon.token)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{daemon.tcp_url}/ui/")
    return page


def wait_until(check: Callable[[], Any], timeout: float = 10.0) -> Any:
    return until("the console's condition", check, timeout)


def subscribe(daemon: Daemon, lab: LabServer, uri: str, text: str) -> dict[str, Any]:
    """Put ``uri`` on the lab with ``text``, subscribe the daemon, wait for its first read."""
    lab.control("PUT", "/lab/resources", json={"uri": uri, "text": text}).raise_for_status()
    answer = daemon.api("POST", "/v1/subscriptions", json={"url": lab.url, "uri": uri})
    assert answer.status_code in (200, 201), answer.text
    sub: dict[str, Any] = answer.json()
    wait_until(lambda: daemon.api("GET", f"/v1/subscriptions/{sub['id']}").json()["revision"] >= 1)
    return sub


def shot(page: Any, folder: Path, name: str) -> None:
    page.screenshot(path=str(folder / f"{name}.png"))
