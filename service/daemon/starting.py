"""``<state dir>/mcpsubd.starting``: "a daemon is starting here", for clients that came early.

``mcpsubd`` followed at once by ``mcpsubctl status`` would otherwise race the start-up
(migrations, links, binding the socket) and say ``DAEMON_UNAVAILABLE``. The daemon writes
this file (its pid) before it starts and removes it once the API listens (or when it exits);
a client whose connect fails waits a bounded while (:data:`CLIENT_WAIT_S`) only while the
file names a live process, so a daemon that is simply not running still fails at once.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

FILENAME = "mcpsubd.starting"
CLIENT_WAIT_S = 5.0


def mark(state_dir: Path) -> Path:
    path = state_dir / FILENAME
    with contextlib.suppress(OSError):
        path.write_text(f"{os.getpid()}\n")
    return path


def clear(state_dir: Path) -> None:
    path = state_dir / FILENAME
    with contextlib.suppress(OSError):
        if path.read_text().strip() == str(os.getpid()):
            path.unlink()


def starting(state_dir: Path) -> bool:
    """True while the file names a process that is alive."""
    try:
        pid = int((state_dir / FILENAME).read_text().strip())
    except (OSError, ValueError):
        return False
    try:
        os.kill(pid, 0)
    except PermissionError:
        return True  # alive, another user's
    except OSError:
        return False
    return True
