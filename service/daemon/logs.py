"""The daemon's log: one JSON object per line on stderr, whoever writes it.

Three sources end up on stderr, and each is routed through the same processors:

* our own ``structlog`` calls;
* the standard ``logging`` module (uvicorn, asyncio's "Task was destroyed but it is pending!"
  and "socket.accept() out of system resource", httpx): a root handler with structlog's
  ``ProcessorFormatter``;
* ``warnings``, uncaught exceptions in threads and "unraisable" exceptions (``__del__``):
  turned into ``logging`` records by hooks installed here.

Every entry passes :func:`plain_values` (an enum member is written as its value) and
:func:`redact` (``service.safetext.redact_urls``: ``user:password@`` in URLs becomes
``***@``, secret parameters ``***``, echoed ``Basic``/``Bearer`` credentials are cut) and, at
warning and above, a :class:`RepeatLimiter`: the same error repeated within
``REPEAT_WINDOW_S`` is logged once, and the next one after the window says how many were
dropped (an accept loop failing with EMFILE thousands of times a second must not fill the
disk). ``log.exception`` entries carry the formatted stack in ``exception``.
"""

from __future__ import annotations

import enum
import logging
import sys
import threading
import time
from collections.abc import MutableMapping
from typing import Any

import structlog

from service.safetext import redact_urls

LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "msg": logging.INFO,
    "warn": logging.WARNING,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "exception": logging.ERROR,
    "critical": logging.CRITICAL,
    "fatal": logging.CRITICAL,
}
REPEAT_WINDOW_S = 30.0
MAX_TRACKED = 512
_min_level = [logging.INFO]


class RepeatLimiter:
    """Lets the first of a run of identical entries through, then one per window (pure state).

    ``check(key, now)`` returns None to drop the entry, or the number of identical entries
    dropped since the last one let through (0 the first time)."""

    def __init__(self, window_s: float = REPEAT_WINDOW_S, max_tracked: int = MAX_TRACKED) -> None:
        self.window_s = window_s
        self.max_tracked = max_tracked
        self._seen: dict[str, tuple[float, int]] = {}
        self._lock = threading.Lock()

    def check(self, key: str, now: float) -> int | None:
        with self._lock:
            entry = self._seen.get(key)
            if entry is not None and now - entry[0] < self.window_s:
                self._seen[key] = (entry[0], entry[1] + 1)
                return None
            if entry is None and len(self._seen) >= self.max_tracked:
                cutoff = now - self.window_s
                self._seen = {k: v for k, v in self._seen.items() if v[0] >= cutoff}
                if len(self._seen) >= self.max_tracked:
                    self._seen.clear()
            self._seen[key] = (now, 0)
            return entry[1] if entry is not None else 0


_limiter = RepeatLimiter()


_NOT_IN_KEY = frozenset({"timestamp", "_record", "_from_structlog", "retry_in"})
"""Fields that differ between otherwise identical entries: ``retry_in`` is a fresh random
backoff on every "link down" line, and counting it made every repeat look new."""


def _entry_key(event_dict: MutableMapping[str, Any]) -> str:
    return repr(sorted((k, str(v)[:200]) for k, v in event_dict.items() if k not in _NOT_IN_KEY))


def enabled(level: int) -> bool:
    """Whether a line at ``level`` would be written: the hot path asks before it builds a
    debug line (dropping one in :func:`level_filter` raises and catches ``DropEvent``)."""
    return level >= _min_level[0]


def level_filter(_logger: Any, method_name: str, event_dict: Any) -> Any:
    # A processor rather than make_filtering_bound_logger(level): loggers are cached on first
    # use, so only a processor can follow a log level changed by a reload.
    if LEVELS.get(method_name, logging.INFO) < _min_level[0]:
        raise structlog.DropEvent
    return event_dict


def limit_repeats(_logger: Any, method_name: str, event_dict: Any) -> Any:
    level = LEVELS.get(str(event_dict.get("level", method_name)), logging.INFO)
    if level < logging.WARNING:
        return event_dict
    dropped = _limiter.check(_entry_key(event_dict), time.monotonic())
    if dropped is None:
        raise structlog.DropEvent
    if dropped:
        event_dict["repeated"] = dropped
    return event_dict


def plain_values(_logger: Any, _method_name: str, event_dict: Any) -> Any:
    """An enum member is logged as its value (``"state": "error"``): the JSON renderer's
    fallback for what it cannot encode is ``repr()``, which printed a plain ``Enum`` as
    ``"<LinkState.ERROR: 'error'>"``. Our states are ``StrEnum`` now; this keeps any other
    enum a log call is given readable too."""
    for key, value in event_dict.items():
        if isinstance(value, enum.Enum):
            event_dict[key] = value.value
    return event_dict


def redact(_logger: Any, _method_name: str, event_dict: Any) -> Any:
    for key, value in event_dict.items():
        if isinstance(value, str):  # redact_urls looks for its cues itself
            event_dict[key] = redact_urls(value)
    return event_dict


def add_logger_name(logger: Any, _method_name: str, event_dict: Any) -> Any:
    record = event_dict.get("_record")
    if record is not None:
        event_dict.setdefault("logger", record.name)
    return event_dict


def set_log_level(level: str) -> None:
    _min_level[0] = getattr(logging, level.upper(), logging.INFO)
    logging.getLogger().setLevel(max(_min_level[0], logging.WARNING))


class _StdlibGate(logging.Filter):
    """Applies the level and the repeat limit to ``logging`` records (a Formatter may not drop)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < _min_level[0]:
            return False
        if record.levelno < logging.WARNING:
            return True
        exc = record.exc_info[1] if record.exc_info else None
        key = f"{record.name}|{record.levelno}|{record.getMessage()[:200]}|{exc!r:.200}"
        dropped = _limiter.check(key, time.monotonic())
        if dropped is None:
            return False
        if dropped:
            record.repeated = dropped
        return True


def _add_repeated(_logger: Any, _method_name: str, event_dict: Any) -> Any:
    record = event_dict.get("_record")
    repeated = getattr(record, "repeated", None)
    if repeated:
        event_dict["repeated"] = repeated
    return event_dict


def configure_logging(log_level: str, log_format: str) -> None:
    """Route every log source to stderr through one renderer (JSON unless a console asks)."""
    json_logs = log_format == "json" or (log_format == "auto" and not sys.stderr.isatty())
    renderer: Any = (
        structlog.processors.JSONRenderer() if json_logs else structlog.dev.ConsoleRenderer()
    )
    # ConsoleRenderer formats exc_info itself; JSON needs the stack as a string field.
    stack: list[Any] = [structlog.processors.format_exc_info] if json_logs else []
    shared: list[Any] = [
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        *stack,
        plain_values,
        redact,
    ]
    structlog.configure(
        processors=[
            level_filter,
            structlog.contextvars.merge_contextvars,
            *shared,
            limit_repeats,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[add_logger_name, _add_repeated, *shared],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter)
    handler.addFilter(_StdlibGate())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    set_log_level(log_level)
    logging.captureWarnings(True)
    logging.raiseExceptions = False  # a failing handler must not print its own traceback
    _install_hooks()


def _install_hooks() -> None:
    hooks = logging.getLogger("mcpsubd.hooks")

    def thread_hook(args: threading.ExceptHookArgs) -> None:
        if args.exc_type is SystemExit or args.exc_value is None:
            return
        name = args.thread.name if args.thread is not None else "?"
        hooks.error(
            "uncaught exception in thread %s",
            name,
            exc_info=(args.exc_type, args.exc_value, args.exc_traceback),
        )

    def unraisable_hook(args: Any) -> None:
        exc = args.exc_value
        info = (type(exc), exc, args.exc_traceback) if exc is not None else None
        hooks.error("unraisable exception: %s %r", args.err_msg or "", args.object, exc_info=info)

    def except_hook(exc_type: Any, exc: Any, tb: Any) -> None:
        if issubclass(exc_type, KeyboardInterrupt):
            sys.__excepthook__(exc_type, exc, tb)
            return
        hooks.critical("uncaught exception", exc_info=(exc_type, exc, tb))

    threading.excepthook = thread_hook
    sys.unraisablehook = unraisable_hook
    sys.excepthook = except_hook
