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

import time
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from labserver.console import Console
from labserver.eventlog import EventLog
from labserver.verdicts import group, judge, judge_client, report_json, report_markdown

TRIGGERS = frozenset({"listen.closed", "http.error", "resources.read"})


class VerdictLine:
    """Observer of an :class:`EventLog` that prints a client's final outcome once."""

    def __init__(self, log: EventLog, console: Console) -> None:
        self.log = log
        self.console = console
        self.printed: dict[str, str] = {}
        log.observers.append(self)

    def __call__(self, entry: dict[str, Any]) -> None:
        if entry.get("event") not in TRIGGERS or "request" not in entry:
            return
        groups = group(self.log.entries())
        key = next((k for k, es in groups.items() if entry in es), None)
        if key is None:
            return
        verdict = judge_client(key, groups[key], time.time())
        if verdict.outcome == "incomplete" or self.printed.get(key) == verdict.outcome:
            return
        self.printed[key] = verdict.outcome
        line = f"[lab/verdict] {verdict.summary()}"
        if verdict.outcome == "passed":
            self.console.info(line)
        else:
            self.console.error(line)

    def forget(self) -> None:
        """``/lab/reset`` empties the log; outcomes printed before it no longer apply."""
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
