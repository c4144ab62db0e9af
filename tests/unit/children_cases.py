"""Cases for tests/unit/test_children.py, each run there in a pytest of its own (the file name
does not start with ``test_``, so the suite itself never collects it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PIDS = Path(os.environ.get("CHILDREN_CASE_PIDS", os.devnull))
SLEEPER = [sys.executable, "-c", "import time; time.sleep(600)"]


def orphan() -> int:
    """A process whose parent has exited (as a daemon started detached, or a demo's server
    when the demo is killed): its pid."""
    shell = subprocess.run(
        ["sh", "-c", '"$@" >/dev/null 2>&1 & echo $!', "sh", *SLEEPER],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(shell.stdout)


def test_a_child_gets_sigint_at_its_default() -> None:
    code = "import signal, sys; sys.exit(signal.getsignal(signal.SIGINT) is signal.SIG_IGN)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_fails_while_its_processes_run() -> None:
    child = subprocess.Popen(SLEEPER)
    PIDS.write_text(f"{child.pid} {orphan()}\n")
    raise AssertionError("failing on purpose, with a child and an orphan running")


def test_passes_but_leaves_a_process_running() -> None:
    PIDS.write_text(f"{orphan()}\n")
