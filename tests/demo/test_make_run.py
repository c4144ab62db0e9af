"""``make run`` runs ``python -m cli.demo``; this drives the same script to completion."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

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
