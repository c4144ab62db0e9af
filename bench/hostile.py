"""Before/after figures for hostile servers: floods, compression bombs, deep JSON.

Runs the real ``mcpsubd`` and both CLIs against ``tests/support/hostile.py`` (and the lab
server for an honest subscription next to the attack), all on 127.0.0.1, and writes
``results/hostile.md``. ``--before DIR`` runs the same scenarios a second time with the code
of another checkout first on ``PYTHONPATH`` (e.g. ``git archive 18ab17d | tar -x -C DIR``),
so the report shows both columns. Peak memory is ``VmHWM`` from ``/proc/PID/status``.

    .venv/bin/python -m bench.hostile [--before DIR] [--flood N]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.cli import BIN, SHIMS, cli_env
from tests.support.daemon import Daemon
from tests.support.hostile import HostileServer, peak_rss_kib
from tests.support.lab import LabServer

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "results" / "hostile.md"


def mib(kib: float) -> str:
    return f"{kib / 1024:.0f} MiB"


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def wait(check: Callable[[], Any], timeout: float, step: float = 0.01) -> tuple[Any, float]:
    """(result, seconds) of the first truthy ``check()``; (None, timeout) if none."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        value = check()
        if value:
            return value, time.monotonic() - started
        time.sleep(step)
    return None, timeout


class Run:
    """One column of the report: the code under test and its processes."""

    def __init__(self, label: str, code: Path, tmp: Path) -> None:
        self.label = label
        self.code = code
        self.tmp = tmp
        self.env = {"PYTHONPATH": os.pathsep.join([str(SHIMS), str(code)])}
        self.count = 0

    def daemon(self, **env: str) -> Daemon:
        self.count += 1
        state = self.tmp / f"{self.label}-{self.count}"
        return Daemon(state, {**self.env, "MCPSUB_BACKOFF_CAP_S": "2", **env}).start()

    def cli(self, *args: str) -> dict[str, Any]:
        """Run mcpsubctl, sampling VmHWM; returns code, peak, seconds, errorCode."""
        started = time.monotonic()
        with tempfile.TemporaryFile("w+") as out:
            proc = subprocess.Popen(
                [str(BIN / "mcpsubctl"), *args],
                env=cli_env(self.env),
                stdout=out,
                stderr=subprocess.DEVNULL,
                text=True,
            )
            peak = 0
            while proc.poll() is None:
                with contextlib.suppress(OSError, RuntimeError):
                    peak = max(peak, peak_rss_kib(proc.pid))
                time.sleep(0.002)
            out.seek(0)
            lines = out.read().strip().splitlines()
        code = json.loads(lines[-1]).get("errorCode") if lines else None
        return {"peak": peak, "seconds": time.monotonic() - started, "errorCode": code}


def subscribe(d: Daemon, url: str, uri: str) -> int:
    response = d.api("POST", "/v1/subscriptions", json={"url": url, "uri": uri})
    response.raise_for_status()
    sub_id: int = response.json()["id"]
    return sub_id


def text(d: Daemon, uri: str) -> str | None:
    response = d.api("GET", "/v1/content", params={"uri": uri})
    return response.json()["text"] if response.status_code == 200 else None


def put(lab: LabServer, uri: str, value: str) -> None:
    lab.control(
        "PUT", "/lab/resources", json={"uri": uri, "text": value, "notify": True}
    ).raise_for_status()


def honest_latency(d: Daemon, lab: LabServer, uri: str, rounds: int, tag: str) -> list[float]:
    """Seconds from a lab update to the daemon serving it, ``rounds`` times."""
    out = []
    for n in range(rounds):
        value = f"{tag}-{n}"
        put(lab, uri, value)
        _, seconds = wait(lambda v=value: text(d, uri) == v, 30)
        out.append(seconds)
    return out


def fmt_latency(values: list[float]) -> str:
    if not values:
        return "-"
    return f"median {statistics.median(values):.2f} s, max {max(values):.2f} s (n={len(values)})"


# ---- scenarios ----------------------------------------------------------------------------
def cli_bombs(run: Run, hostile: HostileServer) -> dict[str, str]:
    out = {}
    for mode in ("bomb", "bomb1", "deep-read"):
        r = run.cli("probe", "--url", hostile.url(mode), "--uri", f"hostile://{mode}/doc", "--json")
        out[f"mcpsubctl probe vs `{mode}`"] = (
            f"{mib(r['peak'])} peak, {r['seconds']:.2f} s, {r['errorCode']}"
        )
    return out


def daemon_bomb(run: Run, hostile: HostileServer) -> dict[str, str]:
    d = run.daemon()
    try:
        sub = subscribe(d, hostile.url("bomb"), "hostile://bomb/doc")

        def errored() -> bool:
            return bool(d.api("GET", f"/v1/subscriptions/{sub}").json()["state"] == "error")

        _, seconds = wait(errored, 60, 0.05)
        assert d.proc is not None
        return {
            "mcpsubd reading `gzip, gzip` bomb": (
                f"{mib(peak_rss_kib(d.proc.pid))} peak, subscription `error` after {seconds:.1f} s"
            )
        }
    finally:
        d.stop()


def deep_listen(run: Run, hostile: HostileServer) -> dict[str, str]:
    d = run.daemon(MCPSUB_KEEPALIVE_S="15")
    try:
        subscribe(d, hostile.url("deep"), "hostile://deep/doc")
        url = hostile.url("deep")

        def noticed() -> str | None:
            for link in links(d, url):
                if link["lastErrorCode"]:
                    return f"{link['lastErrorCode']}: {link['lastError'][:60]}"
            return None

        what, seconds = wait(noticed, 60, 0.02)
        # Measured from the subscribe call: the frame comes right after the acknowledgement.
        verdict = f"{what} after {seconds:.2f} s" if what else "still `open` after 60 s"
        return {"mcpsubd listen stream sends a 200,000-deep frame": verdict}
    finally:
        d.stop()


def links(d: Daemon, url: str) -> list[dict[str, Any]]:
    return [x for x in d.api("GET", "/v1/status").json()["links"] if x["url"] == url]


def flood(
    run: Run, hostile: HostileServer, lab: LabServer, mode: str, window: float
) -> dict[str, str]:
    """The honest link's latency while ``mode`` floods, sampled for at most ``window`` s."""
    d = run.daemon()
    try:
        assert d.proc is not None
        put(lab, "test://honest", "start")
        subscribe(d, lab.url, "test://honest")
        wait(lambda: text(d, "test://honest") == "start", 30)
        baseline = honest_latency(d, lab, "test://honest", 10, f"{mode}-base")
        base_rss = rss_kib(d.proc.pid)
        started = time.monotonic()
        flood_sub = subscribe(d, hostile.url(mode), f"hostile://{mode}/doc")
        during: list[float] = []
        done_at = None
        while time.monotonic() - started < window:
            if text(d, f"hostile://{mode}/doc") == "final":
                done_at = time.monotonic() - started
                break
            during += honest_latency(d, lab, "test://honest", 1, f"{mode}-{len(during)}")
        peak = peak_rss_kib(d.proc.pid)
        after = rss_kib(d.proc.pid)
        d.api("DELETE", f"/v1/subscriptions/{flood_sub}")
        time.sleep(1.0)
        after_unsub = rss_kib(d.proc.pid)
        logged = sum("unsubscribed URI" in line for line in d.lines)
        finished = f"{done_at:.1f} s" if done_at else f"not within {window:g} s (still flooding)"
        return {
            f"`{mode}`: flood handled (content `final`)": finished,
            f"`{mode}`: mcpsubd RSS before / peak / after / after unsubscribe": (
                f"{mib(base_rss)} / {mib(peak)} / {mib(after)} / {mib(after_unsub)}"
            ),
            f"`{mode}`: honest subscription latency, idle": fmt_latency(baseline),
            f"`{mode}`: honest subscription latency, during the flood": fmt_latency(during),
            f"`{mode}`: log lines about unsubscribed URIs": str(logged),
        }
    finally:
        d.stop()


def run_all(run: Run, flood_count: int, ka_count: int, window: float) -> dict[str, str]:
    results: dict[str, str] = {}
    hostile = HostileServer({"HOSTILE_FLOOD": str(flood_count), "HOSTILE_KEEPALIVE_S": "1"})
    hostile.start()
    lab = LabServer({"MCP_TEST_UPDATE_DELAY_SECONDS": "0.01"}).start()
    try:
        results.update(cli_bombs(run, hostile))
        results.update(daemon_bomb(run, hostile))
        results.update(deep_listen(run, hostile))
        results.update(flood(run, hostile, lab, "flood", 180))
        ka = HostileServer({"HOSTILE_FLOOD": str(ka_count), "HOSTILE_KEEPALIVE_S": "1"})
        ka.start()
        try:
            results.update(flood(run, ka, lab, "keepalive-flood", window))
        finally:
            ka.stop()
    finally:
        hostile.stop()
        lab.stop()
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="a checkout of the code before the fixes")
    parser.add_argument("--flood", type=int, default=300_000, help="notifications per flood")
    parser.add_argument("--ka-flood", type=int, default=3_000_000, help="keep-alive comments")
    parser.add_argument(
        "--window", type=float, default=30, help="seconds of latency sampling (keep-alive flood)"
    )
    args = parser.parse_args()
    columns: dict[str, dict[str, str]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        if args.before:
            print("== before", file=sys.stderr)
            columns["before"] = run_all(
                Run("before", args.before.resolve(), Path(tmp)),
                args.flood,
                args.ka_flood,
                args.window,
            )
        print("== after", file=sys.stderr)
        columns["after"] = run_all(
            Run("after", REPO, Path(tmp)), args.flood, args.ka_flood, args.window
        )
    rows = list(next(iter(columns.values())))
    lines = [
        "# Hostile servers: before and after",
        "",
        f"`python -m bench.hostile --flood {args.flood} --ka-flood {args.ka_flood}` on {platform.node() or 'this machine'}"
        f" ({os.cpu_count()} CPUs, Python {platform.python_version()}), "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. Servers: "
        "`tests/support/hostile.py` (bomb: 512 MiB of JSON text behind 1.4 KB of `gzip, gzip`; "
        f"flood: {args.flood:,} `resources/updated`, half for the subscribed URI, half for "
        f"distinct unsubscribed URIs; keep-alive flood: {args.ka_flood:,} comments) and the "
        "lab server for the honest subscription. Peak = `VmHWM`. Latency = seconds from a lab "
        "update to `GET /v1/content` serving it (polled every 10 ms). After the fixes a "
        "flooding stream is read at `stream_max_frames_per_s` (5000), so the flood itself "
        "takes longer to drain: the attacker waits, the other links do not.",
        "",
        "| scenario | " + " | ".join(columns) + " |",
        "|---|" + "---|" * len(columns),
    ]
    for row in rows:
        lines.append(f"| {row} | " + " | ".join(c.get(row, "-") for c in columns.values()) + " |")
    lines += [
        "",
        "The machine is a shared 2-CPU VM: wall times (and latencies) move with its load, so",
        "compare columns of one run; peak memory, log-line counts and who notices what are the",
        "robust figures. `before` is an older checkout given as `--before DIR`.",
    ]
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
