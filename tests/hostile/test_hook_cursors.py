"""``mcpsubctl hook``'s cursor files attacked: what is planted at a cursor's name (a FIFO, a
link, a directory) never hangs a prompt or writes through a link; concurrent hooks of one
session tell a change once; session ids that are not strings keep their own cursors.

The hook runs before every prompt and promises an answer within about 2 s (docs/agents.md),
so every run here has a deadline well above that and below a hang."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

from tests.hostile.helpers import put, subscribe, wait_text
from tests.support.cli import BIN, REPO_ROOT, cli_env
from tests.support.daemon import Daemon

SLOW = {"MCP_TEST_UPDATE_DELAY_SECONDS": "600"}
PROMISE_S = 10.0
"""The hook's own bound is 2 s for all it waits for (stdin, a lock, the daemon), plus the
interpreter's start on a machine loaded by parallel tests (load 16 on 2 cores seen); a hang is far past."""


def run_hook(state: Path, payload: Any, cwd: Path = REPO_ROOT) -> subprocess.CompletedProcess[str]:
    started = time.monotonic()
    try:
        result = subprocess.run(
            [str(BIN / "mcpsubctl"), "hook", "claude-code"],
            input=json.dumps(payload),
            env=cli_env({"MCPSUB_STATE_DIR": str(state)}),
            capture_output=True,
            text=True,
            timeout=20,
            cwd=str(cwd),
        )
    except subprocess.TimeoutExpired:
        raise AssertionError("the hook hung: the agent's prompt would wait for ever") from None
    assert time.monotonic() - started < PROMISE_S
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    return result


def prompt(session: object) -> dict[str, Any]:
    return {"session_id": session, "hook_event_name": "UserPromptSubmit"}


def changed(d: Daemon, lab_server_factory: Any) -> Any:
    """A daemon with one subscription; returns a function that makes one change."""
    lab = lab_server_factory(SLOW)
    put(lab, "test://c", "v0")
    subscribe(d, lab.url, "test://c")
    wait_text(d, "test://c", "v0")
    count = iter(range(1, 1000))

    def change() -> None:
        text = f"v{next(count)}"
        put(lab, "test://c", text)
        wait_text(d, "test://c", text)

    return change


def test_a_fifo_at_a_cursor_never_hangs_the_prompt(daemon_factory) -> None:
    d = daemon_factory()
    hooks = d.state_dir / "hooks"
    hooks.mkdir(mode=0o700)
    os.mkfifo(hooks / "claude-code--fifo")
    first = run_hook(d.state_dir, prompt("fifo"))
    assert first.stdout == ""
    assert (hooks / "claude-code--fifo").is_file(), "the FIFO's name now holds a real cursor"
    assert (hooks / "claude-code--fifo").read_text().strip().isdigit()


def test_a_link_at_a_cursor_or_a_temporary_name_never_writes_its_target(
    daemon_factory, lab_server_factory, tmp_path: Path
) -> None:
    d = daemon_factory()
    change = changed(d, lab_server_factory)
    hooks = d.state_dir / "hooks"
    victim = tmp_path / "precious"
    victim.write_text("precious data\n")
    # At every name the old temporary write could pick (<key>.<pid>.tmp for the next 1,500
    # pids: the test's own processes take a few) while a session goes on and has a
    # change to record...
    assert run_hook(d.state_dir, prompt("link")).stdout == ""
    change()
    last_pid = int(Path("/proc/sys/kernel/ns_last_pid").read_text())
    for pid in range(last_pid + 1, last_pid + 1500):
        (hooks / f"claude-code--link.{pid}.tmp").symlink_to(victim)
    assert "revision 2" in run_hook(d.state_dir, prompt("link")).stdout
    assert victim.read_text() == "precious data\n"
    # ... and at a new session's cursor itself.
    (hooks / "claude-code--new").symlink_to(victim)
    run_hook(d.state_dir, prompt("new"))
    assert victim.read_text() == "precious data\n"
    cursor = hooks / "claude-code--new"
    assert not cursor.is_symlink() and cursor.read_text().strip().isdigit()
    # Old temporaries are pruned with what is left of a new session's budget (2 s for the
    # whole hook): on a loaded machine the next new sessions go on with the rest.
    for n in range(20):
        if not [name for name in os.listdir(hooks) if name.endswith(".tmp")]:
            break
        run_hook(d.state_dir, prompt(f"pruning-{n}"))
    assert not [n for n in os.listdir(hooks) if n.endswith(".tmp")], "old temporaries are pruned"

    # A hard link to a file of the user's is not a cursor either.
    other = tmp_path / "also-precious"
    other.write_text("mine\n")
    os.link(other, hooks / "claude-code--hard")
    run_hook(d.state_dir, prompt("hard"))
    assert other.read_text() == "mine\n"


def test_a_directory_or_a_linked_hooks_dir_is_refused_in_one_line(
    daemon_factory, tmp_path: Path
) -> None:
    d = daemon_factory()
    hooks = d.state_dir / "hooks"
    (hooks / "claude-code--dir").mkdir(parents=True, mode=0o700)
    refused = run_hook(d.state_dir, prompt("dir"))
    assert refused.stdout == "" and "cannot use the cursor" in refused.stderr
    assert refused.stderr.count("\n") == 1

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    (state / "hooks").symlink_to(elsewhere)
    (state / "api.sock").symlink_to(d.socket_path)
    linked = run_hook(state, prompt("s"))
    assert linked.stdout == "" and "is not a directory" in linked.stderr
    assert os.listdir(elsewhere) == []


def test_concurrent_hooks_of_one_session_tell_a_change_once(
    daemon_factory, lab_server_factory
) -> None:
    d = daemon_factory()
    change = changed(d, lab_server_factory)
    assert run_hook(d.state_dir, prompt("busy")).stdout == ""
    change()
    procs = [
        subprocess.Popen(
            [str(BIN / "mcpsubctl"), "hook", "claude-code"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=cli_env({"MCPSUB_STATE_DIR": str(d.state_dir)}),
        )
        for _ in range(10)
    ]
    for p in procs:  # all ten are started and reading stdin: they go at once
        assert p.stdin is not None
        p.stdin.write(json.dumps(prompt("busy")))
    for p in procs:
        assert p.stdin is not None
        p.stdin.close()
    for p in procs:
        p.wait(timeout=30)
    outputs = [(p.stdout.read(), p.stderr.read()) for p in procs]  # type: ignore[union-attr]
    told = [out for out, _ in outputs if out]
    assert len(told) == 1, [err for _, err in outputs]
    assert "test://c is now revision 2" in told[0]
    assert all(p.returncode == 0 for p in procs)


def test_session_ids_that_are_not_strings_keep_their_own_cursors(
    daemon_factory, lab_server_factory, tmp_path: Path
) -> None:
    d = daemon_factory()
    change = changed(d, lab_server_factory)
    ids: list[object] = [123, None, "123", True, [1]]
    for n, session in enumerate(ids):  # each the first of its own workspace: starts at now
        payload = {**prompt(session), "cwd": str(tmp_path / f"w{n}")}
        assert run_hook(d.state_dir, payload).stdout == ""
    change()
    for n, session in enumerate(ids):
        payload = {**prompt(session), "cwd": str(tmp_path / f"w{n}")}
        shown = run_hook(d.state_dir, payload).stdout
        assert "test://c is now revision 2" in shown, session
