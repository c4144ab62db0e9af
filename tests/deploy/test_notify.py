"""The real mcpsubd under a fake systemd: READY/WATCHDOG/STATUS/STOPPING/RELOADING datagrams.

``NOTIFY_SOCKET`` points at a datagram socket this test owns; ``WATCHDOG_USEC=400000`` asks
for a ping every 0.2 s. ``MCPSUB_TEST_BLOCK_LOOP_ON_SIGUSR1=1`` makes SIGUSR1 block the
daemon's event loop for 2 s: the pings must stop (they come from the loop, not a thread).
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.deploy.notify import NotifyListener
from tests.support.daemon import Daemon
from tests.support.http import uds_client
from tests.support.lab import LabServer
from tests.support.poll import until

SLOW = {"MCP_TEST_UPDATE_DELAY_SECONDS": "600"}


def readyz(socket_path: Path) -> object:
    """What GET /readyz answers right now (a status code, or the transport error's name)."""
    try:
        with uds_client(str(socket_path), timeout=2.0) as client:
            return client.get("/readyz").status_code
    except httpx.HTTPError as exc:
        return type(exc).__name__


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    return tmp_path / "state"


@pytest.fixture
def listener(state_dir: Path) -> Iterator[NotifyListener]:
    notify = NotifyListener(on_ready=lambda: readyz(state_dir / "api.sock"))
    yield notify
    notify.close()


def start(state_dir: Path, listener: NotifyListener, **env: str) -> Daemon:
    return Daemon(
        state_dir,
        {
            "NOTIFY_SOCKET": str(listener.path),
            "WATCHDOG_USEC": "400000",
            "MCPSUB_TEST_BLOCK_LOOP_ON_SIGUSR1": "1",
            **env,
        },
    ).start()


def test_ready_watchdog_status_block_and_stop(state_dir: Path, listener: NotifyListener) -> None:
    d = start(state_dir, listener)
    try:
        ready = listener.wait_for("READY", "1")
        assert ready.observed == 200, "READY=1 was sent before the API answered /readyz"
        assert ready.fields.get("STATUS") == "0 links, 0 open, 0 subscriptions"
        early = [m for m in listener.having("WATCHDOG") if m.at < ready.at]
        assert not early, "watchdog pings start once the daemon is ready"

        # Pings every 0.2 s (half of WATCHDOG_USEC), steadily.
        t0 = time.monotonic()
        time.sleep(1.2)
        pings = listener.having("WATCHDOG", "1", since=t0)
        assert len(pings) >= 4, [m.at - t0 for m in pings]

        # A blocked event loop must stop the pings (they are sent from the loop).
        assert d.proc is not None
        before_block = time.monotonic()
        d.proc.send_signal(signal.SIGUSR1)
        time.sleep(3.0)
        after = [m.at for m in listener.having("WATCHDOG", "1", since=before_block)]
        times = [before_block, *after]
        gaps = [b - a for a, b in itertools.pairwise(times)]
        assert max(gaps) > 1.0, f"pings kept coming while the loop was blocked: {gaps}"
        assert after and after[-1] > before_block + 2.0, "pings resume after the loop unblocks"
        assert d.api("GET", "/readyz").status_code == 200
    finally:
        code = d.stop()
    assert code == 0
    stopping = listener.wait_for("STOPPING", "1", timeout=5)
    assert stopping.at > ready.at
    statuses = listener.having("STATUS")
    assert statuses, "STATUS= was sent"


def _subscriptions(d: Daemon) -> dict[tuple[str, str], int]:
    body = d.api("GET", "/v1/subscriptions").json()
    return {(s["serverUrl"], s["uri"]): s["id"] for s in body["subscriptions"]}


def _put(lab: LabServer, uri: str, text: str) -> None:
    lab.control(
        "PUT", "/lab/resources", json={"uri": uri, "text": text, "notify": True}
    ).raise_for_status()


def _wait_text(d: Daemon, uri: str, text: str, timeout: float = 15.0) -> None:
    def reached() -> bool:
        response = d.api("GET", "/v1/content", params={"uri": uri})
        return response.status_code == 200 and response.json()["text"] == text

    until(f"{uri} == {text!r}", reached, timeout)


def _write_subs(path: Path, pairs: list[tuple[str, str]], header: str = "") -> None:
    body = header + "".join(f'[[subscriptions]]\nurl = "{u}"\nuri = "{i}"\n\n' for u, i in pairs)
    path.write_text(body)


def _hup(d: Daemon, listener: NotifyListener) -> tuple[float, float]:
    assert d.proc is not None
    sent = time.monotonic()
    d.proc.send_signal(signal.SIGHUP)
    reloading = listener.wait_for("RELOADING", "1", since=sent, timeout=10)
    assert int(reloading.fields["MONOTONIC_USEC"]) > 0
    ready = listener.wait_for("READY", "1", since=reloading.at, timeout=10)
    assert ready.at >= reloading.at
    return reloading.at, ready.at


def test_sighup_reloads_config_and_subscription_files(
    tmp_path: Path, state_dir: Path, listener: NotifyListener, lab_server_factory: Any
) -> None:
    lab = lab_server_factory(SLOW)
    for name in ("a", "b", "c", "d"):
        _put(lab, f"test://{name}", f"{name}1")
    a, b, c, dd = ((lab.url, f"test://{n}") for n in "abcd")
    state_dir.mkdir(mode=0o700)
    subs_file = state_dir / "subscriptions.toml"
    _write_subs(subs_file, [a])
    config = tmp_path / "mcpsubd.toml"
    _write_subs(config, [b], header='[mcpsubd]\nlog_level = "info"\n\n')

    d = start(state_dir, listener, MCPSUB_CONFIG=str(config))
    try:
        listener.wait_for("READY", "1")
        subs = _subscriptions(d)
        assert set(subs) == {a, b}, subs
        _wait_text(d, "test://a", "a1")
        # One made through the API: files never touch it, even when they list it.
        made = d.api("POST", "/v1/subscriptions", json={"url": c[0], "uri": c[1]})
        assert made.status_code in (200, 201), made.text
        managed = state_dir / "managed-subscriptions.json"
        assert stat.S_IMODE(os.stat(managed).st_mode) == 0o600
        assert {e["uri"] for e in json.loads(managed.read_text())["subscriptions"]} == {
            "test://a",
            "test://b",
        }

        # Reload 1: a leaves the file, c and d are listed; the log level becomes debug.
        _write_subs(subs_file, [c, dd])
        _write_subs(config, [b], header='[mcpsubd]\nlog_level = "debug"\n\n')
        _hup(d, listener)
        subs = _subscriptions(d)
        assert set(subs) == {b, c, dd}, subs
        _wait_text(d, "test://d", "d1")
        _put(lab, "test://d", "d2")
        _wait_text(d, "test://d", "d2")
        assert any('"declared subscriptions"' in line for line in d.lines), (
            "log_level = debug was applied"
        )

        # Reload 2: c leaves the file too; it was made through the API, so it stays.
        _write_subs(subs_file, [dd])
        _hup(d, listener)
        assert set(_subscriptions(d)) == {b, c, dd}

        # Reload 3: an invalid file changes nothing and the daemon keeps running.
        subs_file.write_text("[[subscriptions]]\nurl = 'ftp://nope'\nuri = 'x:y'\n")
        _hup(d, listener)
        assert set(_subscriptions(d)) == {b, c, dd}
        assert any("reload failed" in line and "subscriptions[0]" in line for line in d.lines)
        subs_file.write_text("not = [valid toml")
        _hup(d, listener)
        assert set(_subscriptions(d)) == {b, c, dd}
        status = listener.having("STATUS")[-1].fields["STATUS"]
        assert status.startswith("1 links, ") and "3 subscriptions" in status, status
        assert "last reload failed" in status
        assert d.api("GET", "/readyz").status_code == 200
    finally:
        code = d.stop()
    assert code == 0
