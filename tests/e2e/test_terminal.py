"""What a person at a terminal sees: the live status line, errors printed once, and a daemon
that is still starting. Terminals are real ptys (``os.openpty``); scripts get pipes.

``MCPSUB_STATUS_DELAY_S=0`` shows the status line at once (by default it waits 1 s so that
quick commands never flicker); nothing here depends on how long anything takes.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli.human import ago, duration, error_text, listing, yes_no
from service.statusline import ERASE
from tests.support.cli import BIN, REPO_ROOT, CliResult, cli_env, run_cli
from tests.support.daemon import Daemon
from tests.support.lab import LabServer

URI = "test://review/status"
NOW = {"MCPSUB_STATUS_DELAY_S": "0"}


class Pty:
    """A pseudo-terminal whose output is collected on a thread until the child closes it."""

    def __init__(self) -> None:
        self.master, self.slave = os.openpty()
        self.chunks: list[bytes] = []
        self._thread = threading.Thread(target=self._read, daemon=True)

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:  # EIO: every writer closed its end
                return
            if not data:
                return
            self.chunks.append(data)

    def started(self) -> Pty:
        os.close(self.slave)  # the child holds its copy
        self._thread.start()
        return self

    def text(self) -> str:
        self._thread.join(10)
        os.close(self.master)
        return b"".join(self.chunks).decode(errors="replace")


def run_on_pty(
    program: str, *args: str, env: dict[str, str] | None = None, stdout_tty: bool = False
) -> tuple[CliResult, str]:
    """Run with stderr (and optionally stdout) on a pty; returns (result, terminal text)."""
    pty = Pty()
    proc = subprocess.Popen(
        [str(BIN / program), *args],
        env=cli_env(env),
        stdin=subprocess.DEVNULL,
        stdout=pty.slave if stdout_tty else subprocess.PIPE,
        stderr=pty.slave,
        cwd=str(REPO_ROOT),
    )
    pty.started()
    out, _ = proc.communicate(timeout=60)
    text = pty.text()
    return CliResult(proc.returncode, (out or b"").decode(), ""), text


@pytest.fixture
def review_lab() -> Iterator[LabServer]:
    with LabServer({"MCP_TEST_UPDATE_DELAY_SECONDS": "0.3"}) as lab:
        yield lab


# ---- the status line ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("program", "args"),
    [("mcpsubctl", ["probe"]), ("mcp-resource-subscriber", [])],
    ids=["probe", "drop-in"],
)
def test_status_line_on_a_terminal_shows_phase_and_is_erased(
    review_lab: LabServer, program: str, args: list[str]
) -> None:
    result, tty = run_on_pty(program, *args, "--url", review_lab.url, "--uri", URI, env=NOW)
    assert result.code == 0, tty
    assert f"{ERASE}listening on {URI} (acknowledged) 0 s" in tty
    assert f"{ERASE}discovering {review_lab.url}" in tty
    assert tty.endswith(ERASE), repr(tty[-80:])  # erased when done
    assert result.stdout.startswith("capabilities ")
    assert "\x1b" not in result.stdout


def test_quiet_turns_the_status_line_off(review_lab: LabServer) -> None:
    result, tty = run_on_pty(
        "mcpsubctl", "probe", "--url", review_lab.url, "--uri", URI, "--quiet", env=NOW
    )
    assert result.code == 0
    assert "\x1b" not in tty and "listening on" not in tty


@pytest.mark.parametrize("program", ["mcpsubctl", "mcp-resource-subscriber"])
def test_no_status_line_when_stderr_is_not_a_terminal(review_lab: LabServer, program: str) -> None:
    args = ["probe"] if program == "mcpsubctl" else []
    result = run_cli(program, *args, "--url", review_lab.url, "--uri", URI, env=NOW)
    assert result.code == 0
    assert "\x1b" not in result.stdout + result.stderr
    assert "listening on" not in result.stderr


def test_status_line_during_a_daemon_wait(review_lab: LabServer, tmp_path: Path) -> None:
    daemon = Daemon(tmp_path / "state").start()
    try:
        env = {**NOW, "MCPSUB_STATE_DIR": str(daemon.state_dir)}
        result, tty = run_on_pty(
            "mcpsubctl", "wait", "--url", review_lab.url, "--uri", URI, env=env
        )
        assert result.code == 0, tty
        assert f"{ERASE}waiting for an update of {URI} (mcpsubd)" in tty
        # Erased: by the end, or by the diagnostic printed over it on a clean line.
        after = tty[tty.rfind("(mcpsubd) ") :]
        assert ERASE in after and (tty.endswith(ERASE) or tty.endswith("\r\n")), repr(after)
    finally:
        daemon.stop()


def test_status_line_during_daemon_start_up(tmp_path: Path) -> None:
    pty = Pty()
    env = cli_env({**NOW, "MCPSUB_STATE_DIR": str(tmp_path / "state")})
    proc = subprocess.Popen(
        [str(BIN / "mcpsubd")], env=env, stdin=subprocess.DEVNULL, stdout=pty.slave,
        stderr=pty.slave,
    )  # fmt: skip
    pty.started()
    try:
        ready = run_cli(
            "mcpsubctl", "status", "--wait-ready", "--json",
            env={"MCPSUB_STATE_DIR": str(tmp_path / "state")},
        )  # fmt: skip
        assert ready.code == 0, ready
    finally:
        proc.terminate()
        proc.wait(20)
    tty = pty.text()
    assert f"{ERASE}mcpsubd: migrating" in tty
    assert "ready" in tty.split("mcpsubd: starting the API", 1)[1]


# ---- a daemon that is still starting --------------------------------------------------------
def test_a_command_right_after_mcpsubd_waits_for_its_socket(tmp_path: Path) -> None:
    state = tmp_path / "state"
    proc = subprocess.Popen(
        [str(BIN / "mcpsubd")], env=cli_env({"MCPSUB_STATE_DIR": str(state)}),
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        marker = state / "mcpsubd.starting"
        while not marker.exists():  # the daemon announces its start-up
            assert proc.poll() is None
        result = run_cli("mcpsubctl", "status", "--json", env={"MCPSUB_STATE_DIR": str(state)})
        assert result.code == 0, result
        assert result.json["ready"] is True
        assert not marker.exists()  # removed once the API listens
    finally:
        proc.terminate()
        proc.wait(20)


def test_a_stale_start_marker_does_not_make_clients_wait(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "mcpsubd.starting").write_text("999999999\n")  # no such process
    result = run_cli("mcpsubctl", "status", env={"MCPSUB_STATE_DIR": str(state)})
    assert result.code == 10
    assert "start the daemon" in result.stdout + result.stderr


def test_wait_ready_gives_up_with_daemon_unavailable(tmp_path: Path) -> None:
    result = run_cli(
        "mcpsubctl", "status", "--wait-ready", "--timeout-ms", "200",
        env={"MCPSUB_STATE_DIR": str(tmp_path / "state")},
    )  # fmt: skip
    assert result.code == 10
    assert "not ready within 200 ms" in result.stderr


def test_wait_ready_reads_the_token_a_tcp_daemon_writes_after_it_started(tmp_path: Path) -> None:
    """``status --wait-ready`` started before a TCP daemon finds no token; rather than 401
    for the whole wait (exit 3), it must read the token file again while it waits."""
    state = tmp_path / "state"
    env = {"MCPSUB_STATE_DIR": str(state)}
    with socket.socket() as listener:  # the daemon's port, held until the CLI polls it
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        waiter = subprocess.Popen(
            [str(BIN / "mcpsubctl"), "status", "--wait-ready", "--json", "--timeout-ms", "30000",
             "--api", f"http://127.0.0.1:{port}"],
            env=cli_env(env), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        listener.settimeout(30)
        polled, _ = listener.accept()  # the CLI has read (no) token and is polling now
        polled.close()
    assert not (state / "api.token").exists()
    daemon = subprocess.Popen(
        [str(BIN / "mcpsubd")],
        env=cli_env({**env, "MCPSUB_API": f"tcp://127.0.0.1:{port}"}),
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        out, err = waiter.communicate(timeout=40)
        assert waiter.returncode == 0, (waiter.returncode, out, err)
        assert json.loads(out)["ready"] is True
    finally:
        waiter.kill()
        daemon.terminate()
        daemon.wait(20)


# ---- errors on a terminal -------------------------------------------------------------------
def test_on_a_terminal_an_error_is_printed_once(tmp_path: Path) -> None:
    env = {"MCPSUB_STATE_DIR": str(tmp_path / "state")}
    result, tty = run_on_pty("mcpsubctl", "status", env=env, stdout_tty=True)
    assert result.code == 10
    assert "error-code" not in tty
    assert tty.count("the daemon is not reachable") == 1
    assert tty.count("hint: start the daemon") == 1
    _, with_lines = run_on_pty("mcpsubctl", "--lines", "status", env=env, stdout_tty=True)
    assert "error-code DAEMON_UNAVAILABLE" in with_lines
    piped = run_cli("mcpsubctl", "status", env=env)  # scripts keep their lines
    assert "error-code DAEMON_UNAVAILABLE" in piped.stdout


# ---- human units ----------------------------------------------------------------------------
def test_human_units() -> None:
    assert duration(701) == "11m41s"
    assert duration(5) == "5 s"
    assert duration(3 * 3600 + 300) == "3h05m"
    assert duration(3 * 86400) == "3d00h"
    assert duration(None) == "-"
    assert ago(100.0, now=102.4) == "2 s ago"
    assert ago(110.0, now=100.0) == "in 10 s"
    assert yes_no(True) == "yes" and yes_no(False) == "no" and yes_no(None) == "-"
    assert listing(["a", "b"]) == "a, b" and listing([]) == "-"
    assert error_text("NETWORK_ERROR", "refused") == "NETWORK_ERROR: refused"
    assert error_text(None, None) == "-"


def test_status_show_and_events_in_human_units(review_lab: LabServer, tmp_path: Path) -> None:
    daemon = Daemon(tmp_path / "state").start()
    try:
        empty = daemon.ctl("events")
        assert empty.code == 0 and empty.stdout == "no events\n"
        sub = daemon.ctl("subscribe", "--url", review_lab.url, "--uri", URI, "--json").json
        review_lab.wait_event("listen.acknowledged", timeout=20)
        status = daemon.ctl("status")
        assert status.code == 0
        first = status.stdout.splitlines()[0]
        assert first.startswith("mcpsubd ") and ": ready, up " in first
        assert "True" not in status.stdout and "uptime" not in status.stdout
        full = daemon.ctl("status", "--json").json
        assert isinstance(full["uptimeSeconds"], (int, float)) and full["ready"] is True
        shown = daemon.ctl("show", str(sub["subscriptions"][0]["id"]))
        assert shown.code == 0
        assert "[" not in shown.stdout.split("text:")[0]  # lists as lists, not reprs
        assert " ago (" in shown.stdout  # created: 0 s ago (2026-…)
    finally:
        daemon.stop()


def test_events_on_a_terminal_say_how_long_ago(review_lab: LabServer, tmp_path: Path) -> None:
    """A person at a terminal reads ``12 s ago``; a pipe or a file keeps the absolute time
    (it is read later), and ``--json`` is the same bytes either way."""
    daemon = Daemon(tmp_path / "state").start()
    try:
        daemon.ctl("subscribe", "--url", review_lab.url, "--uri", URI, "--no-wait")
        env = {"MCPSUB_STATE_DIR": str(daemon.state_dir)}
        date = re.compile(r"\b20\d\d-\d\d-\d\d \d\d:\d\d:\d\d\b")
        ago_re = re.compile(r"^1 {2}\d+ s ago {2}subscription\.created {2}" + re.escape(URI))

        # On a terminal: aligned columns under a header.
        _, tty = run_on_pty("mcpsubctl", "events", "--since", "0", env=env, stdout_tty=True)
        header, first, *rest = tty.replace("\r\n", "\n").splitlines()
        assert header.split() == ["ID", "WHEN", "TYPE", "URI", "REV", "DETAIL"], tty
        assert re.match(r"^1 +\d+ s ago +subscription\.created +" + re.escape(URI), first), tty
        starts = {line.index(URI) for line in [first, *rest] if URI in line}
        assert starts == {header.index("URI")}, tty  # every URI in the URI column
        assert not date.search(tty), tty
        piped = daemon.ctl("events", "--since", "0")
        assert piped.code == 0 and date.search(piped.stdout.splitlines()[0]), piped.stdout
        assert " ago" not in piped.stdout

        # --follow: the same rule for every line it prints.
        args = ("events", "--follow", "--since", "0", "--max-events", "1")
        _, followed = run_on_pty("mcpsubctl", *args, env=env, stdout_tty=True)
        assert ago_re.match(followed.strip()), followed
        assert date.search(daemon.ctl(*args).stdout), "a piped --follow keeps absolute times"

        # --json: byte-identical on a terminal and in a pipe, with the raw timestamps.
        json_args = ("events", "--since", "0", "--limit", "1", "--json")
        _, tty_json = run_on_pty("mcpsubctl", *json_args, env=env, stdout_tty=True)
        piped_json = daemon.ctl(*json_args).stdout
        assert tty_json.replace("\r\n", "\n") == piped_json
        assert isinstance(json.loads(piped_json)["events"][0]["createdAt"], (int, float))
    finally:
        daemon.stop()


def test_status_line_escapes_what_servers_and_users_put_in_a_phase() -> None:
    import io

    from service.statusline import StatusLine

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty = Tty()
    status = StatusLine.for_terminal(stream=tty)
    status._show_after = 0.0
    with status:
        status.phase("listening on test://x\x1b]0;owned\x07 (acknowledged)")
        while "listening" not in tty.getvalue():
            status.phase("listening on test://x\x1b]0;owned\x07 (acknowledged)")
    text = tty.getvalue()
    assert "\x07" not in text and "\x1b]" not in text
    assert "test://x\\x1b]0;owned\\x07" in text
    assert text.endswith(ERASE)


def test_the_wait_for_a_starting_daemon_is_bounded(tmp_path: Path) -> None:
    """A start marker naming a live process whose socket never appears: give up after the
    bound (5 s), as DAEMON_UNAVAILABLE, instead of waiting for ever."""
    state = tmp_path / "state"
    state.mkdir()
    (state / "mcpsubd.starting").write_text(f"{os.getpid()}\n")  # alive, but no daemon
    result = run_cli("mcpsubctl", "status", env={"MCPSUB_STATE_DIR": str(state)})
    assert result.code == 10
    assert "the daemon is not reachable" in result.stderr


def test_read_escapes_server_text_on_a_terminal_and_writes_it_raw_to_a_pipe(
    review_lab: LabServer, tmp_path: Path
) -> None:
    """``mcpsubctl read`` escapes a resource's escape sequences on a terminal, as every other
    command escapes server text. A pipe, a file and ``--raw`` keep
    the bytes as stored."""
    evil = "one\n\x1b]0;owned\x07\x1b[2Jtwo\u202e\n"
    uri = "test://terminal/evil"
    review_lab.control("PUT", "/lab/resources", json={"uri": uri, "text": evil}).raise_for_status()
    daemon = Daemon(tmp_path / "state").start()
    try:
        assert daemon.ctl("subscribe", "--url", review_lab.url, "--uri", uri).code == 0
        env = {"MCPSUB_STATE_DIR": str(daemon.state_dir)}
        result, tty = run_on_pty("mcpsubctl", "read", "--uri", uri, env=env, stdout_tty=True)
        assert result.code == 0, tty
        assert "\x1b" not in tty and "\x07" not in tty and "\u202e" not in tty, repr(tty)
        shown = tty.replace("\r\n", "\n")
        assert shown == "one\n\\x1b]0;owned\\x07\\x1b[2Jtwo\\u202e\n\n", repr(shown)
        _, raw = run_on_pty("mcpsubctl", "read", "--uri", uri, "--raw", env=env, stdout_tty=True)
        assert "\x1b]0;owned\x07" in raw
        piped = daemon.ctl("read", "--uri", uri)
        assert piped.code == 0 and piped.stdout == evil + "\n"
    finally:
        daemon.stop()
