"""``mcpsubctl mcp``: the agent face on stdio (``service/face``), for agent configs such as
``claude mcp add mcpsub -- mcpsubctl mcp``.

When no daemon answers on the default socket, it starts the installed per-user service, or
else ``mcpsubd`` detached from the agent's process tree (as ssh-agent or gpg-agent are
started on first use), says so on stderr, and carries on: the start runs in a thread beside
the server, so ``initialize`` never waits for it, while a tool call does (bounded);
``--no-autostart`` turns that off (tools then answer ``DAEMON_UNAVAILABLE`` with a hint).
stdout carries only JSON-RPC; every diagnostic goes to stderr.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

AUTOSTART_WAIT_S = 15.0


def add_face_command(sub: Any, commands: dict[str, Any]) -> None:
    from cli.parsing import sub_parser

    p = sub_parser(
        sub,
        "mcp",
        help="serve the daemon's subscriptions to an agent as an MCP server on stdio",
    )
    p.add_argument(
        "--api",
        default=None,
        help="daemon API: unix:///path/api.sock or http://127.0.0.1:PORT (env MCPSUB_API)",
    )
    p.add_argument(
        "--no-autostart",
        action="store_true",
        help="do not start mcpsubd when none answers on the default socket",
    )
    p.add_argument(
        "--channel",
        action="store_true",
        help="also declare Claude Code's claude/channel capability and push each change "
        "as a channel message (research preview; see docs/agents-face.md)",
    )
    commands["mcp"] = cmd_mcp


def _say(text: str) -> None:
    sys.stderr.write(f"mcpsubctl mcp: {text}\n")
    sys.stderr.flush()


def _answers(endpoint: Any) -> bool:
    """Whether ``/healthz`` answers 200 within 2 s."""
    from service import localclient

    try:
        status, _ = localclient.fetch(endpoint, "/healthz", timeout_s=2.0, max_body=64 * 1024)
    except localclient.Unreachable as exc:
        if isinstance(exc.error, localclient.NotTrusted):
            raise exc.error from None  # not a daemon to start: another user's socket
        return False
    except (OSError, localclient.ProtocolError, localclient.TooLarge):
        return False
    return status == 200


def _autostart(endpoint: Any) -> Any:
    """Start a daemon for the face and wait (bounded) until it answers; the endpoint to use.

    An installed per-user service (``mcpsubctl service install --user``; the launchd agent on
    macOS) is started through its manager, and the face then talks to that daemon. Otherwise
    ``mcpsubd`` is started for the default state dir, detached for real: a double fork makes
    it nobody's descendant, so an agent that signals every descendant of its MCP server when
    a session ends (opencode does) does not stop it. Either way it keeps running after this
    session, as ssh-agent does."""
    unit = _installed_unit()
    if unit is not None:
        started = _start_unit(unit, endpoint)
        if started is not None:
            return started
    _spawn_detached(endpoint)
    return endpoint


def _installed_unit() -> Any:
    """The per-user service's target when its unit file is installed, else None."""
    from cli.service_cmds import ServiceError, resolve_target

    try:
        target = resolve_target(user=True)
    except ServiceError:
        return None
    return target if target.path.is_file() else None


def _start_unit(target: Any, endpoint: Any) -> Any:
    """Start the installed service; its endpoint once it answers (None: it did not start)."""
    import shlex
    import shutil

    from cli.service_cmds import LAUNCHD_LABEL, SYSTEMD_UNIT
    from service.localclient import Endpoint

    if target.kind == "systemd":
        argv = ["systemctl", "--user", "start", SYSTEMD_UNIT]
    else:
        argv = ["launchctl", "kickstart", f"gui/{os.getuid()}/{LAUNCHD_LABEL}"]
    shown = shlex.join(argv)
    program = shutil.which(argv[0])
    if program is None:
        _say(f"the service {target.path} is installed but {argv[0]} is not on PATH")
        return None
    try:
        done = subprocess.run(
            [program, *argv[1:]],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=AUTOSTART_WAIT_S,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        _say(f"`{shown}` failed: {exc}")
        return None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [""])[-1]
        _say(f"`{shown}` exited with {done.returncode}: {_clean(last)}")
        return None
    unit_endpoint = Endpoint(socket=str(target.socket))
    _say(f"no daemon answered on {endpoint.display}; started the installed service (`{shown}`)")
    if _wait_until_answers(unit_endpoint, lambda: True):
        return unit_endpoint
    _say(f"the service did not answer within {AUTOSTART_WAIT_S:g} s on {target.socket}")
    return None


def _clean(text: str) -> str:
    from service.safetext import terminal_safe

    return terminal_safe(text)[:300]


def _spawn_detached(endpoint: Any) -> None:
    """``mcpsubd`` for the endpoint's state dir as a grandchild that the intermediate child
    leaves behind at once (it is re-parented to init or the session's subreaper)."""
    assert endpoint.socket is not None
    state = Path(endpoint.state_dir)
    daemon = Path(sys.executable).parent / "mcpsubd"
    command = [str(daemon)] if daemon.exists() else [sys.executable, "-m", "service.daemon.main"]
    state.mkdir(parents=True, exist_ok=True, mode=0o700)
    log_path = state / "mcpsubd.log"
    env = {**os.environ, "MCPSUB_STATE_DIR": str(state)}
    pid = _double_fork(command, env, log_path)
    if pid is None:
        _say(f"could not start mcpsubd; see {log_path}")
        return
    _say(
        f"no daemon answered on {endpoint.display}; started mcpsubd (pid {pid}, log "
        f"{log_path}); it keeps running after this session"
    )
    if _wait_until_answers(endpoint, lambda: _alive(pid)):
        return
    if not _alive(pid):
        _say(f"mcpsubd exited during its start: {_last_line(log_path)} (log {log_path})")
    else:
        _say(f"mcpsubd did not answer within {AUTOSTART_WAIT_S:g} s; tools will retry")


_SPAWN = (
    "import subprocess, sys\n"
    "p = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL, stdout=2, stderr=2,\n"
    "                     start_new_session=True, cwd='/')\n"
    "print(p.pid)\n"
)
"""The intermediate: starts the daemon in a session of its own (its output to the log, the
intermediate's stderr), prints its pid and exits, leaving it to init or a subreaper."""


def _double_fork(command: list[str], env: dict[str, str], log_path: Path) -> int | None:
    """Start ``command`` as the child of a child that exits at once; the daemon's pid (None
    when it could not be started). A process, not ``os.fork``: this runs in a thread beside
    the face's event loop, where forking the interpreter is not safe."""
    try:
        log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    except OSError:
        return None
    try:
        done = subprocess.run(
            [sys.executable, "-S", "-c", _SPAWN, *command],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=log,
            start_new_session=True,
            timeout=AUTOSTART_WAIT_S,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    finally:
        os.close(log)
    said = done.stdout.strip()
    return int(said) if done.returncode == 0 and said.isdigit() else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _last_line(path: Path) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - 4096))
            lines = handle.read().decode("utf-8", "replace").strip().splitlines()
    except OSError:
        return "no log"
    return _clean(lines[-1]) if lines else "nothing logged"


def _wait_until_answers(endpoint: Any, still_starting: Any) -> bool:
    """Poll ``/healthz`` until it answers (True) or the start is over or too slow (False):
    nothing tells this process when another one binds its socket."""
    deadline = time.monotonic() + AUTOSTART_WAIT_S
    pause = 0.05
    while time.monotonic() < deadline:
        if _answers(endpoint):
            return True
        if not still_starting():
            return _answers(endpoint)
        time.sleep(pause)
        pause = min(pause * 2, 0.5)
    return False


def _progress_s() -> float:
    """``MCPSUB_AGENT_PROGRESS_S`` (the daemon's ``agent_progress_s``), default 5 s."""
    try:
        value = float(os.environ.get("MCPSUB_AGENT_PROGRESS_S", "5"))
    except ValueError:
        return 5.0
    return value if 0 < value <= 10 else 5.0


def cmd_mcp(args: argparse.Namespace) -> int:
    import asyncio

    from service.face.handlers import Face
    from service.face.remote import ApiBackend
    from service.face.stdio import StdioServer
    from service.localclient import resolve_endpoint

    try:
        endpoint = resolve_endpoint(args.api)
    except ValueError as exc:
        _say(str(exc))
        return 2
    from service.localclient import NotTrusted

    autostart = False
    try:
        answers = _answers(endpoint)
    except NotTrusted as exc:  # every tool call then says SOCKET_NOT_TRUSTED
        _say(f"{exc.message}; hint: {exc.hint}")
        answers = True
    if not answers:
        if args.no_autostart or endpoint.socket is None or endpoint.explicit:
            _say(f"no daemon answers on {endpoint.display}; {endpoint.start_hint()}")
        else:
            autostart = True

    async def run() -> None:
        backend = ApiBackend(endpoint)

        async def start() -> None:
            started = await asyncio.to_thread(_autostart, endpoint)
            if started.socket != endpoint.socket:
                backend.retarget(started.socket, started.start_hint())

        if autostart:  # beside the server: initialize answers at once, tools wait for it
            backend.starting(asyncio.ensure_future(start()))
        try:
            face = Face(backend, channel=args.channel, progress_every_s=_progress_s())
            await StdioServer(face, channel=args.channel).serve()
        finally:
            await backend.aclose()

    try:
        asyncio.run(run())
    except KeyboardInterrupt:
        return 130
    return 0
