"""Human units for the daemon commands' text output (``--json`` keeps the raw data).

Pure functions: a value in, the words a person reads out (``up 11m41s``, ``2 s ago``,
``ready``). Also the one rule for when machine lines (``error-code …``) are printed.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable
from typing import Any


def duration(seconds: Any) -> str:
    """``45 s``, ``11m41s``, ``3h05m``, ``2d04h``; ``-`` for nothing."""
    if not isinstance(seconds, (int, float)) or seconds < 0:
        return "-"
    whole = int(seconds)
    if whole < 60:
        return f"{whole} s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h"


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
