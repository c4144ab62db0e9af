"""Scale, throughput and latency of ``mcpsubd`` against real lab servers on loopback.

Run: ``.venv/bin/python bench/daemon.py [--quick] [--out PATH] [--py-spy PATH]``
(``make bench``). The full run writes ``results/daemon.md``; ``--quick`` (a smaller variant,
under a minute) only prints its report unless ``--out`` is given.

Everything runs on this machine: lab servers (``python -m labserver`` on 127.0.0.1, port 0,
control on, log silent, keep-alive 15 s) and one ``mcpsubd`` with default settings and a
private state directory, driven over its unix socket. Three phases:

(a) **Scale**: L server links × 10 URIs (full: 1,000 × 10 = 10,000 subscriptions) spread
    over a few lab processes. A link is a distinct server URL, ``{lab}/mcp?link=N`` (the lab
    routes by path, so the query only makes the URL distinct). The subscriptions are stored
    before the daemon starts (``mcpsubd migrate``, then the rows ``Store.add_subscription``
    writes, through ``service.store.schema``): through the API, 10,000 take ~10 minutes here,
    more than this bench's budget. From the daemon's start we time until every link's stream
    is open, every subscription is ``active`` and every URI's first read is stored, and check
    the labs really hold L streams. After a warm-up we read the daemon's RSS (``VmRSS``) and
    CPU time (``utime+stime`` of ``/proc/PID/stat``) over an idle window; then the API path
    is timed on a few more links added with ``POST /v1/subscriptions``.
    Targets: RSS ≤ 300 MB, idle CPU ≤ 2 % of one core.
(b) **Throughput**: a fresh daemon, one lab, 10 links × 10 URIs, every link with its own
    URIs (``test://bench/<link>/<k>``) so one change is one notification to one stream and
    at most one revision. An SSE client follows ``/v1/events/stream``; the driver changes
    the URIs round-robin (``PUT /lab/resources`` with notify, over a few keep-alive
    connections, as fast as the lab takes them), each to a unique text whose
    ``contentHash`` we predict. Reported: changes/s sent, revisions/s delivered over SSE,
    changes coalesced (no revision of their own because a later read covered them), and
    whether every URI's last text arrived. Target ≥ 1,000 revisions/s delivered.
(c) **Latency**: the same daemon, first with changes sent one at a time (each awaited: the
    path without a queue), then at a steady 200 changes/s (round-robin, so a URI changes
    every 0.5 s): per change, SSE arrival of its predicted hash − send time.
    Target p99 ≤ 50 ms at 200/s.

"Where the time goes": CPU of each process per phase from ``/proc``, the latency split
at the daemon's event timestamp, and, with ``--py-spy`` (or ``py-spy`` on PATH), a sampled
profile of the daemon during (b).

Only 127.0.0.1 and the daemon's unix socket are contacted; every wait is bounded; every
process started here is stopped on exit, on an exception and on Ctrl-C/SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import datetime
import hashlib
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

REPO_ROOT = Path(__file__).resolve().parents[1]
PYTHON = REPO_ROOT / ".venv" / "bin" / "python"
BIN = PYTHON.parent
CLK_TCK = os.sysconf("SC_CLK_TCK")
URIS_PER_LINK = 10
STARTUP_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 15.0
TARGET_RSS_MB = 300.0
TARGET_IDLE_CPU_PCT = 2.0
TARGET_UPDATES_PER_S = 1000.0
TARGET_P99_MS = 50.0
_LISTENING = re.compile(r"listening on (http://127\.0\.0\.1:(\d+))/mcp")


@dataclass(frozen=True)
class Plan:
    name: str
    links: int
    labs: int
    warmup_s: float
    idle_s: float
    ramp_timeout_s: float
    burst_changes: int
    steady_s: float
    api_links: int = 20
    sequential: int = 100
    tput_links: int = 10
    burst_connections: int = 8
    steady_rate: float = 200.0
    steady_connections: int = 4


FULL = Plan("full", 1000, 4, 10.0, 30.0, 480.0, 5000, 10.0)
QUICK = Plan("quick", 100, 2, 1.0, 5.0, 40.0, 600, 4.0, api_links=2, sequential=30)


# ---- processes ---------------------------------------------------------------------------------
class Child:
    """A subprocess in its own session; stdout+stderr drained on a thread (bounded tail)."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str]) -> None:
        self.name = name
        self.argv = argv
        self.env = env
        self.proc: subprocess.Popen[str] | None = None
        self.tail: collections.deque[str] = collections.deque(maxlen=40)
        self.line_count = 0
        self._reader: threading.Thread | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            self.argv,
            env=self.env,
            cwd=str(REPO_ROOT),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # Ctrl-C reaches only us; we stop the children in order
        )
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()

    def _drain(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:  # never let the pipe fill
            self.line_count += 1
            self.tail.append(line.rstrip("\n"))
            self.on_line(line)

    def on_line(self, line: str) -> None:
        pass

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self._reader is not None:
            self._reader.join(2)

    def output(self) -> str:
        return "\n".join(self.tail)


class Lab(Child):
    def __init__(self, index: int, env: dict[str, str]) -> None:
        full_env = {
            **os.environ,
            "PYTHONPATH": str(REPO_ROOT),
            "PYTHONUNBUFFERED": "1",
            "MCP_TEST_CONTROL": "true",
            "MCP_TEST_LOG_LEVEL": "silent",
            "MCP_TEST_KEEPALIVE_SECONDS": "15",
            "MCP_TEST_UPDATE_DELAY_SECONDS": "3600",  # the review resource stays quiet
            **env,
        }
        super().__init__(
            f"lab{index}",
            [str(PYTHON), "-m", "labserver", "--host", "127.0.0.1", "--port", "0"],
            full_env,
        )
        self.base_url = ""
        self.port = 0
        self.ready = threading.Event()

    def on_line(self, line: str) -> None:
        match = _LISTENING.search(line)
        if match and not self.ready.is_set():
            self.base_url, self.port = match.group(1), int(match.group(2))
            self.ready.set()

    def wait_ready(self) -> None:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline and not self.ready.is_set() and self.alive():
            self.ready.wait(0.05)
        if not self.ready.is_set():
            raise RuntimeError(f"{self.name} did not start:\n{self.output()}")

    @property
    def url(self) -> str:
        return f"{self.base_url}/mcp"


class Mcpsubd(Child):
    def __init__(self, state_dir: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MCPSUB_", "MCP_PROBE_"))}
        env.update(
            {
                "MCPSUB_STATE_DIR": str(state_dir),
                "MCPSUB_LOG_FORMAT": "json",
                # a token store that does not exist: never the user's login cache
                "MCP_PROBE_TOKEN_STORE_PATH": str(state_dir.parent / "no-tokens.sqlite"),
            }
        )
        super().__init__("mcpsubd", [str(BIN / "mcpsubd")], env)
        self.state_dir = state_dir
        self.socket = state_dir / "api.sock"
        self.link_down: collections.Counter[str] = collections.Counter()
        """``code`` of every "link down" log line: why links reconnected."""
        self.link_down_errors: dict[str, str] = {}
        """The first error message seen for each code."""

    def on_line(self, line: str) -> None:
        if '"link down"' not in line:
            return
        try:
            record = json.loads(line)
        except ValueError:
            self.link_down["(unparsed log line)"] += 1
            return
        code = str(record.get("code"))
        self.link_down[code] += 1
        self.link_down_errors.setdefault(code, str(record.get("error", ""))[:160])

    def migrate(self) -> None:
        """``mcpsubd migrate``: create the state directory and the database schema."""
        done = subprocess.run(
            [*self.argv, "migrate"],
            env=self.env,
            cwd=str(REPO_ROOT),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"mcpsubd migrate exited {done.returncode}:\n{done.stdout}{done.stderr}"
            )

    def wait_ready(self) -> None:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline and self.alive():
            if self.socket.exists():
                try:
                    with httpx.Client(
                        transport=httpx.HTTPTransport(uds=str(self.socket)),
                        base_url="http://localhost",
                        timeout=5.0,
                    ) as client:
                        if client.get("/readyz").status_code == 200:
                            return
                except httpx.TransportError:
                    pass
            time.sleep(0.05)
        raise RuntimeError(f"mcpsubd did not become ready:\n{self.output()}")


class Children:
    """Every process this bench started; stopped in reverse order (daemons before labs)."""

    def __init__(self) -> None:
        self.started: list[Child] = []

    def add(self, child: Child) -> Child:
        self.started.append(child)
        child.start()
        return child

    def stop(self, *which: Child) -> None:
        for child in reversed(which or tuple(self.started)):
            try:
                child.stop()
            finally:
                if child in self.started:
                    self.started.remove(child)

    def stop_all(self) -> None:
        self.stop()


def start_labs(children: Children, count: int, env: dict[str, str]) -> list[Lab]:
    labs = [Lab(i, env) for i in range(count)]
    for lab in labs:  # start them all, then wait: they boot in parallel
        children.add(lab)
    for lab in labs:
        lab.wait_ready()
    return labs


def start_daemon(children: Children, state_dir: Path, daemon: Mcpsubd | None = None) -> Mcpsubd:
    daemon = daemon or Mcpsubd(state_dir)
    children.add(daemon)
    daemon.wait_ready()
    return daemon


def seed_subscriptions(daemon: Mcpsubd, pairs: list[tuple[str, str]]) -> None:
    """Store ``pairs`` (url, uri) in a stopped daemon's database, as the API would.

    The same ``servers`` and ``subscriptions`` rows ``Store.add_subscription`` writes (without
    the ``subscription.created`` events), in one transaction through the project's own schema
    module; the daemon then starts every link with its whole URI set, as after a restart.
    """
    sys.path.insert(0, str(REPO_ROOT))
    from sqlalchemy import create_engine, insert, select

    from service.daemon.config import load_settings
    from service.store import schema

    daemon.migrate()
    settings = load_settings(env={"MCPSUB_STATE_DIR": str(daemon.state_dir)})
    engine = create_engine(f"sqlite:///{settings.db_path}")
    try:
        now = time.time()
        urls = list(dict.fromkeys(url for url, _ in pairs))
        with engine.begin() as conn:
            conn.execute(
                insert(schema.servers),
                [
                    {"url": u, "credential_key": "", "created_at": now, "updated_at": now}
                    for u in urls
                ],
            )
            ids = {
                row.url: row.id
                for row in conn.execute(select(schema.servers.c.url, schema.servers.c.id))
            }
            conn.execute(
                insert(schema.subscriptions),
                [
                    {"server_id": ids[url], "uri": uri, "created_at": now, "updated_at": now}
                    for url, uri in pairs
                ],
            )
    finally:
        engine.dispose()


_METRIC = re.compile(r'^(mcpsub_[a-z_]+)(?:\{table="(\w+)"\})? ([0-9.e+-]+)$', re.M)


async def daemon_metrics(api: httpx.AsyncClient) -> dict[str, float]:
    """``GET /metrics`` as {name or name[table]: value}; cheaper than ``/v1/status``."""
    text = (await api.get("/metrics")).text
    return {
        (f"{name}[{table}]" if table else name): float(value)
        for name, table, value in _METRIC.findall(text)
    }


# ---- /proc ------------------------------------------------------------------------------------
def cpu_seconds(pid: int) -> float:
    """utime + stime of every thread of ``pid``, in seconds."""
    raw = Path(f"/proc/{pid}/stat").read_text()
    fields = raw[raw.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # fields 14 and 15 of stat


def status_kb(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def open_fds(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return -1


class CpuMeter:
    """CPU % of one core for several processes over a window."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids
        self.start_wall = time.perf_counter()
        self.start = {name: cpu_seconds(pid) for name, pid in pids.items()}
        self.used: dict[str, float] = {}
        self.elapsed = 0.0

    def stop(self) -> CpuMeter:
        self.elapsed = time.perf_counter() - self.start_wall
        self.used = {name: cpu_seconds(pid) - self.start[name] for name, pid in self.pids.items()}
        return self

    def pct(self, name: str) -> float:
        return 100.0 * self.used[name] / self.elapsed if self.elapsed else 0.0


# ---- helpers ----------------------------------------------------------------------------------
def predict_hash(uri: str, text: str) -> str:
    """``service.store.store.content_hash`` of the lab's read result for ``uri``.

    The lab answers ``resources/read`` with ``contents: [{uri, mimeType: "text/plain",
    text}]`` (``labserver.resources.Resource.contents``); the store hashes the canonical
    JSON (sorted keys, no spaces) of that list.
    """
    contents = [{"uri": uri, "mimeType": "text/plain", "text": text}]
    canonical = json.dumps(contents, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def check_hash_prediction() -> None:
    sys.path.insert(0, str(REPO_ROOT))
    from service.store.store import content_hash

    sample = [{"uri": "test://bench/0", "mimeType": "text/plain", "text": "chg 1"}]
    if content_hash(sample) != predict_hash("test://bench/0", "chg 1"):
        raise SystemExit("bench: predict_hash no longer matches service.store.content_hash")


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * pct // 100))  # nearest rank
    return ordered[int(rank) - 1]


def uds_client(daemon: Mcpsubd, timeout: float = 30.0) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.AsyncHTTPTransport(uds=str(daemon.socket)),
        base_url="http://localhost",
        timeout=timeout,
    )


async def bounded_wait(
    check: Callable[[], Awaitable[bool]], timeout: float, interval: float, what: str
) -> float:
    """Poll ``check`` until true; returns the seconds it took, raises TimeoutError."""
    start = time.perf_counter()
    deadline = start + timeout
    while True:
        if await check():
            return time.perf_counter() - start
        if time.perf_counter() >= deadline:
            raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}")
        await asyncio.sleep(interval)


async def lab_put(http: httpx.AsyncClient, lab: Lab, uri: str, text: str, notify: bool) -> None:
    r = await http.put(
        f"{lab.base_url}/lab/resources", json={"uri": uri, "text": text, "notify": notify}
    )
    if r.status_code not in (200, 201):
        raise RuntimeError(f"{lab.name}: PUT {uri} -> {r.status_code} {r.text}")


async def lab_streams(http: httpx.AsyncClient, labs: list[Lab]) -> list[int]:
    states = await asyncio.gather(*(http.get(f"{lab.base_url}/lab/state") for lab in labs))
    return [int(s.json()["streams"]) for s in states]


class LabConnection:
    """One keep-alive HTTP/1.1 connection for ``PUT /lab/resources``, minimal on purpose.

    The driver should cost the machine as little as possible (lab, daemon and bench share
    the CPUs); a raw request is a few microseconds of our CPU instead of httpx's stack.
    """

    def __init__(self, lab: Lab) -> None:
        self.lab = lab
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def open(self) -> LabConnection:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.lab.port)
        return self

    async def put(self, uri: str, text: str) -> tuple[float, float]:
        """Send one change; returns (perf_counter, time.time()) taken just before the write."""
        assert self.reader is not None and self.writer is not None
        body = json.dumps({"uri": uri, "text": text, "notify": True}).encode()
        head = (
            f"PUT /lab/resources HTTP/1.1\r\nHost: 127.0.0.1:{self.lab.port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode()
        sent = time.perf_counter(), time.time()
        self.writer.write(head + body)
        await self.writer.drain()
        raw = await asyncio.wait_for(self.reader.readuntil(b"\r\n\r\n"), 10.0)
        lines = raw.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        length = 0
        for line in lines[1:]:
            if line.lower().startswith("content-length:"):
                length = int(line.split(":", 1)[1])
        payload = await asyncio.wait_for(self.reader.readexactly(length), 10.0)
        if status != 200:
            raise RuntimeError(f"PUT /lab/resources {uri} -> {status} {payload[:200]!r}")
        return sent

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            with contextlib.suppress(Exception):
                await self.writer.wait_closed()


@dataclass
class Arrival:
    perf: float
    wall: float
    created_at: float
    uri: str


class SseFollower:
    """Follows ``/v1/events/stream?type=resource.updated`` and indexes events by contentHash."""

    def __init__(self, api: httpx.AsyncClient, after: int) -> None:
        self.api = api
        self.after = after
        self.by_hash: dict[str, Arrival] = {}
        self.count = 0
        self.connected = asyncio.Event()
        self.changed = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        params = {"type": "resource.updated", "after": str(self.after)}
        timeout = httpx.Timeout(30.0, read=None)
        async with self.api.stream(
            "GET", "/v1/events/stream", params=params, timeout=timeout
        ) as response:
            if response.status_code != 200:
                raise RuntimeError(f"/v1/events/stream -> {response.status_code}")
            self.connected.set()
            event = ""
            async for line in response.aiter_lines():
                if line.startswith("event:"):
                    event = line[6:].strip()
                elif line.startswith("data:") and event == "resource.updated":
                    now, wall = time.perf_counter(), time.time()
                    data = json.loads(line[5:])
                    digest = (data.get("data") or {}).get("contentHash")
                    self.count += 1
                    if isinstance(digest, str) and digest not in self.by_hash:
                        self.by_hash[digest] = Arrival(
                            now, wall, float(data.get("createdAt") or 0.0), str(data.get("uri"))
                        )
                    self.changed.set()
                elif not line:
                    event = ""

    async def wait_for(self, hashes: set[str], timeout: float) -> bool:
        """True once every hash in ``hashes`` arrived; False after ``timeout``."""
        deadline = time.perf_counter() + timeout
        while not hashes <= self.by_hash.keys():
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                return False
            if self.task is not None and self.task.done():
                self.task.result()  # re-raise what ended the stream
                return False
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), min(remaining, 1.0))
        return True

    async def wait_quiet(self, quiet_s: float, timeout: float) -> None:
        """Until no event arrived for ``quiet_s`` (bounded by ``timeout``)."""
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            seen = self.count
            await asyncio.sleep(quiet_s)
            if self.count == seen:
                return

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.task


# ---- py-spy (optional) ------------------------------------------------------------------------
class Profiler:
    """``py-spy record --format raw`` of one pid, stopped with SIGINT; summarised by function."""

    def __init__(self, binary: str | None, pid: int, out: Path) -> None:
        self.binary = binary
        self.pid = pid
        self.out = out
        self._log = out.with_suffix(".log")
        self._log_file: Any = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.error: str | None = None

    def start(self) -> None:
        if not self.binary:
            return
        self._log_file = self._log.open("wb")  # a file: nobody drains a pipe while it records
        self.proc = subprocess.Popen(
            [
                self.binary,
                "record",
                "--pid",
                str(self.pid),
                "--rate",
                "200",
                "--format",
                "raw",
                "--output",
                str(self.out),
                "--nonblocking",
                "--gil",  # only the thread holding the GIL: Python CPU, not GIL waits
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._log_file,
            start_new_session=True,
        )

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self._log_file is not None:
            self._log_file.close()
        if self.proc.returncode not in (0, -signal.SIGINT) or not self.out.exists():
            err = self._log.read_text(errors="replace") if self._log.exists() else ""
            self.error = f"py-spy exited {self.proc.returncode}: {err.strip()[-300:]}"

    def summary(self, top: int = 15) -> tuple[int, list[tuple[str, float, float]]] | None:
        """(samples, [(function, self %, total %)]) sorted by self time."""
        if self.proc is None or not self.out.exists():
            return None
        own: collections.Counter[str] = collections.Counter()
        total: collections.Counter[str] = collections.Counter()
        samples = 0
        for line in self.out.read_text(errors="replace").splitlines():
            stack, _, count_text = line.rpartition(" ")
            if not stack or not count_text.isdigit():
                continue
            count = int(count_text)
            samples += count
            frames = [_short_frame(f) for f in stack.split(";")]
            if frames:
                own[frames[-1]] += count
            for name in set(frames):
                total[name] += count
        if not samples:
            return None
        rows = [
            (name, 100.0 * n / samples, 100.0 * total[name] / samples)
            for name, n in own.most_common(top)
        ]
        return samples, rows

    def packages(self) -> list[tuple[str, float, float]]:
        """[(package, own %, with callees %)]: where the samples' innermost frame lives."""
        if self.proc is None or not self.out.exists():
            return []
        own: collections.Counter[str] = collections.Counter()
        total: collections.Counter[str] = collections.Counter()
        samples = 0
        for line in self.out.read_text(errors="replace").splitlines():
            stack, _, count_text = line.rpartition(" ")
            if not stack or not count_text.isdigit():
                continue
            count = int(count_text)
            samples += count
            frames = stack.split(";")
            own[_package(frames[-1])] += count
            for name in {_package(f) for f in frames}:
                total[name] += count
        if not samples:
            return []
        return [
            (name, 100.0 * n / samples, 100.0 * total[name] / samples)
            for name, n in own.most_common(14)
        ]


def _package(frame: str) -> str:
    """The top-level package (or ``service/<sub>``) of a py-spy frame."""
    match = re.search(r"\(([^()]*?):\d+\)$", frame.strip())
    if not match:
        return "(native or unknown)"
    path = match.group(1)
    if path.startswith("service/"):
        return "/".join(path.split("/")[:2])
    if path.startswith("<frozen importlib"):
        return "importlib (imports at run time)"
    if "selectors.py" in path:
        return "selectors (waiting in epoll)"
    if "/" in path:
        return path.split("/")[0]
    return path.removesuffix(".py") + " (stdlib)"


def _short_frame(frame: str) -> str:
    """``func (path/to/module.py:123)`` -> ``func (module.py)``; keeps files apart, drops lines."""
    match = re.match(r"(.*) \((.*?):\d+\)$", frame.strip())
    if not match:
        return frame.strip()
    func, path = match.groups()
    parts = Path(path).parts
    short = "/".join(parts[-2:]) if len(parts) >= 2 else path
    return f"{func} ({short})"


# ---- phase (a): scale -------------------------------------------------------------------------
@dataclass
class ScaleResult:
    links: int = 0
    subscriptions: int = 0
    labs: int = 0
    seed_s: float = 0.0
    ready_s: float = 0.0
    open_s: float | None = None
    active_s: float | None = None
    read_s: float | None = None
    daemon_open: int = 0
    lab_streams: list[int] = field(default_factory=list)
    reconnects: int = 0
    link_down: dict[str, int] = field(default_factory=dict)
    link_down_errors: dict[str, str] = field(default_factory=dict)
    not_open: int = 0
    status_ms: list[float] = field(default_factory=list)
    rss_kb: int = 0
    rss_max_kb: int = 0
    hwm_kb: int = 0
    fds: int = 0
    threads: int = 0
    idle: CpuMeter | None = None
    ramp: CpuMeter | None = None
    warmup_s: float = 0.0
    log_lines: int = 0
    api_links: int = 0
    api_posts: int = 0
    api_post_s: float = 0.0
    api_post_ms: list[float] = field(default_factory=list)
    api_active_s: float | None = None
    api_read_s: float | None = None
    api_cpu: CpuMeter | None = None


async def phase_scale(plan: Plan, children: Children, tmp: Path) -> ScaleResult:
    res = ScaleResult(links=plan.links, subscriptions=plan.links * URIS_PER_LINK, labs=plan.labs)
    total_links = plan.links + plan.api_links
    per_lab = -(-total_links // plan.labs)
    labs = start_labs(children, plan.labs, {"MCP_TEST_MAX_SUBSCRIPTIONS": str(per_lab * 2)})
    uris = [f"test://bench/{k}" for k in range(URIS_PER_LINK)]

    def pairs_for(links: range) -> list[tuple[str, str]]:
        return [(f"{labs[n % plan.labs].url}?link={n}", uri) for n in links for uri in uris]

    print(
        f"(a) {plan.links} links x {URIS_PER_LINK} URIs over {plan.labs} labs (cold start)",
        flush=True,
    )
    async with httpx.AsyncClient(timeout=30.0) as http:
        await asyncio.gather(
            *(lab_put(http, lab, u, "initial", False) for lab in labs for u in uris)
        )
        daemon = Mcpsubd(tmp / "state-scale")
        started = time.perf_counter()
        seed_subscriptions(daemon, pairs_for(range(plan.links)))
        res.seed_s = time.perf_counter() - started
        t0 = time.perf_counter()
        start_daemon(children, daemon.state_dir, daemon)
        res.ready_s = time.perf_counter() - t0
        pids = {"mcpsubd": daemon.pid, **{lab.name: lab.pid for lab in labs}}
        res.ramp = CpuMeter(pids)
        res.ramp.start_wall = t0  # the daemon's CPU before its first sample is all start-up
        res.ramp.start["mcpsubd"] = 0.0
        target = res.subscriptions
        async with uds_client(daemon, timeout=60.0) as api:

            async def ramp_done() -> bool:
                # /metrics (cheap) until every stream is open and every URI read, then
                # /v1/status (lists every subscription) for the active count.
                now = time.perf_counter() - t0
                metrics = await daemon_metrics(api)
                if res.open_s is None and metrics.get("mcpsub_streams_open") == plan.links:
                    res.open_s = now
                if res.read_s is None and metrics.get("mcpsub_store_rows[revisions]", 0) >= target:
                    res.read_s = now
                if res.open_s is not None and res.active_s is None:
                    asked = time.perf_counter()
                    status = (await api.get("/v1/status")).json()
                    res.status_ms.append((time.perf_counter() - asked) * 1000)
                    if status["subscriptionsByState"].get("active", 0) == target:
                        res.active_s = now
                return None not in (res.open_s, res.active_s, res.read_s)

            try:
                await bounded_wait(ramp_done, plan.ramp_timeout_s, 0.5, "all links open and read")
            finally:
                res.ramp.stop()
            print(
                f"    ready {res.ready_s:.1f} s, open {fmt_s(res.open_s)}, "
                f"active {fmt_s(res.active_s)}, read {fmt_s(res.read_s)}",
                flush=True,
            )

            async def labs_settled() -> bool:
                res.lab_streams = await lab_streams(http, labs)
                return sum(res.lab_streams) == plan.links

            with contextlib.suppress(TimeoutError):  # reported, not fatal
                await bounded_wait(labs_settled, 20.0, 0.5, "lab stream counts")
            # warm-up, then the idle window: no API calls, only /proc reads
            res.warmup_s = plan.warmup_s
            await asyncio.sleep(plan.warmup_s)
            meter = CpuMeter(pids)
            rss: list[int] = []
            end = time.perf_counter() + plan.idle_s
            while (left := end - time.perf_counter()) > 0:
                rss.append(status_kb(daemon.pid, "VmRSS"))
                await asyncio.sleep(min(1.0, left))
            res.idle = meter.stop()
            res.rss_kb = status_kb(daemon.pid, "VmRSS")
            res.rss_max_kb = max([*rss, res.rss_kb])
            res.hwm_kb = status_kb(daemon.pid, "VmHWM")
            res.fds = open_fds(daemon.pid)
            res.threads = status_kb(daemon.pid, "Threads")
            # after the window: still everything open, nothing reconnected?
            asked = time.perf_counter()
            status = (await api.get("/v1/status")).json()
            res.status_ms.append((time.perf_counter() - asked) * 1000)
            res.daemon_open = sum(1 for link in status["links"] if link["state"] == "open")
            res.not_open = plan.links - res.daemon_open
            res.reconnects = sum(int(link["reconnects"]) for link in status["links"])
            res.link_down = dict(daemon.link_down)
            res.link_down_errors = dict(daemon.link_down_errors)
            res.lab_streams = await lab_streams(http, labs)
            res.log_lines = daemon.line_count
            print(
                f"    RSS {res.rss_kb / 1024:.1f} MB, idle CPU {res.idle.pct('mcpsubd'):.2f} %",
                flush=True,
            )
            await api_sample(plan, api, res, pairs_for(range(plan.links, total_links)), pids)
    children.stop(*labs, daemon)
    return res


async def api_sample(
    plan: Plan,
    api: httpx.AsyncClient,
    res: ScaleResult,
    pairs: list[tuple[str, str]],
    pids: dict[str, int],
) -> None:
    """The API path on the loaded daemon: more links through ``POST /v1/subscriptions``."""
    if not pairs:
        return
    res.api_links, res.api_posts = plan.api_links, len(pairs)
    print(f"    + {len(pairs)} subscriptions through POST /v1/subscriptions", flush=True)
    before = await daemon_metrics(api)
    revisions0 = before.get("mcpsub_store_rows[revisions]", 0)
    pending = iter(pairs)

    async def worker() -> None:
        for url, uri in pending:
            asked = time.perf_counter()
            r = await api.post("/v1/subscriptions", json={"url": url, "uri": uri})
            res.api_post_ms.append((time.perf_counter() - asked) * 1000)
            if r.status_code != 201:
                raise RuntimeError(f"POST /v1/subscriptions -> {r.status_code} {r.text}")

    meter = CpuMeter(pids)
    t0 = time.perf_counter()
    try:
        await asyncio.gather(*(worker() for _ in range(32)))
        res.api_post_s = time.perf_counter() - t0
        want = res.subscriptions + len(pairs)

        async def done() -> bool:
            now = time.perf_counter() - t0
            metrics = await daemon_metrics(api)
            if res.api_read_s is None and (
                metrics.get("mcpsub_store_rows[revisions]", 0) - revisions0 >= len(pairs)
            ):
                res.api_read_s = now
            if res.api_active_s is None:
                status = (await api.get("/v1/status")).json()
                if status["subscriptionsByState"].get("active", 0) >= want:
                    res.api_active_s = now
            return res.api_read_s is not None and res.api_active_s is not None

        with contextlib.suppress(TimeoutError):  # reported as "—"
            await bounded_wait(done, 120.0, 0.5, "API-added subscriptions active and read")
    finally:
        res.api_cpu = meter.stop()


# ---- phases (b) and (c): throughput and latency -----------------------------------------------
@dataclass
class BurstResult:
    changes: int = 0
    links: int = 0
    uris: int = 0
    connections: int = 0
    send_s: float = 0.0
    delivered: int = 0
    deliver_s: float = 0.0
    absorb_s: float = 0.0
    finals_ok: bool = False
    cpu: CpuMeter | None = None
    latencies_ms: list[float] = field(default_factory=list)
    profile: tuple[int, list[tuple[str, float, float]]] | None = None
    profile_packages: list[tuple[str, float, float]] = field(default_factory=list)
    profile_error: str | None = None


@dataclass
class SteadyResult:
    rate: float = 0.0
    seconds: float = 0.0
    changes: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    to_event_ms: list[float] = field(default_factory=list)
    to_client_ms: list[float] = field(default_factory=list)
    missing: int = 0
    late_sends: int = 0
    max_send_lag_ms: float = 0.0
    achieved_rate: float = 0.0
    finals_ok: bool = False
    cpu: CpuMeter | None = None


@dataclass
class SequentialResult:
    changes: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    cpu: CpuMeter | None = None


async def phase_flow(
    plan: Plan, children: Children, tmp: Path, spy: str | None
) -> tuple[SequentialResult, BurstResult, SteadyResult]:
    burst = BurstResult(
        changes=plan.burst_changes,
        links=plan.tput_links,
        uris=plan.tput_links * URIS_PER_LINK,
        connections=plan.burst_connections,
    )
    steady = SteadyResult(rate=plan.steady_rate, seconds=plan.steady_s)
    sequential = SequentialResult(changes=plan.sequential)
    (lab,) = start_labs(children, 1, {})
    uris_of = {
        n: [f"test://bench/{n}/{k}" for k in range(URIS_PER_LINK)] for n in range(plan.tput_links)
    }
    all_uris = [u for n in range(plan.tput_links) for u in uris_of[n]]
    async with httpx.AsyncClient(timeout=30.0) as http:
        await asyncio.gather(*(lab_put(http, lab, u, "initial", False) for u in all_uris))
        pairs = [(f"{lab.url}?link={n}", u) for n in range(plan.tput_links) for u in uris_of[n]]
        daemon = Mcpsubd(tmp / "state-flow")
        seed_subscriptions(daemon, pairs)  # the API path is (a)'s business
        start_daemon(children, daemon.state_dir, daemon)
        pids = {"mcpsubd": daemon.pid, "lab": lab.pid, "bench": os.getpid()}
        async with uds_client(daemon) as api:

            async def ready() -> bool:
                status = (await api.get("/v1/status")).json()
                opened = sum(1 for link in status["links"] if link["state"] == "open")
                return (
                    opened == plan.tput_links
                    and status["subscriptionsByState"].get("active", 0) == len(pairs)
                    and status["counts"]["revisions"] >= len(pairs)
                )

            await bounded_wait(ready, 60.0, 0.2, "throughput links open and read")
            last_id = int((await api.get("/v1/status")).json()["lastEventId"])
            follower = SseFollower(api, after=last_id)
            follower.start()
            await asyncio.wait_for(follower.connected.wait(), 10.0)
            await asyncio.sleep(0.3)
            try:
                print(f"(c) {plan.sequential} changes one at a time (unloaded)", flush=True)
                await run_sequential(lab, all_uris, follower, sequential, pids)
                await follower.wait_quiet(0.5, 10.0)
                print(
                    f"(b) burst of {plan.burst_changes} changes over {len(all_uris)} URIs",
                    flush=True,
                )
                await run_burst(plan, lab, all_uris, follower, burst, pids, daemon, tmp, spy)
                await follower.wait_quiet(1.0, 30.0)
                print(f"(c) {plan.steady_rate:g} changes/s for {plan.steady_s:g} s", flush=True)
                await run_steady(plan, lab, all_uris, follower, steady, pids)
            finally:
                await follower.stop()
    children.stop(lab, daemon)
    return sequential, burst, steady


async def run_sequential(
    lab: Lab,
    uris: list[str],
    follower: SseFollower,
    res: SequentialResult,
    pids: dict[str, int],
) -> None:
    """One change at a time, each awaited on the SSE stream: the per-change cost unqueued."""
    conn = await LabConnection(lab).open()
    meter = CpuMeter(pids)
    try:
        for i in range(res.changes):
            uri, text = uris[i % len(uris)], f"one {i}"
            digest = predict_hash(uri, text)
            sent, _ = await conn.put(uri, text)
            if not await follower.wait_for({digest}, 10.0):
                raise RuntimeError(f"change {i} ({uri}) not delivered within 10 s")
            res.latencies_ms.append((follower.by_hash[digest].perf - sent) * 1000)
    finally:
        res.cpu = meter.stop()
        await conn.close()


async def run_burst(
    plan: Plan,
    lab: Lab,
    uris: list[str],
    follower: SseFollower,
    res: BurstResult,
    pids: dict[str, int],
    daemon: Mcpsubd,
    tmp: Path,
    spy: str | None,
) -> None:
    n = plan.burst_changes
    expected: dict[str, int] = {}
    sent_at: list[float] = [0.0] * n
    last_text: dict[str, str] = {}
    for i in range(n):
        uri, text = uris[i % len(uris)], f"burst {i}"
        expected[predict_hash(uri, text)] = i
        last_text[uri] = text
    finals = {predict_hash(u, t) for u, t in last_text.items()}
    conns: list[LabConnection] = []
    profiler = Profiler(spy, daemon.pid, tmp / "burst.pyspy.txt")
    next_index = iter(range(n))

    async def worker(conn: LabConnection) -> None:
        for i in next_index:
            sent_at[i] = (await conn.put(uris[i % len(uris)], f"burst {i}"))[0]

    meter = CpuMeter(pids)
    try:
        for _ in range(plan.burst_connections):
            conns.append(await LabConnection(lab).open())
        profiler.start()
        if spy:
            await asyncio.sleep(1.0)  # let py-spy attach before the load starts
        meter = CpuMeter(pids)
        t0 = time.perf_counter()
        await asyncio.gather(*(worker(c) for c in conns))
        res.send_s = time.perf_counter() - t0
        res.finals_ok = await follower.wait_for(finals, 60.0)
        await follower.wait_quiet(0.5, 10.0)
    finally:
        res.cpu = meter.stop()
        profiler.stop()
        for conn in conns:
            await conn.close()
    arrivals = [(h, a) for h, a in follower.by_hash.items() if h in expected]
    res.delivered = len(arrivals)
    if arrivals:
        last = max(a.perf for _, a in arrivals)
        res.deliver_s = last - t0
        final_arrivals = [follower.by_hash[h].perf for h in finals if h in follower.by_hash]
        res.absorb_s = (max(final_arrivals) if final_arrivals else last) - t0
        res.latencies_ms = [(a.perf - sent_at[expected[h]]) * 1000 for h, a in arrivals]
    res.profile = profiler.summary()
    res.profile_packages = profiler.packages()
    res.profile_error = profiler.error


async def run_steady(
    plan: Plan,
    lab: Lab,
    uris: list[str],
    follower: SseFollower,
    res: SteadyResult,
    pids: dict[str, int],
) -> None:
    n = int(plan.steady_rate * plan.steady_s)
    res.changes = n
    sends: dict[str, tuple[float, float]] = {}
    last_text = {uris[i % len(uris)]: f"steady {i}" for i in range(n)}
    finals = {predict_hash(u, t) for u, t in last_text.items()}
    pool: asyncio.Queue[LabConnection] = asyncio.Queue()
    conns: list[LabConnection] = []
    lags: list[float] = []

    async def one(i: int, digest: str) -> None:
        conn = await pool.get()
        try:
            sends[digest] = await conn.put(uris[i % len(uris)], f"steady {i}")
        finally:
            pool.put_nowait(conn)

    tasks: list[asyncio.Task[None]] = []
    meter = CpuMeter(pids)
    loop = asyncio.get_running_loop()
    try:
        for _ in range(plan.steady_connections):
            conns.append(await LabConnection(lab).open())
            pool.put_nowait(conns[-1])
        meter = CpuMeter(pids)
        t0 = time.perf_counter() + 0.05
        for i in range(n):
            due = t0 + i / plan.steady_rate
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            lags.append(time.perf_counter() - due)
            digest = predict_hash(uris[i % len(uris)], f"steady {i}")
            tasks.append(loop.create_task(one(i, digest)))
        await asyncio.wait_for(asyncio.gather(*tasks), 30.0)
        send_span = max(p for p, _ in sends.values()) - min(p for p, _ in sends.values())
        res.achieved_rate = (n - 1) / send_span if send_span > 0 else 0.0
        # coalesced changes never arrive; every URI's last one must
        res.finals_ok = await follower.wait_for(finals, 60.0)
        await follower.wait_quiet(0.5, 10.0)
    finally:
        res.cpu = meter.stop()
        for task in tasks:
            task.cancel()
        for conn in conns:
            await conn.close()
    res.late_sends = sum(1 for lag in lags if lag > 0.005)
    res.max_send_lag_ms = max(lags) * 1000 if lags else 0.0
    for digest, (perf, wall) in sends.items():
        arrival = follower.by_hash.get(digest)
        if arrival is None:
            res.missing += 1
            continue
        res.latencies_ms.append((arrival.perf - perf) * 1000)
        res.to_event_ms.append((arrival.created_at - wall) * 1000)
        res.to_client_ms.append((arrival.wall - arrival.created_at) * 1000)


# ---- report -----------------------------------------------------------------------------------
def verdict(ok: bool) -> str:
    return "met" if ok else "**missed**"


def fmt_s(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f} s"


def dist(values: list[float]) -> str:
    if not values:
        return "— | — | — | —"
    return " | ".join(
        f"{v:.1f}"
        for v in (
            percentile(values, 50),
            percentile(values, 90),
            percentile(values, 99),
            max(values),
        )
    )


def machine() -> str:
    nproc = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    mem_gb = 0.0
    with contextlib.suppress(OSError, ValueError, IndexError):
        mem_gb = int(Path("/proc/meminfo").read_text().split()[1]) / 1024 / 1024
    return (
        f"{nproc} CPUs (nproc){', ' + model if model else ''}, {mem_gb:.0f} GB RAM, "
        f"{platform.machine()}, Linux {platform.release()}, "
        f"Python {platform.python_version()} ({sys.implementation.name})"
    )


def code_version() -> str:
    """``git`` HEAD (read-only) and whether the daemon's code has uncommitted changes."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=str(REPO_ROOT),
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "service", "labserver", "uv.lock"],
            cwd=str(REPO_ROOT),
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    if not head:
        return "unknown"
    return f"`{head}`" + (
        " with uncommitted changes in service/, labserver/ or uv.lock" if dirty else ""
    )


def code_fingerprint() -> str:
    """Tree hashes of what the daemon and labs run (plus uncommitted changes there)."""
    try:
        trees = subprocess.run(
            ["git", "rev-parse", "HEAD:service", "HEAD:labserver", "HEAD:uv.lock"],
            cwd=str(REPO_ROOT),
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "service", "labserver", "uv.lock"],
            cwd=str(REPO_ROOT),
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    return trees + dirty


def render(
    plan: Plan,
    scale: ScaleResult,
    sequential: SequentialResult,
    burst: BurstResult,
    steady: SteadyResult,
    spy: str | None,
    wall_s: float,
    code: str,
) -> tuple[str, list[str]]:
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    missed: list[str] = []
    out = [
        "# Daemon benchmark",
        "",
        f"Generated by `bench/daemon.py`{' --quick' if plan.name == 'quick' else ''} on {now} "
        f"({wall_s:.0f} s in all).",
        f"Machine: {machine()}.",
        f"Code: {code}.",
        "",
        "Lab servers (`python -m labserver`, 127.0.0.1, log `silent`, keep-alive 15 s) and one",
        "`mcpsubd` with default settings (log level `info`, JSON to a pipe) share the machine",
        "with the bench client; CPU % is of one core (utime+stime from `/proc/PID/stat`).",
        "",
    ]
    # (a)
    idle = scale.idle
    assert idle is not None and scale.ramp is not None
    rss_mb, idle_pct = scale.rss_kb / 1024, idle.pct("mcpsubd")
    ok_rss, ok_cpu = rss_mb <= TARGET_RSS_MB, idle_pct <= TARGET_IDLE_CPU_PCT
    all_open = scale.not_open == 0 and sum(scale.lab_streams) == scale.links
    if not ok_rss:
        missed.append("RSS")
    if not ok_cpu:
        missed.append("idle CPU")
    if not all_open:
        missed.append("all streams open")
    lab_idle = sum(idle.pct(name) for name in idle.used if name.startswith("lab"))
    ramp_cpu = scale.ramp.used.get("mcpsubd", 0.0)
    api_rate = scale.api_posts / scale.api_post_s if scale.api_post_s else 0.0
    out += [
        f"## (a) Scale: {scale.links:,} server links × {URIS_PER_LINK} URIs = "
        f"{scale.subscriptions:,} subscriptions",
        "",
        f"{scale.labs} lab processes; link N is `{{lab}}/mcp?link=N` on lab N mod {scale.labs};",
        f"resources `test://bench/0..{URIS_PER_LINK - 1}` on every lab. The subscriptions are",
        "stored before the daemon starts (`mcpsubd migrate`, then the rows",
        "`Store.add_subscription` writes, in one transaction: "
        f"{scale.seed_s:.1f} s), so this is a cold start",
        "with every link's whole URI set known, as after a restart. Times from starting",
        "`mcpsubd`, observed every 0.5 s through `/metrics` and `/v1/status`. The API path is",
        "measured afterwards on the loaded daemon (last rows).",
        "",
        "| metric | value | target | met? |",
        "|---|---:|---:|---|",
        f"| start → API ready (`/readyz`) | {scale.ready_s:.1f} s | | |",
        f"| start → every link's stream open (acknowledged) | {fmt_s(scale.open_s)} | | |",
        f"| start → all {scale.subscriptions:,} subscriptions `active` | "
        f"**{fmt_s(scale.active_s)}** | | |",
        f"| start → first read of every URI stored ({scale.subscriptions:,} revisions) | "
        f"{fmt_s(scale.read_s)} | | |",
        f"| daemon CPU from start to all read | {ramp_cpu:.1f} s "
        f"({100 * ramp_cpu / scale.ramp.elapsed:.0f} % of a core) | | |",
        f"| links open (daemon) / listen streams held by the labs | {scale.daemon_open:,} / "
        f"{sum(scale.lab_streams):,} ({' + '.join(map(str, scale.lab_streams))}) | "
        f"{scale.links:,} | {verdict(all_open)} |",
        f'| reconnects ("link down" in the daemon log, by code) | {scale.reconnects}'
        + (
            " (" + ", ".join(f"`{code}` × {n}" for code, n in sorted(scale.link_down.items())) + ")"
            if scale.link_down
            else ""
        )
        + " | 0 | |",
        f"| RSS (`VmRSS`) after {scale.warmup_s:g} s warm-up + {idle.elapsed:.0f} s idle | "
        f"{rss_mb:.1f} MB (max sampled {scale.rss_max_kb / 1024:.1f}) | "
        f"≤ {TARGET_RSS_MB:g} MB | {verdict(ok_rss)} |",
        f"| peak RSS (`VmHWM`, includes the start) | {scale.hwm_kb / 1024:.1f} MB | | |",
        f"| idle CPU over {idle.elapsed:.0f} s | **{idle_pct:.2f} %** "
        f"({idle.used['mcpsubd'] * 1000:.0f} ms) | ≤ {TARGET_IDLE_CPU_PCT:g} % | "
        f"{verdict(ok_cpu)} |",
        f"| the labs' CPU in the same window (sum) | {lab_idle:.2f} % | | |",
        f"| daemon threads / open file descriptors | {scale.threads} / {scale.fds:,} | | |",
        f"| `GET /v1/status` with {scale.subscriptions:,} subscriptions (median / max) | "
        f"{statistics.median(scale.status_ms):.0f} / {max(scale.status_ms):.0f} ms | | |",
        f"| daemon log lines written | {scale.log_lines:,} | | |",
    ]
    if scale.api_posts:
        assert scale.api_cpu is not None
        out += [
            f"| API path: {scale.api_posts} more subscriptions ({scale.api_links} new links) "
            f"via `POST /v1/subscriptions`, 32 concurrent | {scale.api_post_s:.1f} s = "
            f"**{api_rate:.0f}/s**; each POST p50 {percentile(scale.api_post_ms, 50):.0f} / "
            f"p90 {percentile(scale.api_post_ms, 90):.0f} ms | | |",
            f"| → those active / read (from the first POST) | {fmt_s(scale.api_active_s)} / "
            f"{fmt_s(scale.api_read_s)}; daemon CPU "
            f"{1000 * scale.api_cpu.used['mcpsubd'] / scale.api_posts:.0f} ms per subscription | | |",
            f"| → {scale.subscriptions:,} subscriptions at that rate | "
            f"~{scale.subscriptions / api_rate if api_rate else 0:.0f} s | | |",
        ]
    out.append("")
    if scale.link_down_errors:
        out += [
            "Why links went down (first message per code): "
            + "; ".join(f"`{code}`: {msg}" for code, msg in sorted(scale.link_down_errors.items())),
            "",
        ]
    # (b)
    cpu = burst.cpu
    assert cpu is not None
    sent_rate = burst.changes / burst.send_s if burst.send_s else 0.0
    rev_rate = burst.delivered / burst.deliver_s if burst.deliver_s else 0.0
    absorb_rate = burst.changes / burst.absorb_s if burst.absorb_s else 0.0
    ok_tput = rev_rate >= TARGET_UPDATES_PER_S and burst.finals_ok
    if not ok_tput:
        missed.append("throughput")
    coalesced = burst.changes - burst.delivered
    daemon_ms_per_rev = 1000 * cpu.used["mcpsubd"] / burst.delivered if burst.delivered else 0.0
    out += [
        f"## (b) Throughput: notification → revision → SSE event ({burst.changes:,} changes)",
        "",
        f"One lab, {burst.links} links × {URIS_PER_LINK} URIs (stored before start, as in (a)), "
        "each link with its own URIs "
        f"(`test://bench/<link>/<k>`, {burst.uris} in all), so a change is one notification to "
        f"one stream. The driver changes them round-robin to unique texts, as fast as the lab "
        f"answers (`PUT /lab/resources`, notify, {burst.connections} keep-alive connections); an "
        "SSE client on `/v1/events/stream?type=resource.updated` matches events to changes by "
        "their predicted `contentHash`. A change is *coalesced* when a later read covered it "
        "(the refresher keeps one read in flight plus one trailing read per URI).",
        "",
        "| metric | value | target | met? |",
        "|---|---:|---:|---|",
        f"| changes sent | {burst.changes:,} in {burst.send_s:.2f} s = **{sent_rate:.0f}/s** | | |",
        f"| revisions delivered over SSE | {burst.delivered:,} in {burst.deliver_s:.2f} s = "
        f"**{rev_rate:.0f}/s** | ≥ {TARGET_UPDATES_PER_S:g}/s | {verdict(ok_tput)} |",
        f"| changes coalesced | {coalesced:,} ({100 * coalesced / burst.changes:.0f} %) | | |",
        f"| every URI's last text delivered | {'yes' if burst.finals_ok else '**no**'} | yes | |",
        f"| changes absorbed (all sent → last one delivered) | {absorb_rate:.0f}/s "
        f"({burst.absorb_s:.2f} s) | | |",
        f"| change → event, delivered ones (p50 / p90 / p99 / max ms) | "
        f"{dist(burst.latencies_ms).replace(' | ', ' / ')} | | |",
        f"| CPU, % of one core: mcpsubd / lab / bench client | {cpu.pct('mcpsubd'):.0f} / "
        f"{cpu.pct('lab'):.0f} / {cpu.pct('bench'):.0f} % over {cpu.elapsed:.1f} s | | |",
        f"| daemon CPU per delivered revision | {daemon_ms_per_rev:.2f} ms | "
        f"≤ {1000 / TARGET_UPDATES_PER_S:g} ms | |",
        "",
    ]
    # (c)
    scpu, qcpu = steady.cpu, sequential.cpu
    assert scpu is not None and qcpu is not None
    p99 = percentile(steady.latencies_ms, 99) if steady.latencies_ms else float("inf")
    ok_lat = p99 <= TARGET_P99_MS and steady.missing == 0 and steady.finals_ok
    if not ok_lat:
        missed.append("latency p99")
    per_change_ms = 1000 * qcpu.used["mcpsubd"] / max(1, sequential.changes)
    out += [
        f"## (c) Latency at a steady {steady.rate:g} changes/s for {steady.seconds:g} s",
        "",
        f"{steady.changes:,} changes, round-robin over the same {burst.uris} URIs (one URI "
        f"changes every {burst.uris / steady.rate:.1f} s), paced by the clock "
        f"(achieved {steady.achieved_rate:.0f}/s; {steady.late_sends} sends > 5 ms late, worst "
        f"{steady.max_send_lag_ms:.1f} ms). Latency = SSE event with the change's `contentHash` "
        "received − `PUT` written, both in the bench process; a change whose event never "
        "comes (coalesced into a later read) is *missing*. The split uses the event's "
        "`createdAt` (daemon clock, taken inside the revision transaction): *change → event row* "
        "is lab notify + daemon read + store; *event row → client* is commit + wake-up + the SSE "
        f"query + transfer. The first row is {sequential.changes} changes sent one at a time, "
        "each awaited on the SSE stream: the same path with no queue.",
        "",
        "| | p50 ms | p90 ms | p99 ms | max ms | target | met? |",
        "|---|---:|---:|---:|---:|---:|---|",
        f"| one change at a time, unloaded ({sequential.changes}) | "
        f"{dist(sequential.latencies_ms)} | | |",
        f"| **{steady.rate:g}/s**: change → SSE event ({len(steady.latencies_ms):,} delivered, "
        f"{steady.missing:,} missing) | {dist(steady.latencies_ms)} | p99 ≤ {TARGET_P99_MS:g} | "
        f"{verdict(ok_lat)} |",
        f"| {steady.rate:g}/s: change → event row (`createdAt`) | {dist(steady.to_event_ms)} | | |",
        f"| {steady.rate:g}/s: event row → SSE client | {dist(steady.to_client_ms)} | | |",
        "",
        f"Every URI's last change delivered: {'yes' if steady.finals_ok else '**no**'}. "
        f"CPU in the {steady.rate:g}/s phase, % of one core: mcpsubd {scpu.pct('mcpsubd'):.0f} %, "
        f"lab {scpu.pct('lab'):.0f} %, bench {scpu.pct('bench'):.0f} %.",
        "",
    ]
    # where the time goes
    ceiling = 1000 / per_change_ms if per_change_ms else 0.0
    lab_per_change_ms = 1000 * qcpu.used["lab"] / max(1, sequential.changes)
    lab_burst_ms = 1000 * cpu.used["lab"] / max(1, burst.changes)
    out += [
        "## Where the time goes",
        "",
        "| phase | mcpsubd CPU | per revision | lab CPU | bench CPU |",
        "|---|---:|---:|---:|---:|",
        f"| one change at a time | {qcpu.pct('mcpsubd'):.0f} % | {per_change_ms:.1f} ms | "
        f"{qcpu.pct('lab'):.0f} % | {qcpu.pct('bench'):.0f} % |",
        f"| (b) burst | {cpu.pct('mcpsubd'):.0f} % | {daemon_ms_per_rev:.1f} ms | "
        f"{cpu.pct('lab'):.0f} % | {cpu.pct('bench'):.0f} % |",
        f"| (c) {steady.rate:g}/s | {scpu.pct('mcpsubd'):.0f} % | "
        f"{1000 * scpu.used['mcpsubd'] / max(1, len(steady.latencies_ms)):.1f} ms | "
        f"{scpu.pct('lab'):.0f} % | {scpu.pct('bench'):.0f} % |",
        "",
        f"* **Per change** the daemon spends {per_change_ms:.1f} ms of CPU (notification, "
        "re-read, revision transaction, event fan-out, SSE), and it runs on one event loop: "
        f"at most ~{ceiling:.0f} revisions/s on this machine, whatever the load. Above that "
        "rate notifications queue, the refresher coalesces them (correctly: every URI's last "
        "text still arrives) and latency grows with the backlog; that is what (b) and (c) show.",
        f"* **The lab's share**: a change that becomes a revision costs the lab a PUT, a "
        f"notification and a `resources/read`: {lab_per_change_ms:.1f} ms of its CPU one at a "
        f"time ({lab_burst_ms:.2f} ms per change sent in (b), where few were read). "
        + (
            f"{TARGET_UPDATES_PER_S:g} read-backed changes/s would need "
            f"{lab_per_change_ms * TARGET_UPDATES_PER_S / 1000:.1f} cores for the lab alone, on "
            "a machine that also runs the daemon and the client: the end-to-end target cannot "
            "be shown here whatever the daemon does, so read the daemon's own budget, "
            f"≤ {1000 / TARGET_UPDATES_PER_S:g} ms of CPU per revision, in (b)."
            if lab_per_change_ms * TARGET_UPDATES_PER_S / 1000 > 1.0
            else "The lab fits the target rate in one core."
        ),
        f"* **Idle**: {scale.links:,} streams each carry a `: keepalive` every 15 s and each "
        "link's loop wakes every `keepalive_s` (15 s) for its watchdog: "
        f"{idle.used['mcpsubd'] * 1000 / max(idle.elapsed, 1e-9):.1f} ms of CPU per second, "
        f"{idle.used['mcpsubd'] * 1000 / max(idle.elapsed, 1e-9) / scale.links * 15:.2f} ms "
        "per link per 15 s.",
        f"* **Cold start**: {ramp_cpu:.0f} s of CPU for {scale.subscriptions:,} first reads "
        f"({1000 * ramp_cpu / scale.subscriptions:.0f} ms each, listens included).",
        "",
    ]
    if burst.profile is not None:
        samples, rows = burst.profile
        out += [
            f"`py-spy record --rate 200 --gil` of mcpsubd during (b) ({samples:,} samples of the",
            "thread holding the GIL, i.e. Python CPU; SQLite's own C work runs with the GIL",
            "released in aiosqlite's thread and is not in here). SQLAlchemy's async engine runs",
            "its sync code in greenlets, which py-spy shows as separate stacks, so *on the stack*",
            "of the daemon's own modules undercounts the SQL they cause. By package of the",
            "innermost frame:",
            "",
            "| package | own % | on the stack % |",
            "|---|---:|---:|",
        ]
        out += [f"| {name} | {own:.1f} | {tot:.1f} |" for name, own, tot in burst.profile_packages]
        out += [
            "",
            "Top functions by own time:",
            "",
            "| function | own % | with callees % |",
            "|---|---:|---:|",
        ]
        out += [f"| `{name}` | {own:.1f} | {tot:.1f} |" for name, own, tot in rows]
        out.append("")
    elif spy or burst.profile_error:
        out += [f"py-spy profile unavailable: {burst.profile_error or 'no samples'}", ""]
    else:
        out += [
            "No sampled profile in this run (pass `--py-spy PATH`; see docs/benchmarks.md).",
            "",
        ]
    out += [
        f"Targets missed: {', '.join(missed)}." if missed else "All targets met.",
        "",
    ]
    return "\n".join(out), missed


# ---- main -------------------------------------------------------------------------------------
def _sigterm(_sig: int, _frame: Any) -> None:
    raise KeyboardInterrupt


def find_py_spy(explicit: str | None) -> str | None:
    if explicit:
        return explicit
    return shutil.which("py-spy")


@contextlib.contextmanager
def workspace() -> Iterator[tuple[Children, Path]]:
    children = Children()
    with tempfile.TemporaryDirectory(prefix="mcpsub-bench-daemon-") as tmp_name:
        try:
            yield children, Path(tmp_name)
        finally:
            children.stop_all()


async def run(plan: Plan, children: Children, tmp: Path, spy: str | None) -> tuple[Any, ...]:
    scale = await phase_scale(plan, children, tmp)
    sequential, burst, steady = await phase_flow(plan, children, tmp, spy)
    return scale, sequential, burst, steady


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--quick", action="store_true", help="100 links, 600 changes, 4 s at 200/s (< 1 min)"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="markdown report (default results/daemon.md; --quick: print only)",
    )
    parser.add_argument("--py-spy", dest="py_spy", help="py-spy binary: profile mcpsubd in (b)")
    args = parser.parse_args()
    plan = QUICK if args.quick else FULL
    out = args.out or (None if args.quick else REPO_ROOT / "results" / "daemon.md")
    spy = find_py_spy(args.py_spy)
    check_hash_prediction()
    signal.signal(signal.SIGTERM, _sigterm)
    started = time.perf_counter()
    code, fingerprint = code_version(), code_fingerprint()
    with workspace() as (children, tmp):
        try:
            scale, sequential, burst, steady = asyncio.run(run(plan, children, tmp, spy))
        except KeyboardInterrupt:
            print("bench: interrupted; stopping everything", file=sys.stderr)
            return 130
        except Exception:
            for child in children.started:
                print(f"--- {child.name} (last lines)\n{child.output()}", file=sys.stderr)
            raise
    report, missed = render(
        plan, scale, sequential, burst, steady, spy, time.perf_counter() - started, code
    )
    if code_fingerprint() != fingerprint:
        warning = (
            "**service/, labserver/ or uv.lock changed during this run** "
            f"(now {code_version()}): phases may have measured different code."
        )
        report = report.replace(f"Code: {code}.", f"Code: {code}. {warning}", 1)
        print(f"bench: {warning}", file=sys.stderr)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(report, encoding="utf-8")
    print(report)
    if missed:
        print(f"bench: targets missed: {', '.join(missed)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
