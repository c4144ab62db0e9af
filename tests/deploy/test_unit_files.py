"""The unit files in deploy/: required keys always, ``systemd-analyze verify`` when present."""

from __future__ import annotations

import os
import plistlib
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from cli import service_cmds
from tests.support import skips

REPO = Path(__file__).resolve().parents[2]
SYSTEMD = REPO / "deploy" / "systemd"
PLIST = REPO / "deploy" / "launchd" / "io.mcpsub.mcpsubd.plist"
UNITS = {"system": SYSTEMD / "mcpsubd.service", "user": SYSTEMD / "mcpsubd.user.service"}

REQUIRED = {
    "Type": "notify",
    "WatchdogSec": "30",
    "Restart": "on-failure",
    "RestartSec": "5",
    "TimeoutStopSec": "15",
    "StateDirectory": "mcpsubd",
    "RuntimeDirectory": "mcpsubd",
    "NoNewPrivileges": "yes",
    "ProtectSystem": "strict",
    "PrivateTmp": "yes",
    "PrivateDevices": "yes",
    "RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6",
    "SystemCallFilter": "@system-service",
    "ProtectKernelTunables": "yes",
    "ProtectKernelModules": "yes",
    "ProtectKernelLogs": "yes",
    "ProtectControlGroups": "yes",
    "LockPersonality": "yes",
    "RestrictNamespaces": "yes",
    "RestrictRealtime": "yes",
    "SystemCallArchitectures": "native",
    "CapabilityBoundingSet": "",
    "UMask": "0077",
}


def parse_unit(text: str) -> dict[str, dict[str, list[str]]]:
    """[section] → key → every value (systemd allows a key more than once)."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        assert current is not None, f"key outside a section: {line!r}"
        key, sep, value = line.partition("=")
        assert sep, f"not KEY=VALUE: {line!r}"
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


@pytest.mark.parametrize("scope", ["system", "user"])
def test_systemd_unit_has_the_required_keys(scope: str) -> None:
    unit = parse_unit(UNITS[scope].read_text())
    service = unit["Service"]
    for key, value in REQUIRED.items():
        assert value in service.get(key, []), f"{scope} unit: {key}={value} missing"
    assert service["ProtectHome"][0] in ("yes", "read-only", "tmpfs")
    exec_start = service["ExecStart"][0]
    assert "--state-dir %S/mcpsubd" in exec_start
    assert "--api unix://%t/mcpsubd/api.sock" in exec_start
    assert exec_start.split()[0].endswith("/mcpsubd")
    assert "HUP" in service["ExecReload"][0]
    if scope == "system":
        assert service["DynamicUser"] == ["yes"]
        assert unit["Install"]["WantedBy"] == ["multi-user.target"]
    else:
        assert "DynamicUser" not in service
        assert unit["Install"]["WantedBy"] == ["default.target"]


@pytest.mark.skipif(
    shutil.which("systemd-analyze") is None, reason=skips.because("systemd", "no systemd-analyze")
)
@pytest.mark.parametrize("scope", ["system", "user"])
def test_systemd_analyze_verify(scope: str, tmp_path: Path) -> None:
    # Rendered the way `service install` renders it, so ExecStart names a real program.
    target = service_cmds.Target("systemd", scope == "user", tmp_path, "mcpsubd.service")
    unit = tmp_path / "mcpsubd.service"
    unit.write_text(service_cmds.render(target))
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime), "SYSTEMD_LOG_LEVEL": "notice"}
    args = ["systemd-analyze", *(["--user"] if scope == "user" else []), "verify", str(unit)]
    proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60)
    output = proc.stdout + proc.stderr
    ours = [line for line in output.splitlines() if "mcpsubd" in line]
    assert proc.returncode == 0 and not ours, output


def test_launchd_plist() -> None:
    with PLIST.open("rb") as handle:
        plist = plistlib.load(handle)
    assert plist["Label"] == "io.mcpsub.mcpsubd"
    program, *args = plist["ProgramArguments"]
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert Path(program).name in scripts, "ProgramArguments names an entry point we ship"
    assert "--state-dir" in args
    assert plist["RunAtLoad"] is True
    assert plist["KeepAlive"] == {"SuccessfulExit": False}
    assert plist["ThrottleInterval"] == 10
    assert plist["ExitTimeOut"] == 20
    for key in ("StandardOutPath", "StandardErrorPath"):
        assert "/Library/Logs/mcpsub/" in plist[key]
    assert "/usr/bin" in plist["EnvironmentVariables"]["PATH"]
    # No self-daemonizing switch exists to pass, and none is passed.
    assert not any("daemon" in a.lower() for a in args)


def test_rendered_plist_names_this_installation(monkeypatch: pytest.MonkeyPatch) -> None:
    home = Path("/Users/someone")
    monkeypatch.setattr(Path, "home", classmethod(lambda cls: home))
    target = service_cmds.Target("launchd", True, home / "Library/LaunchAgents", "x.plist")
    text = service_cmds.render(target)
    plist = plistlib.loads(text.encode())
    program = Path(plist["ProgramArguments"][0])
    assert program == service_cmds.mcpsubd_path() and program.exists()
    assert plist["ProgramArguments"][-1] == f"{home}/Library/Application Support/mcpsub"
    assert plist["StandardErrorPath"] == f"{home}/Library/Logs/mcpsub/mcpsubd.log"
    assert plist["EnvironmentVariables"]["PATH"].split(":")[0] == str(program.parent)
    assert "USERNAME" not in text.split("<plist", 1)[1]


def test_replica_template_unit() -> None:
    """deploy/systemd/mcpsubd@.service: the system unit's keys, one state dir, socket and
    replica id per instance, the database URL from a root-only file, restart on 69."""
    unit = parse_unit((SYSTEMD / "mcpsubd@.service").read_text())
    service = unit["Service"]
    for key, value in REQUIRED.items():
        expected = f"{value}-%i" if key in ("StateDirectory", "RuntimeDirectory") else value
        assert expected in service.get(key, []), f"template unit: {key}={expected} missing"
    exec_start = service["ExecStart"][0]
    assert "--state-dir %S/mcpsubd-%i" in exec_start
    assert "--api unix://%t/mcpsubd-%i/api.sock" in exec_start
    assert service["EnvironmentFile"] == ["/etc/mcpsub/replicas.env"]
    assert "MCPSUB_REPLICA_ID=%H-%i" in service["Environment"]
    assert service["RestartPreventExitStatus"] == ["78"], "69 (database down) is retried"
    assert unit["Install"]["WantedBy"] == ["multi-user.target"]
