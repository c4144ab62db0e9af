"""What agents get from mcpsub: how fast a change reaches them, what many sessions cost the
daemon, and what the prompt hook adds to every prompt.

Run: ``.venv/bin/python -m bench.agents [--quick] [--out PATH]`` (default
``results/agents.md``; ``--quick``: fewer changes, sessions and runs, printed only).

1. **Latency at 20 changes/s.** One lab server, one watched URI, its text set through the lab's
   control API 20 times a second. Measured from just before each change is sent to the lab
   until (a) a ``wait_for_change`` call (over ``mcpsubctl mcp`` on stdio, called again at once
   with the returned cursor) returns a revision at least as new, and (b)
   ``notifications/resources/updated`` for that URI reaches a stdio client that sent
   ``resources/subscribe`` (2025-11-25 era). Target: p99 ≤ 50 ms for both.
2. **100 agent sessions at once**: half ``mcpsubctl mcp`` processes on stdio, half sessions on
   the daemon's ``/mcp`` over its unix socket; each subscribes to the same 10 URIs
   (``resources/subscribe``) and keeps a ``wait_for_change`` pending. Then each URI changes
   once. Reported: the daemon's RSS before the sessions and with all of them open (target:
   growth ≤ 50 MB) and whether every session saw every change, both as a notification and
   through its pending wait.
3. **The prompt hook**: ``mcpsubctl hook claude-code`` with nothing new, against a running
   daemon and a session that already has its cursor, next to ``python -c pass`` (round-robin,
   same interpreter). Target: median ≤ 2× the bare interpreter.

Only 127.0.0.1 and unix sockets are used; every process started is stopped on exit. The
machine's load is printed with every figure: on a shared 2-core machine it moves them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.agents_lab.report import keep_block
from bench.harness import (
    BIN,
    PYTHON,
    REPO_ROOT,
    Mcpsubd,
    code_version,
    load_average,
    machine,
    markdown_table,
    percentile,
    sigterm_to_interrupt,
    start_daemon,
    start_labs,
    status_kb,
    workspace,
)

URI = "test://bench/agents"
LATENCY_TARGET_MS = 50.0
RSS_TARGET_MB = 50.0
HOOK_TARGET = 2.0
RATE_PER_S = 20.0
SLOW_RATE_PER_S = 2.0
PROTOCOL = "2025-11-25"
RPC_TIMEOUT_S = 30.0


# ---- a minimal MCP client: newline-delimited JSON-RPC over a subprocess' stdio ---------------
@dataclass
class StdioSession:
    """One ``mcpsubctl mcp`` process as an agent's client sees it (2025-11-25 era)."""

    proc: asyncio.subprocess.Process
    pending: dict[int, asyncio.Future[dict[str, Any]]] = field(default_factory=dict)
    updates: list[tuple[float, str]] = field(default_factory=list)
    updated: asyncio.Event = field(default_factory=asyncio.Event)
    next_id: int = 0
    reader: asyncio.Task[None] | None = None

    @classmethod
    async def start(cls, env: dict[str, str]) -> StdioSession:
        proc = await asyncio.create_subprocess_exec(
            str(BIN / "mcpsubctl"),
            "mcp",
            "--no-autostart",
            env=env,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            limit=16 << 20,
        )
        session = cls(proc)
        session.reader = asyncio.create_task(session._read())
        await session.call(
            "initialize",
            {
                "protocolVersion": PROTOCOL,
                "capabilities": {},
                "clientInfo": {"name": "bench.agents", "version": "1"},
            },
        )
        await session.notify("notifications/initialized", {})
        return session

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            now = time.perf_counter()
            message = json.loads(line)
            if "id" in message and ("result" in message or "error" in message):
                future = self.pending.pop(message["id"], None)
                if future is not None and not future.done():
                    future.set_result(message)
            elif message.get("method") == "notifications/resources/updated":
                self.updates.append((now, message["params"]["uri"]))
                self.updated.set()

    async def _send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        await self.proc.stdin.drain()

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        await self._send({"jsonrpc": "2.0", "method": method, "params": params})

    async def call(
        self, method: str, params: dict[str, Any], timeout: float = RPC_TIMEOUT_S
    ) -> dict[str, Any]:
        self.next_id += 1
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.pending[self.next_id] = future
        await self._send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        answer = await asyncio.wait_for(future, timeout)
        if "error" in answer:
            raise RuntimeError(f"{method}: {answer['error']}")
        return dict(answer["result"])

    async def tool(
        self, name: str, arguments: dict[str, Any], timeout: float = RPC_TIMEOUT_S
    ) -> Any:
        result = await self.call("tools/call", {"name": name, "arguments": arguments}, timeout)
        if result.get("isError"):
            raise RuntimeError(f"{name}: {result.get('structuredContent') or result}")
        return result.get("structuredContent") or {}

    async def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            await asyncio.wait_for(self.proc.wait(), 5)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()
        if self.reader is not None:
            self.reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.reader


async def subscribe_and_read(daemon: Mcpsubd, url: str, uris: list[str]) -> None:
    """Subscribe through the REST API (the face's own ``subscribe`` tool only allows origins
    already subscribed) and wait until every URI's first revision is stored."""
    from bench.harness import bounded_wait, uds_client

    async with uds_client(daemon) as api:
        response = await api.post("/v1/subscriptions", json={"url": url, "uris": uris})
        response.raise_for_status()

        async def all_read() -> bool:
            for uri in uris:
                if (await api.get("/v1/content", params={"uri": uri})).status_code != 200:
                    return False
            return True

        await bounded_wait(all_read, 60, 0.05, "the first reads")


def face_env(daemon: Mcpsubd) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MCPSUB_", "MCP_PROBE_"))}
    env["MCPSUB_STATE_DIR"] = str(daemon.state_dir)
    return env


# ---- (3) the prompt hook ---------------------------------------------------------------------
def run_timed(argv: list[str], env: dict[str, str], stdin: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one run; the run must exit 0 and print nothing."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        argv, env=env, input=stdin, capture_output=True, text=True, timeout=30, cwd=REPO_ROOT
    )
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0 or done.stdout or done.stderr:
        raise SystemExit(f"bench: {argv!r} → {done.returncode} {done.stdout!r} {done.stderr!r}")
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def hook_startup(daemon: Mcpsubd, runs: int) -> dict[str, Any]:
    env = face_env(daemon)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    payload = json.dumps({"session_id": "bench-hook", "hook_event_name": "UserPromptSubmit"})
    rows = {
        "python -c pass": [str(PYTHON), "-c", "pass"],
        "mcpsubctl hook claude-code (nothing new)": [str(BIN / "mcpsubctl"), "hook", "claude-code"],
    }
    for argv in rows.values():  # warm-up; the hook's first call also sets the session's cursor
        run_timed(argv, env, payload)
    wall: dict[str, list[float]] = {label: [] for label in rows}
    cpu: dict[str, list[float]] = {label: [] for label in rows}
    for _ in range(runs):
        for label, argv in rows.items():
            w, c = run_timed(argv, env, payload)
            wall[label].append(w * 1000)
            cpu[label].append(c * 1000)
    return {"wall": wall, "cpu": cpu, "runs": runs, "load": load_average()}


def render_hook(result: dict[str, Any]) -> list[str]:
    wall, cpu = result["wall"], result["cpu"]
    base = statistics.median(wall["python -c pass"])
    rows = []
    for label in wall:
        median = statistics.median(wall[label])
        ratio = median / base
        target = "" if label.startswith("python") else f"≤ {HOOK_TARGET:g}×"
        met = "" if not target else ("met" if ratio <= HOOK_TARGET else "**missed**")
        rows.append(
            [
                f"`{label}`",
                f"{median:.1f}",
                f"{percentile(wall[label], 90):.1f}",
                f"{min(wall[label]):.1f}",
                f"{statistics.median(cpu[label]):.1f}",
                f"{ratio:.2f}×",
                target,
                met,
            ]
        )
    header = ["command", "median ms", "p90 ms", "min ms", "CPU ms", "× `python -c pass`"]
    return [
        "## The prompt hook with nothing new",
        "",
        f"{result['runs']} timed runs per command, round-robin after one warm-up each, against a"
        " running daemon; the hook's session already has its cursor, so each run is one"
        " `GET /v1/events` that returns nothing. Same interpreter (`.venv/bin/python`), bytecode"
        f" cached. Load average during the runs: {result['load']}.",
        "",
        *markdown_table([*header, "target", "met?"], rows, "lrrrrrll"),
        "",
    ]


# ---- HTTP sessions on the daemon's /mcp (2025-11-25 era, over the unix socket) ---------------
class HttpSession:
    """One handshake-era session on ``/mcp``: POSTs for requests, one GET for notifications."""

    def __init__(self, daemon: Mcpsubd) -> None:
        import httpx

        self.http = httpx.AsyncClient(
            transport=httpx.AsyncHTTPTransport(uds=str(daemon.socket)),
            base_url="http://localhost",
            timeout=httpx.Timeout(RPC_TIMEOUT_S, read=None),
        )
        self.session_id = ""
        self.next_id = 0
        self.updates: list[tuple[float, str]] = []
        self.updated = asyncio.Event()
        self.stream: asyncio.Task[None] | None = None

    def _headers(self) -> dict[str, str]:
        headers = {
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
        }
        if self.session_id:
            headers["Mcp-Session-Id"] = self.session_id
            headers["MCP-Protocol-Version"] = PROTOCOL
        return headers

    @classmethod
    async def start(cls, daemon: Mcpsubd) -> HttpSession:
        session = cls(daemon)
        await session.call(
            "initialize",
            {
                "protocolVersion": PROTOCOL,
                "capabilities": {},
                "clientInfo": {"name": "bench.agents", "version": "1"},
            },
        )
        await session.http.post(
            "/mcp",
            json={"jsonrpc": "2.0", "method": "notifications/initialized"},
            headers=session._headers(),
        )
        ready = asyncio.Event()
        session.stream = asyncio.create_task(session._listen(ready))
        await asyncio.wait_for(ready.wait(), RPC_TIMEOUT_S)
        return session

    async def _listen(self, ready: asyncio.Event) -> None:
        headers = {**self._headers(), "Accept": "text/event-stream"}
        async with self.http.stream("GET", "/mcp", headers=headers) as response:
            if response.status_code != 200:
                raise RuntimeError(f"GET /mcp → {response.status_code}")
            ready.set()
            async for line in response.aiter_lines():
                if not line.startswith("data:"):
                    continue
                now = time.perf_counter()
                message = json.loads(line[5:])
                if message.get("method") == "notifications/resources/updated":
                    self.updates.append((now, message["params"]["uri"]))
                    self.updated.set()

    async def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        body = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        async with self.http.stream("POST", "/mcp", json=body, headers=self._headers()) as response:
            if not self.session_id:
                self.session_id = response.headers.get("mcp-session-id", "")
            if response.status_code != 200:
                await response.aread()
                raise RuntimeError(f"{method} → HTTP {response.status_code} {response.text[:200]}")
            if response.headers.get("content-type", "").startswith("application/json"):
                answer = json.loads(await response.aread())
            else:
                answer = {}
                async for line in response.aiter_lines():
                    if line.startswith("data:"):
                        message = json.loads(line[5:])
                        if message.get("id") == self.next_id:
                            answer = message
                            break
        if "error" in answer or "result" not in answer:
            raise RuntimeError(f"{method}: {answer}")
        return dict(answer["result"])

    async def tool(self, name: str, arguments: dict[str, Any]) -> Any:
        result = await self.call("tools/call", {"name": name, "arguments": arguments})
        if result.get("isError"):
            raise RuntimeError(f"{name}: {result.get('structuredContent') or result}")
        return result.get("structuredContent") or {}

    async def close(self) -> None:
        if self.stream is not None:
            self.stream.cancel()
            with contextlib.suppress(BaseException):
                await self.stream
        with contextlib.suppress(Exception):
            await self.http.delete("/mcp", headers=self._headers())
        await self.http.aclose()


# ---- (1) latency at 20 changes/s -------------------------------------------------------------
def change_text(i: int, tag: str) -> str:
    return f"agents bench {tag} change {i}"


def index_of(text: object, tag: str) -> int:
    prefix = change_text(0, tag)[:-1]
    if isinstance(text, str) and text.startswith(prefix) and text[len(prefix) :].isdigit():
        return int(text[len(prefix) :])
    return -1


def latencies(sent: list[float], learned: list[tuple[float, int]]) -> list[float]:
    """Per change i: ms from sending it until the client first knew a revision >= i."""
    out: list[float] = []
    for i, t0 in enumerate(sent):
        t1 = next((t for t, index in learned if index >= i and t >= t0), None)
        if t1 is not None:
            out.append((t1 - t0) * 1000)
    return out


async def latency_phase(daemon: Mcpsubd, lab: Any, changes: int, rate: float) -> dict[str, Any]:
    import httpx

    from bench.harness import LabConnection, predict_hash

    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.put(
            f"{lab.base_url}/lab/resources", json={"uri": URI, "text": "start", "notify": True}
        )
        response.raise_for_status()
    env = face_env(daemon)
    waiter = await StdioSession.start(env)
    listener = await StdioSession.start(env)
    try:
        await subscribe_and_read(daemon, lab.url, [URI])
        await listener.call("resources/subscribe", {"uri": URI})
        cursor = (await waiter.tool("wait_for_change", {"uri": URI, "timeoutSeconds": 0}))["cursor"]
        start_cursor = cursor
        learned_wait: list[tuple[float, int]] = []
        call_ms: list[float] = []
        done = asyncio.Event()
        tag = f"{rate:g}/s"

        async def wait_loop() -> None:
            nonlocal cursor
            while not done.is_set():
                asked = time.perf_counter()
                got = await waiter.tool(
                    "wait_for_change", {"uri": URI, "after": cursor, "timeoutSeconds": 5}
                )
                now = time.perf_counter()
                if got.get("changed"):
                    cursor = got.get("cursor") or got["eventId"]
                    index = index_of(got.get("finalText"), tag)
                    learned_wait.append((now, index))
                    call_ms.append((now - asked) * 1000)
                    if index == changes - 1:
                        return
                else:
                    cursor = got["cursor"]

        waiting = asyncio.create_task(wait_loop())
        lab_conn = await LabConnection(lab).open()
        sent: list[float] = []
        interval = 1.0 / rate
        begin = time.perf_counter()
        load_before = load_average()
        for i in range(changes):
            delay = begin + i * interval - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)  # the pace of the changes, not synchronisation
            sent.append((await lab_conn.put(URI, change_text(i, tag)))[0])
        await lab_conn.close()
        try:
            await asyncio.wait_for(waiting, 60)
        finally:
            done.set()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            events = await _events_after(daemon, start_cursor)
            if len(listener.updates) >= len(events) and events:
                break
            listener.updated.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(listener.updated.wait(), 1.0)
        events = await _events_after(daemon, start_cursor)
        by_hash = {predict_hash(URI, change_text(i, tag)): i for i in range(changes)}
        indices = [by_hash.get(str((e.get("data") or {}).get("contentHash")), -1) for e in events]
        learned_note = [
            (t, indices[k]) for k, (t, _) in enumerate(listener.updates[: len(indices)])
        ]
        return {
            "rate": rate,
            "call_ms": call_ms,
            "changes": changes,
            "events": len(events),
            "notifications": len(listener.updates),
            "wait": latencies(sent, learned_wait),
            "notify": latencies(sent, learned_note),
            "load": f"{load_before} → {load_average()}",
        }
    finally:
        await waiter.close()
        await listener.close()


async def _events_after(daemon: Mcpsubd, after: int) -> list[dict[str, Any]]:
    from bench.harness import uds_client

    events: list[dict[str, Any]] = []
    async with uds_client(daemon) as api:
        while True:
            params: dict[str, str | int] = {
                "after": after,
                "limit": 1000,
                "type": "resource.updated",
                "uri": URI,
            }
            page = (await api.get("/v1/events", params=params)).json()
            events += page["events"]
            if len(page["events"]) < 1000:
                return events
            after = page["nextAfter"]


def render_latency(results: list[dict[str, Any]]) -> list[str]:
    rows = []
    for result in results:
        rate = result["rate"]
        targeted = rate == RATE_PER_S
        for key, label in (
            ("wait", "`wait_for_change` returns (called again at once with the cursor)"),
            ("notify", "`notifications/resources/updated` reaches a `resources/subscribe` client"),
        ):
            values = result[key]
            target = f"≤ {LATENCY_TARGET_MS:g}" if targeted else ""
            if not values:
                rows.append([f"{rate:g}/s", label, "-", "-", "-", "-", target, "**no data**"])
                continue
            p99 = percentile(values, 99)
            met = ("met" if p99 <= LATENCY_TARGET_MS else "**missed**") if targeted else ""
            rows.append(
                [
                    f"{rate:g}/s",
                    label,
                    f"{percentile(values, 50):.1f}",
                    f"{percentile(values, 90):.1f}",
                    f"{p99:.1f}",
                    f"{max(values):.1f}",
                    target,
                    met,
                ]
            )
    notes = []
    for result in results:
        calls = result["call_ms"]
        cost = ""
        if result["rate"] == RATE_PER_S and calls:
            cost = (
                f"; one `wait_for_change` call took {statistics.median(calls):.0f} ms"
                " (median) from call to answer, the wait for the next change included"
            )
        notes.append(
            f"* {result['rate']:g}/s: {result['changes']} changes; the daemon stored"
            f" {result['events']} revisions (changes that land while a read is in flight are"
            f" merged), the subscribed client got {result['notifications']} notifications{cost}."
            f" Load average: {result['load']}."
        )
    return [
        "## A change reaches an agent",
        "",
        "One URI on one lab server, its text set through the lab's control API at a steady rate;"
        " measured from just before each change is sent to the lab until the client first"
        " holds that revision or a newer one. Both clients are `mcpsubctl mcp` processes on"
        " stdio in the 2025-11-25 era; notifications are matched to revisions through the"
        " events' content hashes. The target applies at 20 changes/s; the slower run shows a"
        " change's latency when no backlog builds up (each `wait_for_change` returns one change,"
        " so once a call costs more than the interval between changes, waits fall behind)."
        " The stdio face describes a change from the revisions its event stream carried"
        " (`include=content`) when it holds both sides, so a call makes no local-API request"
        " then (the first two changes a process describes, a revision bigger than 32 KiB and"
        " the one after it cost one `/v1/wait` each).",
        "",
        *markdown_table(
            ["rate", "path", "p50 ms", "p90 ms", "p99 ms", "max ms", "target p99 ms", "met?"],
            rows,
            "llrrrrrl",
        ),
        "",
        *notes,
        "",
    ]


# ---- (2) 100 sessions at once ------------------------------------------------------------------
SESSION_URIS = [f"test://bench/sessions/{i}" for i in range(10)]
OPEN_BATCH = 10
"""Sessions opened at once: enough to finish in a minute, few enough not to time out."""


async def sessions_phase(daemon: Mcpsubd, lab: Any, count: int) -> dict[str, Any]:
    import httpx

    async with httpx.AsyncClient(timeout=10) as http:
        for uri in SESSION_URIS:
            body = {"uri": uri, "text": "start", "notify": True}
            (await http.put(f"{lab.base_url}/lab/resources", json=body)).raise_for_status()
    env = face_env(daemon)
    await subscribe_and_read(daemon, lab.url, SESSION_URIS)
    rss_before = status_kb(daemon.pid, "VmRSS") / 1024
    sessions: list[Any] = []
    waits: list[asyncio.Task[Any]] = []
    started = time.perf_counter()
    try:
        stdio_count = count // 2

        async def open_one(i: int) -> Any:
            session: Any = await (
                StdioSession.start(env) if i < stdio_count else HttpSession.start(daemon)
            )
            for uri in SESSION_URIS:
                await session.call("resources/subscribe", {"uri": uri})
            return session

        for first in range(0, count, OPEN_BATCH):  # each stdio one is a Python start-up
            batch = range(first, min(first + OPEN_BATCH, count))
            sessions += await asyncio.gather(*(open_one(i) for i in batch))
        cursor = (await sessions[0].tool("wait_for_change", {"timeoutSeconds": 0}))["cursor"]
        for session in sessions:
            args = {"uri": "test://bench/sessions/*", "after": cursor, "timeoutSeconds": 120}
            waits.append(asyncio.create_task(session.tool("wait_for_change", args)))
        open_s = time.perf_counter() - started
        # every wait is pending (no answer can come before a change); let the daemon settle
        await asyncio.sleep(2.0)  # a measurement window, not synchronisation
        rss_open = status_kb(daemon.pid, "VmRSS") / 1024
        load_open = load_average()
        async with httpx.AsyncClient(timeout=10) as http:
            for uri in SESSION_URIS:
                body = {"uri": uri, "text": "changed", "notify": True}
                (await http.put(f"{lab.base_url}/lab/resources", json=body)).raise_for_status()
        results = await asyncio.wait_for(asyncio.gather(*waits, return_exceptions=True), 120)
        waits_ok = sum(
            1
            for r in results
            if isinstance(r, dict)
            and r.get("changed")
            and str(r.get("uri", "")).startswith("test://bench/sessions/")
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if all({u for _, u in s.updates} >= set(SESSION_URIS) for s in sessions):
                break
            await asyncio.sleep(0.1)  # polling the clients' own state, bounded
        complete = sum(1 for s in sessions if {u for _, u in s.updates} >= set(SESSION_URIS))
        rss_after = status_kb(daemon.pid, "VmRSS") / 1024
        return {
            "sessions": count,
            "stdio": stdio_count,
            "http": count - stdio_count,
            "open_s": open_s,
            "rss_before": rss_before,
            "rss_open": rss_open,
            "rss_after": rss_after,
            "waits_ok": waits_ok,
            "complete": complete,
            "load": f"{load_open} (sessions open) → {load_average()}",
        }
    finally:
        for task in waits:
            task.cancel()
        for session in sessions:
            with contextlib.suppress(Exception):
                await session.close()


def render_sessions(result: dict[str, Any]) -> list[str]:
    growth = result["rss_open"] - result["rss_before"]
    n = result["sessions"]
    rows = [
        ["daemon RSS before the sessions", f"{result['rss_before']:.1f} MB", "", ""],
        [
            f"daemon RSS with {n} sessions open, 10 subscriptions and a pending wait each",
            f"{result['rss_open']:.1f} MB (+{growth:.1f} MB)",
            f"growth ≤ {RSS_TARGET_MB:g} MB",
            "met" if growth <= RSS_TARGET_MB else "**missed**",
        ],
        ["daemon RSS after every change was delivered", f"{result['rss_after']:.1f} MB", "", ""],
        [
            "sessions that got all 10 `notifications/resources/updated`",
            f"{result['complete']} / {n}",
            f"{n} / {n}",
            "met" if result["complete"] == n else "**missed**",
        ],
        [
            "pending `wait_for_change` calls that returned a change",
            f"{result['waits_ok']} / {n}",
            f"{n} / {n}",
            "met" if result["waits_ok"] == n else "**missed**",
        ],
    ]
    return [
        f"## {n} agent sessions at once",
        "",
        f"{result['stdio']} `mcpsubctl mcp` processes on stdio and {result['http']} sessions on"
        " the daemon's `/mcp` (unix socket), all in the 2025-11-25 era; each sent"
        " `resources/subscribe` for the same 10 URIs and then `wait_for_change` (pattern"
        " `test://bench/sessions/*`, 120 s). Opening them took"
        f" {result['open_s']:.1f} s. Then each URI changed once. Load average: {result['load']}.",
        "",
        *markdown_table(["what", "measured", "target", "met?"], rows, "lrll"),
        "",
    ]


# ---- the report -------------------------------------------------------------------------------
def render(parts: list[list[str]], quick: bool) -> str:
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    head = [
        "# Agents: latency, many sessions, the prompt hook",
        "",
        f"Generated by `bench/agents.py`{' --quick' if quick else ''} on {stamp} ({code_version()}).",
        f"Machine: {machine()}.",
        "The machine is shared with other work; the load average is given with each figure.",
        "",
    ]
    return "\n".join(head + [line for part in parts for line in part])


async def run(args: argparse.Namespace) -> str:
    parts: list[list[str]] = []
    with workspace() as (children, tmp):
        lab = start_labs(children, 1, {"MCP_TEST_UPDATE_DELAY_SECONDS": "3600"})[0]
        daemon = start_daemon(children, tmp / "state")
        if not args.skip_face:
            runs = [
                await latency_phase(daemon, lab, args.changes, RATE_PER_S),
                await latency_phase(daemon, lab, max(10, args.changes // 10), SLOW_RATE_PER_S),
            ]
            parts.append(render_latency(runs))
            print("\n".join(parts[-1]), flush=True)
            sessions = await sessions_phase(daemon, lab, args.sessions)
            parts.append(render_sessions(sessions))
            print("\n".join(parts[-1]), flush=True)
        hook = hook_startup(daemon, args.runs)
        parts.append(render_hook(hook))
        print("\n".join(parts[-1]), flush=True)
        del children
    return render(parts, args.quick)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "results" / "agents.md")
    parser.add_argument("--quick", action="store_true", help="a smoke run: small numbers")
    parser.add_argument("--changes", type=int, default=400, help="changes at 20/s (default 400)")
    parser.add_argument("--sessions", type=int, default=100, help="sessions at once (default 100)")
    parser.add_argument("--runs", type=int, default=30, help="timed hook runs (default 30)")
    parser.add_argument("--skip-face", action="store_true", help="only the prompt hook")
    args = parser.parse_args()
    if args.quick:
        args.changes, args.sessions, args.runs = 60, 10, 5
    signal.signal(signal.SIGTERM, sigterm_to_interrupt)
    report = asyncio.run(run(args))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    # the agent lab's block (make agents-lab) stays: it is measured by another bench
    args.out.write_text(keep_block(args.out, report + "\n"), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
