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
