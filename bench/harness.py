"""Shared harness of the benches: start lab / fast-peer / ``mcpsubd`` processes, sample
``/proc``, follow the daemon's SSE stream, profile with py-spy, describe the machine.

Everything here talks to 127.0.0.1 or a unix socket only, bounds every wait, and stops what
it started (:class:`Children`, :func:`workspace`). Each bench module (``bench.daemon``,
``bench.hotpath``, …) builds its phases from these parts and writes one report to
``results/``.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import hashlib
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

REPO_ROOT = Path(__file__).resolve().parents[1]
PYTHON = REPO_ROOT / ".venv" / "bin" / "python"
BIN = PYTHON.parent
CLK_TCK = os.sysconf("SC_CLK_TCK")
STARTUP_TIMEOUT_S = 20.0
DAEMON_READY_TIMEOUT_S = 180.0
"""``/readyz`` of a daemon cold-starting 1,000 links on a busy machine takes well over 20 s."""
STOP_TIMEOUT_S = 15.0
_LISTENING = re.compile(r"listening on (http://127\.0\.0\.1:(\d+))/mcp")
COMPILED_DIRS = ("service", "cli", "labserver", "bench", "mcpsub_start.py")
"""What the children import from the clone: compiled once by :func:`workspace`."""
SOURCE_START = False
"""``--source-start``: the daemon compiles the clone's modules on every start, as every bench
start did before 2026-12-04 (the session's ``PYTHONDONTWRITEBYTECODE=1`` reached it)."""


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
        self.stdin_pipe = False
        """Give the child a stdin pipe (a child that exits when it closes outlives no bench)."""

    def start(self) -> None:
        self.proc = subprocess.Popen(
            self.argv,
            env=self.env,
            cwd=str(REPO_ROOT),
            stdin=subprocess.PIPE if self.stdin_pipe else subprocess.DEVNULL,
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


class FastPeer(Child):
    """``python -m bench.fastpeer``: the bare load-generating MCP server (see its docstring)."""

    def __init__(self, name: str = "peer", args: tuple[str, ...] = ()) -> None:
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "PYTHONUNBUFFERED": "1"}
        argv = [str(PYTHON), "-m", "bench.fastpeer", "--port", "0", *args]
        super().__init__(name, argv, env)
        self.stdin_pipe = True
        self.base_url = ""
        self.port = 0
        self.ready = threading.Event()

    on_line = Lab.on_line
    wait_ready = Lab.wait_ready

    @property
    def url(self) -> str:
        return f"{self.base_url}/mcp"

    def control(self, method: str, path: str, body: Any = None, timeout: float = 10.0) -> Any:
        """One control request (``/ctl/...``), synchronously; returns the JSON answer."""
        with httpx.Client(base_url=self.base_url, timeout=timeout, trust_env=False) as http:
            response = http.request(method, path, json=body)
            response.raise_for_status()
            return response.json()


def start_peer(children: Children, name: str = "peer", args: tuple[str, ...] = ()) -> FastPeer:
    peer = FastPeer(name, args)
    children.add(peer)
    peer.wait_ready()
    return peer


def markdown_table(header: list[str], rows: list[list[Any]], align: str = "") -> list[str]:
    """A markdown table; ``align`` has one ``l``/``r`` per column (default: first l, rest r)."""
    align = align or "l" + "r" * (len(header) - 1)
    rule = ["---" if a == "l" else "---:" for a in align]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(rule) + " |"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return lines


def load_average() -> str:
    with contextlib.suppress(OSError):
        return ", ".join(Path("/proc/loadavg").read_text().split()[:3])
    return "unknown"


class Mcpsubd(Child):
    def __init__(self, state_dir: Path, extra_env: dict[str, str] | None = None) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MCPSUB_", "MCP_PROBE_"))}
        if SOURCE_START:
            env["PYTHONDONTWRITEBYTECODE"] = "1"
        else:
            # An installed daemon starts from its wheel's .pyc files; with this variable (set
            # on some machines, and in the sessions that run these benches) every start would
            # compile ~100 of our modules from source, ~0.7 s of each cold start measured.
            env.pop("PYTHONDONTWRITEBYTECODE", None)
        env.update(
            {
                "MCPSUB_STATE_DIR": str(state_dir),
                "MCPSUB_LOG_FORMAT": "json",
                # a token store that does not exist: never the user's login cache
                "MCP_PROBE_TOKEN_STORE_PATH": str(state_dir.parent / "no-tokens.sqlite"),
                **(extra_env or {}),
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
        deadline = time.monotonic() + DAEMON_READY_TIMEOUT_S
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


def run_queue_wait_seconds(pid: int) -> float:
    """Time the threads of ``pid`` spent runnable but waiting for a CPU (the second field of
    ``/proc/PID/task/TID/schedstat``), summed, in seconds; threads that ended are not counted.

    On a shared machine this says whether a process was slow because it had too much to do
    or because it was not given a CPU to do it on."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError, IndexError, ValueError):
            total += int((task / "schedstat").read_text().split()[1])
    return total / 1e9


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

    def __init__(self, binary: str | None, pid: int, out: Path, *, gil: bool = True) -> None:
        self.binary = binary
        self.pid = pid
        self.out = out
        self.gil = gil
        """``--gil``: only the thread holding the GIL. Off for an idle process, where the
        few samples py-spy takes with ``--gil`` can all miss (every thread waits)."""
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
                os.environ.get("MCPSUB_BENCH_SPY_RATE", "200"),
                "--format",
                "raw",
                "--output",
                str(self.out),
                "--nonblocking",
                # only the thread holding the GIL: Python CPU, not GIL waits
                *(["--gil"] if self.gil else []),
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
        keep = os.environ.get("MCPSUB_BENCH_SPY_KEEP")
        if keep and self.out.exists():
            shutil.copy(self.out, Path(keep) / self.out.name)
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


# ---- main -------------------------------------------------------------------------------------
def sigterm_to_interrupt(_sig: int, _frame: Any) -> None:
    raise KeyboardInterrupt


def find_py_spy(explicit: str | None) -> str | None:
    if explicit:
        return explicit
    return shutil.which("py-spy")


def compile_tree(root: Path = REPO_ROOT) -> None:
    """Byte-compile the clone's modules, as installing the wheel would: the first daemon a
    bench starts (which writes its .pyc files, :class:`Mcpsubd`) would otherwise pay for the
    compilation in the figure it measures. A no-op for files compiled and unchanged since.
    The npm trees under ``bench/`` (``make node-deps``, which ``make test`` runs) are not ours
    and carry Python 2 scripts that do not compile: skipped."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    paths = [str(root / name) for name in COMPILED_DIRS if (root / name).exists()]
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", "-j", "0", "-x", "/node_modules/", *paths],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        check=True,
        timeout=300,
    )


def uncompile_tree(root: Path = REPO_ROOT) -> None:
    """Remove the clone's .pyc files (``--source-start``): with them there a daemon would read
    them even under ``PYTHONDONTWRITEBYTECODE``."""
    for name in COMPILED_DIRS:
        if (root / name).is_dir():
            for cache in (root / name).rglob("__pycache__"):
                shutil.rmtree(cache, ignore_errors=True)


def start_kind() -> str:
    """How the benches' daemons start, for a report's header."""
    if SOURCE_START:
        return (
            "from source (`--source-start`: `PYTHONDONTWRITEBYTECODE=1`, every start compiles "
            "the clone's modules)"
        )
    return (
        "installed (the clone byte-compiled once before the runs, `PYTHONDONTWRITEBYTECODE` "
        "not passed to `mcpsubd`, as a wheel install starts)"
    )


@contextlib.contextmanager
def workspace() -> Iterator[tuple[Children, Path]]:
    if SOURCE_START:
        uncompile_tree()
    else:
        compile_tree()
    children = Children()
    with tempfile.TemporaryDirectory(prefix="mcpsub-bench-daemon-") as tmp_name:
        try:
            yield children, Path(tmp_name)
        finally:
            children.stop_all()


async def new_generation(store: Any, server_id: int) -> int:
    """A link's generation to record reads under, as the daemon gets one: by claiming the
    link's lease (which bumps it)."""
    from service.store.lease_repository import LeaseRepository

    [claimed] = await LeaseRepository(store).claim("bench", 3600.0, 1, [server_id], mine_too=True)
    return int(claimed.generation)
