"""``service install`` warns for every path the unit's sandbox hides (ProtectHome, PrivateTmp)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli.service_cmds import hidden_path_warnings, paths_the_unit_needs, unit_settings
from tests.support.cli import REPO_ROOT, run_cli

SYSTEM = (REPO_ROOT / "deploy/systemd/mcpsubd.service").read_text()
USER = (REPO_ROOT / "deploy/systemd/mcpsubd.user.service").read_text()


def test_unit_settings_read_the_shipped_hardening() -> None:
    system, user = unit_settings(SYSTEM), unit_settings(USER)
    assert system["ProtectHome"] == "yes"
    assert system["PrivateTmp"] == "yes" and user["PrivateTmp"] == "yes"
    assert user["ProtectHome"] == "read-only"


@pytest.mark.parametrize(
    ("path", "user", "hidden_under"),
    [
        ("/tmp/venv/bin/mcpsubd", False, "/tmp"),
        ("/tmp/venv/bin/mcpsubd", True, "/tmp"),  # PrivateTmp in the user unit too
        ("/var/tmp/x/bin/python3", True, "/var/tmp"),
        ("/home/ann/.local/bin/mcpsubd", False, "/home"),
        ("/root/.pyenv/versions/3.12/bin/python3.12", False, "/root"),
        ("/home/ann/.local/bin/mcpsubd", True, None),  # ProtectHome=read-only: visible
        ("/opt/mcpsub/bin/mcpsubd", False, None),
        ("/usr/local/bin/mcpsubd", True, None),
        ("/tmpfoo/bin/mcpsubd", False, None),  # a prefix is not a parent
    ],
)
def test_every_hidden_path_gets_a_warning(path: str, user: bool, hidden_under: str | None) -> None:
    warnings = hidden_path_warnings(USER if user else SYSTEM, [Path(path)], user)
    if hidden_under is None:
        assert warnings == []
    else:
        assert len(warnings) == 1
        assert warnings[0].startswith(f"{path} is under {hidden_under}, which the ")


def test_the_interpreter_behind_the_script_is_checked_too(tmp_path: Path) -> None:
    script = tmp_path / "mcpsubd"
    script.write_text("#!/tmp/elsewhere/bin/python3\nprint('hi')\n")
    paths = paths_the_unit_needs(script)
    assert Path("/tmp/elsewhere/bin/python3") in paths
    warnings = hidden_path_warnings(SYSTEM, paths, False)
    assert any(w.startswith("/tmp/elsewhere/bin/python3 is under /tmp") for w in warnings)


def test_install_dry_run_warns_for_this_installation(tmp_path: Path) -> None:
    from cli.service_cmds import mcpsubd_path

    expected = hidden_path_warnings(SYSTEM, paths_the_unit_needs(mcpsubd_path()), False)
    result = run_cli(
        "mcpsubctl", "service", "install", "--dry-run", "--platform", "linux",
        env={"MCPSUB_SERVICE_DIR": str(tmp_path)},
    )  # fmt: skip
    assert result.code == 0, result.stderr
    warned = [line for line in result.stderr.splitlines() if "which the system unit hides" in line]
    assert warned == [f"warning: {w}" for w in expected]
