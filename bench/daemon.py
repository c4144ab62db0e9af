"""Scale, throughput and latency of ``mcpsubd`` against real lab servers on loopback.

Run: ``.venv/bin/python -m bench.daemon [--quick] [--out PATH] [--py-spy PATH]``
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
    Targets: cold start ≤ 10 s, RSS ≤ 150 MB, idle CPU ≤ 0.5 % of one core (``--phases a``
    runs this phase alone, ``results/daemon-scale.md``).
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
import contextlib
import dataclasses
import datetime
import os
import signal
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench import daemonscale, harness
from bench.harness import (
    REPO_ROOT,
    Children,
    CpuMeter,
    Lab,
    LabConnection,
    Mcpsubd,
    Profiler,
    SseFollower,
    bounded_wait,
    check_hash_prediction,
    code_fingerprint,
    code_version,
    cpu_seconds,
    daemon_metrics,
    dist,
    find_py_spy,
    fmt_s,
    lab_put,
    lab_streams,
    machine,
    open_fds,
    percentile,
    predict_hash,
    seed_subscriptions,
    sigterm_to_interrupt,
    start_daemon,
    start_kind,
    start_labs,
    status_kb,
    uds_client,
    verdict,
    workspace,
)

URIS_PER_LINK = 10
TARGET_RSS_MB = 150.0
TARGET_IDLE_CPU_PCT = 0.5
TARGET_COLD_START_S = 10.0
TARGET_STATUS_MS = 20.0
TARGET_API_PER_S = 1000.0
TARGET_UPDATES_PER_S = 1000.0
TARGET_P99_MS = 50.0


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
    batch_links: int = 20
    sequential: int = 100
    tput_links: int = 10
    burst_connections: int = 8
    steady_rate: float = 200.0
    steady_connections: int = 4


FULL = Plan("full", 1000, 4, 10.0, 30.0, 480.0, 5000, 10.0)
QUICK = Plan("quick", 100, 2, 1.0, 5.0, 40.0, 600, 4.0, api_links=2, batch_links=2, sequential=30)


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
    batch: ScaleResult | None = None
    """The same measurement with the batch form (one POST per link, all its URIs)."""
    profiles: list[tuple[str, Any]] = field(default_factory=list)
    """(title, (samples, functions, packages) or an error string) from ``--py-spy``: the cold
    start, and a second idle window after the measured one."""
    smaps: dict[str, int] = field(default_factory=dict)
    """The daemon's ``/proc/PID/smaps_rollup`` after the idle window (kB)."""


async def phase_scale(
    plan: Plan, children: Children, tmp: Path, spy: str | None = None
) -> ScaleResult:
    res = ScaleResult(links=plan.links, subscriptions=plan.links * URIS_PER_LINK, labs=plan.labs)
    total_links = plan.links + plan.api_links + plan.batch_links
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
        labs_cpu0 = {lab.name: cpu_seconds(lab.pid) for lab in labs}
        t0 = time.perf_counter()
        children.add(daemon)
        cold: Profiler | None = None
        if spy:  # from the interpreter's start: the cold start is what (a) times
            wait_for_interpreter(daemon.pid)
            cold = Profiler(spy, daemon.pid, tmp / "scale-cold.txt")
            cold.start()
        daemon.wait_ready()
        res.ready_s = time.perf_counter() - t0
        pids = {"mcpsubd": daemon.pid, **{lab.name: lab.pid for lab in labs}}
        res.ramp = CpuMeter(pids)
        res.ramp.start_wall = t0  # the daemon's CPU before its first sample is all start-up
        res.ramp.start["mcpsubd"] = 0.0
        res.ramp.start.update(labs_cpu0)  # the labs' share of the cold start, from t0 too
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
                if cold is not None:
                    cold.stop()
                    res.profiles.append(
                        ("cold start (daemon start → every URI read)", digest(cold))
                    )
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
            res.smaps = smaps_rollup(daemon.pid)
            if spy:  # a second idle window, profiled (the measured one ran without py-spy)
                idle = Profiler(spy, daemon.pid, tmp / "scale-idle.txt", gil=False)
                idle.start()
                await asyncio.sleep(plan.idle_s)
                idle.stop()
                title = (
                    f"idle (a second {plan.idle_s:g} s window after the measured one; all threads)"
                )
                res.profiles.append((title, digest(idle)))
            # after the window: still everything open, nothing reconnected?
            # GET /v1/status on the settled daemon: 10 timed calls (the ones during the ramp
            # above compete with the cold start and are not the figure)
            res.status_ms = []
            for _ in range(10):
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
            api_end = plan.links + plan.api_links
            await api_sample(plan, api, res, pairs_for(range(plan.links, api_end)), pids)
            res.batch = ScaleResult(
                links=0, subscriptions=res.subscriptions + res.api_posts, labs=0
            )
            await api_sample(
                plan, api, res.batch, pairs_for(range(api_end, total_links)), pids, batch=True
            )
    children.stop(*labs, daemon)
    return res


async def api_sample(
    plan: Plan,
    api: httpx.AsyncClient,
    res: ScaleResult,
    pairs: list[tuple[str, str]],
    pids: dict[str, int],
    batch: bool = False,
) -> None:
    """The API path on the loaded daemon: more links through ``POST /v1/subscriptions``,
    one URI per call (32 concurrent) or, with ``batch``, one call per link with all its URIs
    (8 concurrent)."""
    if not pairs:
        return
    links = list(dict.fromkeys(url for url, _ in pairs))
    res.api_links, res.api_posts = len(links), len(pairs)
    form = "batch " if batch else ""
    print(f"    + {len(pairs)} subscriptions through {form}POST /v1/subscriptions", flush=True)
    before = await daemon_metrics(api)
    revisions0 = before.get("mcpsub_store_rows[revisions]", 0)
    bodies: list[dict[str, Any]] = (
        [{"url": u, "uris": [uri for url, uri in pairs if url == u]} for u in links]
        if batch
        else [{"url": url, "uri": uri} for url, uri in pairs]
    )
    pending = iter(bodies)

    async def worker() -> None:
        for body in pending:
            asked = time.perf_counter()
            r = await api.post("/v1/subscriptions", json=body)
            res.api_post_ms.append((time.perf_counter() - asked) * 1000)
            if r.status_code != 201:
                raise RuntimeError(f"POST /v1/subscriptions -> {r.status_code} {r.text}")

    meter = CpuMeter(pids)
    t0 = time.perf_counter()
    try:
        await asyncio.gather(*(worker() for _ in range(8 if batch else 32)))
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


def digest(profiler: Profiler) -> Any:
    """The profile's tables while its file still exists, or why there are none."""
    summary = profiler.summary(top=20)
    if summary is None:
        return profiler.error or "no samples"
    return summary[0], summary[1], profiler.packages(), ours_on_stack(profiler.out)


def ours_on_stack(raw: Path, top: int = 20) -> list[tuple[str, float]]:
    """[(function, % of samples with it on the stack)] for the project's own functions
    (``service/``): which of our calls the time is spent under, callees included."""
    total: dict[str, int] = {}
    samples = 0
    with contextlib.suppress(OSError):
        for line in raw.read_text(errors="replace").splitlines():
            stack, _, count_text = line.rpartition(" ")
            if not stack or not count_text.isdigit():
                continue
            samples += int(count_text)
            names = set()
            for frame in stack.split(";"):
                if "(service/" in frame or "(daemon/" in frame or "(store/" in frame:
                    names.add(
                        frame.split(" (")[0].strip()
                        + " ("
                        + frame.rsplit("(", 1)[-1].split(":")[0]
                        + ")"
                    )
            for name in names:
                total[name] = total.get(name, 0) + int(count_text)
    ranked = sorted(total.items(), key=lambda kv: -kv[1])[:top]
    return [(name, 100.0 * n / max(samples, 1)) for name, n in ranked]


def wait_for_interpreter(pid: int, timeout_s: float = 5.0) -> None:
    """Until ``pid`` runs Python code (its first extension module is mapped): py-spy cannot
    attach to a process still in exec, and then records nothing."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            if "lib-dynload" in Path(f"/proc/{pid}/maps").read_text(errors="replace"):
                return
        time.sleep(0.01)


def smaps_rollup(pid: int) -> dict[str, int]:
    """``/proc/PID/smaps_rollup`` in kB (Rss, Anonymous, …): which kind of memory RSS is."""
    out: dict[str, int] = {}
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            name, _, rest = line.partition(":")
            parts = rest.split()
            if len(parts) == 2 and parts[1] == "kB":
                out[name.strip()] = int(parts[0])
    return out


def scale_details(scale: ScaleResult) -> list[str]:
    """(a)'s CPU per unit of work, memory by kind, and the py-spy tables when recorded."""
    idle, ramp = scale.idle, scale.ramp
    assert idle is not None and ramp is not None
    ramp_cpu = ramp.used.get("mcpsubd", 0.0)
    per_s = idle.used["mcpsubd"] * 1000 / max(idle.elapsed, 1e-9)
    out = [
        f"* **Idle**: {scale.links:,} streams each carry a `: keepalive` every 15 s: "
        f"{per_s:.1f} ms of CPU per second, {per_s / max(scale.links, 1) * 15:.2f} ms "
        "per link per 15 s.",
        f"* **Cold start**: {ramp_cpu:.1f} s of CPU for {scale.subscriptions:,} first reads "
        f"({1000 * ramp_cpu / max(scale.subscriptions, 1):.2f} ms each, discover and listens "
        "included).",
    ]
    if scale.smaps:
        kb = scale.smaps
        out.append(
            f"* **Memory** (`smaps_rollup` after the idle window): Rss {kb.get('Rss', 0) / 1024:.1f} MB "
            f"= anonymous {kb.get('Anonymous', 0) / 1024:.1f} MB + file-backed "
            f"{(kb.get('Rss', 0) - kb.get('Anonymous', 0)) / 1024:.1f} MB (shared libraries, "
            f"bytecode mapped from `.so` files); {1024 * kb.get('Anonymous', 0) / max(scale.links, 1) / 1024:.0f} kB "
            "anonymous per link."
        )
    out.append("")
    for title, profile in scale.profiles:
        if isinstance(profile, str):
            out += [f"py-spy, {title}: unavailable ({profile})", ""]
            continue
        samples, rows, packages, ours = profile
        out += [
            f"`py-spy record --rate 200` of mcpsubd, {title}: {samples:,} samples. "
            "By package of the innermost frame:",
            "",
            "| package | own % | on the stack % |",
            "|---|---:|---:|",
            *(f"| {name} | {own:.1f} | {tot:.1f} |" for name, own, tot in packages),
            "",
            "| function | own % | with callees % |",
            "|---|---:|---:|",
            *(f"| `{name}` | {own:.1f} | {tot:.1f} |" for name, own, tot in rows),
            "",
            "The project's own functions by share of samples with them on the stack:",
            "",
            "| function | on the stack % |",
            "|---|---:|",
            *(f"| `{name}` | {tot:.1f} |" for name, tot in ours),
            "",
        ]
    return out


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


def render(
    plan: Plan,
    scale: ScaleResult,
    sequential: SequentialResult | None,
    burst: BurstResult | None,
    steady: SteadyResult | None,
    spy: str | None,
    wall_s: float,
    code: str,
) -> tuple[str, list[str]]:
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    missed: list[str] = []
    out = [
        "# Daemon benchmark",
        "",
        f"Generated by `bench/daemon.py`{' --quick' if plan.name == 'quick' else ''}"
        f"{' --phases a' if burst is None else ''} on {now} "
        f"({wall_s:.0f} s in all).",
        f"Machine: {machine()}.",
        f"Code: {code}.",
        f"Daemon start: {start_kind()}.",
        "",
        "Lab servers (`python -m labserver`, 127.0.0.1, log `silent`, keep-alive 15 s) and one",
        "`mcpsubd` with default settings (log level `info`, JSON to a pipe) share the machine",
        "with the bench client; CPU % is of one core (utime+stime from `/proc/PID/stat`).",
        f"Load average (1/5/15 min) at the end: {' / '.join(f'{x:.2f}' for x in os.getloadavg())}.",
        "",
    ]
    # (a)
    idle = scale.idle
    assert idle is not None and scale.ramp is not None
    rss_mb, idle_pct = scale.rss_kb / 1024, idle.pct("mcpsubd")
    ok_rss, ok_cpu = rss_mb <= TARGET_RSS_MB, idle_pct <= TARGET_IDLE_CPU_PCT
    all_open = scale.not_open == 0 and sum(scale.lab_streams) == scale.links
    ok_cold = scale.read_s is not None and scale.read_s <= TARGET_COLD_START_S
    ok_status = statistics.median(scale.status_ms) <= TARGET_STATUS_MS
    if not ok_cold:
        missed.append("cold start")
    if not ok_status:
        missed.append("GET /v1/status")
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
        f"**{fmt_s(scale.read_s)}** | ≤ {TARGET_COLD_START_S:g} s | {verdict(ok_cold)} |",
        f"| daemon CPU from start to all read | {ramp_cpu:.1f} s "
        f"({100 * ramp_cpu / scale.ramp.elapsed:.0f} % of a core) | | |",
        f"| the labs' CPU in the same time (sum of {scale.labs}) | "
        f"{sum(v for k, v in scale.ramp.used.items() if k.startswith('lab')):.1f} s | | |",
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
        f"| `GET /v1/status` with {scale.subscriptions:,} subscriptions, settled, 10 calls (median / max) | "
        f"**{statistics.median(scale.status_ms):.0f}** / {max(scale.status_ms):.0f} ms | "
        f"≤ {TARGET_STATUS_MS:g} ms | {verdict(ok_status)} |",
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
    batch = scale.batch
    if batch is not None and batch.api_posts:
        assert batch.api_cpu is not None
        batch_rate = batch.api_posts / batch.api_post_s if batch.api_post_s else 0.0
        ok_api = batch_rate >= TARGET_API_PER_S
        if not ok_api:
            missed.append("POST /v1/subscriptions rate")
        out += [
            f"| API path, batch form: {batch.api_posts} more subscriptions ({batch.api_links} new "
            f"links), one `POST /v1/subscriptions` per link with its {URIS_PER_LINK} URIs, 8 "
            f"concurrent | {batch.api_post_s:.2f} s = **{batch_rate:.0f} subscriptions/s**; each "
            f"POST p50 {percentile(batch.api_post_ms, 50):.0f} / p90 "
            f"{percentile(batch.api_post_ms, 90):.0f} ms | ≥ {TARGET_API_PER_S:g}/s | "
            f"{verdict(ok_api)} |",
            f"| → those active / read (from the first POST) | {fmt_s(batch.api_active_s)} / "
            f"{fmt_s(batch.api_read_s)}; daemon CPU "
            f"{1000 * batch.api_cpu.used['mcpsubd'] / batch.api_posts:.1f} ms per subscription "
            "| | |",
        ]
    out.append("")
    if scale.link_down_errors:
        out += [
            "Why links went down (first message per code): "
            + "; ".join(f"`{code}`: {msg}" for code, msg in sorted(scale.link_down_errors.items())),
            "",
        ]
    out += scale_details(scale)
    if burst is None or sequential is None or steady is None:
        out.append(f"Targets missed: {', '.join(missed)}." if missed else "All targets met.")
        out.append("")
        return "\n".join(out), missed
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


async def run(
    plan: Plan, children: Children, tmp: Path, spy: str | None, phases: str
) -> tuple[Any, ...]:
    scale = await phase_scale(plan, children, tmp, spy if phases == "a" else None)
    if phases == "a":
        return scale, None, None, None
    sequential, burst, steady = await phase_flow(plan, children, tmp, spy)
    return scale, sequential, burst, steady


def scale_main(
    quick: bool, heap: bool, out: Path | None, spy: str | None, links: str | None = None
) -> int:
    """``--phases scale``: :mod:`bench.daemonscale`'s ladder and its report."""
    ladder = daemonscale.HEAP if heap else daemonscale.QUICK if quick else daemonscale.FULL
    if links:
        rungs = tuple(int(n) for n in links.split(","))
        ladder = dataclasses.replace(ladder, rungs=rungs)
    signal.signal(signal.SIGTERM, sigterm_to_interrupt)
    code, fingerprint = code_version(), code_fingerprint()
    started = time.perf_counter()
    with workspace() as (children, tmp):
        try:
            rungs, nofile = asyncio.run(daemonscale.run_ladder(ladder, children, tmp, heap, spy))
        except KeyboardInterrupt:
            print("bench: interrupted; stopping everything", file=sys.stderr)
            return 130
        except Exception:
            for child in children.started:
                print(f"--- {child.name} (last lines)\n{child.output()}", file=sys.stderr)
            raise
    lines, missed = daemonscale.render(ladder, rungs, nofile, code, machine(), heap)
    lines.insert(3, f"Run took {time.perf_counter() - started:.0f} s.")
    if code_fingerprint() != fingerprint:
        lines.insert(
            3, "**service/ changed during this run**: rungs may have measured different code."
        )
    report = "\n".join(lines)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(report, encoding="utf-8")
    print(report)
    if missed:
        print(f"bench: targets missed: {', '.join(missed)}", file=sys.stderr)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--quick", action="store_true", help="100 links, 600 changes, 4 s at 200/s (< 1 min)"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="markdown report (default results/daemon.md, --phases scale results/daemon-scale.md; "
        "--quick, --heap and --phases a: print only)",
    )
    parser.add_argument(
        "--py-spy",
        dest="py_spy",
        help="py-spy binary: profile mcpsubd in (b); with --phases a, its cold start and idle; "
        "with --phases scale, the idle daemon at 1,000 links",
    )
    parser.add_argument(
        "--no-py-spy",
        dest="no_py_spy",
        action="store_true",
        help="no profile even with py-spy on PATH (a profiled run's wall times are not figures)",
    )
    parser.add_argument(
        "--phases",
        choices=("abc", "a", "scale"),
        default="abc",
        help="a: phase (a) alone (1,000 links on labs: cold start, RSS, idle CPU, API); "
        "scale: 100 -> 1,000 -> 10,000 links on fast peers (bench.daemonscale); default abc",
    )
    parser.add_argument(
        "--links",
        help="scale: the rungs, comma-separated link counts (default 100,1000,10000; "
        "--quick 100,1000)",
    )
    parser.add_argument(
        "--heap",
        action="store_true",
        help="scale: run each daemon under tracemalloc and report the bytes per link by line",
    )
    parser.add_argument(
        "--source-start",
        action="store_true",
        help="start mcpsubd with PYTHONDONTWRITEBYTECODE=1 and the clone's .pyc files removed, "
        "so that every start compiles our modules (how these benches started it before "
        "2026-12-04); by default the clone is byte-compiled once first, as a wheel install is",
    )
    args = parser.parse_args()
    harness.SOURCE_START = args.source_start
    plan = QUICK if args.quick else FULL
    default_out = (
        REPO_ROOT / "results" / ("daemon-scale.md" if args.phases == "scale" else "daemon.md")
    )
    # (a) alone prints (--out keeps it): results/daemon-scale.md is the scale ladder's now
    alone = args.quick or args.heap or args.phases == "a"
    out = args.out or (None if alone else default_out)
    spy = None if args.no_py_spy else find_py_spy(args.py_spy)
    if args.phases == "scale":
        return scale_main(args.quick, args.heap, out, spy, args.links)
    check_hash_prediction()
    signal.signal(signal.SIGTERM, sigterm_to_interrupt)
    started = time.perf_counter()
    code, fingerprint = code_version(), code_fingerprint()
    with workspace() as (children, tmp):
        try:
            scale, sequential, burst, steady = asyncio.run(
                run(plan, children, tmp, spy, args.phases)
            )
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
