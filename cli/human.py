"""Human units for the daemon commands' text output (``--json`` keeps the raw data).

Pure functions: a value in, the words a person reads out (``up 11m41s``, ``2 s ago``,
``ready``). Also the one rule for when machine lines (``error-code …``) are printed.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable

from service.statusline import duration

TYPE_CHECKING = False  # typing costs more than socket+json: not imported at run time
if TYPE_CHECKING:
    from typing import Any


def ago(ts: Any, now: float | None = None) -> str:
    """``2 s ago`` (``in 5 s`` for a time ahead of us); ``-`` for nothing."""
    if not isinstance(ts, (int, float)):
        return "-"
    delta = (time.time() if now is None else now) - ts
    if delta < 0:
        return f"in {duration(-delta)}"
    return f"{duration(delta)} ago"


def yes_no(value: Any) -> str:
    if value is None:
        return "-"
    return "yes" if value else "no"


def listing(values: Iterable[Any] | None) -> str:
    """A list as a list: ``a, b`` (``-`` when empty), never a Python repr."""
    items = [str(v) for v in values or []]
    return ", ".join(items) if items else "-"


def error_text(code: Any, message: Any) -> str:
    """The error code with its message beside it."""
    if not code and not message:
        return "-"
    if code and message:
        return f"{code}: {message}"
    return str(code or message)


def machine_lines_wanted(json_mode: bool, lines_mode: bool = False) -> bool:
    """``error-code …`` lines go to stdout for scripts: when stdout is not a terminal, or
    ``--json`` / ``--lines`` asks for them. A person at a terminal reads the error once,
    on stderr."""
    if json_mode or lines_mode or os.environ.get("MCPSUB_LINES") == "1":
        return True
    try:
        return not sys.stdout.isatty()
    except (AttributeError, ValueError):
        return True
