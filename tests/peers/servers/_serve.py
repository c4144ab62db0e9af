"""Serve an ASGI app on 127.0.0.1 with uvicorn and print the bound port once it accepts.

Shared by the peer server scripts in this folder (each is run as ``python <script>``, so this
module is importable from the script's own directory). The first stdout line is
``PORT <n>``; later lines are the script's own notes (e.g. ``LISTEN opened``).
"""

from __future__ import annotations

import argparse
import socket
from typing import Any

import uvicorn


class _AnnouncingServer(uvicorn.Server):
    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started:
            port = self.servers[0].sockets[0].getsockname()[1]
            print(f"PORT {port}", flush=True)


def parse_port(description: str, extra: Any = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--port", type=int, default=0)
    if extra is not None:
        extra(parser)
    return parser.parse_args()


def serve(app: Any, port: int = 0) -> None:
    # IPPROTO_TCP, not the default 0: asyncio sets TCP_NODELAY on accepted sockets only when
    # proto says TCP; without it Nagle + delayed ACK add ~40 ms to every keep-alive request.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    config = uvicorn.Config(
        app,
        http="h11",
        lifespan="on",
        access_log=False,
        log_level="warning",
        timeout_graceful_shutdown=1,
    )
    _AnnouncingServer(config).run(sockets=[sock])
