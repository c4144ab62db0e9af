"""Import structlog and mark httpx's command-line tool absent, so that the extras the
development environment has (rich, pygments, click) stay out of the daemon: imported first by
:mod:`service.daemon.main` and :mod:`service.daemon.run`.

structlog's ``dev`` and ``tracebacks`` modules import rich (and through it pygments) at
import time whenever it is installed, only to format exceptions in the console renderer.
rich is no dependency of ours: it is in the development environment only, as a dependency of
schemathesis, so an installed daemon never has it. Hiding it while structlog is imported makes
the development daemon format exceptions as the installed one does (structlog's plain
traceback) and measure the RSS an installed one has (the daemon's RSS target,
docs/benchmarks.md). The marker is removed again right after, so anything imported later (a
test importing schemathesis in the same process) still finds rich.
"""

from __future__ import annotations

import sys

_hide = "rich" not in sys.modules and "structlog" not in sys.modules
if _hide:
    sys.modules["rich"] = None  # type: ignore[assignment]
# httpx imports its command-line tool (rich, pygments, click) when they are installed; the
# webhook dispatcher imports httpx before service.mcp, which marks it absent for the same reason.
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
try:
    import structlog  # noqa: F401
finally:
    if _hide and "rich" in sys.modules and sys.modules["rich"] is None:
        del sys.modules["rich"]
