"""The event loop the daemon runs on: uvloop's where it is installed, asyncio's otherwise.

Why: once the daemon's own work per re-read was cut down (lean transport, group commit, no
task per read), asyncio's pure-Python loop was the largest share left of a re-read's CPU
(``_run_once``, the selector, ``Handle._run``, futures). uvloop runs the same loop in C on
libuv: interleaved runs of ``bench.hotpath`` measured ~15 % less CPU per re-read for
``mcpsubd`` (docs/benchmarks.md). Nothing in ``service/`` depends on which loop runs it; the
tests run the daemon on uvloop, as shipped.

``MCPSUB_EVENT_LOOP=asyncio`` runs the standard loop instead (to rule the loop out when
chasing a bug); uvloop is not installed on Windows, where asyncio's loop runs.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, TypeVar

T = TypeVar("T")

ENV = "MCPSUB_EVENT_LOOP"
CHOICES = ("uvloop", "asyncio")


class EventLoopError(ValueError):
    """``MCPSUB_EVENT_LOOP`` names no loop we know, or one that is not installed."""


def choose(env: Mapping[str, str] = os.environ) -> str:
    """The loop to run: ``uvloop`` when installed, unless ``MCPSUB_EVENT_LOOP`` says
    ``asyncio``."""
    wanted = env.get(ENV, "").strip().lower()
    if wanted and wanted not in CHOICES:
        raise EventLoopError(f"{ENV}={wanted!r}: expected one of {', '.join(CHOICES)}")
    if wanted == "asyncio":
        return "asyncio"
    try:
        import uvloop  # noqa: F401
    except ImportError:
        if wanted == "uvloop":
            raise EventLoopError(f"{ENV}=uvloop: uvloop is not installed") from None
        return "asyncio"
    return "uvloop"


def factory(name: str) -> Callable[[], asyncio.AbstractEventLoop]:
    if name == "uvloop":
        import uvloop

        return uvloop.new_event_loop
    return asyncio.new_event_loop


def name_of(loop: asyncio.AbstractEventLoop) -> str:
    """What ``/v1/status`` shows as ``eventLoop``."""
    return "uvloop" if type(loop).__module__.startswith("uvloop") else "asyncio"


def run(
    main: Coroutine[Any, Any, T], env: Mapping[str, str] = os.environ, *, loop: str | None = None
) -> T:
    """``asyncio.run(main)`` on ``loop``, or the one :func:`choose` picks. A caller that must
    answer a bad ``MCPSUB_EVENT_LOOP`` in its own words calls :func:`choose` first."""
    with asyncio.Runner(loop_factory=factory(loop or choose(env))) as runner:
        return runner.run(main)
