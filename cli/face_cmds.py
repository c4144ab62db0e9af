"""``mcpsubctl mcp``: the agent face on stdio (``service/face``), for agent configs such as
``claude mcp add mcpsub -- mcpsubctl mcp``.

When no daemon answers on the default socket, it starts ``mcpsubd`` in the background (as
ssh-agent or gpg-agent are started on first use), says so on stderr, and carries on;
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
    import httpx

    transport = httpx.HTTPTransport(uds=str(endpoint.socket)) if endpoint.socket else None
    try:
        with httpx.Client(transport=transport, base_url=endpoint.base_url, timeout=2.0) as c:
            return c.get("/healthz").status_code == 200
    except httpx.HTTPError:
        return False


def _autostart(endpoint: Any) -> None:
    """Start ``mcpsubd`` for the socket's state dir, detached, and wait until it answers."""
    assert endpoint.socket is not None
    state = Path(endpoint.state_dir)
    daemon = Path(sys.executable).parent / "mcpsubd"
    command = [str(daemon)] if daemon.exists() else [sys.executable, "-m", "service.daemon.main"]
    state.mkdir(parents=True, exist_ok=True, mode=0o700)
    log = open(state / "mcpsubd.log", "ab")  # noqa: SIM115 - handed to the child
    env = {**os.environ, "MCPSUB_STATE_DIR": str(state)}
    proc = subprocess.Popen(
        command,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=log,
        start_new_session=True,
    )
    log.close()
    _say(
        f"no daemon answered on {endpoint.display}; started mcpsubd (pid {proc.pid}, log "
        f"{state / 'mcpsubd.log'}); it keeps running after this session"
    )
    deadline = time.monotonic() + AUTOSTART_WAIT_S
    pause = 0.05
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            _say(f"mcpsubd exited with {proc.returncode}; see {state / 'mcpsubd.log'}")
            return
        if _answers(endpoint):
            return
        time.sleep(pause)  # polling a child's readiness: no event to wait on
        pause = min(pause * 2, 0.5)
    _say(f"mcpsubd did not answer within {AUTOSTART_WAIT_S:g} s; tools will retry")


def _progress_s() -> float:
    """``MCPSUB_AGENT_PROGRESS_S`` (the daemon's ``agent_progress_s``), default 5 s."""
    try:
        value = float(os.environ.get("MCPSUB_AGENT_PROGRESS_S", "5"))
    except ValueError:
        return 5.0
    return value if 0 < value <= 10 else 5.0


def cmd_mcp(args: argparse.Namespace) -> int:
    import asyncio

    from cli.localapi import resolve_endpoint
    from service.face.handlers import Face
    from service.face.remote import ApiBackend
    from service.face.stdio import StdioServer

    try:
        endpoint = resolve_endpoint(args.api)
    except ValueError as exc:
        _say(str(exc))
        return 2
    if not _answers(endpoint):
        if args.no_autostart or endpoint.socket is None or endpoint.explicit:
            _say(f"no daemon answers on {endpoint.display}; {endpoint.start_hint()}")
        else:
            _autostart(endpoint)

    async def run() -> None:
        backend = ApiBackend(
            socket=str(endpoint.socket) if endpoint.socket else None,
            base_url=endpoint.base_url,
            token=endpoint.token,
            start_hint=endpoint.start_hint(),
        )
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
