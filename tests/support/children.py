"""The processes a test run starts: SIGINT as a terminal would give it, stopped when a test
fails, and none left when the run ends.

A shell that starts ``make test`` in the background (``nohup make test &``, a script, cron)
hands it SIGINT *ignored*, and an ignored signal stays ignored across ``fork`` and ``exec``:
every CLI the tests then Ctrl-C would ignore it, and the tests that check Ctrl-C fail after
their timeouts, leaving the processes running. :func:`sigint_at_default` gives the test
process Python's own SIGINT handler instead; a caught signal is reset to its default by
``exec``, so every child, however it is started, gets SIGINT the way a terminal gives it.

The pytest process (each xdist worker) is made a child subreaper on Linux, so a grandchild
whose parent dies (a demo's daemon when the demo is killed, a daemon started detached)
becomes its child instead of init's and is still found. :func:`descendants` lists them all,
:func:`stop` ends them (SIGTERM, then SIGKILL) and reaps what it can.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

STOP_GRACE_S = 5.0
"""SIGTERM first; what still runs after this gets SIGKILL."""


def sigint_at_default() -> None:
    """Undo an inherited "SIGINT ignored" in this process (and so in every child it starts).

    Only from the main thread (``signal.signal`` refuses others); a no-op when SIGINT is not
    ignored, so an interactive run keeps whatever handler it has."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def become_subreaper() -> bool:
    """Linux ``PR_SET_CHILD_SUBREAPER``: orphaned descendants are re-parented to us."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(36, 1, 0, 0, 0) == 0)  # PR_SET_CHILD_SUBREAPER = 36
    except (OSError, AttributeError):
        return False


# ---- who is there ---------------------------------------------------------------------------
def _state(pid: int) -> str | None:
    """The process state letter (``Z`` for a zombie), None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rfind(")") + 2 :][:1] or None


def _children_linux(pid: int) -> list[int]:
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError):
                found += [
                    int(c) for c in Path(f"/proc/{pid}/task/{task}/children").read_text().split()
                ]
    return found


def _tree_ps(root: int) -> dict[int, tuple[int, str]]:
    """Elsewhere (macOS): ``ps`` gives pid, parent and state of every process."""
    out = subprocess.run(
        ["ps", "-A", "-o", "pid=", "-o", "ppid=", "-o", "stat="],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    table: dict[int, tuple[int, str]] = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[0].isdigit() and parts[1].isdigit():
            table[int(parts[0])] = (int(parts[1]), parts[2][:1])
    return table


def descendants(root: int | None = None) -> set[int]:
    """Every live (not zombie) process below ``root`` (default: this one)."""
    root = os.getpid() if root is None else root
    found: set[int] = set()
    if Path(f"/proc/{root}/task").is_dir():
        todo = [root]
        while todo:
            for child in _children_linux(todo.pop()):
                if child not in found:
                    found.add(child)
                    todo.append(child)
        return {pid for pid in found if _state(pid) not in (None, "Z")}
    table = _tree_ps(root)
    parents: dict[int, list[int]] = {}
    for pid, (ppid, _state_letter) in table.items():
        parents.setdefault(ppid, []).append(pid)
    todo = [root]
    while todo:
        for child in parents.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return {pid for pid in found if table[pid][1] != "Z"}


def describe(pid: int) -> str:
    """``pid: command line`` (what ``ps`` would show), for a failure message."""
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        args = subprocess.run(
            ["ps", "-o", "args=", "-p", str(pid)], capture_output=True, text=True, check=False
        ).stdout.strip()
    return f"{pid}: {args[:300] or '?'}"


# ---- stopping --------------------------------------------------------------------------------
def reap_zombies() -> None:
    """Collect the exit status of our children that have exited (re-parented orphans
    included), so they leave the process table."""
    for pid in _children_linux(os.getpid()) if Path("/proc/self/task").is_dir() else []:
        if _state(pid) == "Z":
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)


def _alive(pid: int) -> bool:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # our child: reap it once it exits
    state = _state(pid)
    if state is not None:
        return state != "Z"
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stop(pids: set[int], grace: float = STOP_GRACE_S) -> list[str]:
    """SIGTERM each of ``pids``, SIGKILL what is still running after ``grace`` seconds, and
    reap the ones that are our children. Returns their descriptions (taken before)."""
    described = [describe(pid) for pid in sorted(pids)]
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    left = set(pids)
    while left and time.monotonic() < deadline:
        left = {pid for pid in left if _alive(pid)}
        if left:
            time.sleep(0.05)  # no event tells us another process's exit: poll it
    for pid in left:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 2.0  # SIGKILL is not refused, only not instant
    while left and time.monotonic() < deadline:
        left = {pid for pid in left if _alive(pid)}
        if left:
            time.sleep(0.01)
    reap_zombies()
    return described
