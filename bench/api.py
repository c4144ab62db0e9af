"""The local API's own cost: ``POST /v1/subscriptions`` and ``GET /v1/status`` at 10,000
subscriptions, as daemon CPU per call, next to the wall-clock figures.

Run: ``.venv/bin/python -m bench.api [--quick] [--out PATH] [--posts N]`` (default
``results/api.md``, ~2 min; ``--quick``: 100 links, prints only). ``bench/daemon.py``
times the same calls against lab servers, but on a shared 2-core machine its wall-clock
figures mostly measure the load; here the peer is ``bench/fastpeer.py`` (one process, any
path is a distinct server URL, so its share of the CPU stays small), and each phase reports
the daemon's utime+stime per call, the figure that compares across runs.

Set-up: 1,000 links x 10 URIs stored before ``mcpsubd`` starts (as ``bench.daemon`` does),
wait until every stream is open and every URI read, then:

* ``GET /v1/status`` 50 times in a row;
* ``POST /v1/subscriptions`` in five shapes: the single form (32 concurrent) re-adding
  existing subscriptions (the API and the write alone: no link changes), adding a URI to
  existing links, adding new links; the batch form (10 URIs per call, 8 concurrent) for new
  links and for new URIs of existing links. CPU per subscription includes what the daemon
  does because of it until the phase's last answer (re-listens, first reads, new links).

Only 127.0.0.1 and the daemon's unix socket are used; every process is stopped on exit.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import signal
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bench.harness import (
    REPO_ROOT,
    CpuMeter,
    Mcpsubd,
    bounded_wait,
    code_version,
    daemon_metrics,
    load_average,
    machine,
    markdown_table,
    percentile,
    seed_subscriptions,
    sigterm_to_interrupt,
    start_daemon,
    start_peer,
    uds_client,
    workspace,
)

LINKS_FULL = 1000
LINKS = LINKS_FULL
"""Links of this run (``--quick``: 100)."""
URIS_PER_LINK = 10
STATUS_CALLS = 50
TARGET_STATUS_MS = 20.0
TARGET_PER_S = 1000.0


@dataclass
class Phase:
    name: str
    calls: int
    subscriptions: int
    seconds: float
    latencies_ms: list[float]
    cpu_s: float
    load: str

    def row(self) -> list[Any]:
        return [
            self.name,
            f"{self.calls:,}",
            f"{self.subscriptions:,}",
            f"{self.subscriptions / self.seconds:.0f}",
            f"{statistics.median(self.latencies_ms):.1f} / {percentile(self.latencies_ms, 90):.1f}",
            f"{self.cpu_s * 1000 / self.subscriptions:.2f}",
            f"{self.subscriptions / self.cpu_s:.0f}" if self.cpu_s else "—",
            self.load,
        ]


async def posts(
    api: httpx.AsyncClient,
    pid: int,
    name: str,
    bodies: list[dict[str, Any]],
    concurrency: int,
    expect: int,
) -> Phase:
    pending = iter(bodies)
    latencies: list[float] = []

    async def worker() -> None:
        for body in pending:
            asked = time.perf_counter()
            response = await api.post("/v1/subscriptions", json=body)
            latencies.append((time.perf_counter() - asked) * 1000)
            if response.status_code != expect:
                raise RuntimeError(f"{name}: {response.status_code} {response.text[:200]}")

    meter = CpuMeter({"mcpsubd": pid})
    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    seconds = time.perf_counter() - started
    meter.stop()
    subscriptions = sum(len(b["uris"]) if "uris" in b else 1 for b in bodies)
    return Phase(
        name, len(bodies), subscriptions, seconds, latencies, meter.used["mcpsubd"], load_average()
    )


async def run(tmp: Path, children: Any, count: int, links_total: int) -> tuple[Phase, list[Phase]]:
    peer = start_peer(children)
    uris = [f"test://bench/{k}" for k in range(URIS_PER_LINK)]

    def url(n: int) -> str:
        return f"{peer.url}?link={n}"

    global LINKS
    LINKS = links_total
    daemon = Mcpsubd(tmp / "state")
    seed_subscriptions(daemon, [(url(n), uri) for n in range(LINKS) for uri in uris])
    start_daemon(children, daemon.state_dir, daemon)
    print(f"api: {LINKS} links x {URIS_PER_LINK} URIs on the fast peer", flush=True)
    async with uds_client(daemon, timeout=120.0) as api:

        async def settled() -> bool:
            metrics = await daemon_metrics(api)
            return (
                metrics.get("mcpsub_streams_open") == LINKS
                and metrics.get("mcpsub_store_rows[revisions]", 0) >= LINKS * URIS_PER_LINK
            )

        await bounded_wait(settled, 600.0, 1.0, "every link open and every URI read")
        await asyncio.sleep(3.0)
        latencies: list[float] = []
        meter = CpuMeter({"mcpsubd": daemon.pid})
        started = time.perf_counter()
        for _ in range(STATUS_CALLS):
            asked = time.perf_counter()
            (await api.get("/v1/status")).raise_for_status()
            latencies.append((time.perf_counter() - asked) * 1000)
        status = Phase(
            "`GET /v1/status`",
            STATUS_CALLS,
            STATUS_CALLS,
            time.perf_counter() - started,
            latencies,
            meter.stop().used["mcpsubd"],
            load_average(),
        )
        print(f"    status p50 {statistics.median(latencies):.1f} ms", flush=True)
        links = count // URIS_PER_LINK
        plan = [
            (
                "single form, existing subscriptions (200: API + write only)",
                [{"url": url(n), "uri": u} for n in range(links) for u in uris],
                32,
                200,
            ),
            (
                "single form, a new URI on existing links",
                [{"url": url(n), "uri": f"{u}/s"} for n in range(links) for u in uris],
                32,
                201,
            ),
            (
                "single form, new links",
                [{"url": url(LINKS + n), "uri": u} for n in range(links) for u in uris],
                32,
                201,
            ),
            (
                "batch form (10 URIs a call), new links",
                [{"url": url(2 * LINKS + n), "uris": uris} for n in range(links)],
                8,
                201,
            ),
            (
                "batch form (10 URIs a call), new URIs on existing links",
                [{"url": url(n), "uris": [f"{u}/b" for u in uris]} for n in range(links)],
                8,
                201,
            ),
        ]
        phases = []
        for name, bodies, concurrency, expect in plan:
            phase = await posts(api, daemon.pid, name, bodies, concurrency, expect)
            print(f"    {name}: {phase.subscriptions / phase.seconds:.0f}/s", flush=True)
            phases.append(phase)
            await asyncio.sleep(3.0)  # let the links' re-listens and reads settle
    children.stop(daemon, peer)
    return status, phases


def render(status: Phase, phases: list[Phase], seconds: float) -> str:
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    per_call = status.cpu_s * 1000 / status.calls
    p50 = statistics.median(status.latencies_ms)
    out = [
        "# API benchmark",
        "",
        f"Generated by `bench/api.py` on {now} ({seconds:.0f} s in all).",
        f"Machine: {machine()}. Code: {code_version()}.",
        "",
        f"One `mcpsubd` (default settings) with {LINKS:,} links x {URIS_PER_LINK} URIs on "
        "`bench/fastpeer.py`, every stream open and every URI read before the calls; the "
        "bench client shares the machine. CPU is the daemon's utime+stime over the phase; "
        "per subscription it includes the re-listens, first reads and new links the calls "
        "caused up to the phase's last answer. Load average (1, 5, 15 min) at each phase's end.",
        "",
        *markdown_table(
            ["call", "calls", "wall p50 / p90 ms", "daemon CPU per call ms", "target", "load"],
            [
                [
                    f"`GET /v1/status` at {LINKS * URIS_PER_LINK:,} subscriptions",
                    status.calls,
                    f"{p50:.1f} / {percentile(status.latencies_ms, 90):.1f}",
                    f"{per_call:.2f}",
                    f"≤ {TARGET_STATUS_MS:g} ms: {'met' if p50 <= TARGET_STATUS_MS else 'missed'}",
                    status.load,
                ]
            ],
        ),
        "",
        *markdown_table(
            [
                "`POST /v1/subscriptions`",
                "calls",
                "subscriptions",
                "per s (wall)",
                "p50 / p90 ms",
                "daemon CPU per subscription ms",
                "per s per core of daemon CPU",
                "load",
            ],
            [phase.row() for phase in phases],
        ),
        "",
        f"Target: ≥ {TARGET_PER_S:,.0f} subscriptions/s. *Per s per core of daemon CPU* is "
        "the rate one core would sustain at the measured CPU per subscription; the wall rate "
        "is what the daemon reached with the share of the two cores it got.",
        "",
    ]
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--out", type=Path, default=None, help="report (default results/api.md; --quick: print)"
    )
    parser.add_argument(
        "--posts", type=int, default=1000, help="subscriptions per POST phase (default 1000)"
    )
    parser.add_argument(
        "--quick", action="store_true", help="100 links, 100 per phase (< 1 min); prints only"
    )
    args = parser.parse_args()
    links = LINKS_FULL
    out = args.out or (None if args.quick else REPO_ROOT / "results" / "api.md")
    if args.quick:
        links, args.posts = 100, 100
    signal.signal(signal.SIGTERM, sigterm_to_interrupt)
    started = time.perf_counter()
    with workspace() as (children, tmp):
        try:
            status, phases = asyncio.run(run(tmp, children, args.posts, links))
        except KeyboardInterrupt:
            print("bench: interrupted; stopping everything", file=sys.stderr)
            return 130
        except Exception:
            for child in children.started:
                print(f"--- {child.name} (last lines)\n{child.output()}", file=sys.stderr)
            raise
    report = render(status, phases, time.perf_counter() - started)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(report, encoding="utf-8")
    print(report)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
