"""A peer server script from ``tests/peers/servers/`` as a subprocess on 127.0.0.1, port 0.

Each script prints ``PORT <n>`` once uvicorn accepts; every output line (stdout and stderr)
is kept so tests can look for the script's own notes (``LISTEN opened``, ``POST <method>``).
Started and stopped by the shared :class:`tests.support.process.ServerProcess`.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from tests.support.process import ServerProcess

SERVERS = Path(__file__).resolve().parent / "servers"
_PORT = re.compile(r"^PORT (?P<port>\d+)$")


class PeerServer(ServerProcess):
    def __init__(self, script: str, *args: str) -> None:
        super().__init__([sys.executable, str(SERVERS / script), *args], dict(os.environ), _PORT)

    @property
    def url(self) -> str:
        return f"{self.base_url}/mcp"
