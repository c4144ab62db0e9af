"""``mcpsubd --api unix:///PATH`` never replaces what sits at PATH unless it is a socket.

The daemon used to probe the path and, when nothing answered, delete it and put its socket
there: a regular file, a directory's entry or a symlink named by mistake was lost. It now
binds through the API's one ``bind_unix_socket``, which refuses anything that is not a
socket: the daemon exits 78 (configuration) with one line saying why, and the path survives.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support.cli import cli_env
from tests.support.daemon import BIN, FAST_ENV

EXIT_CONFIG = 78


@pytest.mark.parametrize("kind", ["file", "directory", "symlink"])
def test_a_path_that_is_not_a_socket_survives_with_a_clear_error(tmp_path: Path, kind: str) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    target = tmp_path / "precious"
    real = tmp_path / "real.txt"
    if kind == "file":
        target.write_text("keep me\n")
    elif kind == "directory":
        target.mkdir()
        (target / "inside.txt").write_text("keep me\n")
    else:
        real.write_text("keep me\n")
        target.symlink_to(real)
    env = cli_env({**FAST_ENV, "MCPSUB_STATE_DIR": str(state), "MCPSUB_LOG_FORMAT": "console"})
    result = subprocess.run(
        [str(BIN / "mcpsubd"), "--api", f"unix://{target}"],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    output = result.stdout + result.stderr
    assert result.returncode == EXIT_CONFIG, output
    assert f"{target} exists and is not a socket" in output
    assert "Traceback" not in output
    if kind == "file":
        assert target.read_text() == "keep me\n"
    elif kind == "directory":
        assert (target / "inside.txt").read_text() == "keep me\n"
    else:
        assert target.is_symlink() and real.read_text() == "keep me\n"
