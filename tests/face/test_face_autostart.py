"""The daemon ``mcpsubctl mcp`` starts outlives the agent: it is nobody's descendant, so an
agent that signals its MCP server's whole process tree when a session ends (opencode walks
``/proc`` children and sends SIGTERM to each, about 1 s after the session) leaves it running.
Where a per-user service is installed, the face starts that instead.

Before, the daemon was the face's child in a new session (``start_new_session=True``): the
walk found it and it stopped with the agent."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sys
from pathlib import Path

from tests.face.stdio_peer import StdioPeer
from tests.support.cli import run_cli
from tests.support.poll import until
from tests.support.process import gone, stop_detached

AGENT = (
    sys.executable,
    "-c",
    "import subprocess, sys; sys.exit(subprocess.run(sys.argv[1:]).returncode)",
)
"""A stand-in agent: runs the face as its child, its stdio passed through."""


def parent_of(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])


def descendants(root: int) -> set[int]:
    """Every process under ``root``, found as opencode finds them: ``/proc``'s parent links."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (ppid := parent_of(int(entry))) is not None:
            children.setdefault(ppid, []).append(int(entry))
    found: set[int] = set()
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def started_pid(peer: StdioPeer) -> int:
    line = until("the face says it started mcpsubd",
                 lambda: next((s for s in peer.stderr if "started mcpsubd" in s), None))  # fmt: skip
    match = re.search(r"pid (\d+)", line)
    assert match is not None, line
    return int(match.group(1))


def test_the_daemon_survives_an_agent_that_signals_every_descendant(tmp_path: Path) -> None:
    state = tmp_path / "state"
    agent = StdioPeer(state, wrapper=AGENT)
    pid = None
    try:
        agent.request(0, "initialize", {"protocolVersion": "2025-11-25"})
        assert "result" in agent.answer(0, timeout=60)
        agent.request(1, "tools/call", {"name": "list_subscriptions", "arguments": {}})
        assert agent.answer(1, timeout=30)["result"]["isError"] is False
        pid = started_pid(agent)
        tree = descendants(agent.proc.pid)
        assert tree, "the face runs under the agent"
        assert pid not in tree, "the daemon is nobody's descendant"
        assert os.getsid(pid) != os.getsid(agent.proc.pid)

        # What opencode does when the session ends: SIGTERM to each descendant, and here the
        # whole process group too.
        for child in tree:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGTERM)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(agent.proc.pid, signal.SIGTERM)
        agent.proc.wait(30)
        until("the face ended", lambda: all(gone(p) for p in tree))

        assert not gone(pid), "the daemon keeps running"
        status = run_cli("mcpsubctl", "status", "--json", env={"MCPSUB_STATE_DIR": str(state)})
        assert status.code == 0, status.stderr
        assert not gone(pid)
        assert '"stopping"' not in (state / "mcpsubd.log").read_text(), "it had no SIGTERM"
    finally:
        agent.close()
        if pid is not None:
            stop_detached(pid)


def test_an_installed_user_service_is_started_instead(tmp_path: Path) -> None:
    """``systemctl --user start mcpsubd.service`` is what the face runs when the unit file is
    installed; a stand-in ``systemctl`` (no user manager runs here) starts the daemon as the
    unit would: its own state dir, its socket under ``$XDG_RUNTIME_DIR/mcpsubd``."""
    runtime = Path(tempfile_short())
    units = tmp_path / "units"
    units.mkdir()
    (units / "mcpsubd.service").write_text("[Service]\n")
    unit_state = tmp_path / "unit-state"
    fake = tmp_path / "bin"
    fake.mkdir()
    calls = tmp_path / "calls"
    bindir = Path(sys.executable).parent
    (fake / "systemctl").write_text(
        "#!/bin/sh\n"
        f'echo "$@" >> {calls}\n'
        f"mkdir -p {runtime}/mcpsubd\n"
        f"setsid {bindir}/mcpsubd run --state-dir {unit_state} "
        f"--api unix://{runtime}/mcpsubd/api.sock </dev/null >>{tmp_path}/unit.log 2>&1 &\n"
        f"echo $! > {tmp_path}/unit.pid\n"
    )
    (fake / "systemctl").chmod(0o755)
    env = {
        "MCPSUB_SERVICE_DIR": str(units),
        "MCPSUB_SERVICE_PLATFORM": "linux",
        "XDG_RUNTIME_DIR": str(runtime),
        "PATH": f"{fake}:{os.environ['PATH']}",
    }
    face = StdioPeer(tmp_path / "default-state", env=env)
    pid = None
    try:
        face.request(1, "tools/call", {"name": "list_subscriptions", "arguments": {}})
        answer = face.answer(1, timeout=60)
        assert answer["result"]["isError"] is False, (answer, face.stderr)
        assert calls.read_text().split() == ["--user", "start", "mcpsubd.service"]
        assert any("started the installed service" in line for line in face.stderr)
        assert not (tmp_path / "default-state" / "api.sock").exists(), "no second daemon"
        pid = int((tmp_path / "unit.pid").read_text())
    finally:
        face.close()
        if pid is not None:
            stop_detached(pid)
        for line in face.stderr:  # a daemon of its own, had the face not used the unit
            if match := re.search(r"started mcpsubd \(pid (\d+)", line):
                stop_detached(int(match.group(1)))
        import shutil

        shutil.rmtree(runtime, ignore_errors=True)


def tempfile_short() -> str:
    import tempfile

    return tempfile.mkdtemp(prefix="rt", dir="/tmp")
