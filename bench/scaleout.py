"""Scale-out bench: the revision write on PostgreSQL vs SQLite, lease costs with 1,000 links.

Store-level, in one process against a throwaway PostgreSQL cluster (the tests' fixture) and
a SQLite file, so the figures are the database work the daemon adds per revision and per
lease pass, without network peers. Writes ``results/scale-out.md``.

  .venv/bin/python -m bench.scaleout [--revisions 3000] [--links 1000]

On two shared cores the absolute throughput is not the point; CPU per revision (ours and the
PostgreSQL server's) and the lease pass's cost per 1,000 links are.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.harness import CLK_TCK, REPO_ROOT, code_version, load_average, machine, markdown_table
from service.store import Store
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
            gen = await store.bump_generation(sub.server_id)
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
        claimed = await store.claim_leases("bench", TTL, links + 1)
        claim_s = time.perf_counter() - started
        passes = []
        for _ in range(20):
            t0 = time.perf_counter()
            await store.lease_heartbeat("bench", "host", 1)
            await store.renew_leases("bench", TTL)
            await store.lease_balance(TTL)
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


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--revisions", type=int, default=3000)
    parser.add_argument("--links", type=int, default=1000)
    args = parser.parse_args()
    bin_dir = find_bin_dir()
    if bin_dir is None:
        print("no PostgreSQL binaries (apt-get install postgresql)")
        return 1
    cluster = PgCluster(bin_dir).start()
    workdir = Path(tempfile.mkdtemp(prefix="mcpsub-bench-"))
    rows = []
    try:
        for label, with_target in (("no webhook target", False), ("1 webhook target", True)):
            sqlite = f"sqlite:///{workdir / f'{with_target}.db'}"
            upgrade(sqlite)
            r = asyncio.run(revisions(sqlite, args.revisions, with_target))
            rows.append(["SQLite", label, r["wall"], r["cpu"], 0.0])
            pg = cluster.fresh_database()
            r = asyncio.run(
                revisions(pg, args.revisions, with_target, lambda: postgres_cpu_s(cluster))
            )
            rows.append(["PostgreSQL", label, r["wall"], r["cpu"], r["server"]])
        leases = asyncio.run(lease_costs(cluster.fresh_database(), args.links))
    finally:
        cluster.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    n = args.revisions
    table = markdown_table(
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
            for b, label, wall, cpu, server in rows
        ],
    )
    per_pass = 5  # heartbeat, renew, 2 balance counts, the URI-set read
    lines = [
        "# Scale-out: PostgreSQL vs SQLite, lease costs",
        "",
        f"Machine: {machine()}; load average at the end {load_average()}; code {code_version()}.",
        f"Command: `.venv/bin/python -m bench.scaleout --revisions {n} --links {args.links}`.",
        "",
        f"## The revision write, one replica ({n} revisions over 100 URIs, 200-byte texts)",
        "",
        "Each revision is the whole fenced transaction (fenced UPDATE, revision row, event,",
        "outbox rows, and on PostgreSQL the event-order lock and the NOTIFY), awaited one by",
        "one from one asyncio task: the figure is latency-bound, not a cluster's throughput.",
        "",
        *table,
        "",
        f"## Leases with {args.links:,} links (one replica, TTL {TTL:g} s)",
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
                ["statements per pass (independent of the link count)", str(per_pass)],
                [
                    f"database queries/s per replica (a pass every {TTL / 3:g} s)",
                    f"{per_pass / (TTL / 3):.1f}",
                ],
                ["queries/s per 1,000 links", f"{per_pass / (TTL / 3) * 1000 / args.links:.1f}"],
            ],
        ),
        "",
        "The renew is one `UPDATE … WHERE lease_owner = me RETURNING id`, however many links a",
        "replica holds: the lease load on the database grows with replicas, not with links.",
        "",
    ]
    out = REPO_ROOT / "results" / "scale-out.md"
    out.write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
