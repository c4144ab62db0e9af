"""In-process checks of the notify client and the declarative subscription reload."""

from __future__ import annotations

import asyncio
import os
import socket
import stat
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from service.daemon.config import Settings
from service.daemon.reload import (
    ConfigSource,
    ManagedSet,
    Reloader,
    ReloadError,
    apply_declared,
    declared_subscriptions,
)
from service.daemon.sdnotify import Notifier
from tests.deploy.notify import NotifyListener

URL = "http://127.0.0.1:9/mcp"


def test_notifier_is_a_no_op_without_notify_socket() -> None:
    env: dict[str, str] = {"WATCHDOG_USEC": "400000"}
    notifier = Notifier.from_env(env)
    assert not notifier.enabled
    assert notifier.notify("READY=1") is False
    assert notifier.watchdog_interval_s is None


def test_notifier_sends_datagrams_and_clears_the_environment() -> None:
    listener = NotifyListener()
    try:
        env = {"NOTIFY_SOCKET": str(listener.path), "WATCHDOG_USEC": "400000", "OTHER": "1"}
        notifier = Notifier.from_env(env)
        assert env == {"OTHER": "1"}, "children must not inherit the notify variables"
        assert notifier.watchdog_interval_s == pytest.approx(0.2)
        assert notifier.ready("1 links, 1 open, 2 subscriptions")
        assert notifier.reloading()
        message = listener.wait_for("READY", "1", timeout=5)
        assert message.fields["STATUS"] == "1 links, 1 open, 2 subscriptions"
        reloading = listener.wait_for("RELOADING", "1", timeout=5)
        assert int(reloading.fields["MONOTONIC_USEC"]) > 0
    finally:
        listener.close()


def test_watchdog_for_another_pid_is_ignored() -> None:
    env = {"NOTIFY_SOCKET": "/nonexistent", "WATCHDOG_USEC": "400000", "WATCHDOG_PID": "1"}
    notifier = Notifier.from_env(env)
    assert notifier.watchdog_interval_s is None
    assert notifier.notify("WATCHDOG=1") is False, "a send error is swallowed"
    assert notifier.last_error


def test_abstract_namespace_address() -> None:
    name = f"mcpsub-test-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as server:
        server.bind("\0" + name)
        server.settimeout(5)
        assert Notifier("@" + name).stopping()
        assert server.recv(100) == b"STOPPING=1"


@dataclass
class FakeSub:
    id: int
    server_url: str
    uri: str


class FakeSupervisor:
    def __init__(self) -> None:
        self.subs: dict[tuple[str, str], FakeSub] = {}
        self.next_id = 1

    async def subscribe(self, url: str, uri: str) -> tuple[FakeSub, bool]:
        if (url, uri) in self.subs:
            return self.subs[(url, uri)], False
        sub = FakeSub(self.next_id, url, uri)
        self.next_id += 1
        self.subs[(url, uri)] = sub
        return sub, True

    async def unsubscribe(self, subscription_id: int) -> FakeSub | None:
        for key, sub in list(self.subs.items()):
            if sub.id == subscription_id:
                del self.subs[key]
                return sub
        return None


def test_apply_declared_manages_only_what_files_added(tmp_path: Path) -> None:
    target = FakeSupervisor()
    managed = ManagedSet(tmp_path / "managed.json")

    async def run() -> None:
        await target.subscribe(URL, "test://api")  # made through the API
        added, removed = await apply_declared(
            target,
            managed,
            [(URL, "test://a"), (URL, "test://api")],
        )
        assert (added, removed) == ([2], [])
        assert set(managed.entries.values()) == {(URL, "test://a")}
        assert stat.S_IMODE(os.stat(managed.path).st_mode) == 0o600
        added, removed = await apply_declared(target, managed, [(URL, "test://b")])
        assert (added, removed) == ([3], [2])
        assert set(target.subs) == {(URL, "test://api"), (URL, "test://b")}
        # It survives a restart: a new ManagedSet reads the same file.
        again = ManagedSet.load(managed.path)
        assert again.entries == {3: (URL, "test://b")}
        added, removed = await apply_declared(target, again, [])
        assert (added, removed) == ([], [3])
        assert set(target.subs) == {(URL, "test://api")}

    asyncio.run(run())


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("subscriptions = 3", "array of tables"),
        ('[[subscriptions]]\nurl = "ftp://x"\nuri = "a:b"\n', "http"),
        ('[[subscriptions]]\nurl = "http://h/mcp"\n', "uri"),
        ('[[subscriptions]]\nurl = "http://h/mcp"\nuri = "a:b"\nextra = 1\n', "unknown key"),
        ("[[subscriptions]\n", "invalid TOML"),
    ],
)
def test_invalid_subscription_files(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "subscriptions.toml").write_text(text)
    with pytest.raises(ReloadError, match=message):
        declared_subscriptions(None, tmp_path)


def test_declared_from_both_files_without_duplicates(tmp_path: Path) -> None:
    entry = f'[[subscriptions]]\nurl = "{URL}"\nuri = "test://x"\n'
    config = tmp_path / "mcpsubd.toml"
    config.write_text('[mcpsubd]\nlog_level = "info"\n\n' + entry)
    (tmp_path / "subscriptions.toml").write_text(entry + entry.replace("test://x", "test://y"))
    assert declared_subscriptions(config, tmp_path) == [(URL, "test://x"), (URL, "test://y")]
    with pytest.raises(ReloadError, match="no such file"):
        declared_subscriptions(tmp_path / "missing.toml", tmp_path)


def test_a_failed_reload_keeps_everything(tmp_path: Path) -> None:
    config = tmp_path / "mcpsubd.toml"
    config.write_text(
        f'[mcpsubd]\nlog_level = "info"\n[[subscriptions]]\nurl = "{URL}"\nuri = "test://k"\n'
    )
    levels: list[str] = []
    target = FakeSupervisor()
    settings = Settings(state_dir=tmp_path)
    reloader = Reloader(target, settings, ConfigSource({}, config), levels.append)

    async def run() -> None:
        assert (await reloader.initial()).ok
        assert set(target.subs) == {(URL, "test://k")}
        config.write_text('[mcpsubd]\nlog_level = "debug"\nno_such_setting = 1\n')
        result = await reloader.reload()
        assert not result.ok and "no_such_setting" in (result.error or "")
        assert reloader.last_error
        assert levels == [] and set(target.subs) == {(URL, "test://k")}
        config.write_text('[mcpsubd]\nlog_level = "debug"\n')
        result = await reloader.reload()
        assert result.ok and result.removed == [1]
        assert levels == ["debug"] and reloader.last_error is None

    asyncio.run(run())
