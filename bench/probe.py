"""Start-up and one-shot probe latency of the CLIs, against the real lab server on loopback.

Run: ``.venv/bin/python bench/probe.py [--runs N] [--out results/probe.md]`` (``make bench``).

Starts ``python -m labserver`` on 127.0.0.1 (port 0, update delay 0, log silent), then
measures wall time of N runs (round-robin, after one untimed warm-up each) of:

* ``python -c pass`` with this interpreter: the floor every Python CLI pays;
* ``mcp-resource-subscriber --version`` and ``mcpsubctl --version``;
* a full probe ``mcp-resource-subscriber --url … --uri test://review/status --json``
  (must exit 0 every time).

and, when ``bench/compat/node_modules`` holds the pinned official TypeScript SDK client
(``make compat`` installs it; ``npm ci`` in ``bench/compat``) and ``node`` is on PATH, the same
probe done by that client (``bench/compat/ts_client.mjs … auto``: discover, list, read,
listen, wait for the update, read again, close).

Targets: ``--version`` ≤ 2.5× and a full probe ≤ 4× the bare interpreter's median; a full
probe ≤ 0.35× the TypeScript SDK client's median.
It also writes where the time goes: ``-X importtime`` of ``cli.runner`` (top 10 cumulative)
and the network phases of one probe, timed in-process over the same client code.
Only 127.0.0.1 is contacted; every run is bounded and the lab server is always stopped.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import platform
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
PYTHON = REPO_ROOT / ".venv" / "bin" / "python"
BIN = PYTHON.parent
URI = "test://review/status"
RUN_TIMEOUT_S = 30.0
STARTUP_TIMEOUT_S = 15.0
TARGETS = {"--version": 2.5, "probe": 4.0}
TS_TARGET = 0.35
"""A full probe's median over the official TypeScript SDK client's, at most."""
TS_CLIENT = REPO_ROOT / "bench" / "compat" / "ts_client.mjs"
TS_LABEL = "official TypeScript SDK client (same probe)"
PROBE_LABEL = "mcp-resource-subscriber --url … --uri … --json"
_LISTENING = re.compile(r"listening on (https?://127\.0\.0\.1:\d+/mcp)")


# ---- the lab server ---------------------------------------------------------------------------
@contextmanager
def lab_server() -> Iterator[str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO_ROOT),
        "PYTHONUNBUFFERED": "1",
        "MCP_TEST_UPDATE_DELAY_SECONDS": "0",
        "MCP_TEST_LOG_LEVEL": "silent",
    }
    proc = subprocess.Popen(
        [str(PYTHON), "-m", "labserver", "--host", "127.0.0.1", "--port", "0"],
        env=env,
        cwd=str(REPO_ROOT),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    found: list[str] = []
    ready = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:  # keep draining so the pipe never fills
            match = _LISTENING.search(line)
            if match and not found:
                found.append(match.group(1))
                ready.set()
        ready.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        if not ready.wait(STARTUP_TIMEOUT_S) or not found:
            raise SystemExit("bench: the lab server did not start")
        yield found[0]
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        reader.join(2)


# ---- measuring --------------------------------------------------------------------------------
def cli_env(tmp: Path, *, bytecode: bool) -> dict[str, str]:
    """The CLIs' environment: clean of MCP_PROBE_*/MCPSUB_*, with a private .pyc cache.

    ``bytecode=True`` (the normal case for an installed tool): .pyc files are written on the
    warm-up run into ``tmp/pycache`` (``PYTHONPYCACHEPREFIX``, so the work tree and the venv
    are left alone) and read by every timed run. ``bytecode=False``: no .pyc is read or
    written, every import compiles from source, as in a shell with
    ``PYTHONDONTWRITEBYTECODE=1`` over a venv that uv installed without ``--compile-bytecode``.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MCP_PROBE_", "MCPSUB_"))}
    env["MCP_PROBE_TOKEN_STORE_PATH"] = str(tmp / "tokens.sqlite")  # not the user's login cache
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if bytecode:
        env["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
    else:
        env["PYTHONPYCACHEPREFIX"] = str(tmp / "no-pycache")  # stays empty
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


CPU_S: dict[str, list[float]] = {}
"""CPU seconds (user + system, from ``RUSAGE_CHILDREN``) of each timed run, by row label."""
_LAST_CPU = [0.0]


def timed(
    argv: list[str], env: dict[str, str], check: Callable[[subprocess.CompletedProcess[str]], None]
) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        argv,
        env=env,
        cwd=str(REPO_ROOT),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    _LAST_CPU[0] = cpu
    check(done)
    return elapsed


def exit_zero(done: subprocess.CompletedProcess[str]) -> None:
    if done.returncode != 0:
        raise SystemExit(
            f"bench: {done.args!r} exited {done.returncode}\n{done.stdout}\n{done.stderr}"
        )


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * pct // 100))  # nearest rank
    return ordered[int(rank) - 1]


# ---- where the time goes ----------------------------------------------------------------------
def import_profile(
    module: str, env: dict[str, str], top: int = 10
) -> list[tuple[float, float, str]]:
    """``-X importtime`` of one import: (cumulative ms, self ms, name), largest first."""
    done = subprocess.run(
        [str(PYTHON), "-X", "importtime", "-c", f"import {module}"],
        env={**env, "PYTHONPATH": str(REPO_ROOT)},
        cwd=str(REPO_ROOT),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )
    rows: list[tuple[float, float, str]] = []
    for line in done.stderr.splitlines():
        match = re.match(r"import time:\s+(\d+) \|\s+(\d+) \| (.*)$", line)
        if match:
            own, cumulative, name = match.groups()
            rows.append((int(cumulative) / 1000, int(own) / 1000, name))
    rows.sort(reverse=True)
    return rows[:top]


async def _phases_once(url: str) -> dict[str, float]:
    sys.path.insert(0, str(REPO_ROOT))
    from service.mcp.client import McpClient
    from service.mcp.listen import Closed, Failed, Lost, Notified

    marks: dict[str, float] = {}
    last = time.perf_counter()

    def mark(name: str) -> None:
        nonlocal last
        now = time.perf_counter()
        marks[name] = (now - last) * 1000
        last = now

    async with asyncio.timeout(RUN_TIMEOUT_S):
        # The transport service.probe gets: the lean one (llhttp) on plain http://.
        async with McpClient(url, client_name="mcpsub-bench") as client:
            mark("client setup")
            await client.discover()
            mark("server/discover")
            await client.list_resources()
            mark("resources/list")
            await client.read_resource(URI)
            mark("resources/read (initial)")
            async with client.listen({"resourceSubscriptions": [URI]}) as stream:
                mark("subscriptions/listen → ack")
                await client.read_resource(URI)
                mark("resources/read (pre-completion)")
                while not isinstance(event := await stream.next_event(), Notified):
                    if isinstance(event, (Closed, Failed, Lost)):
                        raise RuntimeError(f"listen ended before the update: {event}")
                mark("wait for resources/updated")
                await client.read_resource(URI)
                mark("resources/read (final)")
            mark("close listen")
    return marks


def network_phases(url: str, runs: int) -> dict[str, float]:
    """Median ms per phase over ``runs`` in-process probes (imports and start-up excluded)."""
    samples: dict[str, list[float]] = {}
    for _ in range(runs):
        for name, ms in asyncio.run(_phases_once(url)).items():
            samples.setdefault(name, []).append(ms)
    return {name: statistics.median(values) for name, values in samples.items()}


# ---- report -----------------------------------------------------------------------------------
Row = tuple[str, str, bool, list[str]]
"""(label, target key or "", bytecode cached?, argv)."""

NAGLE_NOTE = (
    "Each request on a reused keep-alive connection takes ~40 ms here: the signature of Nagle "
    "+ delayed ACK. The lab server binds its own socket as `socket.socket(family, "
    "SOCK_STREAM)` (proto 0), and asyncio only sets `TCP_NODELAY` on accepted sockets whose "
    "`proto` is `IPPROTO_TCP`; so this is the lab's cost, not the client's (see "
    "docs/benchmarks.md). It inflates the full-probe row by roughly 4 × 40 ms."
)


def ts_ratio(samples: dict[str, list[float]]) -> float:
    probe = statistics.median(samples[PROBE_LABEL])
    return probe / statistics.median(samples[TS_LABEL])


def render(
    runs: int,
    rows: list[Row],
    samples: dict[str, list[float]],
    imports: list[tuple[float, float, str]],
    phases: dict[str, float] | None,
) -> str:
    base = statistics.median(samples[rows[0][0]])
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    nproc = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    out = [
        "# Probe start-up benchmark",
        "",
        f"Generated by `bench/probe.py` on {now}: {runs} timed runs per command (round-robin,",
        "after one untimed warm-up each) against the lab server on 127.0.0.1 with",
        "`MCP_TEST_UPDATE_DELAY_SECONDS=0`. Ratios are to the median of `python -c pass` with",
        "the same interpreter (`.venv/bin/python`). Rows marked *no .pyc* compile every",
        "module from source (no bytecode cache); they are for information and have no target.",
        "",
        f"Machine: {nproc} CPUs (nproc), {platform.machine()}, Linux {platform.release()}, "
        f"Python {platform.python_version()} ({sys.implementation.name}).",
        "",
        "| command | median ms | p90 ms | min ms | × `python -c pass` | target | met? |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for label, target_key, _, _ in rows:
        values = samples[label]
        ratio = statistics.median(values) / base
        target = TARGETS.get(target_key)
        verdict = "" if target is None else ("met" if ratio <= target else "**missed**")
        target_text = "" if target is None else f"≤ {target:g}×"
        out.append(
            f"| `{label}` | {statistics.median(values) * 1000:.1f} | "
            f"{percentile(values, 90) * 1000:.1f} | {min(values) * 1000:.1f} | {ratio:.2f}× | "
            f"{target_text} | {verdict} |"
        )
    if TS_LABEL in samples:
        ratio = ts_ratio(samples)
        verdict = "met" if ratio <= TS_TARGET else "**missed**"
        out += [
            "",
            f"Full probe ÷ {TS_LABEL}, medians of the same round-robin: **{ratio:.2f}×** "
            f"(target ≤ {TS_TARGET:g}×: {verdict}).",
        ]
        probe_cpu = statistics.median(CPU_S[PROBE_LABEL])
        ts_cpu = statistics.median(CPU_S[TS_LABEL])
        out += [
            "",
            f"CPU (user + system) per run, medians, which the machine's load moves less: "
            f"probe {probe_cpu * 1000:.0f} ms, TypeScript SDK client {ts_cpu * 1000:.0f} ms "
            f"({probe_cpu / ts_cpu:.2f}×).",
        ]
    out += [
        "",
        "## Where the time goes",
        "",
        '`python -X importtime -c "import cli.runner"` (what a probe imports before its first',
        "request), bytecode cached, top 10 by cumulative time; one run, so read it as",
        "proportions:",
        "",
        "| cumulative ms | self ms | module |",
        "|---:|---:|---|",
    ]
    out += [f"| {cum:.1f} | {own:.1f} | `{name.strip()}` |" for cum, own, name in imports]
    if phases:
        total = sum(phases.values())
        out += [
            "",
            "Network phases of one probe, timed in-process over the same `McpClient` calls",
            f"(median of {runs} runs; no interpreter start, no imports): {total:.1f} ms in all.",
            "",
            "| phase | median ms |",
            "|---|---:|",
        ]
        out += [f"| {name} | {ms:.1f} |" for name, ms in phases.items()]
        if phases.get("resources/list", 0.0) >= 35.0:
            out += ["", NAGLE_NOTE]
    out.append("")
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=20, help="timed runs per command (default 20)")
    parser.add_argument(
        "--out", type=Path, default=REPO_ROOT / "results" / "probe.md", help="markdown report"
    )
    parser.add_argument("--quick", action="store_true", help="3 runs per command (a smoke run)")
    args = parser.parse_args()
    if args.quick:
        args.runs = 3
    if not 1 <= args.runs <= 1000:
        parser.error("--runs must be between 1 and 1000")

    with tempfile.TemporaryDirectory(prefix="mcpsub-bench-") as tmp_name, lab_server() as url:
        tmp = Path(tmp_name)
        envs = {True: cli_env(tmp, bytecode=True), False: cli_env(tmp, bytecode=False)}
        sub = str(BIN / "mcp-resource-subscriber")
        probe = [sub, "--url", url, "--uri", URI, "--json"]
        rows: list[Row] = [
            ("python -c pass", "", True, [str(PYTHON), "-c", "pass"]),
            ("mcp-resource-subscriber --version", "--version", True, [sub, "--version"]),
            ("mcpsubctl --version", "--version", True, [str(BIN / "mcpsubctl"), "--version"]),
            ("mcp-resource-subscriber --url … --uri … --json", "probe", True, probe),
            ("mcp-resource-subscriber --version (no .pyc)", "", False, [sub, "--version"]),
            ("mcp-resource-subscriber --url … --json (no .pyc)", "", False, probe),
        ]
        node = shutil.which("node")
        if node and (TS_CLIENT.parent / "node_modules" / "@modelcontextprotocol").is_dir():
            rows.append((TS_LABEL, "", True, [node, str(TS_CLIENT), url, "auto"]))
        else:
            print("bench: no TypeScript SDK client (npm ci in bench/compat)", file=sys.stderr)
        samples: dict[str, list[float]] = {label: [] for label, *_ in rows}
        for _, _, cached, argv in rows:  # warm-up: page cache, and the .pyc files
            timed(argv, envs[cached], exit_zero)
        for _ in range(args.runs):
            for label, _, cached, argv in rows:
                samples[label].append(timed(argv, envs[cached], exit_zero))
                CPU_S.setdefault(label, []).append(_LAST_CPU[0])
        try:
            phases: dict[str, float] | None = network_phases(url, args.runs)
        except Exception as exc:  # the table matters more than the breakdown
            print(f"bench: network phases skipped: {exc!r}", file=sys.stderr)
            phases = None
        imports = import_profile("cli.runner", envs[True])

    report = render(args.runs, rows, samples, imports, phases)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report, encoding="utf-8")
    print(report)
    base = statistics.median(samples[rows[0][0]])
    missed = [
        label
        for label, key, _, _ in rows
        if key in TARGETS and statistics.median(samples[label]) / base > TARGETS[key]
    ]
    if TS_LABEL in samples and ts_ratio(samples) > TS_TARGET:
        missed.append(f"probe vs TS SDK ({ts_ratio(samples):.2f}× > {TS_TARGET:g}×)")
    if missed:
        print(f"bench: targets missed: {', '.join(missed)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
