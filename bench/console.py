"""The web console at scale: page cost, page weight, how fast a change shows, and what the
console costs a daemon nobody browses.

Run: ``.venv/bin/python -m bench.console [--quick] [--out PATH]`` (``make bench``). The full
run writes ``results/console.md``; ``--quick`` (100 links) only prints its report unless
``--out`` is given.

Setup, all on this machine: lab servers on 127.0.0.1 and one ``mcpsubd`` on its unix socket
with 1,000 links × 10 URIs stored before it starts (``bench.harness.seed_subscriptions``), so
its cold start writes ≥ 10,000 events (a state change and a first revision per URI). Then:

1. **No browser**: idle CPU (``utime+stime`` from ``/proc``) and RSS (``VmRSS``) over a
   window in which nothing calls the API: the daemon has never imported the console.
2. **First load, server side**: every request a page makes on its first load (the shell,
   its script and stylesheet, and the API calls its script makes), timed one after the other
   over the unix socket (the console needs no login there); the first, cold, load and the
   median of the next ten. Page weight is the bytes of those answers (uncompressed).
   Pages: the overview and one subscription page (the subscription with the most revisions).
3. **A change, seen in a browser**: headless Chromium (Debian's, through Playwright) logs in
   through the loopback TCP listener ``mcpsubctl ui`` would open, shows the overview and the
   subscription page; the bench changes the resource on its lab and a MutationObserver in
   each page records when the change appears. Latency = that moment − the moment the lab
   was told (one clock: same machine).
4. **After the browser left**: the same idle window again.

Targets: first load ≤ 300 ms server time, page weight ≤ 200 kB, a change visible
≤ 1 s after the server changed it, idle CPU and RSS with no browser within noise of the
daemon before the console (``results/daemon-scale.md``).

Only 127.0.0.1 and the daemon's unix socket are contacted; every wait is bounded; every
process started here is stopped on exit.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import shutil
import signal
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.harness import (
    REPO_ROOT,
    Children,
    CpuMeter,
    Mcpsubd,
    bounded_wait,
    code_version,
    daemon_metrics,
    lab_put,
    load_average,
    machine,
    seed_subscriptions,
    sigterm_to_interrupt,
    start_labs,
    status_kb,
    uds_client,
    verdict,
    workspace,
)

URIS_PER_LINK = 10
TARGET_LOAD_MS = 300.0
TARGET_WEIGHT_KB = 200.0
TARGET_VISIBLE_S = 1.0
CHROMIUM_FLAGS = [  # as tests/support/browser.py
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
NEWEST = "9223372036854775807"


@dataclass(frozen=True)
class Plan:
    name: str
    links: int
    labs: int
    idle_s: float
    loads: int
    changes: int
    ramp_timeout_s: float


FULL = Plan("full", 1000, 4, 30.0, 10, 10, 600.0)
QUICK = Plan("quick", 100, 2, 5.0, 5, 5, 120.0)


@dataclass
class Idle:
    cpu_pct: float = 0.0
    rss_mb: float = 0.0


@dataclass
class PageLoad:
    name: str
    requests: list[str] = field(default_factory=list)
    cold_ms: float = 0.0
    warm_ms: list[float] = field(default_factory=list)
    slowest: str = ""
    weight: int = 0


@dataclass
class Result:
    plan: Plan
    subscriptions: int = 0
    events: int = 0
    ready_s: float = 0.0
    before: Idle = field(default_factory=Idle)
    after: Idle = field(default_factory=Idle)
    loads: list[PageLoad] = field(default_factory=list)
    visible: dict[str, list[float]] = field(default_factory=dict)
    browser_load_ms: dict[str, float] = field(default_factory=dict)
    committed: list[float] = field(default_factory=list)
    """Per change: the daemon's commit (its event's createdAt) − the moment the lab was told."""
    after_commit: dict[str, list[float]] = field(default_factory=dict)
    load_avg: list[str] = field(default_factory=list)


async def idle_window(daemon: Mcpsubd, seconds: float) -> Idle:
    meter = CpuMeter({"mcpsubd": daemon.pid})
    rss: list[int] = []
    end = time.perf_counter() + seconds
    while (left := end - time.perf_counter()) > 0:
        rss.append(status_kb(daemon.pid, "VmRSS"))
        await asyncio.sleep(min(1.0, left))
    used = meter.stop()
    return Idle(cpu_pct=used.pct("mcpsubd"), rss_mb=statistics.median(rss) / 1024)


async def page_load(api: httpx.AsyncClient, name: str, paths: list[str], loads: int) -> PageLoad:
    """Every request of one first load, one after the other; the cold one, then ``loads``."""
    result = PageLoad(name, requests=paths)
    for round_ in range(loads + 1):
        total = 0.0
        weight = 0
        worst = (0.0, "")
        for path in paths:
            started = time.perf_counter()
            answer = await api.get(path)
            took = (time.perf_counter() - started) * 1000
            if answer.status_code != 200:
                raise RuntimeError(f"{path}: {answer.status_code} {answer.text[:200]}")
            total += took
            weight += len(answer.content)
            worst = max(worst, (took, path))
        if round_ == 0:
            result.cold_ms, result.weight, result.slowest = total, weight, worst[1]
        else:
            result.warm_ms.append(total)
    return result


OBSERVE = """([selector, text]) => {
  window.__seenAt = null;
  const done = () => { const node = document.querySelector(selector);
    return node && node.textContent.includes(text); };
  const observer = new MutationObserver(() => {
    if (done()) { observer.disconnect(); window.__seenAt = Date.now(); }
  });
  observer.observe(document.body, {subtree: true, childList: true, characterData: true});
}"""
"""Installed before the change: records (page clock, ms) when ``text`` appears."""


def browser_part(
    result: Result, base: str, login_path: str, sub: dict[str, Any], lab_url: str
) -> None:
    """Log in, open both pages, change the resource ``plan.changes`` times, time each."""
    from playwright.sync_api import sync_playwright

    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    if executable is None:
        raise RuntimeError("Chromium is not installed (apt-get install chromium)")
    uri = sub["uri"]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=executable, headless=True, args=CHROMIUM_FLAGS
        )
        try:
            # bypass_csp: Playwright's wait_for_function evaluates strings, which the
            # console's CSP (script-src 'self') refuses; the pages run as served otherwise.
            context = browser.new_context(viewport={"width": 1280, "height": 800}, bypass_csp=True)
            context.set_default_timeout(30_000)
            overview = context.new_page()
            started = time.perf_counter()
            overview.goto(base + login_path)
            overview.wait_for_function("document.getElementById('links-total').textContent !== '–'")
            result.browser_load_ms["overview"] = (time.perf_counter() - started) * 1000
            overview.wait_for_function(
                "document.getElementById('live-text').textContent === 'Live: connected'"
            )
            detail = context.new_page()
            started = time.perf_counter()
            detail.goto(f"{base}/ui/subscriptions/{sub['id']}")
            detail.wait_for_function(
                "document.querySelectorAll('#revisions tbody tr').length > 0"
                " && document.getElementById('live-text').textContent === 'Live: connected'"
            )
            result.browser_load_ms["subscription"] = (time.perf_counter() - started) * 1000
            revision = int(sub["revision"])
            result.visible = {"overview": [], "subscription": []}
            jar = {c["name"]: c["value"] for c in context.cookies()}
            with (
                httpx.Client(timeout=10.0) as lab,
                httpx.Client(base_url=base, cookies=jar, timeout=10.0) as daemon_api,
            ):
                for n in range(result.plan.changes):
                    revision += 1
                    marker = f"{uri} revision {revision}"
                    overview.evaluate(OBSERVE, ["#recent", marker])
                    detail.evaluate(OBSERVE, ["#revisions", f"#{revision}"])
                    sent = time.time()
                    lab.put(
                        lab_url.removesuffix("/mcp") + "/lab/resources",
                        json={"uri": uri, "text": f"change {n} at {sent}"},
                    ).raise_for_status()
                    seen = {}
                    for name, page in (("overview", overview), ("subscription", detail)):
                        page.wait_for_function("window.__seenAt !== null")
                        seen[name] = page.evaluate("window.__seenAt") / 1000
                        result.visible[name].append(seen[name] - sent)
                    # The daemon's commit of the change: its event's createdAt.
                    found = daemon_api.get(
                        "/v1/events",
                        params={
                            "subscription": sub["id"],
                            "type": "resource.updated",
                            "limit": 1,
                            "before": NEWEST,
                        },
                    ).json()["events"]
                    committed = float(found[-1]["createdAt"])
                    result.committed.append(committed - sent)
                    for name, at in seen.items():
                        result.after_commit.setdefault(name, []).append(at - committed)
                    time.sleep(0.3)
        finally:
            browser.close()


async def run(plan: Plan, children: Children, tmp: Path) -> Result:
    result = Result(plan, subscriptions=plan.links * URIS_PER_LINK)
    labs = start_labs(children, plan.labs, {"MCP_TEST_MAX_SUBSCRIPTIONS": str(plan.links * 2)})
    uris = [f"test://bench/{k}" for k in range(URIS_PER_LINK)]
    pairs = [
        (f"{labs[n % plan.labs].url}?link={n}", uri) for n in range(plan.links) for uri in uris
    ]
    print(f"console: {plan.links} links x {URIS_PER_LINK} URIs over {plan.labs} labs", flush=True)
    async with httpx.AsyncClient(timeout=30.0) as http:
        await asyncio.gather(
            *(lab_put(http, lab, u, "initial", False) for lab in labs for u in uris)
        )
    daemon = Mcpsubd(tmp / "state")
    seed_subscriptions(daemon, pairs)
    started = time.perf_counter()
    children.add(daemon)
    daemon.wait_ready()
    async with uds_client(daemon, timeout=60.0) as api:

        async def settled() -> bool:
            metrics = await daemon_metrics(api)
            return (
                metrics.get("mcpsub_streams_open") == plan.links
                and metrics.get("mcpsub_store_rows[revisions]", 0) >= result.subscriptions
            )

        await bounded_wait(settled, plan.ramp_timeout_s, 0.5, "every link open and read")
        result.ready_s = time.perf_counter() - started
        result.events = int((await api.get("/v1/overview")).json()["lastEventId"])
        print(f"    ready in {result.ready_s:.1f} s, {result.events:,} events", flush=True)
        await asyncio.sleep(5.0)  # settle: the last first-reads' follow-ups
        result.load_avg.append(load_average())
        result.before = await idle_window(daemon, plan.idle_s)
        print(f"    no browser: {result.before}", flush=True)

        # The subscription a person would open: link 0's first URI (changed below).
        listed = (await api.get("/v1/subscriptions", params={"limit": 1})).json()
        sub = (await api.get(f"/v1/subscriptions/{listed['subscriptions'][0]['id']}")).json()
        assets = ["/ui/static/console.js", "/ui/static/console.css", "/ui/static/favicon.svg"]
        # What each page asks for on its first load (service/console/static/console.js).
        latest = f"/v1/events?type=resource.updated&limit=10&before={NEWEST}"
        result.loads.append(
            await page_load(api, "overview", ["/ui/", *assets, "/v1/overview", latest], plan.loads)
        )
        sid = sub["id"]
        subscription_paths = [
            f"/ui/subscriptions/{sid}",
            *assets,
            f"/v1/subscriptions/{sid}",
            f"/v1/subscriptions/{sid}/revisions?limit=100",
            f"/v1/events?subscription={sid}&limit=50&before={NEWEST}",
            f"/v1/subscriptions/{sid}/revisions/{sub['revision']}",
        ]
        if sub["revision"] >= 2:  # the two newest revisions' diff, shown without a click
            subscription_paths.append(
                f"/v1/subscriptions/{sid}/diff?from={sub['revision'] - 1}&to={sub['revision']}"
            )
        result.loads.append(await page_load(api, "subscription", subscription_paths, plan.loads))
        for load in result.loads:
            print(
                f"    {load.name}: cold {load.cold_ms:.0f} ms, warm median "
                f"{statistics.median(load.warm_ms):.0f} ms, {load.weight / 1024:.1f} kB",
                flush=True,
            )
        listener = (await api.post("/v1/console/listener")).json()
        result.load_avg.append(load_average())
        await asyncio.to_thread(
            browser_part, result, listener["url"], listener["path"], sub, labs[0].url
        )
        for name, values in result.visible.items():
            print(f"    change visible on the {name}: max {max(values):.3f} s", flush=True)
        await asyncio.sleep(3.0)  # the browser's streams are closed by now
        result.load_avg.append(load_average())
        result.after = await idle_window(daemon, plan.idle_s)
        print(f"    after the browser: {result.after}", flush=True)
    children.stop(*labs, daemon)
    return result


def render(result: Result, elapsed_s: float, code: str) -> str:
    plan = result.plan
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    out = [
        "# Web console at scale (`bench/console.py`)",
        "",
        f"{now}, code {code}, {machine()}; plan `{plan.name}`: {plan.links:,} links × "
        f"{URIS_PER_LINK} URIs = {result.subscriptions:,} subscriptions over {plan.labs} lab "
        f"servers, {result.events:,} events in the log; run took {elapsed_s:.0f} s. "
        f"Load average (1, 5, 15 min) at each step: {'; '.join(result.load_avg)} "
        "(the machine is shared: the figures are upper bounds).",
        "",
        "## First load, server side",
        "",
        "Every request of a page's first load, one after the other over the unix socket "
        f"(cold = the first; warm = median of {plan.loads}). Weight: the answers' bytes, "
        "uncompressed.",
        "",
        "| page | requests | cold ms | warm median ms | slowest request (cold) | weight kB | target |",
        "|---|---:|---:|---:|---|---:|---|",
    ]
    for load in result.loads:
        warm = statistics.median(load.warm_ms)
        ok = load.cold_ms <= TARGET_LOAD_MS and load.weight <= TARGET_WEIGHT_KB * 1024
        out.append(
            f"| {load.name} | {len(load.requests)} | {load.cold_ms:.0f} | {warm:.0f} | "
            f"`{load.slowest}` | {load.weight / 1024:.1f} | ≤ {TARGET_LOAD_MS:.0f} ms, "
            f"≤ {TARGET_WEIGHT_KB:.0f} kB: {verdict(ok)} |"
        )
    out += [
        "",
        "In the browser (headless Chromium, login included for the overview): "
        + ", ".join(f"{k} {v:.0f} ms to data on screen" for k, v in result.browser_load_ms.items())
        + ".",
        "",
        "## A change, seen in the browser",
        "",
        f"{plan.changes} changes of one resource on its lab; for each, the time from telling "
        "the lab to the change on the page (the lab's update delay, the notification, the "
        "re-read, the commit, the event stream, the page's fetch and render).",
        "",
        "| page | from the lab, median s | max s | from the daemon's commit, median s | max s | target (from the commit) |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for name, values in result.visible.items():
        after = result.after_commit.get(name, [0.0])
        out.append(
            f"| {name} | {statistics.median(values):.3f} | {max(values):.3f} | "
            f"{statistics.median(after):.3f} | {max(after):.3f} | "
            f"≤ {TARGET_VISIBLE_S:g} s: {verdict(max(after) <= TARGET_VISIBLE_S)} |"
        )
    if result.committed:
        out += [
            "",
            f"The daemon committed each change {statistics.median(result.committed):.3f} s "
            f"(median; max {max(result.committed):.3f} s) after the lab was told: the "
            "notification, the re-read and the write, before the console is involved.",
        ]
    out += [
        "",
        "## What the console costs a daemon nobody browses",
        "",
        f"Idle windows of {plan.idle_s:g} s, nothing calling the API.",
        "",
        "| window | daemon CPU % of one core | RSS MB (median) |",
        "|---|---:|---:|",
        f"| before any browser (console never imported) | {result.before.cpu_pct:.2f} | "
        f"{result.before.rss_mb:.1f} |",
        f"| after a browser used it and left | {result.after.cpu_pct:.2f} | "
        f"{result.after.rss_mb:.1f} |",
        "",
        "The console's module is imported on the first `/ui` request "
        "(`tests/api/test_console_api.py` checks the API app does not import it), so the "
        "first row is the daemon without the console; compare it with the idle figures of "
        "`results/daemon-scale.md` (the daemon before the console). The second row is what "
        "stays after a visit: the imported module, its cached assets, closed streams.",
        "",
    ]
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="100 links, short windows")
    parser.add_argument("--out", type=Path, default=None, help="markdown report path")
    args = parser.parse_args()
    plan = QUICK if args.quick else FULL
    out = args.out or (None if args.quick else REPO_ROOT / "results" / "console.md")
    signal.signal(signal.SIGTERM, sigterm_to_interrupt)
    started = time.perf_counter()
    code = code_version()
    with workspace() as (children, tmp):
        try:
            result = asyncio.run(run(plan, children, tmp))
        except KeyboardInterrupt:
            import traceback

            traceback.print_exc()
            print("bench: interrupted; stopping everything", file=sys.stderr)
            return 130
        except Exception:
            for child in children.started:
                print(f"--- {child.name} (last lines)\n{child.output()}", file=sys.stderr)
            raise
    report = render(result, time.perf_counter() - started, code)
    if out is None:
        print(report)
    else:
        out.write_text(report)
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
