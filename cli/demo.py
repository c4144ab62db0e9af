"""``make run``: the whole product on one machine, in one terminal, in under a minute.

Starts the reference lab server, a webhook receiver that verifies every signature, and
``mcpsubd`` on a throw-away state directory; subscribes to ``test://review/status``; then
shows the resource's update arriving twice: through ``mcpsubctl wait`` and as a signed
webhook delivery. Then it is the reader's turn: it prints a login link to the web console
(``mcpsubctl ui``) and a ``curl`` line that changes the resource through the lab's control
surface (on for the demo's lab), and prints each webhook delivery as it arrives. Everything
runs on 127.0.0.1 and stops on Ctrl-C (``--once`` stops by itself once both paths have
delivered, which is what the first test of this script uses).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from cli.receiver import Receiver, delivery_line, text_of

BIN = Path(sys.executable).parent
URI = "test://review/status"
LISTENING = re.compile(r"listening on (http://127\.0\.0\.1:\d+/mcp)")


def say(text: str = "") -> None:
    """Print a demo line; a reader that went away (``make run | tee log`` + Ctrl-C kills tee
    first) must not stop the demo from cleaning up, so later lines go to /dev/null."""
    try:
        print(text, flush=True)
    except (BrokenPipeError, ValueError):
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)


def ctl(env: dict[str, str], *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "mcpsubctl"), *args], env=env, capture_output=True, text=True, timeout=timeout
    )


def shown_bin() -> str:
    """Where the programs are, as the reader types it: ``.venv/bin`` from the repository's
    root (where ``make run`` runs), else the absolute path."""
    try:
        relative = BIN.relative_to(Path.cwd())
    except ValueError:
        return str(BIN)
    return str(relative) if str(relative) != "." else "."


def your_turn(env: dict[str, str], lab_url: str) -> list[str]:
    """What the reader can do while the demo runs: open the console, change the resource."""
    state = env["MCPSUB_STATE_DIR"]
    programs = shown_bin()
    body = json.dumps({"uri": URI, "text": "status: changed by hand"})
    change = (
        f"curl -s -X PUT {lab_url.removesuffix('/mcp')}/lab/resources"
        f" -H 'Content-Type: application/json' -d {shlex.quote(body)}"
    )
    lines = [
        "Your turn, in another shell at the repository's root (the demo keeps running):",
        f"  export MCPSUB_STATE_DIR={shlex.quote(state)}",
        f"  {programs}/mcpsubctl ui --open    # the web console, through a one-time login link",
        f"  {change}",
        "Each change shows up in the console without a reload, and below as a webhook delivery.",
    ]
    link = ctl(env, "ui")
    if link.returncode == 0 and link.stdout.strip():
        lines.append(f"Console login link (good once, for 2 minutes): {link.stdout.strip()}")
    lines.append(f"Also: {programs}/mcpsubctl status / events / deliveries list / wait --uri {URI}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make run", description=__doc__)
    parser.add_argument(
        "--once", action="store_true", help="exit when the demo has shown both paths"
    )
    parser.add_argument("--delay", type=float, default=3.0, help="seconds until the lab's update")
    args = parser.parse_args(argv)

    workdir = Path(tempfile.mkdtemp(prefix="mcpsub-demo-"))
    env = {**os.environ, "MCPSUB_STATE_DIR": str(workdir / "state"), "PYTHONUNBUFFERED": "1"}
    for name in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "MCPSUB_API"):
        env.pop(name, None)
    children: list[subprocess.Popen[str]] = []
    receiver: Receiver | None = None
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        say("mcpsub demo: lab server + mcpsubd + a webhook receiver, all on 127.0.0.1")
        say(f"  work dir: {workdir}")
        lab = subprocess.Popen(
            [sys.executable, "-m", "labserver", "--port", "0"],
            env={**env, "MCP_TEST_UPDATE_DELAY_SECONDS": str(args.delay), "MCP_TEST_LOG_LEVEL": "warn",
                 "MCP_TEST_CONTROL": "1"},
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        children.append(lab)
        assert lab.stdout is not None
        lab_url = None
        for line in lab.stdout:
            match = LISTENING.search(line)
            if match:
                lab_url = match.group(1)
                break
        if lab_url is None:
            say("the lab server did not start")
            return 1
        threading.Thread(target=lambda: [None for _ in lab.stdout or []], daemon=True).start()
        say(
            f"  lab server: {lab_url}  (its resource {URI} changes {args.delay:g} s after a listen opens)"
        )

        receiver = Receiver()  # the secret comes with the target below
        say(f"  webhook receiver: {receiver.url}")

        log_file = open(workdir / "mcpsubd.log", "w")  # noqa: SIM115 - lives as long as the daemon
        daemon = subprocess.Popen(
            [str(BIN / "mcpsubd")], env=env, stdout=log_file, stderr=subprocess.STDOUT, text=True
        )
        children.append(daemon)
        deadline = time.monotonic() + 60
        while ctl(env, "status", "--json").returncode != 0:
            if daemon.poll() is not None or time.monotonic() > deadline:
                say(f"mcpsubd did not start; see {workdir / 'mcpsubd.log'}")
                return 1
            time.sleep(0.1)
        say(f"  mcpsubd: running, logs in {workdir / 'mcpsubd.log'}")

        added = ctl(env, "webhook", "add", receiver.url, "--uri", URI, "--json")
        if added.returncode != 0:
            say(f"webhook add failed: {added.stdout}{added.stderr}")
            return 1
        receiver.secret = json.loads(added.stdout)["secret"]
        say(
            "$ mcpsubctl webhook add "
            + receiver.url
            + f" --uri {URI}   (secret kept by the receiver)"
        )

        sub = ctl(env, "subscribe", "--url", lab_url, "--uri", URI)
        say(f"$ mcpsubctl subscribe --url {lab_url} --uri {URI}")
        if sub.returncode != 0:
            say(sub.stdout + sub.stderr)
            return 1
        while True:
            read = ctl(env, "read", "--uri", URI, "--json")
            if read.returncode == 0:
                break
            if time.monotonic() > deadline:
                say(read.stdout + read.stderr)
                return 1
            time.sleep(0.1)
        current = json.loads(read.stdout)
        say(f"current content (revision {current.get('revision')}):")
        say("  " + str(current.get("text", "")).replace("\n", "\n  "))

        # Wait for the update after the first revision, race-free: on a busy machine the lab's
        # change may land before `wait` starts (or even before the read above), and a wait
        # --after that revision's event still returns it.
        page = ctl(env, "events", "--uri", URI, "--type", "resource.updated", "--json")
        first = (
            (json.loads(page.stdout)["events"] or [{}])[0].get("id")
            if page.returncode == 0
            else None
        )
        after = ["--after", str(first)] if first else []
        say(f"$ mcpsubctl wait --uri {URI} {' '.join(after)}".rstrip())
        waited = ctl(env, "wait", "--uri", URI, *after, "--timeout-ms", "60000", timeout=90)
        say("  " + waited.stdout.strip().replace("\n", "\n  "))
        if waited.returncode != 0:
            say(waited.stderr)
            return 1

        say("webhook deliveries:")
        seen_reviewed = False
        while not seen_reviewed and time.monotonic() < deadline + 60:
            try:
                payload = receiver.deliveries.get(timeout=1)
            except queue.Empty:
                continue
            say(delivery_line(payload))
            seen_reviewed = "status: reviewed" in text_of(payload)
        if not seen_reviewed:
            say("no webhook delivery of the update arrived")
            return 1
        say("")
        say("Both paths delivered 'status: reviewed'.")
        if args.once:
            return 0
        for line in your_turn(env, lab_url):
            say(line)
        say("Ctrl-C stops.")
        say("webhook deliveries from now on:")
        while not stop.is_set():
            try:
                say(delivery_line(receiver.deliveries.get(timeout=0.5)))
            except queue.Empty:
                continue
        return 0
    except (KeyboardInterrupt, BrokenPipeError):
        return 0
    except subprocess.TimeoutExpired as exc:
        say(f"the demo gave up: {exc}")
        return 1
    finally:
        # Cleanup must finish: a second Ctrl-C does not cut it short (each step is bounded).
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        for child in reversed(children):
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        for child in reversed(children):
            try:
                child.wait(10)
            except subprocess.TimeoutExpired:
                child.kill()
        if receiver is not None:
            receiver.stop()
        shutil.rmtree(workdir, ignore_errors=True)
        say("stopped: lab server, mcpsubd and the receiver are down.")


if __name__ == "__main__":
    raise SystemExit(main())
