"""How every console script ends when the person at the terminal ends it.

Ctrl-C is an answer, not a crash: each program's ``main`` runs through :func:`run_main`,
which turns ``KeyboardInterrupt`` into exit 130 (128 + SIGINT, what shells report) without a
traceback, and a reader that went away (``| head``, a closed pager) into a quiet exit 141
(128 + SIGPIPE) instead of a ``BrokenPipeError`` traceback. Modes that are documented to end
with 0 on Ctrl-C (``probe --follow``, ``events --follow``) catch it themselves first.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable

TYPE_CHECKING = False
if TYPE_CHECKING:  # `typing` stays unloaded: every CLI call starts here (test_localapi.py)
    from typing import NoReturn

EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141


def _silence_stdout() -> None:
    # Python flushes stdout again at exit; point it at /dev/null so that flush cannot fail.
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def run_main(main: Callable[[], int | None]) -> int:
    """Call ``main`` and return its exit code; Ctrl-C → 130, broken stdout pipe → 141."""
    try:
        return main() or 0
    except KeyboardInterrupt:
        _silence_stdout_if_broken()
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE


def _silence_stdout_if_broken() -> None:
    try:
        sys.stdout.flush()
    except (BrokenPipeError, ValueError):
        _silence_stdout()


def exit_now(code: int) -> NoReturn:
    """Flush stdout and stderr and leave with ``code``, skipping the interpreter's teardown.

    For the servers (``mcpsubd``, ``mcp-lab-server``), once they have closed what they opened:
    Python's finalization (every module cleared, a last garbage collection) cost the daemon
    0.3 s of CPU after it logged "stopped", more than the stop itself, and it runs nothing
    these programs need (their output goes to stdout and stderr, flushed here; their files,
    sockets and threads are closed by then). ``systemctl restart`` and every test that stops
    a daemon waited for it."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)
