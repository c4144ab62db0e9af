"""Wiring of :mod:`labserver.verdicts`: ``GET /lab/report(.md)`` and the console verdict line.

The report routes are read-only and mounted whether or not ``MCP_TEST_CONTROL`` is on: a
person checking an agent CLI against a plain ``mcp-lab-server`` needs them, and they
reveal nothing the console does not already print.

:class:`VerdictLine` watches the log and prints ``[lab/verdict] <client>: passed …`` (or
``failed (…)``) once a client's outcome becomes final or changes, judged when one of its
listen streams closes, it reads (polling shows there) or a request of it is refused (a
2025-era ``initialize``, a header mistake).
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict, deque
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from labserver.console import Console
from labserver.eventlog import EventLog
from labserver.verdicts import Grouper, judge, judge_client, report_json, report_markdown

TRIGGERS = frozenset({"listen.closed", "http.error", "resources.read"})
JUDGE_DELAY_SECONDS = 0.2  # coalesces a burst of triggers into one judgment per client
MAX_CLIENTS = 1000
MAX_CLIENT_ENTRIES = 5000


class VerdictLine:
    """Observer of an :class:`EventLog` that prints a client's final outcome once.

    Cheap on the request path (benchmarks run thousands of cycles against the lab): each
    entry is filed under its client in O(1); a trigger schedules one judgment of that client
    only, at most every ``JUDGE_DELAY_SECONDS``, over its own bounded history.
    """

    def __init__(self, log: EventLog, console: Console) -> None:
        self.console = console
        self.grouper = Grouper()
        self.history: OrderedDict[str, deque[dict[str, Any]]] = OrderedDict()
        self.pending: set[str] = set()
        self.printed: dict[str, str] = {}
        log.observers.append(self)

    def __call__(self, entry: dict[str, Any]) -> None:
        key = self.grouper.key_of(entry)
        if key is None:
            return
        history = self.history.get(key)
        if history is None:
            history = self.history[key] = deque(maxlen=MAX_CLIENT_ENTRIES)
            while len(self.history) > MAX_CLIENTS:
                self.history.popitem(last=False)
        history.append(entry)
        if entry.get("event") not in TRIGGERS or key in self.pending:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (a unit test driving the log directly): judge now
            self.judge(key)
            return
        self.pending.add(key)
        loop.call_later(JUDGE_DELAY_SECONDS, self.judge, key)

    def judge(self, key: str) -> None:
        self.pending.discard(key)
        history = self.history.get(key)
        if not history:
            return
        verdict = judge_client(key, list(history), time.time())
        if verdict.outcome == "incomplete" or self.printed.get(key) == verdict.outcome:
            return
        self.printed[key] = verdict.outcome
        line = f"[lab/verdict] {verdict.summary()}"
        if verdict.outcome == "passed":
            self.console.info(line)
        else:
            self.console.error(line)

    def forget(self) -> None:
        """``/lab/reset`` empties the log; what was judged before it no longer applies."""
        self.grouper.clear()
        self.history.clear()
        self.printed.clear()


async def report(request: Request) -> Response:
    now = time.time()
    verdicts = judge(request.app.state.lab.log.entries(), now)
    return JSONResponse(report_json(verdicts, now))


async def report_md(request: Request) -> Response:
    now = time.time()
    verdicts = judge(request.app.state.lab.log.entries(), now)
    return PlainTextResponse(
        report_markdown(verdicts, now), media_type="text/markdown; charset=utf-8"
    )


def report_routes() -> list[Route]:
    return [
        Route("/lab/report", report, methods=["GET"]),
        Route("/lab/report.md", report_md, methods=["GET"]),
    ]
