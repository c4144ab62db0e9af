"""Scale-out bench: PostgreSQL vs SQLite per revision, lease load, fail-over time.

Against a throwaway PostgreSQL cluster (the tests' :class:`tests.support.postgres.PgCluster`,
with ``pg_stat_statements`` loaded) and real ``mcpsubd`` processes on :mod:`bench.fastpeer`
(one peer serves every link: ``/mcp?link=N`` are distinct servers to a client).
Writes ``results/scale-out.md`` (``--quick``: prints only, unless ``--out``).

(1) **The revision write, store level**: ``Store.record_read`` awaited one by one, SQLite vs
    PostgreSQL, with and without a webhook target (the database work alone).
(2) **The revision in the real daemon**, one replica: 10 links x 10 URIs on the peer, changes
    at a steady rate, every revision followed on ``/v1/events/stream`` (notification →
    re-read → revision committed → SSE event); CPU per revision of mcpsubd and PostgreSQL.
(3) **Leases with N replicas** (1, 2, 3) and ``--links`` links: links per replica, the
    database load of an idle cluster over a window (``pg_stat_statements`` calls and
    transaction control: renew, heartbeat, balance and everything else an idle
    replica asks), then **fail-over**: ``kill -9`` of one replica (with 1 replica: kill and
    restart it on its state dir), timed to the first link claimed by a survivor (detect),
    every link claimed, and every link's listen acknowledged again (the peer's open streams).

  .venv/bin/python -m bench.scaleout [--quick] [--out PATH] [--links 1000] [--ttl 15]

On two shared cores the absolute throughput is not the point; CPU per revision (ours and the
PostgreSQL server's), queries per link and fail-over time (set mostly by the lease TTL) are.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg

from bench.harness import (
    CLK_TCK,
    REPO_ROOT,
    Children,
    FastPeer,
    Mcpsubd,
    SseFollower,
    check_hash_prediction,
    code_version,
    cpu_seconds,
    load_average,
    machine,
    markdown_table,
    new_generation,
    percentile,
    predict_hash,
    seed_subscriptions,
    sigterm_to_interrupt,
    start_peer,
    uds_client,
    workspace,
)
from bench.hotpath import RatePhase, rate_phase, wait_streams
from service.store import Store
from service.store.lease_repository import LeaseRepository
from service.store.migrate import upgrade
from service.webhooks.repository import WebhookRepository
from tests.support.postgres import PgCluster, find_bin_dir

TTL = 15.0


def _stat(pid: int | str) -> list[str]:
    raw = Path(f"/proc/{pid}/stat").read_text()
    return raw[raw.rindex(")") + 2 :].split()


def postgres_cpu_s(cluster: PgCluster) -> float:
    """CPU of this cluster only: the postmaster (with its reaped children's time) plus its
    live children (backends, checkpointer, WAL writer...)."""
    postmaster = int((cluster.data / "postmaster.pid").read_text().split()[0])
    fields = _stat(postmaster)
    total = sum(int(fields[i]) for i in (11, 12, 13, 14))  # utime stime cutime cstime
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            fields = _stat(pid)
        except OSError:
            continue
        if int(fields[1]) == postmaster:  # ppid
            total += int(fields[11]) + int(fields[12])
    return total / CLK_TCK


async def revisions(
    url: str, count: int, with_target: bool, server_cpu: Callable[[], float] = lambda: 0.0
) -> dict[str, float]:
    """``count`` revision writes; the server's CPU is read while the store's connections are
    still open (a backend that exits takes its CPU time with it until it is reaped)."""
    store = Store.open(url)
    try:
        if with_target:
            await WebhookRepository(store).create_target("http://127.0.0.1:9/hook")
        subs = []
        for n in range(100):
            sub, _ = await store.add_subscription(f"http://127.0.0.1:1/mcp{n % 10}", f"b://{n}")
            gen = await new_generation(store, sub.server_id)
            subs.append((sub, gen))
        wall, cpu, server = time.perf_counter(), time.process_time(), server_cpu()
        for i in range(count):
            sub, gen = subs[i % len(subs)]
            text = f"revision {i} " + "x" * 200
            await store.record_read(
                sub.id, sub.server_id, gen, [{"uri": sub.uri, "text": text}], text
            )
        return {
            "wall": time.perf_counter() - wall,
            "cpu": time.process_time() - cpu,
            "server": server_cpu() - server,
        }
    finally:
        await store.close()


async def lease_costs(url: str, links: int) -> dict[str, float]:
    store = Store.open(url)
    try:
        await store.add_subscriptions("http://127.0.0.1:1/x", ["u://0"])
        for n in range(links):
            await store.add_subscription(f"http://127.0.0.1:1/mcp?link={n}", f"u://{n}")
        started = time.perf_counter()
        claimed = await LeaseRepository(store).claim("bench", TTL, links + 1)
        claim_s = time.perf_counter() - started
        passes = []
        for _ in range(20):
            t0 = time.perf_counter()
            await LeaseRepository(store).heartbeat("bench", "host", 1)
            await LeaseRepository(store).renew_changes("bench", TTL, [c.server_id for c in claimed])
            await LeaseRepository(store).balance(TTL)
            await store.list_subscriptions(server_ids=[c.server_id for c in claimed])
            passes.append(time.perf_counter() - t0)
        return {
            "claimed": float(len(claimed)),
            "claim_s": claim_s,
            "pass_median_s": statistics.median(passes),
            "pass_max_s": max(passes),
        }
    finally:
        await store.close()


@dataclass(frozen=True)
class Plan:
    name: str
    revisions: int  # (1) store-level revision writes per backend and outbox
    rate: float  # (2) changes per second into the daemon
    steady_s: float  # (2) seconds at that rate
    links: int  # (3) server links, one URI each
    ttl: float  # (3) lease TTL of every replica
    window_s: float  # (3) idle window of the database-load measure
    replicas: tuple[int, ...] = (1, 2, 3)


FULL = Plan("full", 2000, 100.0, 15.0, 1000, 15.0, 30.0)
QUICK = Plan("quick", 300, 100.0, 3.0, 150, 3.0, 6.0)
RATE_LINKS, RATE_URIS = 10, 10
SETTLE_TIMEOUT_S = 300.0


# ---- (2) the revision in the real daemon ----------------------------------------------------
async def seed_pg(url: str, pairs: list[tuple[str, str]]) -> None:
    """The subscriptions as the API would store them (one transaction per server URL)."""
    store = Store.open(url)
    try:
        by_url: dict[str, list[str]] = {}
        for server_url, uri in pairs:
            by_url.setdefault(server_url, []).append(uri)
        for server_url, uris in by_url.items():
            await store.add_subscriptions(server_url, uris)
    finally:
        await store.close()


def replica(tmp: Path, name: str, database_url: str, ttl: float) -> Mcpsubd:
    """One mcpsubd; ``MCPSUB_REPLICA_ID`` pins its id, so a restart on the same state dir is
    the same replica (as the default id kept in ``<state_dir>/replica.id`` would be)."""
    env = {"MCPSUB_LOG_LEVEL": "warning", "MCPSUB_LEASE_TTL_S": f"{ttl:g}"}
    if database_url:
        env |= {"MCPSUB_DATABASE_URL": database_url, "MCPSUB_REPLICA_ID": name}
    daemon = Mcpsubd(tmp / name, env)
    daemon.name = name
    return daemon


async def daemon_revisions(
    backend: str, plan: Plan, peer: FastPeer, children: Children, tmp: Path, cluster: PgCluster
) -> tuple[RatePhase, float]:
    """(2): one replica on ``backend``; returns the phase and PostgreSQL's CPU seconds in it."""
    uris_of = {
        n: [f"test://rev/{backend}/{n}/{k}" for k in range(RATE_URIS)] for n in range(RATE_LINKS)
    }
    pairs = [(f"{peer.url}?link=rev-{backend}-{n}", u) for n in uris_of for u in uris_of[n]]
    all_uris = [u for n in uris_of for u in uris_of[n]]
    if backend == "PostgreSQL":
        url = cluster.fresh_database()
        await seed_pg(url, pairs)
        daemon = replica(tmp, f"rev-{backend}", url, 15.0)
    else:
        daemon = replica(tmp, f"rev-{backend}", "", 15.0)
        seed_subscriptions(daemon, pairs)
    children.add(daemon)
    try:
        await asyncio.to_thread(daemon.wait_ready)
        async with uds_client(daemon) as api:
            follower = SseFollower(api, after=0)
            follower.start()
            await asyncio.wait_for(follower.connected.wait(), 10.0)
            if not await follower.wait_for({predict_hash(u, "v0") for u in all_uris}, 60.0):
                raise RuntimeError(f"mcpsubd on {backend}: the first reads never arrived")
            await follower.wait_quiet(0.5, 10.0)
            server0 = postgres_cpu_s(cluster)
            try:
                phase = await rate_phase(
                    backend[:2], plan.rate, int(plan.rate * plan.steady_s), peer, all_uris,
                    follower, {"mcpsubd": daemon.pid, "peer": peer.pid},
                )  # fmt: skip
            finally:
                await follower.stop()
            server = postgres_cpu_s(cluster) - server0 if backend == "PostgreSQL" else 0.0
    finally:
        children.stop(daemon)
    return phase, server


# ---- (3) leases and fail-over -----------------------------------------------------------------
@dataclass
class Failover:
    replicas: int
    links: int
    ttl: float
    before: dict[str, int] = field(default_factory=dict)
    after: dict[str, int] = field(default_factory=dict)
    settle_s: float = 0.0
    """Start of the replicas → every link held, spread, and acknowledged."""
    window_s: float = 0.0
    calls: int = 0
    """``pg_stat_statements`` calls in the idle window (every statement of every replica)."""
    lease_calls: int = 0
    """... of which lease statements (heartbeat, renew, balance, claim, release)."""
    control: int = 0
    """... of which BEGIN, COMMIT and ROLLBACK."""
    top: list[tuple[str, int]] = field(default_factory=list)
    cpu_pct: dict[str, float] = field(default_factory=dict)
    lease_left_s: float = 0.0
    """How long the victim's leases still had to run at the kill (the newest one)."""
    detect_s: float = float("nan")
    claim_s: float = float("nan")
    ack_s: float = float("nan")
    restart_ready_s: float = float("nan")


LEASE_TABLES = ("replicas", "lease_")


async def pg_fetch(url: str, sql: str, *args: Any) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(url)
    try:
        return list(await conn.fetch(sql, *args))
    finally:
        await conn.close()


class Watch:
    """One asyncpg connection of the bench for polling the lease table (cheap queries)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.conn: asyncpg.Connection | None = None

    async def __aenter__(self) -> Watch:
        self.conn = await asyncpg.connect(self.url)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.conn is not None:
            await self.conn.close()

    async def owners(self) -> dict[str, int]:
        assert self.conn is not None
        rows = await self.conn.fetch(
            "SELECT coalesce(lease_owner, '-') AS owner, count(*) AS n FROM servers "
            "GROUP BY 1 ORDER BY 1"
        )
        return {str(r["owner"]): int(r["n"]) for r in rows}

    async def quiet(self, quiet_s: float = 2.0, timeout: float = 120.0) -> None:
        """Until no event was written and no link re-listened for ``quiet_s`` (the first
        reads of every link done); bounded, since a starved link may keep re-listening."""
        assert self.conn is not None
        deadline = time.monotonic() + timeout
        last: tuple[int, ...] = ()
        while time.monotonic() < deadline:
            newest = tuple(
                await self.conn.fetchrow(
                    "SELECT (SELECT coalesce(max(id), 0) FROM events), "
                    "(SELECT coalesce(sum(generation), 0) FROM servers)"
                )
            )
            if newest == last:
                return
            last = newest
            await asyncio.sleep(quiet_s)

    async def epochs(self) -> int:
        assert self.conn is not None
        return int(await self.conn.fetchval("SELECT coalesce(sum(lease_epoch), 0) FROM servers"))

    async def newest_lease_left(self, owner: str) -> float:
        assert self.conn is not None
        value = await self.conn.fetchval(
            "SELECT max(lease_until) - extract(epoch FROM clock_timestamp()) FROM servers "
            "WHERE lease_owner = $1",
            owner,
        )
        return float(value or 0.0)


async def streams(peer: FastPeer) -> int:
    return int((await asyncio.to_thread(peer.control, "GET", "/ctl/state"))["streams"])


async def settled(watch: Watch, peer: FastPeer, names: list[str], links: int) -> dict[str, int]:
    """Until every link is held, none above the fair share, and every link listening."""
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    owners: dict[str, int] = {}
    while time.monotonic() < deadline:
        owners = await watch.owners()
        held = [owners.get(n, 0) for n in names]
        share = -(-links // len(names))  # the keeper's fair share: ceil(links / replicas)
        if sum(held) == links and max(held) <= share and await streams(peer) >= links:
            return owners
        await asyncio.sleep(0.25)
    raise TimeoutError(f"replicas never settled: {owners}")


def is_lease_statement(query: str) -> bool:
    """The statements of ``service/store/leases.py``: heartbeat, renew, the balance counts,
    claims, releases, replica clean-up."""
    return (
        "replicas" in query
        or query.startswith("SELECT COUNT(*) FROM servers s WHERE EXISTS")
        or ("servers" in query and "lease_" in query)
    )


async def database_load(
    url: str, plan: Plan, daemons: list[Mcpsubd], cluster: PgCluster
) -> tuple[int, int, int, list[tuple[str, int]], dict[str, float], float]:
    """An idle window: every statement the replicas ran, by pg_stat_statements."""
    await pg_fetch(url, "SELECT pg_stat_statements_reset()")
    cpu0 = {d.name: cpu_seconds(d.pid) for d in daemons} | {"PostgreSQL": postgres_cpu_s(cluster)}
    t0 = time.perf_counter()
    await asyncio.sleep(plan.window_s)
    elapsed = time.perf_counter() - t0
    cpu = {d.name: cpu_seconds(d.pid) for d in daemons} | {"PostgreSQL": postgres_cpu_s(cluster)}
    rows = await pg_fetch(
        url,
        "SELECT query, calls FROM pg_stat_statements WHERE dbid = "
        "(SELECT oid FROM pg_database WHERE datname = current_database()) "
        "AND query NOT LIKE '%pg_stat_%' ORDER BY calls DESC",
    )
    calls = sum(int(r["calls"]) for r in rows)
    lease = sum(int(r["calls"]) for r in rows if is_lease_statement(str(r["query"])))
    top = [(" ".join(str(r["query"]).split())[:90], int(r["calls"])) for r in rows[:10]]
    pct = {k: 100.0 * (cpu[k] - cpu0[k]) / elapsed for k in cpu}
    control = sum(int(r["calls"]) for r in rows if r["query"] in ("BEGIN", "COMMIT", "ROLLBACK"))
    return calls, lease, control, top, pct, elapsed


async def failover(
    n: int, plan: Plan, peer: FastPeer, children: Children, tmp: Path, cluster: PgCluster
) -> Failover:
    url = cluster.fresh_database()
    await pg_fetch(url, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    tag = f"fo{n}"
    await seed_pg(
        url, [(f"{peer.url}?link={tag}-{k}", f"test://{tag}/{k}") for k in range(plan.links)]
    )
    result = Failover(n, plan.links, plan.ttl)
    names = [f"{tag}-r{i}" for i in range(n)]
    daemons = [replica(tmp, name, url, plan.ttl) for name in names]
    t0 = time.perf_counter()
    for d in daemons:
        children.add(d)
    try:
        for d in daemons:
            await asyncio.to_thread(d.wait_ready)
        async with Watch(url) as watch:
            result.before = await settled(watch, peer, names, plan.links)
            result.settle_s = time.perf_counter() - t0
            await watch.quiet()
            print(
                f"(3) {n} replica(s): settled in {result.settle_s:.1f} s: {result.before}",
                flush=True,
            )
            (result.calls, result.lease_calls, result.control, result.top, result.cpu_pct,
             result.window_s) = await database_load(url, plan, daemons, cluster)  # fmt: skip
            victim = daemons[-1]
            moved = result.before.get(victim.name, 0)
            epochs0 = await watch.epochs()
            result.lease_left_s = await watch.newest_lease_left(victim.name)
            killed = time.perf_counter()
            os.kill(victim.pid, signal.SIGKILL)
            assert victim.proc is not None
            await asyncio.to_thread(victim.proc.wait, 10)
            children.stop(victim)
            if n == 1:
                while await streams(peer) > 0 and time.perf_counter() - killed < 10:
                    await asyncio.sleep(0.02)
                again = replica(tmp, victim.name, url, plan.ttl)
                children.add(again)
                await asyncio.to_thread(again.wait_ready)
                result.restart_ready_s = time.perf_counter() - killed
                daemons = [again]
            deadline = killed + plan.ttl * 3 + 120
            while time.perf_counter() < deadline:
                now = time.perf_counter() - killed
                if n > 1:
                    left = (await watch.owners()).get(victim.name, 0)
                    if left < moved and result.detect_s != result.detect_s:
                        result.detect_s = now
                    claimed = left == 0
                else:
                    claimed = await watch.epochs() >= epochs0 + plan.links
                if claimed and result.claim_s != result.claim_s:
                    result.claim_s = now
                if claimed and await streams(peer) >= plan.links:
                    result.ack_s = time.perf_counter() - killed
                    break
                await asyncio.sleep(0.05)
            survivors = [d.name for d in daemons if d.alive()]
            if n > 1:
                survivors = names[:-1]
            result.after = await settled(watch, peer, survivors, plan.links)
    except Exception:
        for d in children.started:
            print(f"--- {d.name} (last lines)\n{d.output()}", flush=True)
        raise
    finally:
        children.stop(*[d for d in children.started if isinstance(d, Mcpsubd)])
    print(
        f"(3) {n} replica(s): detect {result.detect_s:.2f} s, claim {result.claim_s:.2f} s, "
        f"ack {result.ack_s:.2f} s; after {result.after}",
        flush=True,
    )
    return result


# ---- report -----------------------------------------------------------------------------------
def ms(value: float) -> str:
    return "-" if value != value else f"{value:.2f}"


def secs(value: float) -> str:
    return "-" if value != value else f"{value:.1f}"


def render(
    plan: Plan,
    store_rows: list[list[Any]],
    leases: dict[str, float],
    daemon_rows: list[tuple[str, RatePhase, float]],
    fails: list[Failover],
    load_before: str,
    code: str,
    wall_s: float,
) -> str:
    n = plan.revisions
    quick = " --quick" if plan.name == "quick" else ""
    lines = [
        "# Scale-out: PostgreSQL vs SQLite, leases, fail-over",
        "",
        f"Machine: {machine()}; load average before {load_before}, at the end "
        f"{load_average()}; code {code}; run took {wall_s:.0f} s.",
        f"Command: `.venv/bin/python -m bench.scaleout{quick}` (plan {plan.name}). PostgreSQL:",
        "the tests' throwaway cluster (fsync off, synchronous_commit off), on the same 2 cores.",
        "",
        "## 1. The revision write, store level, one replica",
        "",
        f"{n} revisions over 100 URIs, 200-byte texts: `Store.record_read` awaited one by one",
        "(latency-bound, not a cluster's throughput). On PostgreSQL the write is one statement",
        "(`RECORD_READ_PG`: event-order lock, fenced UPDATE, revision, event, NOTIFY) plus the",
        "outbox's target read and insert.",
        "",
        *markdown_table(
            [
                "backend",
                "outbox",
                "revisions/s",
                "mcpsubd CPU ms/revision",
                "PostgreSQL CPU ms/revision",
            ],
            [
                [
                    b,
                    label,
                    f"{n / wall:,.0f}",
                    f"{cpu / n * 1000:.2f}",
                    f"{server / n * 1000:.2f}" if b == "PostgreSQL" else "-",
                ]
                for b, label, wall, cpu, server in store_rows
            ],
        ),
        "",
        f"## 2. The revision in the real daemon, one replica ({RATE_LINKS} links x {RATE_URIS} URIs)",
        "",
        f"The peer changes the URIs round-robin at {plan.rate:g}/s for {plan.steady_s:g} s; each",
        "change is notified, re-read by mcpsubd, committed as a revision and followed as an SSE",
        "event on `/v1/events/stream` (latency: change sent → event received, matched by hash).",
        "",
        *markdown_table(
            [
                "backend",
                "changes",
                "revisions seen",
                "revisions/s",
                "latency p50 / p99 ms",
                "mcpsubd CPU ms/revision",
                "PostgreSQL CPU ms/revision",
            ],
            [
                [
                    b,
                    p.changes,
                    p.delivered,
                    f"{p.delivered / p.seconds:,.0f}" if p.seconds else "-",
                    f"{percentile(p.latencies_ms, 50):.0f} / {percentile(p.latencies_ms, 99):.0f}"
                    if p.latencies_ms
                    else "-",
                    ms(p.per_revision_ms("mcpsubd")),
                    ms(1000.0 * server / p.delivered) if b == "PostgreSQL" and p.delivered else "-",
                ]
                for b, p, server in daemon_rows
            ],
        ),
        "",
        f"## 3. Leases and fail-over ({plan.links:,} links, one URI each, lease TTL {plan.ttl:g} s)",
        "",
        "Each replica renews every TTL/3. Kill: `kill -9` of the last replica; with one",
        "replica it is restarted at once on its state dir (same replica id, so it takes its",
        "own leases back without waiting for them to expire). Detect: kill → the first of its",
        "links claimed by a survivor; claim: → all claimed; ack: → every link's listen",
        "acknowledged again (the peer's open listen streams back to the link count). 'Lease",
        "left' is how long the victim's newest lease still had to run at the kill.",
        "",
        *markdown_table(
            [
                "replicas",
                "links per replica before",
                "after",
                "lease left s",
                "detect s",
                "claim s",
                "ack s (all links)",
                "restart ready s",
            ],
            [
                [
                    f.replicas,
                    " / ".join(str(v) for k, v in sorted(f.before.items()) if k != "-"),
                    " / ".join(str(v) for k, v in sorted(f.after.items()) if k != "-"),
                    secs(f.lease_left_s),
                    secs(f.detect_s),
                    secs(f.claim_s),
                    secs(f.ack_s),
                    secs(f.restart_ready_s),
                ]
                for f in fails
            ],
        ),
        "",
        f"### Database load of an idle cluster ({plan.links:,} links, window {plan.window_s:g} s)",
        "",
        "Every statement the replicas ran in the window, counted by `pg_stat_statements`",
        "(lease statements: those on `replicas` or the `lease_*` columns: heartbeat, renew,",
        "balance counts, claims, releases); SQLAlchemy wraps each transaction in BEGIN and",
        "COMMIT or ROLLBACK, counted apart. CPU: % of one core over the window, per replica and",
        "for the whole PostgreSQL cluster.",
        "",
        *markdown_table(
            [
                "replicas",
                "statements/s",
                "lease statements/s",
                "per replica",
                "per 1,000 links",
                "of which BEGIN/COMMIT/ROLLBACK",
                "replica CPU %",
                "PostgreSQL CPU %",
            ],
            [
                [
                    f.replicas,
                    f"{f.calls / f.window_s:.1f}",
                    f"{f.lease_calls / f.window_s:.2f}",
                    f"{f.lease_calls / f.window_s / f.replicas:.2f}",
                    f"{f.lease_calls / f.window_s * 1000 / f.links:.2f}",
                    f"{f.control / f.window_s:.1f}",
                    " / ".join(
                        f"{v:.1f}" for k, v in sorted(f.cpu_pct.items()) if k != "PostgreSQL"
                    ),
                    f"{f.cpu_pct.get('PostgreSQL', 0.0):.1f}",
                ]
                for f in fails
            ],
        ),
        "",
    ]
    if fails:
        biggest = fails[-1]
        lines += [
            f"The most frequent statements with {biggest.replicas} replicas (calls in "
            f"{biggest.window_s:.0f} s):",
            "",
            *markdown_table(
                ["statement (normalised, cut at 90 characters)", "calls"],
                [[f"`{q.replace('|', '/')}`", c] for q, c in biggest.top],
            ),
            "",
        ]
    lines += [
        f"## 4. One lease pass, store level ({plan.links:,} links held by one replica)",
        "",
        *markdown_table(
            ["measure", "value"],
            [
                [
                    "links claimed in one statement",
                    f"{leases['claimed']:.0f} in {leases['claim_s'] * 1000:.0f} ms",
                ],
                [
                    "one lease pass (heartbeat, renew, balance, URI sets): median",
                    f"{leases['pass_median_s'] * 1000:.1f} ms",
                ],
                ["one lease pass: max of 20", f"{leases['pass_max_s'] * 1000:.1f} ms"],
            ],
        ),
        "",
    ]
    return "\n".join(lines)


async def run_daemons(
    plan: Plan, children: Children, tmp: Path, cluster: PgCluster, parts: str
) -> tuple[list[tuple[str, RatePhase, float]], list[Failover]]:
    peer = start_peer(children)
    daemon_rows = []
    for backend in ("SQLite", "PostgreSQL") if "2" in parts else ():
        print(f"(2) the daemon on {backend}: {plan.rate:g} changes/s", flush=True)
        phase, server = await daemon_revisions(backend, plan, peer, children, tmp, cluster)
        daemon_rows.append((backend, phase, server))
    await wait_streams(peer, 0)
    fails = []
    for n in plan.replicas if "3" in parts else ():
        print(f"(3) {n} replica(s), {plan.links} links, TTL {plan.ttl:g} s", flush=True)
        fails.append(await failover(n, plan, peer, children, tmp, cluster))
    return daemon_rows, fails


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="small counts, TTL 3 s (~2 min)")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--links", type=int, default=None)
    parser.add_argument("--ttl", type=float, default=None, help="lease TTL of the replicas")
    parser.add_argument("--replicas", default=None, help="replica counts of part 3, e.g. 2,3")
    parser.add_argument(
        "--parts", default="1234", help="which parts to run, e.g. 2 (default: 1234, all)"
    )
    args = parser.parse_args()
    plan = QUICK if args.quick else FULL
    if args.links:
        plan = Plan(**{**plan.__dict__, "links": args.links})
    if args.ttl:
        plan = Plan(**{**plan.__dict__, "ttl": args.ttl})
    if args.replicas:
        counts = tuple(int(n) for n in args.replicas.split(","))
        plan = Plan(**{**plan.__dict__, "replicas": counts})
    out = args.out or (None if args.quick else REPO_ROOT / "results" / "scale-out.md")
    bin_dir = find_bin_dir()
    if bin_dir is None:
        print("no PostgreSQL binaries (apt-get install postgresql)")
        return 1
    check_hash_prediction()
    signal.signal(signal.SIGTERM, sigterm_to_interrupt)  # so that the finally blocks stop all
    started, code, load_before = time.perf_counter(), code_version(), load_average()
    cluster = PgCluster(bin_dir, "-c shared_preload_libraries=pg_stat_statements").start()
    rows: list[list[Any]] = []
    try:
        with workspace() as (children, tmp):
            for label, with_target in (("no webhook target", False), ("1 webhook target", True)):
                if "1" not in args.parts:
                    break
                print(f"(1) store level, {label}", flush=True)
                sqlite = f"sqlite:///{tmp / f'{with_target}.db'}"
                upgrade(sqlite)
                r = asyncio.run(revisions(sqlite, plan.revisions, with_target))
                rows.append(["SQLite", label, r["wall"], r["cpu"], 0.0])
                pg = cluster.fresh_database()
                r = asyncio.run(
                    revisions(pg, plan.revisions, with_target, lambda: postgres_cpu_s(cluster))
                )
                rows.append(["PostgreSQL", label, r["wall"], r["cpu"], r["server"]])
            leases = dict.fromkeys(("claimed", "claim_s", "pass_median_s", "pass_max_s"), 0.0)
            if "4" in args.parts:
                leases = asyncio.run(lease_costs(cluster.fresh_database(), plan.links))
            try:
                daemon_rows, fails = asyncio.run(
                    run_daemons(plan, children, tmp, cluster, args.parts)
                )
            except Exception:
                for child in children.started:
                    print(f"--- {child.name} (last lines)\n{child.output()}", flush=True)
                raise
    finally:
        cluster.stop()
    report = render(
        plan, rows, leases, daemon_rows, fails, load_before, code, time.perf_counter() - started
    )
    if args.parts != "1234":  # only the parts that ran
        head, *sections = report.split("\n## ")
        report = "\n## ".join([head, *(x for x in sections if x[0] in args.parts)])
        report = report.replace("` (plan", f" --parts {args.parts}` (plan", 1)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(report, encoding="utf-8")
    print(report)
    return 0


if __name__ == "__main__":
    with contextlib.suppress(BrokenPipeError):
        raise SystemExit(main())
