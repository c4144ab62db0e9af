"""CPU per re-read of each subscriber, side by side, and the daemon's hot path at rate.

Run: ``.venv/bin/python -m bench.hotpath [--quick] [--out PATH] [--py-spy PATH]``
(``make bench``). Writes ``results/hotpath.md`` (``--quick``: prints only, unless ``--out``).

The peer is :mod:`bench.fastpeer` (a bare 2026-07-28 server that generates the changes
itself), so the subscriber's cost is not hidden behind the lab's. CPU is ``utime+stime`` of
each process from ``/proc/PID/stat``, reported per process: a figure per re-read does not
depend much on what else the machine runs, where a latency does.

(1) **Side by side**: the same job (one listen on 10 URIs, N changes at R/s round-robin,
    re-read every URI named by a notification) done in turn by the official Python SDK
    client (:mod:`bench.sdk_subscriber`), ``mcpsubctl probe --follow --json`` and
    ``mcpsubd`` (one link, its revisions followed on ``/v1/events/stream``).
(2) **Daemon at rate**: 10 links × 10 URIs on the peer (every link its own URIs), changes
    at a steady 200, 500 and 1,000 per second: revisions delivered over SSE per second, how
    many changes were coalesced, change → SSE event latency (matched by the predicted
    ``contentHash``), CPU per revision of the daemon, the peer and the SSE client.

Only 127.0.0.1 and the daemon's unix socket; every wait is bounded; everything started is
stopped on exit.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.harness import (
    BIN,
    PYTHON,
    REPO_ROOT,
    Child,
    Children,
    FastPeer,
    Mcpsubd,
    Profiler,
    SseFollower,
    check_hash_prediction,
    code_version,
    cpu_seconds,
    find_py_spy,
    load_average,
    machine,
    markdown_table,
    percentile,
    predict_hash,
    run_queue_wait_seconds,
    seed_subscriptions,
    sigterm_to_interrupt,
    start_daemon,
    start_peer,
    status_kb,
    uds_client,
    verdict,
    workspace,
)

URIS = 10
TARGET_DAEMON_RATIO = 0.3
TARGET_DAEMON_RATIO_LOADED = 0.35
"""The target: mcpsubd's CPU per re-read ≤ 0.3× the SDK client's in a quiet run, ≤ 0.35× when
the load average before the run was 4 or more."""
LOADED = 4.0
TARGET_PROBE_RATIO = 0.15
TOGETHER_ROUNDS = 3
"""Rounds of part (1b), the SDK client and mcpsubd measured in one window."""
RATES = (200.0, 500.0, 1000.0, 2000.0)
"""The steady rates of part (2), changes/s offered across the 10 links."""
TARGET_RATE = 2000.0
TARGET_REVISIONS_S = 1900.0
"""At TARGET_RATE offered: at least this many revisions/s, at most 1 % coalesced."""
TARGET_P99 = {200.0: 50.0, 500.0: 50.0}
"""p99 change → SSE event at each steady rate (the 1,000/s row is judged on throughput)."""


@dataclass(frozen=True)
class Plan:
    name: str
    side_changes: int
    side_rate: float
    steady_s: float
    links: int = 10


FULL = Plan("full", 1000, 100.0, 10.0)
QUICK = Plan("quick", 300, 100.0, 3.0)


@dataclass
class SideRow:
    name: str
    reads: int = 0
    revisions: int = 0
    cpu_s: float = 0.0
    peer_cpu_s: float = 0.0
    changes: int = 0
    wall_s: float = 0.0

    @property
    def per_read_ms(self) -> float:
        return 1000.0 * self.cpu_s / self.reads if self.reads else float("nan")

    @property
    def peer_per_change_ms(self) -> float:
        return 1000.0 * self.peer_cpu_s / self.changes if self.changes else float("nan")


@dataclass
class TogetherRound:
    """(1b): the SDK client and ``mcpsubd`` measured in one window on one peer."""

    sdk_ms: float
    daemon_ms: float
    sdk_reads: int
    daemon_revisions: int
    load: str

    @property
    def ratio(self) -> float:
        return self.daemon_ms / self.sdk_ms if self.sdk_ms else float("nan")


@dataclass
class RatePhase:
    name: str
    rate: float
    changes: int = 0
    delivered: int = 0
    missing: int = 0
    seconds: float = 0.0
    latencies_ms: list[float] = field(default_factory=list)
    cpu: dict[str, float] = field(default_factory=dict)
    waited_s: float = 0.0
    """mcpsubd's threads: runnable, waiting for a CPU (schedstat), summed."""
    wall_s: float = 0.0
    """From the first change sent until the SSE stream went quiet (the CPU window)."""
    last_delivered: bool = False

    def per_revision_ms(self, who: str) -> float:
        return 1000.0 * self.cpu.get(who, 0.0) / self.delivered if self.delivered else float("nan")


# ---- helpers ----------------------------------------------------------------------------------
async def settle(peer: FastPeer, quiet_s: float, timeout: float) -> None:
    """Until the peer's generator stopped and no read arrived for ``quiet_s``."""
    deadline = time.monotonic() + timeout
    last = -1
    while time.monotonic() < deadline:
        state = await asyncio.to_thread(peer.control, "GET", "/ctl/state")
        if not state["running"] and state["reads"] == last:
            return
        last = state["reads"]
        await asyncio.sleep(quiet_s)


async def wait_streams(peer: FastPeer, count: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (await asyncio.to_thread(peer.control, "GET", "/ctl/state"))["streams"] >= count:
            return
        await asyncio.sleep(0.05)
    raise TimeoutError(f"peer: {count} listen streams not open after {timeout:g} s")


async def run_changes(
    peer: FastPeer, uris: list[str], count: int, rate: float, prefix: str
) -> list[tuple[str, str, float]]:
    await asyncio.to_thread(
        peer.control, "POST", "/ctl/run", {"uris": uris, "count": count, "rate": rate, "prefix": prefix}
    )  # fmt: skip
    deadline = time.monotonic() + 60 + (count / rate if rate else 0)
    while time.monotonic() < deadline:
        await asyncio.sleep(0.05)
        if not (await asyncio.to_thread(peer.control, "GET", "/ctl/state"))["running"]:
            break
    log: list[tuple[str, str, float]] = await asyncio.to_thread(peer.control, "GET", "/ctl/log")
    return [tuple(item) for item in log]  # type: ignore[misc]


# ---- (1) side by side ------------------------------------------------------------------------
def side_uris(tag: str) -> list[str]:
    """Each subscriber watches fresh URIs, so the first read of each is the peer's ``v0``."""
    return [f"test://side/{tag}/{k}" for k in range(URIS)]


async def side_external(
    name: str, argv: list[str], uris: list[str], plan: Plan, peer: FastPeer, children: Children
) -> SideRow:
    child = Child(name, argv, {**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    child.stdin_pipe = True
    children.add(child)
    try:
        await wait_streams(peer, 1)
        await settle(peer, 0.3, 10)
        return await measure_side(name, child.pid, uris, plan, peer)
    finally:
        children.stop(child)


async def measure_side(
    name: str,
    pid: int,
    uris: list[str],
    plan: Plan,
    peer: FastPeer,
    follower: SseFollower | None = None,
) -> SideRow:
    before = await asyncio.to_thread(peer.control, "GET", "/ctl/state")
    seen = follower.count if follower else 0
    cpu0, peer0, t0 = cpu_seconds(pid), cpu_seconds(peer.pid), time.perf_counter()
    await run_changes(peer, uris, plan.side_changes, plan.side_rate, f"{name[:3]}-")
    await settle(peer, 0.5, 30)
    if follower is not None:
        await follower.wait_quiet(0.5, 10)
    after = await asyncio.to_thread(peer.control, "GET", "/ctl/state")
    return SideRow(
        name=name,
        reads=after["reads"] - before["reads"],
        revisions=(follower.count - seen) if follower else 0,
        cpu_s=cpu_seconds(pid) - cpu0,
        peer_cpu_s=cpu_seconds(peer.pid) - peer0,
        changes=after["changes"] - before["changes"],
        wall_s=time.perf_counter() - t0,
    )


async def side_daemon(
    plan: Plan, peer: FastPeer, children: Children, tmp: Path, spy: str | None
) -> tuple[SideRow, Profiler | None]:
    """``mcpsubd`` on one link; with ``spy``, profiled while it measures (the figure the
    1 ms-per-revision stretch target is judged on: one revision per transaction at 100/s)."""
    uris = side_uris("daemon")
    daemon = Mcpsubd(tmp / "state-side")
    seed_subscriptions(daemon, [(peer.url, uri) for uri in uris])
    start_daemon(children, daemon.state_dir, daemon)
    try:
        async with uds_client(daemon) as api:
            follower = SseFollower(api, after=0)
            follower.start()
            await asyncio.wait_for(follower.connected.wait(), 10.0)
            initial = {predict_hash(u, "v0") for u in uris}
            if not await follower.wait_for(initial, 30.0):
                raise RuntimeError(
                    "mcpsubd: first reads of the side-by-side URIs never arrived\n"
                    + daemon.output()
                )
            profiler = Profiler(spy, daemon.pid, tmp / "hotpath-side.pyspy") if spy else None
            try:
                if profiler is not None:
                    profiler.start()
                row = await measure_side("mcpsubd", daemon.pid, uris, plan, peer, follower)
                return row, profiler
            finally:
                if profiler is not None:
                    profiler.stop()
                await follower.stop()
    finally:
        children.stop(daemon)


async def side_together(
    plan: Plan, peer: FastPeer, children: Children, tmp: Path, rounds: int
) -> list[TogetherRound]:
    """(1b) The SDK client and ``mcpsubd`` at the same time, each on its own 10 URIs at
    ``plan.side_rate`` (the peer's changes alternate between the two sets), their CPU taken
    over the same window. Part (1) measures them one after the other, and on this machine the
    SDK's CPU per re-read moved by half from one run to the next (2.5–3.9 ms, docs/
    benchmarks.md): measured together, a drift of the machine moves both."""
    daemon_uris, sdk_uris = side_uris("together-daemon"), side_uris("together-sdk")
    daemon = Mcpsubd(tmp / "state-together")
    seed_subscriptions(daemon, [(peer.url, uri) for uri in daemon_uris])
    start_daemon(children, daemon.state_dir, daemon)
    sdk = Child(
        "SDK (together)",
        [str(PYTHON), "-m", "bench.sdk_subscriber", peer.url, *sdk_uris],
        {**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    sdk.stdin_pipe = True
    try:
        async with uds_client(daemon) as api:
            follower = SseFollower(api, after=0)
            follower.start()
            try:
                await asyncio.wait_for(follower.connected.wait(), 10.0)
                if not await follower.wait_for({predict_hash(u, "v0") for u in daemon_uris}, 30.0):
                    raise RuntimeError("mcpsubd: first reads never arrived\n" + daemon.output())
                children.add(sdk)
                streams = (await asyncio.to_thread(peer.control, "GET", "/ctl/state"))["streams"]
                await wait_streams(peer, streams + 1)
                await settle(peer, 0.5, 10)
                both = [uri for pair in zip(sdk_uris, daemon_uris, strict=True) for uri in pair]
                result = []
                for r in range(rounds):
                    before = await asyncio.to_thread(peer.control, "GET", "/ctl/state")
                    seen = follower.count
                    cpu_sdk, cpu_daemon = cpu_seconds(sdk.pid), cpu_seconds(daemon.pid)
                    await run_changes(
                        peer, both, 2 * plan.side_changes, 2 * plan.side_rate, f"tog{r}-"
                    )
                    await settle(peer, 0.5, 30)
                    await follower.wait_quiet(0.5, 10)
                    after = await asyncio.to_thread(peer.control, "GET", "/ctl/state")
                    revisions = follower.count - seen
                    sdk_reads = after["reads"] - before["reads"] - revisions
                    result.append(
                        TogetherRound(
                            sdk_ms=1000.0 * (cpu_seconds(sdk.pid) - cpu_sdk) / max(1, sdk_reads),
                            daemon_ms=1000.0
                            * (cpu_seconds(daemon.pid) - cpu_daemon)
                            / max(1, revisions),
                            sdk_reads=sdk_reads,
                            daemon_revisions=revisions,
                            load=load_average(),
                        )
                    )
                return result
            finally:
                await follower.stop()
    finally:
        children.stop(sdk)
        children.stop(daemon)


# ---- (2) the daemon at rate ------------------------------------------------------------------
async def rate_phase(
    name: str,
    rate: float,
    count: int,
    peer: FastPeer,
    uris: list[str],
    follower: SseFollower,
    pids: dict[str, int],
) -> RatePhase:
    phase = RatePhase(name, rate)
    prefix = f"{name}-"
    cpu0 = {who: cpu_seconds(pid) for who, pid in pids.items()}
    waited0 = run_queue_wait_seconds(pids["mcpsubd"])
    t0 = time.time()
    sent = await run_changes(peer, uris, count, rate, prefix)
    last_text = {uri: text for uri, text, _ in sent}
    finals = {predict_hash(uri, text) for uri, text in last_text.items()}
    phase.last_delivered = await follower.wait_for(finals, 60.0)
    await follower.wait_quiet(0.5, 10.0)
    phase.cpu = {who: cpu_seconds(pid) - cpu0[who] for who, pid in pids.items()}
    phase.waited_s = run_queue_wait_seconds(pids["mcpsubd"]) - waited0
    phase.wall_s = time.time() - t0
    phase.changes = len(sent)
    last_arrival = t0
    for uri, text, sent_at in sent:
        arrival = follower.by_hash.get(predict_hash(uri, text))
        if arrival is None:
            phase.missing += 1
            continue
        phase.delivered += 1
        phase.latencies_ms.append(1000.0 * (arrival.wall - sent_at))
        last_arrival = max(last_arrival, arrival.wall)
    phase.seconds = last_arrival - (sent[0][2] if sent else t0)
    return phase


async def daemon_at_rate(
    plan: Plan, peer: FastPeer, children: Children, tmp: Path, spy: str | None
) -> tuple[list[RatePhase], Profiler | None, float]:
    uris_of = {n: [f"test://rate/{n}/{k}" for k in range(URIS)] for n in range(plan.links)}
    all_uris = [u for n in range(plan.links) for u in uris_of[n]]
    daemon = Mcpsubd(tmp / "state-rate")
    seed_subscriptions(daemon, [(f"{peer.url}?link={n}", u) for n in uris_of for u in uris_of[n]])
    start_daemon(children, daemon.state_dir, daemon)
    phases: list[RatePhase] = []
    profiler: Profiler | None = None
    try:
        async with uds_client(daemon) as api:
            follower = SseFollower(api, after=0)
            follower.start()
            await asyncio.wait_for(follower.connected.wait(), 10.0)
            if not await follower.wait_for({predict_hash(u, "v0") for u in all_uris}, 60.0):
                raise RuntimeError("mcpsubd: first reads of the rate URIs never arrived")
            pids = {"mcpsubd": daemon.pid, "peer": peer.pid, "bench": os.getpid()}
            try:
                for rate in RATES:
                    print(f"(2) {rate:g} changes/s for {plan.steady_s:g} s", flush=True)
                    if spy and rate == 500.0:
                        profiler = Profiler(spy, daemon.pid, tmp / "hotpath-500.pyspy")
                        profiler.start()
                    phases.append(
                        await rate_phase(
                            f"r{rate:g}",
                            rate,
                            int(rate * plan.steady_s),
                            peer,
                            all_uris,
                            follower,
                            pids,
                        )
                    )
                    if profiler is not None and profiler.proc is not None and rate == 500.0:
                        profiler.stop()
            finally:
                await follower.stop()
        rss_mb = status_kb(daemon.pid, "VmRSS") / 1024
    finally:
        children.stop(daemon)
    return phases, profiler, rss_mb


# ---- report -----------------------------------------------------------------------------------
def render(
    plan: Plan,
    side: list[SideRow],
    phases: list[RatePhase],
    profilers: dict[str, Profiler],
    rss_mb: float,
    wall_s: float,
    code: str,
    load_before: str,
    together: list[TogetherRound] | None = None,
) -> tuple[str, list[str]]:
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    missed: list[str] = []
    out = [
        "# Hot path: CPU per re-read, side by side, and the daemon at rate",
        "",
        f"Generated by `python -m bench.hotpath` ({plan.name}) on {now} ({wall_s:.0f} s in all).",
        f"Machine: {machine()}. Code: {code}.",
        f"Load average (1, 5, 15 min) before: {load_before}; after: {load_average()}. "
        "Other processes share the CPUs, so read the CPU columns (utime+stime from "
        "`/proc/PID/stat`, per process) before the latencies.",
        "",
        "Peer: `bench/fastpeer.py` (raw asyncio, precomputed frames; it generates the changes "
        "itself), 127.0.0.1.",
        "",
        f"## (1) Side by side: one listen on {URIS} URIs, {plan.side_changes} changes at "
        f"{plan.side_rate:g}/s, every notified URI re-read",
        "",
    ]
    sdk = next((r for r in side if r.name.startswith("SDK")), None)
    rows = []
    for row in side:
        ratio = f"{row.per_read_ms / sdk.per_read_ms:.2f}×" if sdk and sdk.reads else "—"
        target = ""
        ok = True
        ratio_of = row.per_read_ms / sdk.per_read_ms if sdk and sdk.reads else float("nan")
        if row.name == "mcpsubd":
            try:
                loaded = float(load_before.split(",")[0]) >= LOADED
            except ValueError:  # "unknown": judged as a quiet run
                loaded = False
            limit = TARGET_DAEMON_RATIO_LOADED if loaded else TARGET_DAEMON_RATIO
            target = f"≤ {limit:g}× SDK" + (f" (load ≥ {LOADED:g})" if loaded else "")
            ok = ratio_of <= limit
            if not ok:
                missed.append("daemon CPU per re-read")
        elif row.name.startswith("probe"):
            target = f"≤ {TARGET_PROBE_RATIO:g}× SDK"
            ok = ratio_of <= TARGET_PROBE_RATIO
            if not ok:
                missed.append("probe CPU per re-read")
        rows.append(
            [
                f"`{row.name}`" if not row.name.startswith("SDK") else row.name,
                row.reads,
                (
                    f"{row.revisions} ({1000.0 * row.cpu_s / row.revisions:.2f} ms CPU each)"
                    if row.name == "mcpsubd" and row.revisions
                    else "—"
                ),
                f"{row.per_read_ms:.2f}",
                ratio,
                f"{row.peer_per_change_ms:.3f}",
                target,
                verdict(ok) if target else "",
            ]
        )
    out += markdown_table(
        [
            "subscriber",
            "re-reads",
            "revisions",
            "subscriber CPU ms / re-read",
            "× SDK",
            "peer CPU ms / change",
            "target",
            "met?",
        ],
        rows,
        "lrrrrrll",
    )
    out += [
        "",
        "SDK: the official `mcp` 2.x client (`Client.listen` + `read_resource(cache_mode="
        '"bypass")`). `mcpsubd` (default settings, log level `info`) does per re-read: the read, '
        "the revision + event + outbox transaction, and one SSE consumer (this bench).",
        "",
    ]
    if together:
        out += [
            f"### (1b) The SDK client and `mcpsubd` at once ({plan.side_changes} changes each "
            f"at {plan.side_rate:g}/s, on their own URIs of one peer)",
            "",
        ]
        out += markdown_table(
            ["round", "SDK ms / re-read", "`mcpsubd` ms / revision", "× SDK", "load after"],
            [
                [
                    i + 1,
                    f"{r.sdk_ms:.2f} ({r.sdk_reads})",
                    f"{r.daemon_ms:.2f} ({r.daemon_revisions})",
                    f"{r.ratio:.2f}×",
                    r.load,
                ]
                for i, r in enumerate(together)
            ],
            "rrrrl",
        )
        out += [
            "",
            "Part (1) measures each subscriber on its own, one after the other; these rounds "
            "take both in one window, so a drift of the machine moves both. Not judged: the "
            "target is part (1)'s. Both cost less here than alone: at 200 changes/s in all "
            "the machine stays warm (docs/benchmarks.md, issue 37's floor).",
            "",
        ]
    out += [
        f"## (2) mcpsubd at rate: {plan.links} links × {URIS} URIs on the peer",
        "",
    ]
    rows = []
    for phase in phases:
        rate_s = phase.delivered / phase.seconds if phase.seconds > 0 else 0.0
        lat = phase.latencies_ms
        p50 = f"{percentile(lat, 50):.1f}" if lat else "—"
        p99 = f"{percentile(lat, 99):.1f}" if lat else "—"
        if phase.rate >= TARGET_RATE:
            # "no coalescing needed": at least 99 % of the offered changes get their own revision
            target = f"≥ {TARGET_REVISIONS_S:g} revisions/s, ≤ 1 % coalesced"
            ok = rate_s >= TARGET_REVISIONS_S and phase.missing <= 0.01 * phase.changes
            label = f"steady {phase.rate:g}/s"
            if not ok:
                missed.append("throughput")
        elif phase.rate in TARGET_P99:
            limit = TARGET_P99[phase.rate]
            target = f"p99 ≤ {limit:g} ms"
            ok = bool(lat) and percentile(lat, 99) <= limit
            label = f"steady {phase.rate:g}/s"
            if not ok:
                missed.append(f"p99 at {phase.rate:g}/s")
        else:
            target, ok, label = "", True, f"steady {phase.rate:g}/s"
        rows.append(
            [
                label,
                phase.changes,
                phase.delivered,
                phase.missing,
                f"{rate_s:.0f}",
                p50,
                p99,
                f"{phase.per_revision_ms('mcpsubd'):.2f}",
                (
                    f"{100 * phase.cpu.get('mcpsubd', 0.0) / phase.wall_s:.0f} / "
                    f"{100 * phase.waited_s / phase.wall_s:.0f}"
                    if phase.wall_s > 0
                    else "—"
                ),
                f"{phase.per_revision_ms('peer'):.3f}",
                f"{phase.per_revision_ms('bench'):.3f}",
                "yes" if phase.last_delivered else "**no**",
                target,
                verdict(ok) if target else "",
            ]
        )
    out += markdown_table(
        [
            "phase",
            "changes",
            "revisions delivered",
            "coalesced",
            "revisions/s",
            "p50 ms",
            "p99 ms",
            "mcpsubd CPU ms / rev",
            "mcpsubd % on a CPU / % waiting for one",
            "peer",
            "bench (SSE client)",
            "last text of every URI",
            "target",
            "met?",
        ],
        rows,
        "lrrrrrrrrrrlll",
    )
    out += [
        "",
        "Latency: SSE event received (bench) − change made (peer), both `time.time()` on this "
        "machine. *Coalesced*: a change whose own revision never came because a later read "
        "already covered it (the refresher keeps one read in flight plus one trailing read per "
        f"URI; every URI's last text must still arrive). RSS of mcpsubd after the phases: "
        f"{rss_mb:.1f} MB. *% on a CPU / % waiting for one*: mcpsubd's CPU time and its "
        "threads' time runnable but not running (`/proc/PID/task/*/schedstat`), as % of the "
        "phase's wall time: a daemon that falls behind while it waits for a CPU more than it "
        "runs is short of CPU share on the machine, not of speed.",
        "",
    ]
    for label, profiler in profilers.items():
        summary = profiler.summary(20)
        if profiler.error:
            out += [f"py-spy of mcpsubd {label} failed: {profiler.error}", ""]
        elif summary is not None:
            samples, functions = summary
            out += [
                f"### py-spy of mcpsubd {label} ({samples} samples, `--gil`)",
                "",
                "By package of the innermost frame:",
                "",
            ]
            out += markdown_table(
                ["package", "own %", "on the stack %"],
                [[p, f"{o:.1f}", f"{t:.1f}"] for p, o, t in profiler.packages()],
            )
            out += ["", "Top functions by own time:", ""]
            out += markdown_table(
                ["function", "own %", "with callees %"],
                [[f"`{f}`", f"{o:.1f}", f"{t:.1f}"] for f, o, t in functions],
            )
            out.append("")
    out.append(f"Targets missed: {', '.join(missed)}." if missed else "All targets met.")
    out.append("")
    return "\n".join(out), missed


async def run(
    plan: Plan, children: Children, tmp: Path, spy: str | None
) -> tuple[list[SideRow], list[TogetherRound], list[RatePhase], dict[str, Profiler], float]:
    peer = start_peer(children)
    side = []
    sdk_uris, probe_uris = side_uris("sdk"), side_uris("probe")
    print("(1) official Python SDK client", flush=True)
    side.append(
        await side_external(
            "SDK (Python, mcp 2.x)",
            [str(PYTHON), "-m", "bench.sdk_subscriber", peer.url, *sdk_uris],
            sdk_uris,
            plan,
            peer,
            children,
        )
    )
    print("(1) mcpsubctl probe --follow", flush=True)
    side.append(
        await side_external(
            "probe --follow --json",
            [
                str(BIN / "mcpsubctl"),
                "probe",
                "--url",
                peer.url,
                *[arg for uri in probe_uris for arg in ("--uri", uri)],
                "--follow",
                "--json",
                "--skip-resource-list-check",
            ],
            probe_uris,
            plan,
            peer,
            children,
        )
    )
    print("(1) mcpsubd", flush=True)
    row, side_profiler = await side_daemon(plan, peer, children, tmp, spy)
    side.append(row)
    print("(1b) the SDK client and mcpsubd at once", flush=True)
    together = await side_together(plan, peer, children, tmp, TOGETHER_ROUNDS)
    phases, profiler, rss = await daemon_at_rate(plan, peer, children, tmp, spy)
    profiles = {
        f"one link at {plan.side_rate:g} changes/s (part 1)": side_profiler,
        "at 500 changes/s (part 2)": profiler,
    }
    profiled = {k: v for k, v in profiles.items() if v is not None}
    return side, together, phases, profiled, rss


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="smaller counts (< 1 min)")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument(
        "--py-spy", dest="py_spy", help="py-spy binary: profile mcpsubd in (1) and at 500/s"
    )
    args = parser.parse_args()
    plan = QUICK if args.quick else FULL
    out = args.out or (None if args.quick else REPO_ROOT / "results" / "hotpath.md")
    spy = find_py_spy(args.py_spy)
    check_hash_prediction()
    signal.signal(signal.SIGTERM, sigterm_to_interrupt)
    started, code, load_before = time.perf_counter(), code_version(), load_average()
    with workspace() as (children, tmp):
        try:
            side, together, phases, profilers, rss = asyncio.run(run(plan, children, tmp, spy))
        except KeyboardInterrupt:
            print("bench: interrupted; stopping everything", file=sys.stderr)
            return 130
        except Exception:
            for child in children.started:
                print(f"--- {child.name} (last lines)\n{child.output()}", file=sys.stderr)
            raise
        # inside the workspace: the profile lives in its temporary directory
        report, missed = render(
            plan,
            side,
            phases,
            profilers,
            rss,
            time.perf_counter() - started,
            code,
            load_before,
            together,
        )
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(report, encoding="utf-8")
    print(report)
    if missed:
        print(f"bench: targets missed: {', '.join(missed)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    with contextlib.suppress(BrokenPipeError):
        raise SystemExit(main())
