"""Another local user poses as the daemon: every client of the local API refuses, before one
byte, a socket whose directory is not the user's own, is a link, or is writable by others,
and a socket served by a process of another user (docs/operations.md, "Who the clients talk
to"). Exit 12, ``SOCKET_NOT_TRUSTED``, a hint naming the directory and its owner.

The attacker is real: a second, unprivileged user (``mcpsub-squatter``, added when missing)
that claims the ``/tmp/mcpsub-UID-DIGEST`` name the rule computes for a long state path and
serves a fake API on ``api.sock`` (0666) there. Before these checks, ``mcpsubctl status``
printed the fake's answer and ``webhook add`` sent it the webhook secret.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from service import statepaths
from tests.face.stdio_peer import StdioPeer
from tests.support.cli import BIN, REPO_ROOT, cli_env
from tests.support.fakepeer import SQUATTER, FakePeer, squatter

EXIT_SOCKET_NOT_TRUSTED = 12
SECRET = "whsec_" + "s" * 32


def run(argv: list[str], env: dict[str, str], stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, input=stdin, env=env, capture_output=True, text=True, timeout=60, cwd=REPO_ROOT
    )


@pytest.fixture
def long_state() -> Iterator[tuple[dict[str, str], Path]]:
    """An environment whose state path is too long for a socket and has no
    ``XDG_RUNTIME_DIR``: the rule's socket is ``/tmp/mcpsub-UID-DIGEST/api.sock``."""
    base = Path(tempfile.mkdtemp(prefix="trust", dir="/tmp"))
    state = base / ("s" * 120)
    env = cli_env({"MCPSUB_STATE_DIR": str(state)})
    env.pop("XDG_RUNTIME_DIR", None)
    short = Path(statepaths.short_dir(str(state), {}))
    assert short.parent == Path("/tmp") and not short.exists()
    yield env, short
    if short.is_symlink() or short.is_file():
        short.unlink()
    shutil.rmtree(short, ignore_errors=True)
    shutil.rmtree(base, ignore_errors=True)


def clients(env: dict[str, str], short: Path) -> None:
    """Every client, against the squatted name: each refuses with the code and the hint."""
    ctl = str(BIN / "mcpsubctl")
    for args in (
        ["status"],
        ["list", "--json"],
        ["webhook", "add", "http://127.0.0.1:9/hook", "--secret", SECRET],
        ["ui"],
        ["tail"],
    ):
        done = run([ctl, *args], env)
        said = done.stdout + done.stderr
        assert done.returncode == EXIT_SOCKET_NOT_TRUSTED, (args, said)
        assert "Traceback" not in said
        assert f"its directory {short}" in said, (args, said)
        assert f"hint: {short} is {SQUATTER}'s" in said, (args, said)
        if "--json" in args:
            assert json.loads(done.stdout)["errorCode"] == "SOCKET_NOT_TRUSTED"
    service = run([ctl, "service", "status", "--user", "--socket", str(short / "api.sock")], env)
    assert service.returncode == EXIT_SOCKET_NOT_TRUSTED, service
    assert f"SOCKET_NOT_TRUSTED: not connecting to {short}/api.sock" in service.stdout, service
    hook = run(
        [ctl, "hook", "claude-code"],
        env,
        json.dumps({"session_id": "s", "hook_event_name": "UserPromptSubmit", "prompt": "x"}),
    )
    assert hook.returncode == 0 and hook.stdout == "", hook  # a hook never blocks the agent
    assert "SOCKET_NOT_TRUSTED" in hook.stderr and SQUATTER in hook.stderr, hook.stderr
    face = StdioPeer(Path(env["MCPSUB_STATE_DIR"]), exact_env=env)
    try:
        face.request(0, "initialize", {"protocolVersion": "2025-11-25"})
        assert "result" in face.answer(0, timeout=30)
        face.request(1, "tools/call", {"name": "list_subscriptions", "arguments": {}})
        answer = face.answer(1, timeout=60)
        assert answer["result"]["isError"] is True, answer
        assert "SOCKET_NOT_TRUSTED" in json.dumps(answer), answer
    finally:
        face.close()
    assert not any("started mcpsubd" in line for line in face.stderr), face.stderr


def test_a_squatted_directory_of_another_user_gets_nothing(
    long_state: tuple[dict[str, str], Path],
) -> None:
    user = squatter()
    env, short = long_state
    short.mkdir()
    os.chown(short, user.pw_uid, user.pw_gid)
    os.chmod(short, 0o777)
    fake = FakePeer(short / "api.sock", b'{"ready": true, "subscriptions": []}', user=user)
    try:
        assert (short / "api.sock").stat().st_uid == user.pw_uid
        clients(env, short)
        assert fake.connections() == [], "the fake was connected to"
    finally:
        fake.close()


def test_a_link_at_the_name_gets_nothing(long_state: tuple[dict[str, str], Path]) -> None:
    user = squatter()
    env, short = long_state
    theirs = Path(tempfile.mkdtemp(prefix="squat", dir="/tmp"))
    try:
        os.chown(theirs, user.pw_uid, user.pw_gid)
        fake = FakePeer(theirs / "api.sock", b'{"ready": true}', user=user)
        try:
            short.symlink_to(theirs)
            os.lchown(short, user.pw_uid, user.pw_gid)
            clients(env, short)
            assert fake.connections() == [], "the fake was connected to"
        finally:
            fake.close()
    finally:
        shutil.rmtree(theirs, ignore_errors=True)


def test_a_socket_served_by_another_user_in_our_own_directory_gets_no_byte() -> None:
    """The directory passes (ours, 0700); the process behind the socket does not: the
    client connects, reads the peer's credentials, and closes without writing."""
    user = squatter()
    state = Path(tempfile.mkdtemp(prefix="peer", dir="/tmp"))
    try:
        bound = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        bound.bind(str(state / "api.sock"))  # the squatter's process calls listen()
        os.chmod(state / "api.sock", 0o666)
        fake = FakePeer(state / "api.sock", b'{"ready": true}', user=user, bound=bound)
        bound.close()
        try:
            env = cli_env({"MCPSUB_STATE_DIR": str(state)})
            for args in (["status"], ["--api", f"unix://{state}/api.sock", "status"]):
                done = run([str(BIN / "mcpsubctl"), *args], env)
                said = done.stdout + done.stderr
                assert done.returncode == EXIT_SOCKET_NOT_TRUSTED, said
                assert f"the process serving it runs as {SQUATTER}, not as you" in said, said
                assert f"hint: {state} is root's" in said, said
            assert fake.connections() == ["read 0", "read 0"]
        finally:
            fake.close()
    finally:
        shutil.rmtree(state, ignore_errors=True)


def test_the_daemon_binds_only_where_no_one_else_can_replace_its_socket(tmp_path: Path) -> None:
    shared = Path(tempfile.mkdtemp(prefix="open", dir="/tmp"))
    try:
        os.chmod(shared, 0o777)
        env = cli_env({"MCPSUB_STATE_DIR": str(tmp_path / "state"), "MCPSUB_LOG_FORMAT": "json"})
        done = run([str(BIN / "mcpsubd"), "--api", f"unix://{shared}/api.sock"], env)
        said = done.stdout + done.stderr
        assert done.returncode == 71, said
        assert f"its directory {shared} is writable by other users (mode 0777)" in said, said
        assert not (shared / "api.sock").exists()
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def test_a_tcp_port_held_by_another_user_gets_no_byte(tmp_path: Path) -> None:
    """The API set to a loopback TCP port, the daemon down, and another user's program bound
    to that port: the token would have gone to it with the first request. The clients read
    who holds the other end of the connection (Linux: /proc/net/tcp) and close without
    writing."""
    user = squatter()
    fake = FakePeer(Path("tcp"), b'{"ready": true}', user=user)
    try:
        state = tmp_path / "state"
        state.mkdir(mode=0o700)
        (state / "api.token").write_text("t" * 43 + "\n")
        os.chmod(state / "api.token", 0o600)
        api = f"http://127.0.0.1:{fake.port}"
        env = cli_env({"MCPSUB_STATE_DIR": str(state), "MCPSUB_API": api})
        for args in (["status"], ["list", "--json"], ["--api", api, "status"]):
            done = run([str(BIN / "mcpsubctl"), *args], env)
            said = done.stdout + done.stderr
            assert done.returncode == EXIT_SOCKET_NOT_TRUSTED, (args, said)
            assert "Traceback" not in said and "t" * 43 not in said
            assert f"the process listening there runs as {SQUATTER}, not as you" in said, said
            assert f"hint: {SQUATTER}'s program holds the port" in said, said
        assert fake.connections() == ["read 0", "read 0", "read 0"]
    finally:
        fake.close()
