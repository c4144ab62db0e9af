"""Issue 11 point 9: the OpenAPI document says what the API does.

Schemathesis (its CLI, as users would run it) fuzzes a real ``mcpsubd`` over loopback TCP
from the daemon's own ``/openapi.json`` with every check: no 5xx, every response matches
its documented status and schema, schema-valid requests are accepted, schema-invalid ones
refused, ``405`` carries the right ``Allow``. Deterministic generation, a bounded number of
examples per operation, one worker: the same cases every run, in well under a minute.

``schemathesis_hooks.py`` points every generated URL at ``127.0.0.1:9`` (nothing leaves
the machine) and caps ``/v1/wait``'s long-poll; ``schemathesis.toml`` lists 408 among the
accepted answers of a valid long-poll. ``/v1/events/stream`` is left out: an SSE stream
never ends, so there is no response to check (tests/api/test_sse.py covers it).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.support.cli import cli_env

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
MAX_EXAMPLES = "15"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_api_matches_its_openapi_document(tmp_path: Path) -> None:
    port = _free_port()
    state = tmp_path / "state"
    env = cli_env(
        {
            "MCPSUB_STATE_DIR": str(state),
            "MCPSUB_API": f"tcp://127.0.0.1:{port}",
            "MCPSUB_LOG_FORMAT": "json",
            "MCPSUB_BACKOFF_BASE_S": "0.05",
            "MCPSUB_BACKOFF_CAP_S": "0.5",
        }
    )
    log_path = tmp_path / "mcpsubd.log"
    log = log_path.open("w")
    daemon = subprocess.Popen(
        [str(BIN / "mcpsubd")],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            assert daemon.poll() is None, log_path.read_text()
            try:
                if httpx.get(base + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.05)
        token = (state / "api.token").read_text().strip()
        result = subprocess.run(
            [
                str(BIN / "st"),
                "--config-file",
                str(HERE / "schemathesis.toml"),
                "run",
                base + "/openapi.json",
                "-H",
                f"Authorization: Bearer {token}",
                "-H",
                "Host: 127.0.0.1",
                "--checks",
                "all",
                "--exclude-path",
                "/v1/events/stream",
                "--max-examples",
                MAX_EXAMPLES,
                "--generation-deterministic",
                "--workers",
                "1",
                "--request-timeout",
                "10",
                "--report-dir",
                str(tmp_path / "report"),
            ],
            env={
                **os.environ,
                "SCHEMATHESIS_HOOKS": "schemathesis_hooks",
                "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
                "NO_COLOR": "1",
            },
            cwd=tmp_path,  # its .schemathesis cache lands there, not in the repository
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
        assert " passed" in result.stdout and "failures" not in result.stdout.lower()
    finally:
        daemon.terminate()
        daemon.wait(30)
        log.close()
    assert daemon.returncode == 0
    lines = log_path.read_text().splitlines()
    assert token not in "\n".join(lines)
    assert not [line for line in lines if '"level": "error"' in line or "Traceback" in line]
