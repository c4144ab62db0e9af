"""``mcpsubd`` from 100 to 10,000 server links: memory per link, cold start, idle CPU.

Run: ``.venv/bin/python -m bench.daemon --phases scale [--quick] [--heap] [--out PATH]``
(this module is the ``scale`` phase of ``bench.daemon``). The full ladder is 100 → 1,000 →
10,000 links × 10 URIs and writes ``results/daemon-scale.md``; ``--quick`` is 100 → 1,000
with short windows and only prints unless ``--out`` is given.

The servers are :mod:`bench.fastpeer` processes on 127.0.0.1 (lab servers would need a core
each per few hundred links): link N is ``{peer}/s/N/mcp`` on peer N mod P, one distinct server
URL per link, with at most :data:`STREAMS_PER_SERVER` listen streams per server (a
make-before-break hand-over holds two; the peer answers 503 past the bound, as a lab does past
``MCP_TEST_MAX_SUBSCRIPTIONS``), ``: keepalive`` every 15 s per stream (the labs' interval)
spread over the interval. Every link watches the same ten URIs ``test://bench/0..9``. One
peer serves at most :data:`LINKS_PER_PEER` links: the daemon keeps up to three connections
per link (its listen stream and two idle read connections), and one peer's address and port
gives the client 28,000 ephemeral ports.

Per rung: the subscriptions are stored before the daemon starts (as in ``bench.daemon`` (a));
from the daemon's start we time until every stream is open (``/metrics``), every URI's first
read is stored and every subscription is ``active`` (``/v1/status``); after a warm-up the
daemon's RSS and CPU over an idle window (only ``/proc`` is read then). *Per link* is the
slope between rungs (the import footprint is the same in every rung), not RSS ÷ links.

The daemon starts as an installed one does: the clone is byte-compiled once before the runs
and ``PYTHONDONTWRITEBYTECODE`` is not passed on (:func:`bench.harness.compile_tree`).
Before 2026-12-04 every start compiled ~100 of our modules from source (~0.7 s of each cold
start); ``--source-start`` measures that way again.

Descriptors: 10,000 links need ~30,000 in the daemon and ~7,500 in each peer. The bench
raises its ``RLIMIT_NOFILE`` (soft and hard) to :data:`NOFILE` when it may (root, or a hard
limit already that high); the children inherit it, and ``mcpsubd`` raises its soft limit to
the hard one itself. If it cannot, the report says so and links past the daemon's descriptor
budget wait in ``RESOURCE_LIMIT`` (``service/daemon/fdbudget.py``), which the cold start row
then shows as not met.

``--heap`` runs 100 → 300 links, each daemon under :mod:`bench.tracedaemon` (tracemalloc),
and adds the traced bytes per link between the two rungs, by allocating line and by the innermost frame
in the project's own code. A traced daemon runs 2-3x slower, so that run's times and RSS
are not figures.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import shutil
import signal
import sys
import tempfile
import time
import tracemalloc
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bench.harness import (
    PYTHON,
    REPO_ROOT,
    Children,
    CpuMeter,
    FastPeer,
    Mcpsubd,
    Profiler,
    bounded_wait,
    cpu_seconds,
    daemon_metrics,
    fmt_s,
    load_average,
    open_fds,
    seed_subscriptions,
    start_kind,
    start_peer,
    status_kb,
    uds_client,
    verdict,
)

URIS_PER_LINK = 10
LINKS_PER_PEER = 2500
STREAMS_PER_SERVER = 4
KEEPALIVE_S = 15.0
NOFILE = 65536
PROFILED_RUNG = 1000
"""With ``--py-spy``, the rung whose idle daemon is profiled (after the measured window)."""
TARGET_PER_LINK_KB = 30.0
TARGET_RSS_10K_MB = 500.0
TARGET_COLD_1K_S = 5.0
TARGET_COLD_10K_S = 60.0
TARGET_IDLE_1K_PCT = 0.3
HEAP_DUMP_ENV = "MCPSUB_BENCH_HEAP_DUMP"


@dataclass(frozen=True)
class Ladder:
    name: str
    rungs: tuple[int, ...]
    warmup_s: float
    idle_s: float
    poll_s: float


FULL = Ladder("full", (100, 1000, 10000), 25.0, 30.0, 0.5)
QUICK = Ladder("quick", (100, 1000), 25.0, 10.0, 0.25)
"""Both warm up 25 s: a link's read connections are closed once idle 15 s, on the daemon's
next 7.5 s tick, and RSS is what an idle daemon holds after that."""
HEAP = Ladder("heap", (100, 300), 25.0, 3.0, 0.5)
"""``--heap``: a traced daemon cold-starting 1,000 links on 2 shared cores missed its own
30 s request deadlines; the bytes per link are the same slope at 100 → 300."""


@dataclass
class Rung:
    links: int
    peers: int = 0
    seed_s: float = 0.0
    ready_s: float = 0.0
    open_s: float | None = None
    read_s: float | None = None
    active_s: float | None = None
    ramp_cpu_s: float = 0.0
    peers_ramp_cpu_s: float = 0.0
    streams_held: int = 0
    refused: int = 0
    reconnects: int = 0
    link_down: dict[str, int] = field(default_factory=dict)
    rss_kb: int = 0
    rss_max_kb: int = 0
    hwm_kb: int = 0
    anon_kb: int = 0
    fds: int = 0
    threads: int = 0
    idle: CpuMeter | None = None
    load: str = ""
    heap: tracemalloc.Snapshot | None = None
    idle_profile: tuple[int, list[tuple[str, float, float]]] | None = None
    """py-spy of a second idle window (all threads): (samples, [(function, own %, total %)])."""

    @property
    def subscriptions(self) -> int:
        return self.links * URIS_PER_LINK


def raise_nofile(want: int = NOFILE) -> str:
    """Raise this process's descriptor limit (the children inherit it); what it is now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < want:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, max(hard, want)))
        with contextlib.suppress(ValueError, OSError):
            if resource.getrlimit(resource.RLIMIT_NOFILE)[0] < want:
                resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return f"{soft:,} soft / {hard:,} hard"


def smaps_anon_kb(pid: int) -> int:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Anonymous:"):
                return int(line.split()[1])
    return 0


class TracedMcpsubd(Mcpsubd):
    """``mcpsubd`` under :mod:`bench.tracedaemon`; :meth:`snapshot` asks for a heap dump."""

    def __init__(self, state_dir: Path, dump: Path) -> None:
        super().__init__(state_dir, {HEAP_DUMP_ENV: str(dump)})
        self.argv = [str(PYTHON), "-m", "bench.tracedaemon"]
        self.env["PYTHONPATH"] = str(REPO_ROOT)
        self.dump = dump

    def migrate(self) -> None:
        argv, self.argv = self.argv, [str(PYTHON.parent / "mcpsubd")]
        try:
            super().migrate()
        finally:
            self.argv = argv

    async def snapshot(self, timeout_s: float = 300.0) -> tracemalloc.Snapshot:
        with contextlib.suppress(FileNotFoundError):
            self.dump.unlink()
        os.kill(self.pid, signal.SIGUSR2)
        deadline = time.monotonic() + timeout_s
        while not self.dump.exists():
            if time.monotonic() > deadline or not self.alive():
                raise TimeoutError("the traced daemon wrote no heap snapshot")
            await asyncio.sleep(0.2)
        kept = Path(tempfile.gettempdir()) / f"mcpsub-bench-{self.dump.name}"
        shutil.copyfile(self.dump, kept)  # outlives the run's workspace, for a closer look
        return tracemalloc.Snapshot.load(str(self.dump))


async def peer_state(http: httpx.AsyncClient, peers: list[FastPeer]) -> tuple[int, int]:
    """(listen streams held, listens refused) summed over ``peers``."""
    held = refused = 0
    for peer in peers:
        state = (await http.get(f"{peer.base_url}/ctl/state")).json()
        held += int(state["streams"])
        refused += int(state["refused"])
    return held, refused


async def run_rung(
    links: int,
    ladder: Ladder,
    peers: list[FastPeer],
    children: Children,
    tmp: Path,
    heap: bool,
    spy: str | None = None,
) -> Rung:
    rung = Rung(links=links, peers=-(-links // LINKS_PER_PEER))
    used = peers[: rung.peers]
    pairs = [
        (f"{used[n % rung.peers].base_url}/s/{n}/mcp", f"test://bench/{k}")
        for n in range(links)
        for k in range(URIS_PER_LINK)
    ]
    state = tmp / f"state-{links}"
    daemon: Mcpsubd = TracedMcpsubd(state, tmp / f"heap-{links}.dump") if heap else Mcpsubd(state)
    print(f"  {links:,} links x {URIS_PER_LINK} URIs on {rung.peers} peer(s)", flush=True)
    started = time.perf_counter()
    seed_subscriptions(daemon, pairs)
    rung.seed_s = time.perf_counter() - started
    target = rung.subscriptions
    ramp_timeout = 120.0 + links * 0.06
    async with httpx.AsyncClient(timeout=30.0, trust_env=False) as http:
        peers_cpu0 = sum(cpu_seconds(p.pid) for p in used)
        t0 = time.perf_counter()
        children.add(daemon)
        try:
            daemon.wait_ready()
            rung.ready_s = time.perf_counter() - t0
            async with uds_client(daemon, timeout=120.0) as api:

                async def ramp_done() -> bool:
                    now = time.perf_counter() - t0
                    try:
                        return await ramp_check(now)
                    except httpx.TransportError:
                        # A kept-alive API connection the busy daemon closed as we sent on
                        # it: asked again on the next poll.
                        return False

                async def ramp_check(now: float) -> bool:
                    metrics = await daemon_metrics(api)
                    if rung.open_s is None and metrics.get("mcpsub_streams_open") == links:
                        rung.open_s = now
                    if (
                        rung.read_s is None
                        and metrics.get("mcpsub_store_rows[revisions]", 0) >= target
                    ):
                        rung.read_s = now
                    if rung.open_s is not None and rung.read_s is not None:
                        status = (await api.get("/v1/status")).json()
                        if status["subscriptionsByState"].get("active", 0) == target:
                            rung.active_s = time.perf_counter() - t0
                    return rung.active_s is not None

                try:
                    await bounded_wait(ramp_done, ramp_timeout, ladder.poll_s, "the cold start")
                except TimeoutError as exc:  # reported as "—"; the rung's memory still counts
                    print(f"    {exc}", flush=True)
                finally:
                    rung.ramp_cpu_s = cpu_seconds(daemon.pid)
                    rung.peers_ramp_cpu_s = sum(cpu_seconds(p.pid) for p in used) - peers_cpu0
                print(
                    f"    ready {rung.ready_s:.1f} s, open {fmt_s(rung.open_s)}, "
                    f"read {fmt_s(rung.read_s)}, active {fmt_s(rung.active_s)} "
                    f"({rung.ramp_cpu_s:.1f} s of daemon CPU)",
                    flush=True,
                )
                await asyncio.sleep(ladder.warmup_s)
                meter = CpuMeter({"mcpsubd": daemon.pid})
                samples: list[int] = []
                end = time.perf_counter() + ladder.idle_s
                while (left := end - time.perf_counter()) > 0:
                    samples.append(status_kb(daemon.pid, "VmRSS"))
                    await asyncio.sleep(min(1.0, left))
                rung.idle = meter.stop()
                rung.load = load_average()
                rung.rss_kb = status_kb(daemon.pid, "VmRSS")
                rung.rss_max_kb = max([*samples, rung.rss_kb])
                rung.hwm_kb = status_kb(daemon.pid, "VmHWM")
                rung.anon_kb = smaps_anon_kb(daemon.pid)
                rung.fds = open_fds(daemon.pid)
                rung.threads = status_kb(daemon.pid, "Threads")
                if isinstance(daemon, TracedMcpsubd):
                    rung.heap = await daemon.snapshot()
                if spy and links == PROFILED_RUNG:
                    profiler = Profiler(spy, daemon.pid, tmp / f"idle-{links}.txt", gil=False)
                    profiler.start()
                    await asyncio.sleep(ladder.idle_s)
                    profiler.stop()
                    rung.idle_profile = profiler.summary(top=25)
                status = (await api.get("/v1/status")).json()
                rung.reconnects = sum(int(link["reconnects"]) for link in status["links"])
                rung.streams_held, rung.refused = await peer_state(http, used)
                rung.link_down = dict(daemon.link_down)
                print(
                    f"    RSS {rung.rss_kb / 1024:.1f} MB, idle CPU "
                    f"{rung.idle.pct('mcpsubd'):.2f} %, streams held {rung.streams_held:,}",
                    flush=True,
                )
        finally:
            children.stop(daemon)

        async def streams_gone() -> bool:
            return (await peer_state(http, used))[0] == 0

        with contextlib.suppress(TimeoutError):  # the next rung's count would say so
            await bounded_wait(streams_gone, 60.0, 0.2, "the peers' streams to close")
    return rung


async def run_ladder(
    ladder: Ladder, children: Children, tmp: Path, heap: bool, spy: str | None = None
) -> tuple[list[Rung], str]:
    nofile = raise_nofile()
    count = -(-max(ladder.rungs) // LINKS_PER_PEER)
    args = ("--keepalive", f"{KEEPALIVE_S:g}", "--max-streams-per-server", str(STREAMS_PER_SERVER))
    peers = [start_peer(children, f"peer{i}", args) for i in range(count)]
    print(f"scale: rungs {', '.join(f'{n:,}' for n in ladder.rungs)} links", flush=True)
    rungs = [await run_rung(n, ladder, peers, children, tmp, heap, spy) for n in ladder.rungs]
    return rungs, nofile


# ---- the report -----------------------------------------------------------------------------
def per_link_kb(rungs: list[Rung], i: int, value: str = "rss_kb") -> float | None:
    """The slope from rung ``i - 1`` to rung ``i``, kB per link."""
    if i == 0:
        return None
    a, b = rungs[i - 1], rungs[i]
    return (getattr(b, value) - getattr(a, value)) / (b.links - a.links)


def heap_rows(small: Rung, large: Rung, project_frame: bool, top: int = 25) -> list[str]:
    """Traced bytes per link between two rungs, by allocating line or by the innermost frame
    in the project's own code (``service/``)."""
    assert small.heap is not None and large.heap is not None
    links = large.links - small.links

    def group(snapshot: tracemalloc.Snapshot) -> dict[str, tuple[int, int]]:
        sizes: dict[str, tuple[int, int]] = {}
        for stat in snapshot.statistics("traceback"):
            frames = list(stat.traceback)  # the oldest call first, the allocation last
            frame = frames[-1]
            if project_frame:
                ours = [f for f in frames if "/service/" in f.filename]
                frame = ours[-1] if ours else frame
            key = f"{_short(frame.filename)}:{frame.lineno}"
            size, count = sizes.get(key, (0, 0))
            sizes[key] = (size + stat.size, count + stat.count)
        return sizes

    before, after = group(small.heap), group(large.heap)
    deltas = []
    for key in set(before) | set(after):
        size = after.get(key, (0, 0))[0] - before.get(key, (0, 0))[0]
        count = after.get(key, (0, 0))[1] - before.get(key, (0, 0))[1]
        deltas.append((size, count, key))
    deltas.sort(reverse=True)
    total = sum(d[0] for d in deltas)
    rows = [
        f"| `{key}` | {size / links:,.0f} | {count / links:.1f} |"
        for size, count, key in deltas[:top]
    ]
    rows.append(f"| all traced | {total / links:,.0f} | |")
    return rows


def _short(filename: str) -> str:
    for marker in ("/site-packages/", "/lib/python3", "/work/wt/", "/work/main/"):
        if marker in filename:
            tail = filename.split(marker, 1)[1]
            return tail.split("/", 1)[1] if marker.startswith("/work/") else tail
    return filename


def render(
    ladder: Ladder, rungs: list[Rung], nofile: str, code: str, machine: str, heap: bool
) -> tuple[list[str], list[str]]:
    missed: list[str] = []
    out = [
        f"## Scale: {' → '.join(f'{r.links:,}' for r in rungs)} links × {URIS_PER_LINK} URIs "
        "(fast peers)",
        "",
        f"`bench.daemon --phases scale{' --quick' if ladder.name == 'quick' else ''}`: "
        f"`bench/fastpeer.py` processes on 127.0.0.1 ({LINKS_PER_PEER:,} links each, link N "
        f"is `{{peer}}/s/N/mcp`, ≤ {STREAMS_PER_SERVER} listen streams per server, a "
        f"keep-alive every {KEEPALIVE_S:g} s per stream) and one `mcpsubd` per rung with "
        "default settings, its subscriptions stored before it starts. Descriptor limit: "
        f"{nofile}. Times from starting `mcpsubd`; RSS and CPU after a {ladder.warmup_s:g} s "
        f"warm-up, over a {ladder.idle_s:g} s idle window. Per link is the slope from the rung "
        "before (the import footprint cancels out).",
        "",
        "| links | start → streams open / every URI read / all `active` | daemon CPU to all read "
        "(peers') | RSS (most in window; peak) | anonymous | per link (RSS slope) | idle CPU | "
        "fds / threads | streams held / refused / reconnects | load at the window |",
        "|---:|---|---:|---|---:|---:|---:|---:|---|---|",
    ]
    for i, r in enumerate(rungs):
        assert r.idle is not None or r.active_s is None
        slope = per_link_kb(rungs, i)
        idle = f"{r.idle.pct('mcpsubd'):.2f} %" if r.idle is not None else "—"
        out.append(
            f"| {r.links:,} | {fmt_s(r.open_s)} / {fmt_s(r.read_s)} / **{fmt_s(r.active_s)}** | "
            f"{r.ramp_cpu_s:.1f} s ({r.peers_ramp_cpu_s:.1f} s) | **{r.rss_kb / 1024:.1f} MB** "
            f"({r.rss_max_kb / 1024:.1f}; {r.hwm_kb / 1024:.1f}) | {r.anon_kb / 1024:.1f} MB | "
            f"{'—' if slope is None else f'**{slope:.1f} kB**'} | {idle} | "
            f"{r.fds:,} / {r.threads} | {r.streams_held:,} / {r.refused} / {r.reconnects} | "
            f"{r.load} |"
        )
    out.append("")
    by_links = {r.links: r for r in rungs}
    checks: list[tuple[str, str, str, bool]] = []
    slopes = [s for i in range(1, len(rungs)) if (s := per_link_kb(rungs, i)) is not None]
    if slopes:
        worst = max(slopes)
        checks.append(
            ("RSS per link (largest slope)", f"{worst:.1f} kB", f"≤ {TARGET_PER_LINK_KB:g} kB",
             worst <= TARGET_PER_LINK_KB)
        )  # fmt: skip
    if 1000 in by_links:
        r = by_links[1000]
        cold = r.active_s if r.active_s is not None else float("inf")
        checks.append(
            ("cold start, 1,000 × 10 (all read and active)", fmt_s(r.active_s),
             f"≤ {TARGET_COLD_1K_S:g} s", cold <= TARGET_COLD_1K_S)
        )  # fmt: skip
        if r.idle is not None:
            pct = r.idle.pct("mcpsubd")
            checks.append(
                ("idle CPU at 1,000 links", f"{pct:.2f} %", f"≤ {TARGET_IDLE_1K_PCT:g} %",
                 pct <= TARGET_IDLE_1K_PCT)
            )  # fmt: skip
    if 10000 in by_links:
        r = by_links[10000]
        cold = r.active_s if r.active_s is not None else float("inf")
        checks.append(
            ("cold start, 10,000 × 10", fmt_s(r.active_s), f"≤ {TARGET_COLD_10K_S:g} s",
             cold <= TARGET_COLD_10K_S)
        )  # fmt: skip
        checks.append(
            ("RSS at 10,000 × 10", f"{r.rss_kb / 1024:.0f} MB", f"≤ {TARGET_RSS_10K_MB:g} MB",
             r.rss_kb / 1024 <= TARGET_RSS_10K_MB)
        )  # fmt: skip
    out += ["| target | measured | target | met? |", "|---|---:|---:|---|"]
    for name, value, target, ok in checks:
        out.append(f"| {name} | {value} | {target} | {verdict(ok)} |")
        if not ok:
            missed.append(name)
    out.append("")
    for r in rungs:
        if r.link_down:
            why = ", ".join(f"`{code}` × {n}" for code, n in sorted(r.link_down.items()))
            out += [f"Links down at {r.links:,}: {why}.", ""]
    traced = [r for r in rungs if r.heap is not None]
    if heap and len(traced) >= 2:
        small, large = traced[-2], traced[-1]
        head = f"tracemalloc, {small.links:,} → {large.links:,} links: traced bytes per link"
        out += [
            f"{head}, by allocating line (the daemon ran under `bench.tracedaemon`: its times "
            "and RSS in this run are not figures):",
            "",
            "| allocated at | bytes per link | blocks per link |",
            "|---|---:|---:|",
            *heap_rows(small, large, project_frame=False),
            "",
            f"{head}, by the innermost frame in `service/` (who asked for it):",
            "",
            "| project frame | bytes per link | blocks per link |",
            "|---|---:|---:|",
            *heap_rows(small, large, project_frame=True),
            "",
        ]
    for r in rungs:
        if r.idle_profile is not None:
            samples, rows = r.idle_profile
            out += [
                f"`py-spy record --rate 200` (all threads) of the idle daemon at {r.links:,} "
                f"links, a second {ladder.idle_s:g} s window after the measured one: "
                f"{samples:,} samples.",
                "",
                "| function | own % | with callees % |",
                "|---|---:|---:|",
                *(f"| `{name}` | {own:.1f} | {tot:.1f} |" for name, own, tot in rows),
                "",
            ]
    out.append(f"Targets missed: {', '.join(missed)}." if missed else "All targets met.")
    out.append("")
    header = [
        "# Daemon benchmark: scale",
        "",
        f"Generated by `bench/daemon.py --phases scale` on "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
        f"Machine: {machine}.",
        f"Code: {code}.",
        f"Daemon start: {start_kind()}.",
        "",
    ]
    return header + out, missed


__all__ = ["FULL", "HEAP", "QUICK", "Ladder", "Rung", "render", "run_ladder"]


if __name__ == "__main__":  # pragma: no cover - run through bench.daemon
    sys.exit("run: python -m bench.daemon --phases scale [--quick]")
