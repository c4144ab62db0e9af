"""A fake "daemon" on a unix socket, run as another user (or as us) in a process of its own:
what a local attacker would serve at the API socket's name. It answers every request head
with a fixed JSON body and reports, for each connection, how many bytes it read: the proof
that a client refused before sending anything is a connection that read 0 bytes, or none.

It runs on the system's ``python3`` (stdlib only): the test virtualenv's interpreter may sit
where another user cannot read it.
"""

from __future__ import annotations

import os
import pwd
import queue
import shutil
import socket
import subprocess
import threading
from pathlib import Path

import pytest

SQUATTER = "mcpsub-squatter"

_SERVE = r"""
import os, socket, sys
path, body, fd = sys.argv[1], sys.argv[2].encode(), int(sys.argv[3])
if path == "tcp":  # loopback TCP, a port of its own: what squats the API's port
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    print(f"port {server.getsockname()[1]}", flush=True)
elif fd >= 0:  # bound by the test in a directory we may not write; listen() makes it ours
    server = socket.socket(fileno=fd)
else:
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    os.chmod(path, 0o666)
server.listen(16)
print("ready", flush=True)
while True:
    conn, _ = server.accept()
    conn.settimeout(60)
    got = b""
    try:
        while b"\r\n\r\n" not in got:
            data = conn.recv(65536)
            if not data:
                break
            got += data
    except OSError:
        pass
    if got.startswith(b"SENTINEL"):
        print("sentinel", flush=True)
    else:
        print(f"read {len(got)}", flush=True)
    if b"\r\n\r\n" in got and not got.startswith(b"SENTINEL"):
        head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}"
        conn.sendall(head.encode() + b"\r\nConnection: close\r\n\r\n" + body)
    conn.close()
"""


def system_python() -> str:
    found = shutil.which("python3", path="/usr/bin:/bin:/usr/local/bin")
    if found is None:
        pytest.fail("no system python3 to run the fake peer")
    return found


def squatter() -> pwd.struct_passwd:
    """The second, unprivileged user (made here when missing; needs root, as CI runs)."""
    if os.geteuid() != 0:
        if os.environ.get("CI") == "true":
            pytest.fail("the multi-user tests need root under CI (to add and become a user)")
        pytest.skip("needs root to add and become a second user")
    try:
        return pwd.getpwnam(SQUATTER)
    except KeyError:
        pass
    made = subprocess.run(
        ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", SQUATTER],
        capture_output=True,
        text=True,
    )
    try:  # another test process may have added it meanwhile (useradd then exits 9)
        return pwd.getpwnam(SQUATTER)
    except KeyError:
        pytest.fail(f"useradd {SQUATTER} failed: {made.stderr.strip()}")


class FakePeer:
    """The fake at ``path``: as ``user`` (None: as us), listening on a socket it binds, or on
    ``bound`` (a socket the test bound where the user may not write; the fake listens).
    ``path`` ``tcp``: on a loopback TCP port the fake binds itself (:attr:`port`)."""

    def __init__(
        self,
        path: Path,
        body: bytes = b"{}",
        *,
        user: pwd.struct_passwd | None = None,
        bound: socket.socket | None = None,
    ) -> None:
        self.path = path
        fd = bound.fileno() if bound is not None else -1
        ids = {}
        if user is not None:
            ids = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}
        self.proc = subprocess.Popen(
            [system_python(), "-c", _SERVE, str(path), body.decode(), str(fd)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            pass_fds=(fd,) if fd >= 0 else (),
            cwd="/",
            **ids,  # type: ignore[arg-type]
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.port = 0
        if str(path) == "tcp":
            said = self.lines.get(timeout=30)
            assert said.startswith("port "), said
            self.port = int(said.split()[1])
        first = self.lines.get(timeout=30)
        assert first == "ready", (first, self.proc.stderr.read() if self.proc.stderr else "")

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.strip())
        self.lines.put("exited")

    def connections(self) -> list[str]:
        """What each connection since the last call read (``read N``), in order: a sentinel
        connection of ours marks the end, so every earlier connection is accounted for."""
        family = socket.AF_INET if self.port else socket.AF_UNIX
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.settimeout(30)
            probe.connect(("127.0.0.1", self.port) if self.port else str(self.path))
            probe.sendall(b"SENTINEL\r\n\r\n")
        seen = []
        while (line := self.lines.get(timeout=30)) != "sentinel":
            assert line != "exited", seen
            seen.append(line)
        return seen

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait(10)
