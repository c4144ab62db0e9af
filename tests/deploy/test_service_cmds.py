"""``mcpsubctl service install|uninstall|status``, as real subprocesses.

Nothing here writes outside tmp_path or calls systemctl/launchctl: installs go through
``--dry-run`` or into ``MCPSUB_SERVICE_DIR=<tmp_path>/...``, and HOME is a temporary directory.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from tests.support.cli import BIN, CliResult, run_cli
from tests.support.daemon import Daemon

MCPSUBD = BIN / "mcpsubd"
SYSTEM_UNIT = Path("/etc/systemd/system/mcpsubd.service")


def ctl(tmp_path: Path, *args: str, **env: str) -> CliResult:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    base = {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_RUNTIME_DIR": str(tmp_path / "run"),
    }
    return run_cli("mcpsubctl", "service", *args, env={**base, **env}, timeout=30)


def test_dry_run_prints_the_units_naming_this_mcpsubd(tmp_path: Path) -> None:
    system_before = SYSTEM_UNIT.exists()
    system = ctl(tmp_path, "install", "--dry-run", "--platform", "linux")
    assert system.code == 0, system.stderr
    assert system.stdout.startswith(f"# {SYSTEM_UNIT} (dry run")
    assert f"ExecStart={MCPSUBD} run --state-dir %S/mcpsubd" in system.stdout
    assert "DynamicUser=yes" in system.stdout
    assert SYSTEM_UNIT.exists() == system_before, "a dry run writes nothing"

    user = ctl(tmp_path, "install", "--dry-run", "--user", "--platform", "linux")
    assert user.code == 0, user.stderr
    user_path = tmp_path / "home" / ".config" / "systemd" / "user" / "mcpsubd.service"
    assert user.stdout.startswith(f"# {user_path} (dry run")
    assert f"ExecStart={MCPSUBD} run " in user.stdout
    assert "DynamicUser=" not in user.stdout.split("[Service]")[1].replace("No DynamicUser=", "")
    assert not (tmp_path / "home" / ".config").exists(), "a dry run writes nothing"

    mac = ctl(tmp_path, "install", "--dry-run", "--platform", "darwin")
    assert mac.code == 0, mac.stderr
    plist_path = tmp_path / "home" / "Library" / "LaunchAgents" / "io.mcpsub.mcpsubd.plist"
    assert mac.stdout.startswith(f"# {plist_path} (dry run")
    assert f"<string>{MCPSUBD}</string>" in mac.stdout
    assert not (tmp_path / "home" / "Library").exists()


def test_install_status_uninstall_in_a_tmp_dir(tmp_path: Path) -> None:
    units = tmp_path / "units"
    env = {"MCPSUB_SERVICE_DIR": str(units)}
    dry = ctl(tmp_path, "install", "--user", "--dry-run", "--platform", "linux", **env)
    installed = ctl(tmp_path, "install", "--user", "--platform", "linux", **env)
    assert installed.code == 0, installed.stderr
    unit = units / "mcpsubd.service"
    assert installed.stdout.startswith(f"created {unit} (runs {MCPSUBD})")
    assert "systemctl --user daemon-reload && systemctl --user enable --now mcpsubd" in (
        installed.stdout
    )
    assert stat.S_IMODE(os.stat(unit).st_mode) == 0o644
    assert unit.read_text() == dry.stdout.split("\n", 1)[1], "dry run prints what install writes"

    again = ctl(tmp_path, "install", "--user", "--platform", "linux", **env)
    assert again.stdout.startswith(f"unchanged {unit}")

    status = ctl(tmp_path, "status", "--user", "--platform", "linux", "--json", **env)
    assert status.code == 10, status.stdout  # installed, but no daemon answers
    assert status.json["installed"] is True
    assert status.json["upToDate"] is True
    assert status.json["answers"] is False

    removed = ctl(tmp_path, "uninstall", "--user", "--platform", "linux", **env)
    assert removed.code == 0, removed.stderr
    assert removed.stdout.startswith(f"removed {unit}")
    assert "systemctl --user disable --now mcpsubd" in removed.stdout
    assert not unit.exists()
    gone = ctl(tmp_path, "uninstall", "--user", "--platform", "linux", **env)
    assert gone.code == 0 and gone.stdout.startswith("not installed")


def test_launchd_install_into_a_tmp_dir(tmp_path: Path) -> None:
    agents = tmp_path / "agents"
    env = {"MCPSUB_SERVICE_DIR": str(agents)}
    result = ctl(tmp_path, "install", "--platform", "darwin", **env)
    assert result.code == 0, result.stderr
    plist = agents / "io.mcpsub.mcpsubd.plist"
    assert stat.S_IMODE(os.stat(plist).st_mode) == 0o644
    assert f"launchctl bootstrap gui/{os.getuid()} {plist}" in result.stdout
    assert ctl(tmp_path, "uninstall", "--platform", "darwin", **env).code == 0
    assert not plist.exists()


def test_status_and_uninstall_see_a_running_daemon(tmp_path: Path) -> None:
    units = tmp_path / "units"
    env = {"MCPSUB_SERVICE_DIR": str(units)}
    assert ctl(tmp_path, "install", "--user", "--platform", "linux", **env).code == 0
    # The user unit's socket is $XDG_RUNTIME_DIR/mcpsubd/api.sock.
    d = Daemon(tmp_path / "run" / "mcpsubd").start()
    try:
        status = ctl(tmp_path, "status", "--user", "--platform", "linux", **env)
        assert status.code == 0, status.stdout
        assert status.field("daemon").startswith("running at ")
        refused = ctl(tmp_path, "uninstall", "--user", "--platform", "linux", **env)
        assert refused.code == 1
        assert "disable --now" in refused.stderr
        assert (units / "mcpsubd.service").exists()
        forced = ctl(tmp_path, "uninstall", "--user", "--platform", "linux", "--force", **env)
        assert forced.code == 0 and not (units / "mcpsubd.service").exists()
    finally:
        assert d.stop() == 0
