"""A long state path (an ordinary long ``HOME``): the daemon binds its socket through the
short private directory of ``service.statepaths``' rule, and the face (autostart), the CLIs
and the hook find it by the same rule. What still cannot work exits 71 with a hint.

Before the rule, a socket path over 107 bytes made ``mcpsubd`` log ``AF_UNIX path too long``
and exit 75 ("another mcpsubd serves the socket"), and the face's autostart failed."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from service import statepaths
from tests.face.stdio_peer import StdioPeer
from tests.support.cli import BIN, REPO_ROOT, cli_env
from tests.support.process import stop_detached

HOME_BYTES = 150


@pytest.fixture
def runtime_dir() -> Iterator[Path]:
    """A short ``XDG_RUNTIME_DIR`` (pytest's tmp_path is itself too long to hold sockets)."""
    path = Path(tempfile.mkdtemp(prefix="rt", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def long_home_env(tmp_path: Path, runtime: Path) -> dict[str, str]:
    home = tmp_path / ("h" * (HOME_BYTES - len(str(tmp_path)) - 1))
    home.mkdir()
    env = cli_env({"HOME": str(home), "XDG_RUNTIME_DIR": str(runtime)})
    for name in ("XDG_STATE_HOME", "STATE_DIRECTORY"):
        env.pop(name, None)
    assert len(str(home)) == HOME_BYTES
    return env


def run(argv: list[str], env: dict[str, str], stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, input=stdin, env=env, capture_output=True, text=True, timeout=60, cwd=REPO_ROOT
    )


def test_a_long_home_works_for_the_face_the_daemon_the_clis_and_the_hook(
    tmp_path: Path, runtime_dir: Path
) -> None:
    env = long_home_env(tmp_path, runtime_dir)
    state = Path(env["HOME"]) / ".local" / "state" / "mcpsub"
    assert not statepaths.fits(str(state / "api.sock"))
    face = StdioPeer(state, exact_env=env)
    pid = None
    try:
        face.request(0, "initialize", {"protocolVersion": "2025-11-25"})
        assert "result" in face.answer(0, timeout=30)
        face.request(1, "tools/call", {"name": "list_subscriptions", "arguments": {}})
        answer = face.answer(1, timeout=60)
        assert answer["result"]["isError"] is False, (answer, face.stderr)
        started = next((line for line in face.stderr if "started mcpsubd" in line), "")
        match = re.search(r"pid (\d+)", started)
        assert match, face.stderr
        pid = int(match.group(1))

        # The socket is in the short private directory the rule names, not beside the state.
        socket_path = Path(statepaths.socket_path(str(state), env))
        assert socket_path.parent.parent == runtime_dir
        assert stat.S_ISSOCK(socket_path.lstat().st_mode)
        assert stat.S_IMODE(socket_path.parent.stat().st_mode) == 0o700
        assert not (state / "api.sock").exists()

        status = run([str(BIN / "mcpsubctl"), "status", "--json"], env)
        assert status.returncode == 0, status.stderr
        hook = run(
            [str(BIN / "mcpsubctl"), "hook", "claude-code"],
            env,
            json.dumps({"session_id": "long", "hook_event_name": "SessionStart"}),
        )
        assert (hook.returncode, hook.stdout, hook.stderr) == (0, "", "")
        assert (state / "hooks" / "claude-code--long").read_text().strip().isdigit()

        second = run([str(BIN / "mcpsubd")], env)
        assert second.returncode == 75, second.stdout + second.stderr  # that one is true now
    finally:
        face.close()
        if pid is not None:
            stop_detached(pid)


def test_what_cannot_listen_exits_71_with_a_hint(tmp_path: Path, runtime_dir: Path) -> None:
    env = long_home_env(tmp_path, runtime_dir)
    # A named socket path no address holds.
    named = Path(env["HOME"]) / "sockets" / "api.sock"
    env_named = {**env, "MCPSUB_STATE_DIR": str(tmp_path / "s1"), "MCPSUB_LOG_FORMAT": "json"}
    too_long = run([str(BIN / "mcpsubd"), "--api", f"unix://{named}"], env_named)
    assert too_long.returncode == 71, too_long.stdout + too_long.stderr
    said = [
        line for line in (too_long.stdout + too_long.stderr).splitlines() if "cannot listen" in line
    ]
    assert len(said) == 1 and "longer than a unix socket address holds" in said[0]
    assert "hint: name a shorter one with --api" in said[0]

    # The rule's short directory is a link someone planted: refused, never bound through.
    state = Path(env["HOME"]) / "deep-state"
    short = Path(statepaths.short_dir(str(state), env))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    short.symlink_to(elsewhere)
    planted = run(
        [str(BIN / "mcpsubd")], {**env, "MCPSUB_STATE_DIR": str(state), "MCPSUB_LOG_FORMAT": "json"}
    )
    assert planted.returncode == 71, planted.stdout + planted.stderr
    said = [
        line for line in (planted.stdout + planted.stderr).splitlines() if "cannot listen" in line
    ]
    assert len(said) == 1 and "is not a directory" in said[0] and "hint: remove it" in said[0]
    assert os.listdir(elsewhere) == []
    assert "--help" not in said[0]
    helped = run([str(BIN / "mcpsubd"), "--help"], env)
    assert "71 cannot listen" in " ".join(helped.stdout.split())
