"""``mcpsubctl ui`` as a person runs it: the printed link logs a real browser in once; a
daemon on its unix socket opens a loopback TCP listener for it first."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import expect

from tests.support.cli import run_cli
from tests.support.daemon import Daemon


def _log_in_with(context: Any, url: str) -> Any:
    page = context.new_page()
    page.goto(url)
    expect(page.locator("#live-text")).to_have_text("Live: connected")
    assert page.url.endswith("/ui/")
    return page


def test_ui_on_a_unix_socket_daemon_opens_a_tcp_listener(context: Any, tmp_path: Path) -> None:
    daemon = Daemon(tmp_path / "state").start()
    try:
        result = daemon.ctl("ui")
        assert result.code == 0, result.stderr
        url = result.stdout.strip()
        assert url.startswith("http://127.0.0.1:") and "/ui/login?ticket=" in url
        page = _log_in_with(context, url)
        expect(page.locator("#links-total")).to_have_text("0")
        # The link is spent; a second run gives a new one on the same listener.
        again = daemon.ctl("ui", "--json")
        assert again.code == 0, again.stderr
        second = again.json["url"]
        assert second.split("/ui/")[0] == url.split("/ui/")[0] and second != url
        with httpx.Client() as anonymous:
            assert anonymous.get(url, follow_redirects=False).status_code == 401
            base = url.split("/ui/")[0]
            assert anonymous.get(base + "/v1/status").status_code == 401
            token = (tmp_path / "state" / "api.token").read_text().strip()
            authorized = anonymous.get(
                base + "/v1/status", headers={"Authorization": f"Bearer {token}"}
            )
            assert authorized.status_code == 200
        # --revoke-all reaches the console listener's sessions through the unix socket.
        revoked = daemon.ctl("ui", "--revoke-all")
        assert revoked.code == 0 and revoked.stdout == "ended 1 console session\n", revoked
        page.reload()
        expect(page).to_have_url(base + "/ui/login")
        assert daemon.stop() == 0
    finally:
        daemon.kill()


def test_ui_on_a_tcp_daemon(context: Any, daemon: Daemon) -> None:
    assert daemon.tcp_url is not None
    result = run_cli(
        "mcpsubctl",
        "ui",
        env={"MCPSUB_STATE_DIR": str(daemon.state_dir), "MCPSUB_API": daemon.tcp_url},
    )
    assert result.code == 0, result.stderr
    url = result.stdout.strip()
    assert url.startswith(daemon.tcp_url + "/ui/login?ticket=")
    _log_in_with(context, url)
    assert daemon.token not in result.stdout


def test_ui_revoke_all_ends_every_browser_session(context: Any, daemon: Daemon) -> None:
    """``mcpsubctl ui --revoke-all`` ends every console session at once."""
    assert daemon.tcp_url is not None
    env = {"MCPSUB_STATE_DIR": str(daemon.state_dir), "MCPSUB_API": daemon.tcp_url}
    link = run_cli("mcpsubctl", "ui", env=env)
    assert link.code == 0, link.stderr
    page = _log_in_with(context, link.stdout.strip())
    cookie = next(c for c in context.cookies() if c["name"] == "mcpsub_session")["value"]
    with httpx.Client(base_url=daemon.tcp_url) as copy:
        copy.headers["Cookie"] = f"mcpsub_session={cookie}"
        assert copy.get("/v1/status").status_code == 200
        revoked = run_cli("mcpsubctl", "ui", "--revoke-all", env=env)
        assert revoked.code == 0, revoked.stderr
        assert revoked.stdout.startswith("ended ") and "console session" in revoked.stdout
        assert copy.get("/v1/status").status_code == 401
    page.reload()
    expect(page).to_have_url(f"{daemon.tcp_url}/ui/login")
    again = run_cli("mcpsubctl", "ui", "--revoke-all", "--json", env=env)
    assert again.code == 0 and again.json == {"revoked": 0}, again


def test_a_daemon_restart_ends_every_session(tmp_path: Path) -> None:
    """The session table is the daemon's memory: a cookie from before a restart (logged out
    or not) is refused after it. Before: the stateless cookie outlived the restart."""
    from tests.console.conftest import free_port

    state = tmp_path / "state"
    env = {"MCPSUB_API": f"tcp://127.0.0.1:{free_port()}"}
    first = Daemon(state, env).start()
    try:
        assert first.tcp_url is not None
        with httpx.Client(base_url=first.tcp_url) as browser:
            assert browser.post("/ui/login", data={"token": first.token}).status_code == 303
            cookie = browser.cookies["mcpsub_session"]
            assert browser.get("/v1/status").status_code == 200
        assert first.stop() == 0
    finally:
        first.kill()
    second = Daemon(state, env).start()
    try:
        assert second.tcp_url is not None
        with httpx.Client(base_url=second.tcp_url) as browser:
            browser.headers["Cookie"] = f"mcpsub_session={cookie}"
            assert browser.get("/v1/status").status_code == 401
        assert second.stop() == 0
    finally:
        second.kill()
