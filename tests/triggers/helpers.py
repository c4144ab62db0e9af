"""A real program for the trigger tests, and helpers around the real daemon.

``RECORDER`` is the program every end-to-end test runs: it writes what it was given (argv,
stdin, its whole environment) to ``<dir>/<run>-<attempt>.json``, then does what the test's
control files say: block until ``release`` exists, exit with the status in ``exit``, start
a child that sleeps and write its pid, print a lot.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from tests.support.daemon import Daemon
from tests.support.poll import until

LONG = 90.0
"""Deadline of a wait in these tests: generous, since each start is a real process on a
machine that may be busy (no wait sleeps longer than its condition takes)."""
FAST = {
    "MCPSUB_TRIGGER_RETRY_BASE_S": "0.05",
    "MCPSUB_TRIGGER_RETRY_CAP_S": "0.2",
    "MCPSUB_TRIGGER_KILL_GRACE_S": "2",
}

RECORDER = r"""
import json, os, subprocess, sys, time
from pathlib import Path

here = Path(sys.argv[1])
name = f"{os.environ.get('MCPSUB_RUN_ID')}-{os.environ.get('MCPSUB_ATTEMPT')}"
stdin = sys.stdin.buffer.read().decode()
record = {"argv": sys.argv, "stdin": stdin, "env": dict(os.environ), "pid": os.getpid()}
(here / f"{name}.tmp").write_text(json.dumps(record))
os.replace(here / f"{name}.tmp", here / f"{name}.json")
with open(here / "log", "a") as log:
    log.write(f"start {name}\n")
if (here / "child").exists():
    child = subprocess.Popen(["sleep", "300"])
    (here / f"{name}.child").write_text(str(child.pid))
    time.sleep(300)
if (here / "noise").exists():
    sys.stdout.write("x" * int((here / "noise").read_text()))
print("out: token https://user:hunter2@example.com/x?access_token=abc \x1b[31mred")
print("err: value of SECRET_VALUE is " + os.environ.get("SECRET_VALUE", "-"), file=sys.stderr)
while (here / "hold").exists() and not (here / "release").exists():
    time.sleep(0.02)
with open(here / "log", "a") as log:
    log.write(f"end {name}\n")
status = here / "exit"
sys.exit(int(status.read_text()) if status.exists() else 0)
"""


def recorder(tmp: Path) -> tuple[list[str], Path]:
    """The command line of a recorder writing into a fresh directory, and that directory."""
    out = tmp / "records"
    out.mkdir(parents=True, exist_ok=True)
    script = tmp / "recorder.py"
    script.write_text(RECORDER)
    return [sys.executable, str(script), str(out)], out


def records(out: Path) -> dict[str, dict[str, Any]]:
    """What the recorder wrote, by ``<run>-<attempt>``."""
    found = {}
    for path in sorted(out.glob("*.json")):
        found[path.stem] = json.loads(path.read_text())
    return found


def put(lab: Any, uri: str, text: str) -> None:
    lab.control(
        "PUT", "/lab/resources", json={"uri": uri, "text": text, "notify": True}
    ).raise_for_status()


def subscribe(d: Daemon, url: str, uri: str) -> dict[str, Any]:
    response = d.api("POST", "/v1/subscriptions", json={"url": url, "uri": uri})
    assert response.status_code in (200, 201), response.text
    return response.json()


def add_trigger(d: Daemon, command: list[str], **fields: Any) -> dict[str, Any]:
    body = {"program": command[0], "args": command[1:], **fields}
    response = d.api("POST", "/v1/triggers", json=body)
    assert response.status_code == 201, response.text
    return response.json()


def runs(d: Daemon, trigger_id: int) -> list[dict[str, Any]]:
    response = d.api("GET", "/v1/triggers/runs", params={"trigger": trigger_id, "limit": 1000})
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = response.json()["runs"]
    return found


def wait_runs(d: Daemon, trigger_id: int, predicate: Any, timeout: float = 90.0) -> Any:
    def check() -> Any:
        found = runs(d, trigger_id)
        return found if predicate(found) else None

    return until(f"runs of trigger {trigger_id}", check, timeout)


def run_detail(d: Daemon, run_id: int) -> dict[str, Any]:
    response = d.api("GET", f"/v1/triggers/runs/{run_id}")
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found
