"""The human-readable log lines on stdout, filtered by ``MCP_TEST_LOG_LEVEL``.

The lines themselves (``[resources/read] uri=… version=…`` and friends) are a contract
inherited from the original lab server (seed §6.5): people grep them while checking a
client by hand. Unlike the original, the level really filters: request lines are
``info``, diagnostics ``debug``, ``[server/error]`` lines ``error``.
"""

from __future__ import annotations

import sys
from typing import Final, TextIO

from labserver.settings import LOG_LEVELS, LogLevel

_RANK: Final = {level: rank for rank, level in enumerate(LOG_LEVELS)}


def should_print(line_level: LogLevel, threshold: LogLevel) -> bool:
    """``silent`` prints nothing; otherwise lines at or above ``threshold`` are printed."""
    return threshold != "silent" and _RANK[line_level] >= _RANK[threshold]


class Console:
    def __init__(self, threshold: LogLevel, out: TextIO | None = None) -> None:
        self.threshold: LogLevel = threshold
        self._out = out

    def emit(self, level: LogLevel, line: str) -> None:
        if should_print(level, self.threshold):
            out = self._out or sys.stdout
            # Flushed per line: the test fixture and people piping to grep read it live.
            out.write(line + "\n")
            out.flush()

    def debug(self, line: str) -> None:
        self.emit("debug", line)

    def info(self, line: str) -> None:
        self.emit("info", line)

    def error(self, line: str) -> None:
        self.emit("error", line)
