"""service.daemon.starting: the "a daemon is starting here" file clients wait on."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from service.daemon import starting


def test_mark_then_clear(tmp_path: Path) -> None:
    path = starting.mark(tmp_path)
    assert path == tmp_path / starting.FILENAME
    assert path.read_text() == f"{os.getpid()}\n"
    assert starting.starting(tmp_path) is True
    starting.clear(tmp_path)
    assert not path.exists()
    assert starting.starting(tmp_path) is False


def test_clear_leaves_another_process_file(tmp_path: Path) -> None:
    path = tmp_path / starting.FILENAME
    path.write_text(f"{os.getppid()}\n")
    starting.clear(tmp_path)
    assert path.exists()
    assert starting.starting(tmp_path) is True


def test_a_dead_pid_or_garbage_is_not_starting(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    (tmp_path / starting.FILENAME).write_text(done.stdout)
    assert starting.starting(tmp_path) is False
    (tmp_path / starting.FILENAME).write_text("not a pid\n")
    assert starting.starting(tmp_path) is False


def test_mark_in_a_missing_directory_does_not_raise(tmp_path: Path) -> None:
    missing = tmp_path / "gone"
    assert starting.mark(missing) == missing / starting.FILENAME
    assert starting.starting(missing) is False
    starting.clear(missing)
