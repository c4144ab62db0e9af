"""One live status line on a terminal's stderr during a long wait: phase and elapsed time.

``listening on test://review/status (acknowledged) 12 s`` is redrawn in place (``\\r`` + erase
to end of line) by a small thread, and erased when the wait ends, so the terminal is left
as if the line had never been there. It exists only when stderr is a terminal and the user
did not ask for ``--quiet``: scripts (pipes, files, CI logs) never see a byte of it, which
keeps ``mcp-resource-subscriber``'s output identical to the original's.

While the line is shown, ``sys.stderr`` is wrapped so that any other diagnostic first erases
the line, then prints on a clean line; the next tick redraws the status under it. The line
appears only after :data:`SHOW_AFTER_S` (env ``MCPSUB_STATUS_DELAY_S``), so quick commands
never flicker.
"""

from __future__ import annotations

import os
import sys
import time
from types import TracebackType

TYPE_CHECKING = False  # typing costs more than socket+json: not imported at run time
if TYPE_CHECKING:
    import threading
    from typing import IO, Any

SHOW_AFTER_S = 1.0
TICK_S = 1.0
ERASE = "\r\x1b[K"


def _delay() -> float:
    raw = os.environ.get("MCPSUB_STATUS_DELAY_S")
    try:
        return max(0.0, float(raw)) if raw else SHOW_AFTER_S
    except ValueError:
        return SHOW_AFTER_S


def duration(seconds: Any) -> str:
    """``45 s``, ``11m41s``, ``3h05m``, ``2d04h``; ``-`` for nothing (also ``mcpsubctl status``)."""
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


class _ErasingStream:
    """``sys.stderr`` while a status line is shown: erase it before anything else is written."""

    def __init__(self, inner: IO[str], owner: StatusLine) -> None:
        self._inner = inner
        self._owner = owner

    def write(self, text: str) -> int:
        with self._owner.lock:
            self._owner.erase_locked()
            return self._inner.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class StatusLine:
    """``with StatusLine.for_terminal(quiet) as status: status.phase("…")``."""

    def __init__(self, stream: IO[str] | None, *, show_after_s: float | None = None) -> None:
        self.stream = stream
        self.enabled = stream is not None
        self._phase = ""
        self._started = time.monotonic()
        self._show_after = _delay() if show_after_s is None else show_after_s
        self._shown = False
        self._due = False
        self._thread: threading.Thread | None = None
        if self.enabled:
            # Only a line that is shown needs a lock and a ticker: `mcpsubctl wait` in a pipe,
            # and the importers that want only `duration`, do not pay for threading.
            import threading

            self.lock = threading.RLock()
            self._stop = threading.Event()
        self._saved_stderr: Any = None

    @classmethod
    def for_terminal(cls, quiet: bool = False, stream: IO[str] | None = None) -> StatusLine:
        """Enabled only when ``stream`` (default stderr) is a terminal and not ``quiet``.

        The line is drawn on the raw stderr (``sys.__stderr__``): ``sys.stderr`` may be the
        CLIs' escaping wrapper (:mod:`service.safetext`), which would show our own ``\r`` and
        erase sequence as text. The phase text is escaped here instead."""
        stream = stream or sys.__stderr__
        try:
            tty = stream is not None and stream.isatty()
        except (AttributeError, ValueError):
            tty = False
        return cls(stream if tty and not quiet else None)

    # ---- lifecycle --------------------------------------------------------------------------
    def start(self) -> StatusLine:
        if not self.enabled or self._thread is not None:
            return self
        self._started = time.monotonic()
        if self.stream is not None and self.stream is sys.__stderr__:
            # Whatever wraps stderr now keeps doing so; it only learns to erase us first.
            self._saved_stderr = sys.stderr
            sys.stderr = _ErasingStream(sys.stderr, self)
        import threading

        self._thread = threading.Thread(target=self._run, name="status-line", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join(timeout=2)
        self._thread = None
        with self.lock:
            self.erase_locked()
        if self._saved_stderr is not None and isinstance(sys.stderr, _ErasingStream):
            sys.stderr = self._saved_stderr
        self._saved_stderr = None

    def __enter__(self) -> StatusLine:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # ---- what to show -----------------------------------------------------------------------
    def phase(self, text: str) -> None:
        """The current phase; shown with the time since :meth:`start`."""
        if not self.enabled:
            return
        from service.safetext import shown

        with self.lock:
            self._phase = shown(text)  # URIs and URLs come from users and servers
            if self._due:
                self._draw_locked()

    def _run(self) -> None:
        if self._stop.wait(self._show_after):
            return
        self._due = True
        while True:
            with self.lock:
                self._draw_locked()
            if self._stop.wait(TICK_S):
                return

    def _draw_locked(self) -> None:
        if self.stream is None or not self._phase:
            return
        width = _columns(self.stream)
        text = f"{self._phase} {duration(time.monotonic() - self._started)}"
        if len(text) >= width:
            text = text[: max(0, width - 2)] + "…"
        try:
            self.stream.write(ERASE + text)
            self.stream.flush()
        except (OSError, ValueError):
            return
        self._shown = True

    def erase_locked(self) -> None:
        if self._shown and self.stream is not None:
            try:
                self.stream.write(ERASE)
                self.stream.flush()
            except (OSError, ValueError):
                pass
            self._shown = False


def _columns(stream: IO[str]) -> int:
    try:
        columns = os.get_terminal_size(stream.fileno()).columns
    except (OSError, ValueError, AttributeError):
        columns = 0
    return columns or 80  # a pty without a window size says 0
