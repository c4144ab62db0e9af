"""The one rule for the state dir and the API socket (``service.statepaths``), pure parts
and the daemon's check of the socket's short directory."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from service import statepaths


def test_state_dir_precedence() -> None:
    home = os.path.expanduser("~")
    assert statepaths.state_dir({"MCPSUB_STATE_DIR": "/x", "STATE_DIRECTORY": "/y"}) == "/x"
    assert statepaths.state_dir({"STATE_DIRECTORY": "/y:/z"}) == "/y"
    assert statepaths.state_dir({"XDG_STATE_HOME": "/s"}) == "/s/mcpsub"
    assert statepaths.default_state_dir({}) == os.path.join(home, ".local", "state", "mcpsub")
    assert statepaths.state_base({}, "darwin", "/h") == "/h/Library/Application Support"
    assert statepaths.state_base({"LOCALAPPDATA": "/l"}, "win32", "/h") == "/l"


def test_the_socket_sits_beside_the_state_unless_its_path_is_too_long() -> None:
    short = "/home/u/.local/state/mcpsub"
    assert statepaths.socket_path(short, {}) == short + "/api.sock"
    long_state = "/home/" + "h" * 140 + "/.local/state/mcpsub"  # a HOME of ~150 bytes
    env = {"XDG_RUNTIME_DIR": "/run/user/1000"}
    path = statepaths.socket_path(long_state, env)
    assert path.startswith(f"/run/user/1000/mcpsub-{os.getuid()}-") and path.endswith("/api.sock")
    assert statepaths.fits(path) and path == statepaths.socket_path(long_state, env), "stable"
    other = statepaths.socket_path(long_state + "2", env)
    assert other != path, "another state dir, another directory"
    # No runtime dir, or one too long itself: /tmp.
    assert statepaths.socket_path(long_state, {}).startswith("/tmp/mcpsub-")
    too_long = {"XDG_RUNTIME_DIR": "/" + "r" * 100}
    assert statepaths.socket_path(long_state, too_long).startswith("/tmp/mcpsub-")
    # Exactly at the limit still fits; one byte more does not.
    limit = statepaths.max_socket_path("linux")
    assert statepaths.fits("/" + "a" * (limit - 1), "linux")
    assert not statepaths.fits("/" + "a" * limit, "linux")
    assert statepaths.max_socket_path("darwin") == 103


def test_the_short_directory_is_private_and_ours(tmp_path: Path) -> None:
    made = tmp_path / "mcpsub-x"
    statepaths.ensure_private_dir(str(made))
    assert stat.S_IMODE(made.stat().st_mode) == 0o700
    os.chmod(made, 0o755)
    statepaths.ensure_private_dir(str(made))
    assert stat.S_IMODE(made.stat().st_mode) == 0o700, "a widened one is narrowed"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "link").symlink_to(elsewhere)
    with pytest.raises(statepaths.UnusableDir, match="not a directory"):
        statepaths.ensure_private_dir(str(tmp_path / "link"))
    (tmp_path / "file").write_text("")
    with pytest.raises(statepaths.UnusableDir, match="not a directory"):
        statepaths.ensure_private_dir(str(tmp_path / "file"))
    with pytest.raises(statepaths.UnusableDir, match="cannot create"):
        statepaths.ensure_private_dir(str(tmp_path / "missing" / "deeper"))
