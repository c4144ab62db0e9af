"""``mcpsubctl tail`` and ``mcpsubctl hook`` as agents run them: real CLI subprocesses, the real
daemon (SQLite and PostgreSQL), real lab servers."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.daemon.test_daemon import BOTH_BACKENDS, SLOW, put, subscribe, wait_text
from tests.support.cli import BIN, REPO_ROOT, cli_env, spawn_cli
from tests.support.daemon import Daemon, tcp_api_env
from tests.unit.cli.test_agent_hook import assert_documented_shape


class Lines:
    """A running CLI's stdout, line by line, each awaited with a deadline (no sleeps)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.queue.put(line.rstrip("\n"))
        self.queue.put(None)

    def next(self, timeout: float = 15.0) -> str:
        try:
            line = self.queue.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError("no line from the CLI in time") from None
        assert line is not None, "the CLI ended: " + (self.stderr() or "")
        return line

    def none_pending(self) -> bool:
        return self.queue.empty()

    def stderr(self) -> str:
        if self.proc.poll() is None:
            return ""
        assert self.proc.stderr is not None
        return self.proc.stderr.read()

    def interrupt(self) -> tuple[int, str]:
        """Ctrl-C, as a terminal sends it; (exit code, stderr)."""
        self.proc.send_signal(signal.SIGINT)
        _, err = self.proc.communicate(timeout=15)
        return self.proc.returncode, err


def fields(line: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in line.split(" "))


def tail(d: Daemon, *args: str) -> Lines:
    return Lines(spawn_cli("mcpsubctl", "tail", *args, env={"MCPSUB_STATE_DIR": str(d.state_dir)}))


def hook(
    d: Daemon | Path, agent: str, payload: Any, *extra: str, cwd: Path = REPO_ROOT
) -> subprocess.CompletedProcess[str]:
    state = d.state_dir if isinstance(d, Daemon) else d
    return subprocess.run(
        [str(BIN / "mcpsubctl"), "hook", agent, *extra],
        input=payload if isinstance(payload, str) else json.dumps(payload),
        env=cli_env({"MCPSUB_STATE_DIR": str(state)}),
        capture_output=True,
        text=True,
        timeout=30,
        cwd=str(cwd),
    )


def test_tail_prints_each_change_at_once_filters_and_exits_130(
    lab_server_factory, daemon_factory
) -> None:
    lab = lab_server_factory(SLOW)
    for uri in ("test://t/a", "test://t/b", "test://other"):
        put(lab, uri, "v1")
    d = daemon_factory()
    for uri in ("test://t/a", "test://t/b", "test://other"):
        subscribe(d, lab.url, uri)
        wait_text(d, uri, "v1")
    # "From now" is the newest event when tail starts; the test names that point itself so
    # its first change cannot land before a tail has read it.
    now = str(d.api("GET", "/v1/status").json()["lastEventId"])
    everything = tail(d, "--after", now)
    pattern = tail(d, "--uri", "test://t/*", "--json", "--after", now)
    put(lab, "test://other", "v2")
    first = fields(everything.next())
    assert first["uri"] == "test://other" and first["revision"] == "2"
    put(lab, "test://t/a", "v2\x1b[31m")
    second = fields(everything.next())
    assert second["uri"] == "test://t/a" and int(second["event"]) > int(first["event"])
    shown = json.loads(pattern.next())
    assert shown["uri"] == "test://t/a" and shown["type"] == "resource.updated"
    assert shown["id"] == int(second["event"]), "test://other never matched the pattern"
    assert everything.none_pending() and pattern.none_pending()

    code, err = everything.interrupt()
    assert code == 130 and "Traceback" not in err
    code, err = pattern.interrupt()
    assert code == 130 and "Traceback" not in err


def test_tail_summary_carries_the_first_changed_line_as_quoted_server_data(
    lab_server_factory, daemon_factory
) -> None:
    """A Monitor line that says only ``event=… uri=… revision=… server=…`` makes the model
    call ``read`` to learn whether the change mattered. ``--summary`` adds the first changed line, bounded, quoted and escaped, on the same single line."""
    lab = lab_server_factory(SLOW)
    put(lab, "test://s", "status: open\nowner: ann\n")
    d = daemon_factory()
    subscribe(d, lab.url, "test://s")
    wait_text(d, "test://s", "status: open\nowner: ann\n")
    lines = tail(d, "--summary", "--after", "0")
    line = lines.next()
    assert line.endswith(' first_change(server data)="+status: open"'), line
    put(lab, "test://s", "status: reviewed\nowner: ann\n")
    line = lines.next()
    assert line.startswith("event=") and " revision=2 " in line
    assert line.endswith(' first_change(server data)="+status: reviewed"'), line
    hostile = 'say "done"\x1b[2J \u200b' + "x" * 300 + "\nowner: ann\n"
    put(lab, "test://s", hostile)
    line = lines.next()
    summary = line.split(" first_change(server data)=", 1)[1]
    assert summary.startswith('"+say \\"done\\"\\x1b[2J \\u200bxxx') and summary.endswith('…"')
    assert "\x1b" not in line and "\u200b" not in line and len(summary) < 140, line
    as_json = tail(d, "--summary", "--json", "--after", "0")
    first = json.loads(as_json.next())
    assert first["firstChange"] == "+status: open" and first["revision"] == 1
    assert lines.none_pending()
    for running in (lines, as_json):
        code, err = running.interrupt()
        assert code == 130 and "Traceback" not in err


@BOTH_BACKENDS
def test_tail_resumes_after_a_daemon_restart(lab_server_factory, daemon_factory, tmp_path) -> None:
    lab = lab_server_factory(SLOW)
    put(lab, "test://r", "r1")
    state = tmp_path / "state"
    d = daemon_factory(state)
    subscribe(d, lab.url, "test://r")
    wait_text(d, "test://r", "r1")
    lines = tail(d, "--after", "0")
    assert fields(lines.next())["revision"] == "1"  # --after 0 replays the history first
    put(lab, "test://r", "r2")
    assert fields(lines.next())["revision"] == "2"

    assert d.stop() == 0
    put(lab, "test://r", "r3 (while the daemon was down)")
    d2 = daemon_factory(state)
    wait_text(d2, "test://r", "r3 (while the daemon was down)")
    put(lab, "test://r", "r4")
    seen = [fields(lines.next()) for _ in range(2)]
    assert [s["revision"] for s in seen] == ["3", "4"], "nothing missed, nothing repeated"
    events = d2.api("GET", "/v1/events", params={"type": "resource.updated"}).json()["events"]
    assert [str(e["id"]) for e in events[-2:]] == [s["event"] for s in seen]
    assert lines.none_pending()
    code, err = lines.interrupt()
    assert code == 130 and "retrying" in err and "the daemon is back" in err
    assert "Traceback" not in err
    # Not "talking to the daemon failed: bad chunk size line": the reader's words, not the cause.
    assert "the daemon went away" in err and "chunk" not in err, err


def test_tail_errors(tmp_path: Path) -> None:
    env = cli_env({"MCPSUB_STATE_DIR": str(tmp_path / "nothing-here")})
    result = subprocess.run(
        [str(BIN / "mcpsubctl"), "tail"], env=env, capture_output=True, text=True
    )
    assert result.returncode == 10 and "error-code DAEMON_UNAVAILABLE" in result.stdout
    assert "mcpsubd --state-dir" in result.stderr
    for bad in (["--after", "-1"], ["--after", "x"]):
        result = subprocess.run(
            [str(BIN / "mcpsubctl"), "tail", *bad], env=env, capture_output=True, text=True
        )
        assert result.returncode == 2 and "not an event id" in result.stderr


AGENT_EVENTS = [
    ("claude-code", "UserPromptSubmit"),
    ("claude-code", "SessionStart"),
    ("codex", "UserPromptSubmit"),
    ("codex", "SessionStart"),
    ("gemini", "BeforeAgent"),
    ("gemini", "SessionStart"),
]


@BOTH_BACKENDS
def test_hook_reports_each_change_once_per_session(lab_server_factory, daemon_factory) -> None:
    lab = lab_server_factory(SLOW)
    put(lab, "test://h", "h1")
    d = daemon_factory()
    subscribe(d, lab.url, "test://h")
    wait_text(d, "test://h", "h1")
    sessions = {agent + event: {"session_id": f"s-{agent}-{event}", "hook_event_name": event}
                for agent, event in AGENT_EVENTS}  # fmt: skip
    for agent, event in AGENT_EVENTS:
        first = hook(d, agent, sessions[agent + event])
        assert (first.returncode, first.stdout) == (0, ""), "a new session starts at now"
    hooks = d.state_dir / "hooks"
    assert stat.S_IMODE(hooks.stat().st_mode) == 0o700
    assert {stat.S_IMODE(p.stat().st_mode) for p in hooks.iterdir()} == {0o600}

    put(lab, "test://h", "h2 \x1b[2J\u202e")
    wait_text(d, "test://h", "h2 \x1b[2J\u202e")
    put(lab, "test://h", "h3")
    wait_text(d, "test://h", "h3")
    for agent, event in AGENT_EVENTS:
        shown = hook(d, agent, sessions[agent + event])
        assert shown.returncode == 0 and shown.stderr == ""
        output = json.loads(shown.stdout)
        assert_documented_shape(agent, event, output)
        context = output["hookSpecificOutput"]["additionalContext"]
        assert "2 resource changes" in context
        assert "test://h is now revision 3" in context and "2 changes" in context
        again = hook(d, agent, sessions[agent + event])
        assert (again.returncode, again.stdout) == (0, ""), "each change is told once"

    other = hook(d, "claude-code", {"session_id": "late", "hook_event_name": "UserPromptSubmit"})
    assert other.stdout == ""


def test_a_new_session_hears_what_changed_since_the_previous_one_in_its_workspace(
    lab_server_factory, daemon_factory, tmp_path: Path
) -> None:
    """One-shot runs (``claude -p``, ``codex exec``): each is a new session with one prompt."""
    lab = lab_server_factory(SLOW)
    put(lab, "test://ws", "w1")
    d = daemon_factory()
    subscribe(d, lab.url, "test://ws")
    wait_text(d, "test://ws", "w1")
    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir()
    there.mkdir()

    def start(agent: str, session: str, cwd: Path, *, in_payload: bool = True) -> str:
        payload = {"session_id": session, "hook_event_name": "SessionStart"}
        if in_payload:
            payload["cwd"] = str(cwd)
        result = hook(d, agent, payload, cwd=cwd if not in_payload else REPO_ROOT)
        assert result.returncode == 0 and result.stderr == "", result.stderr
        return result.stdout

    # The first runs: each agent and workspace starts at "now".
    assert start("claude-code", "run-1", here) == ""
    assert start("claude-code", "there-1", there) == ""
    assert start("codex", "codex-1", here, in_payload=False) == "", "cwd: the hook's own"

    put(lab, "test://ws", "w2")
    wait_text(d, "test://ws", "w2")
    shown = start("claude-code", "run-2", here)
    output = json.loads(shown)
    assert_documented_shape("claude-code", "SessionStart", output)
    context = output["hookSpecificOutput"]["additionalContext"]
    assert "1 resource change since this agent's previous session in this workspace" in context
    assert "test://ws is now revision 2" in context
    later = hook(d, "claude-code", {"session_id": "run-2", "hook_event_name": "UserPromptSubmit",
                                    "cwd": str(here)})  # fmt: skip
    assert later.stdout == "", "then the session goes on from its own cursor"
    assert start("claude-code", "run-3", here) == "", "the next run does not hear it again"
    again = start("claude-code", "there-2", there)
    assert "test://ws is now revision 2" in again, "another workspace keeps its own cursor"
    codex = start("codex", "codex-2", here, in_payload=False)
    assert "test://ws is now revision 2" in codex, "another agent keeps its own cursor"

    # A session that goes on moves its workspace's cursor too: a run after it hears nothing.
    put(lab, "test://ws", "w3")
    wait_text(d, "test://ws", "w3")
    prompt = hook(d, "claude-code", {"session_id": "run-3", "hook_event_name": "UserPromptSubmit",
                                     "cwd": str(here)})  # fmt: skip
    assert "revision 3" in json.loads(prompt.stdout)["hookSpecificOutput"]["additionalContext"]
    assert start("claude-code", "run-4", here) == ""


def test_hook_never_blocks_a_prompt(tmp_path: Path, daemon_factory) -> None:
    nowhere = tmp_path / "no-daemon"
    payload = {"session_id": "s1", "hook_event_name": "UserPromptSubmit"}
    down = hook(nowhere, "claude-code", payload)
    assert down.returncode == 0 and down.stdout == ""
    assert down.stderr.count("\n") == 1 and "not reachable" in down.stderr
    d = daemon_factory()
    for bad in ("not json", "[1, 2]", "{" * 100_000, "x" * (2 << 20)):
        result = hook(d, "codex", bad)
        assert (result.returncode, result.stdout) == (0, ""), bad[:20]
        assert result.stderr.startswith("mcpsubctl hook: ") and "Traceback" not in result.stderr
    odd_event = hook(d, "gemini", {"session_id": "s", "hook_event_name": "BeforeTool"})
    assert odd_event.returncode == 0 and "cannot take context" in odd_event.stderr
    usage = hook(d, "cursor", payload)
    assert usage.returncode == 1 and "claude-code, codex, gemini" in usage.stderr
    # An odd session id never names a path outside the cursor directory.
    hook(d, "claude-code", {"session_id": "../../escape", "hook_event_name": "UserPromptSubmit"})
    names = [n for n in os.listdir(d.state_dir / "hooks") if not n.startswith("ws-")]
    assert names and all(n.startswith("claude-code--h-") for n in names)

    # Through the full parser (a global flag first), the same command does the same.
    via_parser = subprocess.run(
        [str(BIN / "mcpsubctl"), "--api", f"unix://{d.socket_path}", "hook", "claude-code"],
        input=json.dumps({"session_id": "p"}),
        env=cli_env({"MCPSUB_STATE_DIR": str(d.state_dir)}),
        capture_output=True,
        text=True,
    )
    assert (via_parser.returncode, via_parser.stdout, via_parser.stderr) == (0, "", "")
    assert (d.state_dir / "hooks" / "claude-code--p").exists()
    assert "additionalContext" in hook(d, "codex", "", "--help").stdout

    # With nothing new, the hook loads no module an interpreter does not load anyway, but
    # its own, the state-path rule, the answers' shapes and two C modules: its start-up budget is twice a bare
    # interpreter.
    traced = subprocess.run(
        [sys.executable, "-X", "importtime", str(BIN / "mcpsubctl"), "hook", "claude-code"],
        input=json.dumps({"session_id": "p"}),
        env=cli_env({"MCPSUB_STATE_DIR": str(d.state_dir)}),
        capture_output=True,
        text=True,
    )
    assert traced.returncode == 0 and traced.stdout == ""
    loaded = {line.split("|")[-1].strip() for line in traced.stderr.splitlines() if "|" in line}
    bare = subprocess.run(  # the same environment: tests/support/shims' sitecustomize too
        [sys.executable, "-X", "importtime", "-c", "pass"],
        env=cli_env({"MCPSUB_STATE_DIR": str(d.state_dir)}),
        capture_output=True,
        text=True,
    )
    baseline = {line.split("|")[-1].strip() for line in bare.stderr.splitlines() if "|" in line}
    assert loaded - baseline - {"import time:"} <= {
        "__future__", "mcpsub", "cli", "cli.entry", "cli.agent_hook", "_json", "_socket",
        "service", "service._version", "service.statepaths",  # the one rule: os and sys only
        "service.localclient",  # the one client of the local API: _socket and statepaths
        "service.apishapes",  # what an answer must look like: no imports
    }, loaded - baseline  # fmt: skip


def test_hook_over_tcp_with_the_token(daemon_factory) -> None:
    d = daemon_factory(env=tcp_api_env())
    assert d.tcp_url is not None
    payload = {"session_id": "tcp", "hook_event_name": "BeforeAgent"}
    first = hook(d, "gemini", payload, "--api", d.tcp_url)
    assert (first.returncode, first.stdout, first.stderr) == (0, "", "")
    assert (d.state_dir / "hooks" / "gemini--tcp").read_text().strip().isdigit()
    wrong = subprocess.run(
        [str(BIN / "mcpsubctl"), "hook", "gemini", "--api", d.tcp_url],
        input=json.dumps(payload),
        env=cli_env({"MCPSUB_STATE_DIR": str(d.state_dir), "MCPSUB_API_TOKEN": "not-it"}),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert (wrong.returncode, wrong.stdout) == (0, "")
    assert "HTTP 401 API_TOKEN_REQUIRED" in wrong.stderr
    assert d.token not in wrong.stderr + wrong.stdout and "not-it" not in wrong.stderr


class HostileApi:
    """A unix socket that answers every connection with ``reply`` (or with nothing)."""

    def __init__(self, path: Path, reply: bytes | None) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        self.sock.listen(8)
        self.reply = reply
        self.held: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)
            if self.reply == b"trickle":
                threading.Thread(target=self._trickle, args=(conn,), daemon=True).start()
            elif self.reply is not None:
                with contextlib.suppress(OSError):
                    conn.recv(65536)  # the request
                    conn.sendall(self.reply)
                    conn.close()

    def _trickle(self, conn: socket.socket) -> None:
        """One byte of a never-ending answer every 0.2 s: each recv succeeds."""
        with contextlib.suppress(OSError):
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\n")
            while True:
                conn.sendall(b"X")
                time.sleep(0.2)  # the attacker's pace

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


def test_hook_shows_a_servers_invisible_characters(tmp_path: Path) -> None:
    """What a server named (a URI, its URL) reaches the agent's prompt through the hook: a
    zero-width space, a tag character or a word joiner is escaped, never passed on."""
    page = {
        "events": [{"id": 6, "uri": "test://a\u200bb\U000e0041", "revision": 2,
                    "serverUrl": "http://127.0.0.1:1/m\u2060cp", "type": "resource.updated"}],
        "nextAfter": 6,
    }  # fmt: skip
    body = json.dumps(page).encode()
    reply = b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)
    server = HostileApi(tmp_path / "api.sock", reply)
    (tmp_path / "hooks").mkdir(mode=0o700)
    (tmp_path / "hooks" / "codex--s").write_text("5\n")
    try:
        result = hook(tmp_path, "codex", {"session_id": "s", "hook_event_name": "SessionStart"})
    finally:
        server.close()
    assert result.returncode == 0, result.stderr
    context = json.loads(result.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "test://a\\u200bb\\U000e0041" in context and "m\\u2060cp" in context, context
    assert not {"\u200b", "\U000e0041", "\u2060"} & set(context)
    assert (tmp_path / "hooks" / "codex--s").read_text() == "6\n"


@pytest.mark.parametrize(
    ("reply", "said"),
    [
        (None, "did not answer within 2 s"),  # never answers: the 2 s bound
        (b"trickle", "did not answer within 2 s"),  # answers forever, slowly: the same bound
        (b"HTTP/1.1 200 OK\r\n\r\n" + b"x" * (5 << 20), "too large"),  # 5 MiB: the size bound
        (b"SSH-2.0-OpenSSH\r\n\r\n", "not HTTP"),
        (b"HTTP/1.1 200 OK\r\n\r\n[1, 2]", "HTTP 200"),
        (b'HTTP/1.1 500 X\r\n\r\n{"errorCode": "\\u001b[2JEVIL"}', "HTTP 500 \\x1b[2JEVIL"),
    ],
    ids=["silent", "trickle", "huge", "not-http", "not-an-object", "escape"],
)
def test_hook_survives_a_hostile_api(tmp_path: Path, reply: bytes | None, said: str) -> None:
    server = HostileApi(tmp_path / "api.sock", reply)
    (tmp_path / "hooks").mkdir(mode=0o700)
    (tmp_path / "hooks" / "codex--s").write_text("5\n")  # a session that has its cursor
    try:
        started = time.monotonic()
        result = hook(tmp_path, "codex", {"session_id": "s", "hook_event_name": "SessionStart"})
        assert time.monotonic() - started < 10
    finally:
        server.close()
    assert (result.returncode, result.stdout) == (0, "")
    assert said in result.stderr and "Traceback" not in result.stderr
    assert "\x1b" not in result.stderr
    assert (tmp_path / "hooks" / "codex--s").read_text() == "5\n", "the cursor stays"


def test_hook_whose_stdin_never_ends_gives_up_within_its_budget(tmp_path: Path) -> None:
    """``sleep 8 | mcpsubctl hook claude-code``: before, the hook read stdin until EOF, so an
    agent that never closed it held the prompt as long. Here stdin stays open until the hook
    has ended on its own."""
    proc = subprocess.Popen(
        [str(BIN / "mcpsubctl"), "hook", "claude-code"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cli_env({"MCPSUB_STATE_DIR": str(tmp_path)}),
        text=True,
    )
    try:
        code = proc.wait(timeout=30)  # far beyond the budget: the bound is the hook's own
        assert proc.stdout is not None and proc.stderr is not None
        out, err = proc.stdout.read(), proc.stderr.read()
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.kill()
        proc.wait()
    assert (code, out) == (0, "")
    assert err == "mcpsubctl hook: the hook input on stdin did not end within 2 s; ignored\n"
    assert not (tmp_path / "hooks").exists()


def test_hook_keeps_cursors_in_its_state_dir_whatever_socket_it_is_given(tmp_path: Path) -> None:
    """``--api unix:///DIR/x.sock``: before, the cursors went to ``DIR/hooks/``, even when
    nothing listened there. A daemon at a socket of its own has its cursors in a directory
    of their own under the state dir (another daemon's event ids are not this one's)."""
    state, elsewhere = tmp_path / "state", tmp_path / "elsewhere"
    state.mkdir(mode=0o700)
    elsewhere.mkdir()
    payload = {"session_id": "s", "hook_event_name": "SessionStart"}
    nobody = hook(state, "codex", payload, "--api", f"unix://{elsewhere}/x.sock")
    assert (nobody.returncode, nobody.stdout) == (0, "")
    assert "not reachable" in nobody.stderr
    assert sorted(os.listdir(elsewhere)) == []

    body = b'{"ready": true, "lastEventId": 7}'  # a /v1/status as mcpsubd shapes it
    reply = b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)
    server = HostileApi(elsewhere / "x.sock", reply)
    try:
        answered = hook(state, "codex", payload, "--api", f"unix://{elsewhere}/x.sock")
    finally:
        server.close()
    assert (answered.returncode, answered.stdout, answered.stderr) == (0, "", "")
    assert sorted(os.listdir(elsewhere)) == ["x.sock"]
    [own] = [p for p in (state / "hooks").iterdir() if p.name.startswith("socket-")]
    assert (own / "codex--s").read_text() == "7\n"
    assert stat.S_IMODE(own.stat().st_mode) == stat.S_IMODE((state / "hooks").stat().st_mode)
    assert stat.S_IMODE(own.stat().st_mode) == 0o700
    assert not (state / "hooks" / "codex--s").exists()  # the state dir's own daemon: apart
