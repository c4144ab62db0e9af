"""What one ``mcpsubctl`` call to a running daemon costs, side by side with a bare interpreter.

Run: ``.venv/bin/python -m bench.cli [--runs N] [--out results/cli.md] [--quick]``
(``make bench``; ``--quick``: 5 runs, prints only).

Agent scripts call ``mcpsubctl read``/``events``/``wait`` in loops, so the
figure that matters is a whole call: interpreter start, imports, parsing, the request to
the daemon and the output. This bench starts the real lab server and a real ``mcpsubd`` on
a unix socket in a temporary state directory, subscribes to one resource, then times N
rounds (round-robin, one untimed warm-up each, so a load burst hits every command alike) of:

* ``python -c pass`` with this interpreter: the floor every Python CLI pays;
* ``mcpsubctl --version`` and ``mcp-resource-subscriber --version`` (target ≤ 1.5×);
* ``mcpsubctl read``, ``events --since N``, ``status``, ``list``, ``subscribe`` (an existing
  subscription: it answers at once) and ``wait --after E`` (an update after ``E`` exists:
  the long-poll answers at once, so this is the start of ``wait`` plus its output), each
  ≤ 3× the interpreter.

Wall time is the median and the minimum of the runs; CPU is the child's user+system time
(its median), which a loaded machine inflates less than wall time. The machine's load
average is written beside the figures: the machine is shared. ``--compare-tree DIR`` adds
the same commands run from another checkout (``PYTHONPATH=DIR``), for before/after figures.
Only the unix socket and 127.0.0.1 are used; everything started is stopped.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import resource
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.harness import (
    BIN,
    PYTHON,
    REPO_ROOT,
    Lab,
    Mcpsubd,
    load_average,
    markdown_table,
    start_daemon,
    start_labs,
    workspace,
)

URI = "test://review/status"
RUN_TIMEOUT_S = 30.0
VERSION_TARGET = 1.5
CALL_TARGET = 3.0


def sigterm_to_interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def _env(state_dir: Path, tree: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MCPSUB_", "MCP_PROBE_"))}
    env["MCPSUB_STATE_DIR"] = str(state_dir)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # measure what an installed CLI does
    if tree:
        env["PYTHONPATH"] = tree
    return env


def _once(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall s, CPU s) of one run; it must exit 0."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        argv,
        env=env,
        cwd=str(REPO_ROOT),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=RUN_TIMEOUT_S,
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(
            f"{' '.join(argv)} exited {done.returncode}:\n{done.stdout!r}\n{done.stderr!r}"
        )
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return wall, cpu


def commands(lab_url: str, after: int, since: int) -> list[tuple[str, list[str], float | None]]:
    """(label, argv, target ratio) of every timed command."""
    ctl = str(BIN / "mcpsubctl")
    return [
        ("python -c pass", [str(PYTHON), "-c", "pass"], None),
        ("mcpsubctl --version", [ctl, "--version"], VERSION_TARGET),
        (
            "mcp-resource-subscriber --version",
            [str(BIN / "mcp-resource-subscriber"), "--version"],
            VERSION_TARGET,
        ),
        ("mcpsubctl read --uri U", [ctl, "read", "--uri", URI], CALL_TARGET),
        (f"mcpsubctl events --since {since}", [ctl, "events", "--since", str(since)], CALL_TARGET),
        ("mcpsubctl status", [ctl, "status"], CALL_TARGET),
        ("mcpsubctl list", [ctl, "list"], CALL_TARGET),
        (
            "mcpsubctl subscribe --url L --uri U",
            [ctl, "subscribe", "--url", lab_url, "--uri", URI],
            CALL_TARGET,
        ),
        (
            f"mcpsubctl wait --uri U --after {after}",
            [ctl, "wait", "--uri", URI, "--after", str(after), "--timeout-ms", "10000"],
            CALL_TARGET,
        ),
    ]


def measure(
    cmds: list[tuple[str, list[str], float | None]], env: dict[str, str], runs: int
) -> dict[str, tuple[list[float], list[float]]]:
    timings: dict[str, tuple[list[float], list[float]]] = {c[0]: ([], []) for c in cmds}
    for _label, argv, _target in cmds:
        _once(argv, env)  # warm-up: page cache, .pyc files
    for _ in range(runs):
        for label, argv, _target in cmds:
            wall, cpu = _once(argv, env)
            timings[label][0].append(wall)
            timings[label][1].append(cpu)
    return timings


def _prepare(daemon: Mcpsubd, lab: Lab, env: dict[str, str]) -> tuple[int, int]:
    """Subscribe (waiting for the first read); (an event id before the last update, a
    ``--since`` that returns a few events)."""
    ctl = str(BIN / "mcpsubctl")
    _once([ctl, "subscribe", "--url", lab.url, "--uri", URI, "--timeout-ms", "20000"], env)
    import json

    out = subprocess.run(
        [ctl, "events", "--json", "--type", "resource.updated", "--uri", URI],
        env=env,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=True,
    ).stdout
    updated = [e["id"] for e in json.loads(out)["events"]]
    if not updated:
        raise RuntimeError("no resource.updated event after subscribing")
    return updated[-1] - 1, max(0, updated[-1] - 3)


def render(
    rows: list[tuple[str, dict[str, tuple[list[float], list[float]]]]],
    targets: dict[str, float | None],
    runs: int,
    loads: tuple[str, str],
    elapsed: float,
) -> str:
    out = [
        "# `mcpsubctl` calls to a running daemon vs a bare interpreter",
        "",
        f"Generated by `bench/cli.py` on {datetime.date.today().isoformat()}: "
        f"{runs} runs of each command, round-robin after one warm-up, against a real "
        "`mcpsubd` on its unix socket (one subscription on the lab server). "
        f"Python {platform.python_version()}, {os.cpu_count()} CPUs; load average "
        f"{loads[0]} before, {loads[1]} after (the machine is shared: compare the ratios, "
        f"which are measured side by side). {elapsed:.0f} s in all.",
        "",
        "Ratio = the command's median wall time / `python -c pass`'s median. Targets: "
        f"`--version` ≤ {VERSION_TARGET}×, every daemon call ≤ {CALL_TARGET}×.",
        "",
    ]
    for title, timings in rows:
        floor = statistics.median(timings["python -c pass"][0])
        table_rows = []
        for label, (walls, cpus) in timings.items():
            target = targets.get(label)
            ratio = statistics.median(walls) / floor
            verdict = "" if target is None else ("ok" if ratio <= target else "OVER")
            table_rows.append(
                [
                    f"`{label}`",
                    f"{statistics.median(walls) * 1000:.1f}",
                    f"{min(walls) * 1000:.1f}",
                    f"{statistics.median(cpus) * 1000:.1f}",
                    f"{ratio:.2f}×",
                    "-" if target is None else f"≤ {target}× {verdict}",
                ]
            )
        out += [f"## {title}", ""]
        out += markdown_table(
            ["command", "wall median ms", "wall min ms", "CPU median ms", "ratio", "target"],
            table_rows,
            "lrrrrl",
        )
        out.append("")
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=20, help="timed runs per command")
    parser.add_argument("--out", type=Path, default=None, help="report (default results/cli.md)")
    parser.add_argument("--quick", action="store_true", help="5 runs; prints only")
    parser.add_argument(
        "--compare-tree",
        default=None,
        help="another checkout to time the same commands from (PYTHONPATH), e.g. the code "
        "before a change",
    )
    args = parser.parse_args()
    runs = 5 if args.quick else args.runs
    out = args.out or (None if args.quick else REPO_ROOT / "results" / "cli.md")
    signal.signal(signal.SIGTERM, sigterm_to_interrupt)
    started = time.perf_counter()
    load_before = load_average()
    with workspace() as (children, tmp):
        try:
            (lab,) = start_labs(children, 1, {})
            state = tmp / "state"
            daemon = Mcpsubd(state)
            daemon.migrate()
            start_daemon(children, state, daemon)
            env = _env(state, None)
            after, since = _prepare(daemon, lab, env)
            cmds = commands(lab.url, after, since)
            targets = {label: target for label, _argv, target in cmds}
            rows = [("This checkout", measure(cmds, env, runs))]
            if args.compare_tree:
                compare = measure(cmds, _env(state, args.compare_tree), runs)
                rows.append((f"The checkout in `{args.compare_tree}` (before)", compare))
        except KeyboardInterrupt:
            print("bench: interrupted; stopping everything", file=sys.stderr)
            return 130
        except Exception:
            for child in children.started:
                print(f"--- {child.name} (last lines)\n{child.output()}", file=sys.stderr)
            raise
    report = render(
        rows, targets, runs, (load_before, load_average()), time.perf_counter() - started
    )
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(report + "\n", encoding="utf-8")
    print(report)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
