"""``mcp-lab-server`` / ``python -m labserver``: run the lab server on uvicorn.

Lifecycle: bind the socket ourselves (so ``--port 0`` can print the real port), start
uvicorn on it, print the "listening" line once it accepts, serve until SIGTERM/SIGINT.
On the signal every listen stream is closed *gracefully* (its JSON-RPC result frame, then
the end of the body) before uvicorn waits for connections; without that, uvicorn would
wait for the never-ending streams until its graceful-shutdown timeout. The process exits
0 after a signal, instead of uvicorn's default of re-raising it.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import socket
import sys
from types import FrameType
from typing import Final

import uvicorn

from labserver.app import create_app
from labserver.settings import Settings, settings_from_env
from labserver.state import Lab

# Listen streams are closed on the signal; this only bounds a misbehaving connection.
GRACEFUL_SHUTDOWN_SECONDS: Final = 1


class _DropAbortNoise(logging.Filter):
    """``POST /lab/streams/drop`` aborts responses on purpose; uvicorn logs each as an error."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "returned without completing response" not in record.getMessage()


class LabUvicornServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, lab: Lab, announce: str) -> None:
        super().__init__(config)
        self.lab = lab
        self.announce = announce
        self._loop: asyncio.AbstractEventLoop | None = None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().startup(sockets=sockets)
        if self.started:
            host, port = self.servers[0].sockets[0].getsockname()[:2]
            scheme = "https" if self.config.is_ssl else "http"
            print(self.announce.format(scheme=scheme, host=_url_host(host), port=port), flush=True)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        first = not self.should_exit
        super().handle_exit(sig, frame)
        # A signal is our normal way to stop: exit 0 rather than re-raise it after serve().
        self._captured_signals.clear()
        if first and self._loop is not None:
            self._loop.call_soon_threadsafe(self.lab.begin_shutdown)


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


ANNOUNCE: Final = (
    "MCP resource subscribe test server listening on {scheme}://{host}:{port}/mcp\n"
    "Try: curl -s {scheme}://{host}:{port}/mcp -H 'Content-Type: application/json' "
    "-H 'Accept: application/json, text/event-stream' -H 'MCP-Protocol-Version: 2026-07-28' "
    '-H \'Mcp-Method: server/discover\' -d \'{{"jsonrpc":"2.0","id":1,'
    '"method":"server/discover","params":{{"_meta":{{'
    '"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
    '"io.modelcontextprotocol/clientCapabilities":{{}}}}}}}}\'\n'
    "More (read, listen, /lab control): docs/labserver.md"
)


def parse_args(argv: list[str] | None, settings: Settings) -> argparse.Namespace:
    parser = build_parser(settings)
    args = parser.parse_args(argv)
    if bool(args.ssl_certfile) != bool(args.ssl_keyfile):
        parser.error("--ssl-certfile and --ssl-keyfile go together")
    return args


def build_parser(settings: Settings) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mcp-lab-server",
        description="Reference MCP server (protocol revision 2026-07-28) for testing clients.",
        epilog="Settings come from the environment (docs/labserver.md lists them all), e.g. "
        "MCP_TEST_CONTROL=1 mounts the /lab/* control surface (change a resource by hand: "
        "PUT /lab/resources; faults; POST /lab/reset), MCP_TEST_UPDATE_DELAY_SECONDS (5) is "
        "the delay from the first open listen stream to the update, MCP_TEST_LOG_LEVEL, "
        "MCP_TEST_AUTH_TOKEN. `mcp-lab-server report --url URL` prints a running lab's "
        "per-client report.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument(
        "--port",
        type=int,
        default=settings.port,
        help="port to bind; 0 picks a free one (default MCP_TEST_PORT or 8089)",
    )
    parser.add_argument(
        "--ssl-certfile",
        default=None,
        help="serve https with this PEM certificate (chain); needs --ssl-keyfile",
    )
    parser.add_argument("--ssl-keyfile", default=None, help="PEM private key for --ssl-certfile")
    from service._version import __version__

    parser.add_argument("--version", action="version", version=f"mcp-lab-server v{__version__}")
    return parser


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on accepted sockets whose protocol
    # says TCP, and without it every request after the first on a kept-alive connection
    # waits ~40 ms for a delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def main(argv: list[str] | None = None) -> None:
    from service.exits import exit_now, run_main

    exit_now(run_main(lambda: _main(argv)))


def _main(argv: list[str] | None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["report"]:  # `mcp-lab-server report --url …`: a client of a running lab
        from labserver.report_cli import main as report_main

        raise SystemExit(report_main(argv[1:]))
    settings = settings_from_env(os.environ)
    args = parse_args(argv, settings)
    lab = Lab(settings)
    app = create_app(settings, lab)
    config = uvicorn.Config(
        app,
        http="h11",
        lifespan="off",
        access_log=False,
        log_level="warning",
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
        ssl_certfile=args.ssl_certfile,
        ssl_keyfile=args.ssl_keyfile,
    )
    # After Config(): it (re)configures uvicorn's loggers.
    logging.getLogger("uvicorn.error").addFilter(_DropAbortNoise())
    try:
        sock = _bind(args.host, args.port)
    except OSError as exc:
        print(f"mcp-lab-server: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        raise SystemExit(1) from exc
    server = LabUvicornServer(config, lab, ANNOUNCE)
    server.run(sockets=[sock])


if __name__ == "__main__":
    main()
