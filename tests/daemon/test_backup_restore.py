"""``mcpsubd backup PATH`` while the daemon runs, and the documented restore."""

from __future__ import annotations

import sqlite3
import stat
from pathlib import Path

from tests.support.cli import run_cli
from tests.support.daemon import Daemon


def test_online_backup_is_private_complete_and_restores(tmp_path: Path) -> None:
    daemon = Daemon(tmp_path / "state").start()
    try:
        added = daemon.ctl("webhook", "add", "https://example.test/hook", "--json")
        assert added.code == 0, added.stderr
        secret = added.json["secret"]
        copy = tmp_path / "backups" / "mcpsub.db"
        copy.parent.mkdir()
        env = {"MCPSUB_STATE_DIR": str(daemon.state_dir)}
        made = run_cli("mcpsubd", "backup", str(copy), env=env)  # the daemon keeps running
        assert made.code == 0, made.stderr
        assert f"to {copy}" in made.stdout
        assert stat.S_IMODE(copy.stat().st_mode) == 0o600
        with sqlite3.connect(copy) as db:
            assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
            assert db.execute("SELECT url FROM webhook_targets").fetchall() == [
                ("https://example.test/hook",)
            ]
        again = run_cli("mcpsubd", "backup", str(copy), env=env)
        assert again.code == 73 and again.stderr == f"mcpsubd: {copy} exists; not overwriting it\n"
        assert daemon.proc is not None and daemon.proc.poll() is None
    finally:
        daemon.stop()

    # Restore into a fresh state dir, as docs/operations.md describes, and start from it.
    restored = tmp_path / "restored"
    restored.mkdir(mode=0o700)
    (restored / "mcpsub.db").write_bytes(copy.read_bytes())
    (restored / "mcpsub.db").chmod(0o600)
    second = Daemon(restored).start()
    try:
        listed = second.ctl("webhook", "list", "--json").json["webhooks"]
        assert [t["url"] for t in listed] == ["https://example.test/hook"]
        assert secret not in second.ctl("webhook", "list", "--json").stdout
    finally:
        second.stop()


def test_backup_errors_are_one_line(tmp_path: Path) -> None:
    env = {"MCPSUB_STATE_DIR": str(tmp_path / "empty")}
    missing = run_cli("mcpsubd", "backup", str(tmp_path / "x.db"), env=env)
    assert missing.code == 66 and "no database at" in missing.stderr
    assert not (tmp_path / "x.db").exists()  # no partial file left behind
    no_path = run_cli("mcpsubd", "backup", env=env)
    assert no_path.code == 2 and "mcpsubd backup PATH" in no_path.stderr
    stray = run_cli("mcpsubd", "run", str(tmp_path / "x.db"), env=env)
    assert stray.code == 2 and "takes no path" in stray.stderr
    for result in (missing, no_path, stray):
        assert "Traceback" not in result.stdout + result.stderr
