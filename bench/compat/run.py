"""``make compat``: every MCP client available here against the lab, judged by the lab.

Runs, one after the other against one lab server (its per-client verdicts tell them apart
by ``clientInfo``):

* mcpsub's three front doors: the drop-in ``mcp-resource-subscriber``, ``mcpsubctl probe
  --follow`` (stopped after its first re-read line) and ``mcpsubd`` (subscribe, wait for
  the update, unsubscribe);
* the official Python SDK client (``mcp`` 2.x, a dev dependency);
* the official TypeScript SDK client ``@modelcontextprotocol/client`` pinned in
  ``bench/compat/package.json``, twice: with the options its README shows (which means a
  2025-era ``initialize``) and with ``versionNegotiation: {mode: 'auto'}``.

Then the official conformance suite (``@modelcontextprotocol/conformance``, pinned) runs its
2026-07-28 server scenarios against a second, fresh lab. Everything is written to
``results/compatibility.md``. The npm packages go to ``bench/compat/node_modules``
(gitignored); without ``node``/``npm`` the table says so instead.

The verdicts are the lab's own (``GET /lab/report``), so this file shows exactly what a
person would see checking their own client against the lab.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from bench.agents_lab.report import keep_block  # noqa: E402
from labserver.verdicts import group  # noqa: E402
from tests.support.cli import run_cli, spawn_cli  # noqa: E402
from tests.support.daemon import Daemon  # noqa: E402
from tests.support.lab import LabServer  # noqa: E402

HERE = Path(__file__).resolve().parent
CLIENTS = REPO / "tests" / "peers" / "clients"
RESULTS = REPO / "results" / "compatibility.md"
REVIEW = "test://review/status"
UPDATE_DELAY = "0.5"
STEP_TIMEOUT = 90.0
ITEM_IDS = ("connected", "listed", "read", "listened", "notified", "reread", "closed")
ITEM_HEADS = (
    "2026-07-28",
    "list",
    "read",
    "listen honored",
    "update received",
    "re-read",
    "closed",
)
MARK = {"pass": "✅", "fail": "❌", "pending": "⏳", "n/a": "➖"}
# Conformance checks that cannot pass without the suite's own fixtures (the everything-server's
# tools, resources and prompts) rather than because the lab got the protocol wrong.
FIXTURE = re.compile(
    r"Unknown tool: |diagnostic tool|Available tools:|no tool with x-mcp-header|Not testable"
    r"|Unknown resource URI: test://(static|template|embedded|mixed|watched)|Prerequisite failed"
    r"|nothing watches test://(static|template|embedded|mixed|watched)"
    r"|fixture"
)
NOT_IMPLEMENTED = re.compile(
    r"Method not found: (prompts|completion)/|got -32601|capabilities\.extensions"
)
FIXTURE_SCENARIOS = ("input-required-result-", "tasks-")


@dataclass
class Run:
    """One client run: what we started and what it printed."""

    label: str
    package: str
    command: str
    exit_code: int | None = None
    note: str = ""
    output: str = ""
    keys: list[str] = field(default_factory=list)  # the lab's client keys first seen in this run


def sh(
    argv: list[str], cwd: Path | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, cwd=cwd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )


# ---- npm side ---------------------------------------------------------------------------
def npm_setup() -> tuple[str | None, str]:
    """``node`` path for the TS client and a note; installs the pinned packages once."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        return None, "node/npm not found on this machine: TypeScript SDK and conformance not run"
    stamp = HERE / "node_modules" / ".compat-installed"
    lock = HERE / "package-lock.json"
    if not stamp.exists() or stamp.stat().st_mtime < lock.stat().st_mtime:
        done = sh([npm, "ci", "--no-audit", "--no-fund"], cwd=HERE)
        if done.returncode != 0:
            return None, "npm ci failed: " + done.stderr.strip().splitlines()[-1][:200]
        stamp.touch()
    return node, "node " + sh([node, "--version"]).stdout.strip()


def npm_version(package: str) -> str:
    path = HERE / "node_modules" / package / "package.json"
    return str(json.loads(path.read_text())["version"]) if path.exists() else "?"


# ---- clients ----------------------------------------------------------------------------
def run_dropin(lab: LabServer) -> Run:
    run = Run(
        "mcpsub drop-in (`mcp-resource-subscriber`)",
        "mcpsub " + version("mcpsub"),
        f"mcp-resource-subscriber --url {lab.url} --json",
    )
    done = run_cli("mcp-resource-subscriber", "--url", lab.url, "--json", timeout=STEP_TIMEOUT)
    run.exit_code, run.output = done.code, done.stdout.strip()
    return run


def run_probe_follow(lab: LabServer) -> Run:
    run = Run(
        "mcpsub `mcpsubctl probe --follow`",
        "mcpsub " + version("mcpsub"),
        f"mcpsubctl probe --url {lab.url} --uri {REVIEW} --follow --json (SIGINT after its first re-read triggered by a notification)",
    )
    proc = spawn_cli("mcpsubctl", "probe", "--url", lab.url, "--uri", REVIEW, "--follow", "--json")
    assert proc.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + STEP_TIMEOUT
    for line in proc.stdout:  # NDJSON: one line per re-read
        lines.append(line.strip())
        if '"trigger":"notification"' in line or time.monotonic() > deadline:
            break
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        run.note = "did not stop within 15 s of SIGINT"
    run.exit_code, run.output = proc.returncode, "\n".join(lines)
    return run


def run_daemon(lab: LabServer, workdir: Path) -> Run:
    run = Run(
        "mcpsub `mcpsubd` (subscribe, wait, unsubscribe)",
        "mcpsub " + version("mcpsub"),
        f"mcpsubd + mcpsubctl subscribe --url {lab.url} --uri {REVIEW}; mcpsubctl wait; unsubscribe",
    )
    since = lab.log()[-1]["seq"] if lab.log() else 0
    daemon = Daemon(workdir / "mcpsubd-state").start()
    try:
        sub = daemon.ctl("subscribe", "--url", lab.url, "--uri", REVIEW, "--json")
        if sub.code != 0:
            run.exit_code, run.output = sub.code, sub.stdout + sub.stderr
            return run
        # The lab's update comes UPDATE_DELAY after the daemon's listen; wait sees it.
        lab.wait_event("resources.read", count=2, timeout=STEP_TIMEOUT, since=since)
        shown = daemon.ctl("read", "--uri", REVIEW, "--json")
        run.output = shown.stdout.strip()
        gone = daemon.ctl("unsubscribe", "--url", lab.url, "--uri", REVIEW)
        if gone.code != 0:  # older CLIs: stop the daemon, which closes the stream too
            run.note = "unsubscribe failed; stopped the daemon instead"
        lab.wait_event("listen.closed", timeout=STEP_TIMEOUT, since=since)
        run.exit_code = 0 if "version: 2" in shown.stdout else 1
    finally:
        daemon.stop()
    return run


def run_python_sdk(lab: LabServer) -> Run:
    run = Run(
        "official Python SDK client (`mcp`)",
        "mcp " + version("mcp"),
        f"python tests/peers/clients/sdk_python.py {lab.url}",
    )
    done = sh([sys.executable, str(CLIENTS / "sdk_python.py"), lab.url], timeout=STEP_TIMEOUT)
    run.exit_code, run.output = done.returncode, (done.stdout + done.stderr).strip()[-600:]
    return run


def run_ts_sdk(lab: LabServer, node: str | None, mode: str) -> Run:
    ts = npm_version("@modelcontextprotocol/client")
    label = {
        "default": "official TypeScript SDK client, default options",
        "auto": "official TypeScript SDK client, `versionNegotiation: {mode: 'auto'}`",
    }[mode]
    run = Run(
        label,
        f"@modelcontextprotocol/client {ts}",
        f"node bench/compat/ts_client.mjs {lab.url} {mode}",
    )
    if node is None:
        run.note = "not run: node is not installed"
        return run
    done = sh([node, str(HERE / "ts_client.mjs"), lab.url, mode], timeout=STEP_TIMEOUT)
    run.exit_code, run.output = done.returncode, (done.stdout + done.stderr).strip()[-600:]
    return run


# ---- under lab faults -------------------------------------------------------------------
FAULT_SECONDS = 3.0
FAULT_UPDATE_DELAY = "1"  # the update comes 1 s after a listen opens, inside the window
# Production backoff for the daemon (tests/support/daemon.py's is 20x faster, which a lab
# rightly calls a loop).
FAULT_DAEMON_ENV = {"MCPSUB_BACKOFF_BASE_S": "1", "MCPSUB_BACKOFF_CAP_S": "300"}
Action = tuple[float, str, str] | None  # (seconds into the window, HTTP method, control path)
# Every fault the lab can inject into a subscriber's path (labserver/faults.py's canned
# answers, and the stream and timing knobs of labserver/labconfig.py), each run on a fresh lab.
# Left out: authToken (a configuration the client must be given credentials for, not a fault:
# tests/auth), maxSubscriptions (needs a second client holding the slot; its 503 is
# refuseListen's refusal in another shape), callDelayMs and pageSize (tools/call and
# resources/list, which these clients do not use).
FAULTS: list[tuple[str, dict[str, Any], Action]] = [
    ("the ack comes 1 s late (`ackDelayMs`)", {"ackDelayMs": 1000}, None),
    ("every read takes 1 s (`readDelayMs`)", {"readDelayMs": 1000}, None),
    ("keep-alives every 0.1 s (`keepaliveSeconds`)", {"keepaliveSeconds": 0.1}, None),
    ("every listen stream closed gracefully 10 ms after its ack", {"closeAfterAckMs": 10}, None),
    ("every listen stream dropped 10 ms after its ack", {"dropAfterAckMs": 10}, None),
    (
        "open streams closed gracefully once (`/lab/streams/close`)",
        {},
        (0.5, "POST", "/lab/streams/close"),
    ),
    ("open streams dropped once (`/lab/streams/drop`)", {}, (0.5, "POST", "/lab/streams/drop")),
    ("the resource is not honored (`dishonorUris`)", {"dishonorUris": [REVIEW]}, None),
    ("`resources.subscribe` not advertised", {"advertiseSubscribe": False}, None),
    ("listen refused in-band (`refuseListen`)", {"refuseListen": True}, None),
    ("listen never answered (`silentMethods`)", {"silentMethods": ["subscriptions/listen"]}, None),
    *(
        (f"a 2025-era server (`legacyMode: {mode}`)", {"legacyMode": mode}, None)
        for mode in (
            "method-not-found",
            "missing-session",
            "unsupported-version",
            "not-initialized",
            "discover-2025",
            "not-found",
        )
    ),
    ("discover answered HTTP 503 (`failMethods`)", {"failMethods": {"server/discover": 503}}, None),
    (
        "listen answered HTTP 503 (`failMethods`)",
        {"failMethods": {"subscriptions/listen": 503}},
        None,
    ),
    ("reads answered HTTP 500 (`failMethods`)", {"failMethods": {"resources/read": 500}}, None),
]


@dataclass
class FaultRow:
    fault: str
    client: str
    exit_code: int | None
    listens: int
    outcome: str
    mistakes: list[str]
    spared: list[str] = field(default_factory=list)


def _wait_quietly(proc: subprocess.Popen[str], seconds: float) -> None:
    """Wait up to ``seconds`` for ``proc`` (a follow that ended early is fine)."""
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(seconds)


def _window(lab: LabServer, action: Action, done: Any) -> None:
    """The observation window: FAULT_SECONDS, with the fault's control action inside it."""
    started = time.monotonic()
    if action is not None:
        at, method, path = action
        done(max(0.0, started + at - time.monotonic()))
        lab.control(method, path)
    done(max(0.0, started + FAULT_SECONDS - time.monotonic()))


def run_faults(workdir: Path) -> list[FaultRow]:
    """mcpsubd and ``probe --follow`` for FAULT_SECONDS against each fault; the lab judges."""
    rows: list[FaultRow] = []
    for n, (label, config, action) in enumerate(FAULTS):
        print(f"compat: fault: {label}", flush=True)
        with LabServer({"MCP_TEST_UPDATE_DELAY_SECONDS": FAULT_UPDATE_DELAY}) as lab:
            if config:
                lab.configure(**config)
            codes: dict[str, int | None] = {}
            daemon = Daemon(workdir / f"fault-{n}", env=FAULT_DAEMON_ENV).start()
            try:
                daemon.ctl("subscribe", "--url", lab.url, "--uri", REVIEW, "--no-wait")
                _window(lab, action, time.sleep)
            finally:
                codes["mcpsubd"] = daemon.stop()
            proc = spawn_cli("mcpsubctl", "probe", "--url", lab.url, "--uri", REVIEW, "--follow")

            _window(lab, action, lambda seconds, proc=proc: _wait_quietly(proc, seconds))
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
                proc.wait(15)
            codes["mcpsubctl"] = proc.returncode
            entries = lab.log()
            report = lab.http.get("/lab/report").json()
        groups = group(entries)
        for client in report["clients"]:
            opened = [e for e in groups.get(client["key"], []) if e["event"] == "listen.opened"]
            rows.append(
                FaultRow(
                    label,
                    client["key"],
                    codes.get(client["key"].split(" ")[0]),
                    len(opened),
                    client["outcome"],
                    [m["title"] for m in client["mistakes"]],
                    [i["id"] for i in client["items"] if i["status"] == "n/a"],
                )
            )
    return rows


# ---- conformance ------------------------------------------------------------------------
@dataclass
class Scenario:
    name: str
    scored: bool
    checks: list[dict[str, Any]]

    def bucket(self, check: dict[str, Any]) -> str:
        status = check.get("status")
        if status == "SUCCESS":
            return "passed"
        if status in ("SKIPPED", "INFO"):
            return "skipped/info"
        message = str(check.get("errorMessage") or "")
        if NOT_IMPLEMENTED.search(message):
            return "not implemented"
        if FIXTURE.search(message) or self.name.startswith(FIXTURE_SCENARIOS):
            return "needs fixture"
        return "failed"


def run_conformance(
    node: str | None, workdir: Path, url: str | None = None, name: str = "conformance"
) -> tuple[list[Scenario], str]:
    """The suite's 2026-07-28 server scenarios against ``url`` (default: a fresh lab)."""
    package = npm_version("@modelcontextprotocol/conformance")
    if node is None:
        return [], "not run: node is not installed"
    node22 = HERE / "node_modules" / ".bin" / "node"  # the suite needs Node >= 22
    entry = HERE / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
    out = workdir / name

    def suite(target: str) -> subprocess.CompletedProcess[str]:
        argv = [str(node22), str(entry), "server", "--url", target]
        return sh([*argv, "--requirements", "2026-07-28", "-o", str(out)], timeout=900)

    if url is None:
        with LabServer({"MCP_TEST_UPDATE_DELAY_SECONDS": UPDATE_DELAY}) as lab:
            done = suite(lab.url)
    else:
        done = suite(url)
    unscored = set(re.findall(r"^\s+[✗✓] (\S+) \((?:extension|pending)\)", done.stdout, re.M))
    scenarios: list[Scenario] = []
    for checks in sorted(out.glob("server-*/checks.json")):
        name = re.sub(r"^server-|-\d{4}-\d\d-\d\dT[\d-]+Z$", "", checks.parent.name)
        scenarios.append(Scenario(name, name not in unscored, json.loads(checks.read_text())))
    total = re.search(r"Total: (\d+) passed, (\d+) failed", done.stdout)
    summary = (
        f"@modelcontextprotocol/conformance {package} (pinned: the npm `latest` tag, 0.1.16, has no "
        "2026-07-28 scenarios), `server --requirements 2026-07-28`, run with Node "
        f"{sh([str(node22), '--version']).stdout.strip()} from the npm `node` package (the suite "
        "needs Node >= 22; on this machine's Node 20 it dies at import: no `fs.globSync`)"
    )
    if total:
        summary += f"; the suite's own total: {total.group(1)} passed, {total.group(2)} failed"
    if not scenarios:
        summary += f"; no results (exit {done.returncode}): {done.stderr.strip()[-300:]}"
    return scenarios, summary


class SocketBridge:
    """127.0.0.1:PORT → the daemon's unix socket, byte for byte (the suite takes a URL and
    sends no bearer token; the socket needs none, and the API still checks Host/Origin)."""

    def __init__(self, socket_path: Path) -> None:
        import threading

        self.socket_path = socket_path
        self.port = 0
        self._ready = threading.Event()
        self._loop: Any = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> SocketBridge:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *_exc: object) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    def _run(self) -> None:
        import asyncio

        async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                while data := await reader.read(65536):
                    writer.write(data)
                    await writer.drain()
            except OSError:
                pass
            finally:
                writer.close()

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                up_reader, up_writer = await asyncio.open_unix_connection(str(self.socket_path))
            except OSError:
                writer.close()
                return
            await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

        loop = self._loop = asyncio.new_event_loop()
        server = loop.run_until_complete(asyncio.start_server(handle, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        loop.run_forever()


def run_face_conformance(node: str | None, workdir: Path) -> tuple[list[Scenario], str]:
    """The same suite against the agent face (``/mcp`` on ``mcpsubd``), one URI subscribed."""
    if node is None:
        return [], "not run: node is not installed"
    with LabServer({"MCP_TEST_UPDATE_DELAY_SECONDS": "600"}) as lab:
        daemon = Daemon(workdir / "face-state").start()
        try:
            run_cli(
                "mcpsubctl", "subscribe", "--url", lab.url, "--uri", REVIEW, "--json",
                env={"MCPSUB_STATE_DIR": str(daemon.state_dir)},
            )  # fmt: skip
            with SocketBridge(daemon.socket_path) as bridge:
                url = f"http://127.0.0.1:{bridge.port}/mcp"
                scenarios, summary = run_conformance(node, workdir, url, "face-conformance")
        finally:
            daemon.stop()
    return scenarios, summary.replace(
        "`server --requirements", "`server --url …/mcp --requirements"
    )


# ---- the file ---------------------------------------------------------------------------
def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def row(run: Run, client: dict[str, Any]) -> str:
    marks = {i["id"]: MARK[i["status"]] for i in client["items"]}
    outcome = client["outcome"] + "".join(f"; {m['id']}" for m in client["mistakes"])
    return (
        f"| {run.label} | {run.package} (clientInfo `{cell(client['key'])}`) | {client['era']} | "
        + " | ".join(marks[i] for i in ITEM_IDS)
        + f" | **{outcome}** |"
    )


def evidence(client: dict[str, Any]) -> list[str]:
    lines = [f"clientInfo `{client['key']}`, User-Agent `{client['userAgent']}`:", ""]
    for item in client["items"]:
        shown = item["evidence"][-1]["line"] if item["evidence"] else "no such log entry"
        note = f" ({item['note']})" if item["note"] else ""
        lines.append(f"- {MARK[item['status']]} {item['title']}{note}: `{cell(shown)}`")
    for mistake in client["mistakes"]:
        shown = mistake["evidence"][-1]["line"] if mistake["evidence"] else ""
        lines.append(f"- ⚠️ {mistake['title']}: `{cell(shown)}`")
    return [*lines, ""]


FAULTS_HEAD = "## mcpsub's long-lived clients under lab faults"


def faults_block(faults: list[FaultRow]) -> list[str]:
    """The fault table's section of results/compatibility.md."""
    lines = [
        FAULTS_HEAD,
        "",
        f"Generated on {datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%d %H:%M UTC')} "
        "(`make compat`, or this section alone: `python bench/compat/run.py --faults-only`). "
        f"`mcpsubd` (subscribed, observed {FAULT_SECONDS:g} s, then stopped) and "
        f"`mcpsubctl probe --follow` (SIGINT after {FAULT_SECONDS:g} s) against a fresh "
        f"lab steered into each fault the lab can inject (update {FAULT_UPDATE_DELAY} s "
        "after a listen opens). The verdicts are the lab's; ➖ items are ones the fault "
        'made impossible (docs/labserver.md, "Per-client verdicts").',
        "",
        "| Fault | Client | Exit | Listens opened | Verdict | Items ➖ | Mistakes |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {f.fault} | {cell(f.client)} | {f.exit_code} | {f.listens} | {f.outcome} | "
        f"{cell(', '.join(f.spared)) or '–'} | {cell('; '.join(f.mistakes)) or '–'} |"
        for f in faults
    ]
    lines.append("")
    return lines


def replace_faults_block(text: str, faults: list[FaultRow]) -> str:
    """``text`` (results/compatibility.md) with only its fault section made anew."""
    start = text.index(FAULTS_HEAD)
    end = text.index("\n## ", start + len(FAULTS_HEAD)) + 1
    return text[:start] + "\n".join(faults_block(faults)) + "\n" + text[end:]


def render(
    runs: list[Run],
    report: dict[str, Any],
    node_note: str,
    scenarios: list[Scenario],
    conformance_note: str,
    faults: list[FaultRow] | None = None,
    face: tuple[list[Scenario], str] | None = None,
) -> str:
    clients = {c["key"]: c for c in report["clients"]}
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# Compatibility matrix: MCP clients against the lab server",
        "",
        f"Generated by `make compat` (bench/compat/run.py) on {now}; Python "
        f"{platform.python_version()}, {node_note}. Lab: `mcp-lab-server` {version('mcpsub')}, "
        f"protocol 2026-07-28 only, update {UPDATE_DELAY} s after the first listen. Every "
        "verdict below is the lab's own (`GET /lab/report`; rules in docs/labserver.md), not "
        "this script's. ✅ done, ❌ not done, ⏳ still pending when the report was taken.",
        "",
        "| Client | Version | Protocol era | " + " | ".join(ITEM_HEADS) + " | Verdict |",
        "|---|---|---|" + "---|" * len(ITEM_HEADS) + "---|",
    ]
    for run in runs:
        if not run.keys:
            note = run.note or f"no request reached the lab (exit {run.exit_code})"
            dashes = " | ".join("–" for _ in ITEM_IDS)
            lines.append(f"| {run.label} | {run.package} | – | {dashes} | {cell(note)} |")
        lines += [row(run, clients[k]) for k in run.keys]
    lines += ["", "## Evidence per client (last evidence line of each item)", ""]
    for run in runs:
        lines += [f"### {run.label}", "", f"Command: `{run.command}` (exit {run.exit_code})."]
        if run.note:
            lines.append(f"Note: {run.note}.")
        lines.append("")
        if not run.keys:
            lines += ["The lab saw no request from it.", ""]
        for key in run.keys:
            lines += evidence(clients[key])
    if faults:
        lines += faults_block(faults)
    lines += [
        "## Notes",
        "",
        "- The TypeScript SDK 2.4.0 speaks 2026-07-28, but only when asked: with default options "
        "`versionNegotiation.mode` is `'legacy'`, so it sends a 2025-era `initialize`, which a "
        "2026-07-28-only server refuses (-32022). With `mode: 'auto'` it passes every item.",
        "- The Python SDK sends `clientInfo` `mcp 0.1.0` whatever its package version (2.3.0).",
        "- `mcpsubctl probe --follow` and `mcpsubd` are given the URI and do not call "
        "`resources/list`; the lab shows that but does not require it for *passed*.",
        "",
        "## Official conformance suite, server scenarios (2026-07-28 requirements)",
        "",
        conformance_note + ".",
        "",
        "Buckets: *needs fixture* = the check calls the suite's own fixture tools, resources or "
        "prompts (`test_simple_text`, `test://static-text`, `test_missing_capability`, the "
        "MRTR and tasks tools, …), which the lab does not have; *not implemented* = a feature "
        "the lab does not serve at all (prompts, completions, the tasks extension); *failed* = "
        "anything else. Scenarios marked *not scored* do not count for 2026-07-28 conformance.",
        "",
    ]
    lines += conformance_table(scenarios)
    if face is not None:
        lines += face_section(*face)
    lines.append("")
    return "\n".join(lines)


def conformance_table(scenarios: list[Scenario]) -> list[str]:
    lines = [
        "| Scenario | Scored | Passed | Failed | Needs fixture | Not implemented | Skipped/info | Checks not passed |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for sc in scenarios:
        buckets: dict[str, list[dict[str, Any]]] = {}
        for check in sc.checks:
            buckets.setdefault(sc.bucket(check), []).append(check)
        shown = ", ".join(
            f"`{c.get('id')}` ({bucket}"
            + (f": {cell(str(c.get('errorMessage') or ''))[:90]}" if bucket == "failed" else "")
            + ")"
            for bucket in ("failed", "needs fixture", "not implemented")
            for c in buckets.get(bucket, [])
        )
        counts = [
            len(buckets.get(b, []))
            for b in ("passed", "failed", "needs fixture", "not implemented", "skipped/info")
        ]
        lines.append(
            f"| {sc.name} | {'yes' if sc.scored else 'not scored'} | "
            + " | ".join(str(n) for n in counts)
            + f" | {shown or '–'} |"
        )
    if scenarios:
        totals = {
            b: 0 for b in ("passed", "failed", "needs fixture", "not implemented", "skipped/info")
        }
        for sc in scenarios:
            for check in sc.checks:
                totals[sc.bucket(check)] += 1
        lines += ["", "Totals: " + ", ".join(f"{n} {b}" for b, n in totals.items()) + "."]
    return lines


def face_section(scenarios: list[Scenario], note: str) -> list[str]:
    return [
        "",
        "## The agent face: conformance server scenarios against `/mcp` on mcpsubd",
        "",
        note + ". The daemon (SQLite, one URI of the lab subscribed) serves the face at `/mcp` "
        "on its unix socket, bridged to a loopback port byte for byte (the suite takes a URL and "
        "sends no bearer token). The face is not the suite's everything-server: it has its own six "
        "tools, no prompts and no completions, so *needs fixture* and *not implemented* are the "
        "suite asking for what the face does not offer; *failed* is anything else. Its own "
        "behaviour is tested with the official Python SDK, the TypeScript SDK 1.x and the MCP "
        "Inspector CLI (tests/face/).",
        "",
        *conformance_table(scenarios),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument(
        "--faults-only",
        action="store_true",
        help="run only the fault table and replace its section of --output",
    )
    args = parser.parse_args()
    if args.faults_only:
        with tempfile.TemporaryDirectory(prefix="mcpsub-compat-") as tmp:
            faults = run_faults(Path(tmp))
        args.output.write_text(replace_faults_block(args.output.read_text(), faults))
        for f in faults:
            print(f"compat: {f.fault}: {f.client}: {f.outcome}", flush=True)
        return 0
    node, node_note = npm_setup()
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="mcpsub-compat-") as tmp:
        workdir = Path(tmp)
        with LabServer({"MCP_TEST_UPDATE_DELAY_SECONDS": UPDATE_DELAY}) as lab:
            steps = [
                lambda: run_dropin(lab),
                lambda: run_probe_follow(lab),
                lambda: run_daemon(lab, workdir),
                lambda: run_python_sdk(lab),
                lambda: run_ts_sdk(lab, node, "default"),
                lambda: run_ts_sdk(lab, node, "auto"),
            ]
            for step in steps:
                before = {c["key"] for c in lab.http.get("/lab/report").json()["clients"]}
                run = step()
                after = [c["key"] for c in lab.http.get("/lab/report").json()["clients"]]
                run.keys = [k for k in after if k not in before]
                print(f"compat: {run.label}: exit {run.exit_code} {run.note}", flush=True)
                runs.append(run)
            report = lab.http.get("/lab/report").json()
        faults = run_faults(workdir)
        scenarios, conformance_note = run_conformance(node, workdir)
        face = run_face_conformance(node, workdir)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    # the agent lab's block (make agents-lab: agent CLIs judged by the lab) stays
    args.output.write_text(
        keep_block(
            args.output, render(runs, report, node_note, scenarios, conformance_note, faults, face)
        )
    )
    print(
        f"compat: wrote {args.output.relative_to(REPO) if args.output.is_relative_to(REPO) else args.output}"
    )
    for client in report["clients"]:
        print(f"compat: {client['key']}: {client['outcome']}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "")
    sys.exit(main())
