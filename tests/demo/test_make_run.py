"""``make run`` runs ``python -m cli.demo``; this drives the same script to completion."""

from __future__ import annotations

import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

from tests.support.cli import REPO_ROOT, cli_env


def test_demo_shows_the_update_through_wait_and_a_verified_webhook() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "cli.demo", "--once", "--delay", "1"],
        env=cli_env(), cwd=str(REPO_ROOT), capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    wait_part = out.split("$ mcpsubctl wait", 1)[1].split("webhook deliveries:", 1)[0]
    assert "route subscription" in wait_part
    assert "status: reviewed" in wait_part
    hooks = out.split("webhook deliveries:", 1)[1]
    assert "[verified]" in hooks and "status: reviewed" in hooks
    assert "BAD SIGNATURE" not in out
    assert "stopped: lab server, mcpsubd and the receiver are down." in out


def test_demo_stops_cleanly_on_ctrl_c() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli.demo", "--delay", "1"],
        env=cli_env(), cwd=str(REPO_ROOT), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + 180
    for line in proc.stdout:
        lines.append(line)
        if "Ctrl-C stops" in line or time.monotonic() > deadline:
            break
    proc.send_signal(signal.SIGINT)
    rest, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, "".join(lines) + rest
    assert "stopped: lab server, mcpsubd and the receiver are down." in rest


def test_demo_cleans_up_when_its_reader_is_gone_and_ctrl_c_comes() -> None:
    """`make run | tee log`, then Ctrl-C: tee dies first, every later print hits EPIPE."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli.demo", "--delay", "1"],
        env=cli_env(), cwd=str(REPO_ROOT), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    workdir = None
    for line in proc.stdout:
        if "work dir:" in line:
            workdir = Path(line.split("work dir:", 1)[1].strip())
        if "mcpsubd: running" in line:
            break
    assert workdir is not None and workdir.exists()
    proc.stdout.close()  # the reader (tee) is gone
    proc.send_signal(signal.SIGINT)
    err = proc.stderr.read()
    proc.wait(timeout=60)
    assert "Traceback" not in err, err
    assert not workdir.exists(), f"{workdir} left behind"


def test_demo_lets_the_reader_change_the_resource_and_watch_it_in_the_console() -> None:
    """The demo prints `mcpsubctl ui` and a way to change the resource (its lab has a control
    surface). Run the lines it prints, as a reader would in another
    shell: the change arrives as a verified delivery, and the console's login links work."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli.demo", "--delay", "1"],
        env=cli_env(), cwd=str(REPO_ROOT), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    lines: queue.Queue[str] = queue.Queue()
    seen: list[str] = []
    threading.Thread(
        target=lambda: [lines.put(line) for line in proc.stdout or []], daemon=True
    ).start()

    def next_line(deadline: float) -> str:
        line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
        seen.append(line)
        return line

    try:
        deadline = time.monotonic() + 180
        while "Ctrl-C stops." not in next_line(deadline):
            pass
        turn = "".join(seen).split("Your turn", 1)[1]
        commands = [line.strip() for line in turn.splitlines() if line.startswith("  ")]
        export = next(c for c in commands if c.startswith("export MCPSUB_STATE_DIR="))
        ui = next(c for c in commands if "/mcpsubctl ui" in c).split("#", 1)[0].strip()
        change = next(c for c in commands if c.startswith("curl "))
        link = turn.split("Console login link (good once, for 2 minutes): ", 1)[1].split()[0]
        env = cli_env({"BROWSER": "true"})  # `--open` hands the link to `true`
        env.pop("MCPSUB_STATE_DIR", None)
        shell = subprocess.run(
            ["bash", "-c", f"set -e\n{export}\n{ui}\n{change}"],
            env=env, cwd=str(REPO_ROOT), capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert shell.returncode == 0, shell.stdout + shell.stderr
        # The change arrives while the demo runs, signed and verified.
        deadline = time.monotonic() + 60
        while not ("[verified]" in seen[-1] and "status: changed by hand" in seen[-1]):
            next_line(deadline)
        # Both login links (the printed one, and the one `mcpsubctl ui` printed) log in once.
        fresh = shell.stdout.strip().splitlines()[0]
        for url in (link, fresh):
            assert "/ui/login?ticket=" in url, url
            answer = httpx.get(url)
            assert answer.status_code == 303 and "mcpsub_session=" in answer.headers["set-cookie"]
            assert httpx.get(url).status_code == 401  # spent
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    assert proc.returncode == 0, "".join(seen)
