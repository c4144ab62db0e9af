"""Where the test suite's time goes: every test's start, end and worker, and the machine's idle CPU.

Run: ``.venv/bin/python -m bench.testsuite [--workers N] [--dist MODE] [--quick] [--out PATH]
[-- PYTEST ARGS]`` (``--quick``: ``tests/unit`` only). It runs the suite as ``make test`` does (``-n`` workers, ``--dist``) with
the plugin :mod:`tests.support.timeline`, reads ``/proc/stat`` before and after, and writes
``results/testsuite.md`` (``--out -`` prints it): the run's time, each worker's span and busy
time, the CPU left idle, and the tests and files that take longest.

Why it exists: on 2 cores, 2 workers left the CPU idle 29 % of the run (a third of a test's
time is a wait: a server starting, a bound running out, a peer's timer), and with 3 workers
the default distribution left one worker running 4 minutes after the others, having been
handed a quarter of the suite up front. The figures behind ``make test``'s 3 workers and
``--dist worksteal`` came from this.

Only what the tests themselves start runs (loopback only); a run takes as long as the suite.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.harness import PYTHON, REPO_ROOT, code_version, load_average, machine, markdown_table


def _cpu_ticks() -> tuple[int, int]:
    """(idle + iowait, total) jiffies of all CPUs since boot."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return fields[3] + fields[4], sum(fields)


class IdleSampler:
    """The share of CPU time left idle between :meth:`start` and :meth:`stop` (``/proc/stat``)."""

    def __init__(self) -> None:
        self._first = (0, 0)

    def start(self) -> IdleSampler:
        self._first = _cpu_ticks()
        return self

    def stop(self) -> float:
        idle0, total0 = self._first
        idle1, total1 = _cpu_ticks()
        return 100.0 * (idle1 - idle0) / max(1, total1 - total0)


def _records(where: Path) -> list[dict[str, object]]:
    rows = []
    for path in sorted(where.glob("timeline.*.jsonl")):
        rows += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return rows


def report(rows: list[dict[str, object]], *, wall: float, idle_pct: float, argv: list[str],
           summary: str) -> list[str]:  # fmt: skip
    by_worker: dict[str, list[dict[str, object]]] = collections.defaultdict(list)
    for row in rows:
        by_worker[str(row["worker"])].append(row)
    start = min(float(r["start"]) for r in rows)  # type: ignore[arg-type]
    worker_rows = []
    for worker, mine in sorted(by_worker.items()):
        ends = [float(r["end"]) for r in mine]  # type: ignore[arg-type]
        busy = sum(float(r["end"]) - float(r["start"]) for r in mine)  # type: ignore[arg-type]
        worker_rows.append([worker, len(mine), f"{max(ends) - start:.0f} s", f"{busy:.0f} s"])
    tests = sorted(rows, key=lambda r: float(r["start"]) - float(r["end"]))  # type: ignore[arg-type]
    test_rows = [
        [f"`{r['test']}`", f"{float(r['end']) - float(r['start']):.1f}", f"{float(r['cpu']):.1f}"]  # type: ignore[arg-type]
        for r in tests[:15]
    ]
    files: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0, 0.0])
    for r in rows:
        entry = files[str(r["test"]).split("::")[0]]
        entry[0] += float(r["end"]) - float(r["start"])  # type: ignore[arg-type]
        entry[1] += float(r["cpu"])  # type: ignore[arg-type]
        entry[2] += 1
    file_rows = [
        [f"`{name}`", int(n), f"{w:.0f}", f"{c:.0f}"]
        for name, (w, c, n) in sorted(files.items(), key=lambda kv: -kv[1][0])[:15]
    ]
    total_wall = sum(float(r["end"]) - float(r["start"]) for r in rows)  # type: ignore[arg-type]
    total_cpu = sum(float(r["cpu"]) for r in rows)  # type: ignore[arg-type]
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# The test suite's time",
        "",
        "<!-- not run: as long as the whole suite; `python -m bench.testsuite` -->",
        "",
        f"`python -m bench.testsuite`, {now}, code {code_version()}, {machine()}; load "
        f"{load_average()} at the end. pytest {' '.join(argv)}: {summary}.",
        "",
        f"**{wall / 60:.0f} min {wall % 60:.0f} s** in all; the CPU was idle "
        f"**{idle_pct:.0f} %** of the run. The tests' own times add up to {total_wall:.0f} s, "
        f"of which {total_cpu:.0f} s of CPU were counted (the worker's own and that of the "
        "children it waited for: a daemon, a CLI; not a server still running when its test "
        "ended, so the figure is low).",
        "",
        *markdown_table(["worker", "tests", "last test ended", "busy"], worker_rows),
        "",
        "The slowest tests (seconds):",
        "",
        *markdown_table(["test", "wall", "CPU counted"], test_rows),
        "",
        "The files whose tests take longest together (seconds):",
        "",
        *markdown_table(["file", "tests", "wall", "CPU counted"], file_rows),
        "",
    ]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.testsuite", description=__doc__)
    parser.add_argument("--workers", type=int, default=(os.cpu_count() or 1) + 1)
    parser.add_argument("--dist", default="worksteal")
    parser.add_argument("--quick", action="store_true", help="tests/unit only (a smoke run)")
    parser.add_argument("--out", default=str(REPO_ROOT / "results" / "testsuite.md"))
    parser.add_argument("pytest_args", nargs="*", help="after --: more pytest arguments")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="mcpsub-timeline-") as where:
        selected = args.pytest_args or (["tests/unit"] if args.quick else [])
        pytest_argv = ["-n", str(args.workers), "--dist", args.dist, "-q", *selected]
        env = {**os.environ, "MCPSUB_TEST_TIMELINE": where}
        sampler = IdleSampler().start()
        started = time.monotonic()
        done = subprocess.run(
            [str(PYTHON), "-m", "pytest", "-p", "tests.support.timeline", *pytest_argv],
            cwd=REPO_ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        wall = time.monotonic() - started
        idle_pct = sampler.stop()
        rows = _records(Path(where))
    tail = [line for line in done.stdout.splitlines() if line.strip()]
    summary = tail[-1].strip("= ") if tail else f"exit {done.returncode}"
    if not rows:
        print(done.stdout[-3000:] + done.stderr[-2000:], file=sys.stderr)
        return 1
    lines = report(rows, wall=wall, idle_pct=idle_pct, argv=pytest_argv, summary=summary)
    failed = [line for line in done.stdout.splitlines() if line.startswith(("FAILED ", "ERROR "))]
    if failed:
        lines += ["What did not pass:", "", *(f"- `{line}`" for line in failed), ""]
        print("\n".join(failed), file=sys.stderr)
    text = "\n".join(lines)
    if args.out == "-":
        print(text)
    else:
        Path(args.out).write_text(text)
        print(f"wrote {args.out}: {summary}")
    return 0 if done.returncode == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
