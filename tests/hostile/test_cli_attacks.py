"""Both CLIs against the hostile server: the named error, bounded memory, bounded time.

Peak RSS is sampled from ``VmHWM`` in ``/proc/PID/status`` while the CLI runs. Before the
fixes a ``gzip, gzip`` read took a CLI past 1 GB.
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.support.cli import BIN, cli_env
from tests.support.hostile import HostileServer, peak_rss_kib

RSS_BOUND_KIB = 150 * 1024
"""A CLI run stays well under this (about 30 MB idle; the bomb inflates to 512 MiB)."""


@dataclass
class Measured:
    code: int
    stdout: str
    stderr: str
    peak_rss_kib: int

    @property
    def json(self) -> Any:
        return json.loads(self.stdout.strip().splitlines()[-1])


def run_measured(program: str, *args: str, env: dict[str, str] | None = None) -> Measured:
    """Run a CLI and sample its ``VmHWM`` (peak RSS of its own address space) from /proc.

    Not ``wait4``'s ``ru_maxrss``: Linux folds the forking parent's peak (this big pytest
    process) into it at exec. VmHWM only grows, so the last sample before exit is the peak
    up to a 2 ms sampling gap; a bomb that is inflated takes seconds, many samples.
    """
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(
            [str(BIN / program), *args],
            env=cli_env(env),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            text=True,
        )
        peak = 0
        while proc.poll() is None:
            with contextlib.suppress(OSError, RuntimeError):
                peak = max(peak, peak_rss_kib(proc.pid))
            time.sleep(0.002)
        out.seek(0)
        err.seek(0)
        return Measured(proc.returncode, out.read(), err.read(), peak)


@pytest.fixture(scope="module")
def hostile() -> Iterator[HostileServer]:
    server = HostileServer({"HOSTILE_TRICKLE_S": "0.05"}).start()
    yield server
    server.stop()


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("bomb", "2 stacked content codings"),
        ("bomb1", "larger than 16777216 bytes (after decompression)"),
        ("deep-read", "over-nested JSON"),
    ],
)
def test_ctl_probe_refuses_hostile_reads(hostile: HostileServer, mode: str, message: str) -> None:
    url = hostile.url(mode)
    run = run_measured(
        "mcpsubctl", "probe", "--url", url, "--uri", f"hostile://{mode}/doc", "--json"
    )
    assert run.json["errorCode"] == "PROTOCOL_ERROR", run
    assert message in run.stderr
    assert run.code == 4
    assert "Traceback" not in run.stderr
    assert run.peak_rss_kib < RSS_BOUND_KIB, run.peak_rss_kib


@pytest.mark.parametrize("mode", ["bomb", "bomb1", "deep-read"])
def test_drop_in_refuses_hostile_reads(hostile: HostileServer, mode: str) -> None:
    url = hostile.url(mode)
    run = run_measured(
        "mcp-resource-subscriber", "--url", url, "--uri", f"hostile://{mode}/doc", "--json"
    )
    # The drop-in keeps the TypeScript CLI's code set: protocol failures are INTERNAL_ERROR.
    assert run.json["errorCode"] == "INTERNAL_ERROR", run
    assert run.code == 1
    assert "subscribe-probe failed: resources/read:" in run.stderr
    assert "Traceback" not in run.stderr
    assert run.peak_rss_kib < RSS_BOUND_KIB, run.peak_rss_kib


def test_drop_in_discovery_has_a_deadline_against_a_trickling_server(
    hostile: HostileServer,
) -> None:
    run = run_measured(
        "mcp-resource-subscriber",
        "--url",
        hostile.url("trickle-discover"),
        "--uri",
        "hostile://trickle-discover/doc",
        "--json",
        env={"MCP_PROBE_PHASE_TIMEOUT_MS": "600"},
    )
    assert run.json["errorCode"] == "INTERNAL_ERROR"
    assert "server/discover: no complete answer" in run.stderr
    assert "within 0.6 s" in run.stderr


def test_ctl_probe_timeout_message_is_rounded(hostile: HostileServer) -> None:
    """The budget left for a request is printed rounded, not `0.79319 s`."""
    run = run_measured(
        "mcpsubctl", "probe", "--url", hostile.url("trickle-discover"), "--uri",
        "hostile://trickle-discover/doc", "--timeout-ms", "800", "--json",
    )  # fmt: skip
    assert run.json["errorCode"] == "REQUEST_TIMEOUT", run.stderr
    found = re.findall(r"(?:within|after) (\S+) s\b", run.stderr)
    assert found and all(re.fullmatch(r"\d+(\.\d)?", value) for value in found), run.stderr


def test_ctl_probe_on_a_trickling_listen_ends_at_its_budget(hostile: HostileServer) -> None:
    uri = "hostile://trickle/doc"
    run = run_measured(
        "mcpsubctl",
        "probe",
        "--url",
        hostile.url("trickle"),
        "--uri",
        uri,
        "--timeout-ms",
        "800",
        "--json",
    )
    assert run.json["errorCode"] == "NOTIFICATION_TIMEOUT"
    assert run.json["listenAcknowledged"] is True


def test_ctl_probe_rejects_wrong_ids(hostile: HostileServer) -> None:
    url = hostile.url("wrong-ids")
    run = run_measured(
        "mcpsubctl", "probe", "--url", url, "--uri", "hostile://wrong-ids/doc", "--json"
    )
    assert run.json["errorCode"] == "PROTOCOL_ERROR"
    assert "does not match request" in run.stderr


@pytest.mark.parametrize("program", ["mcpsubctl", "mcp-resource-subscriber"])
def test_deep_args_are_invalid_args(program: str) -> None:
    # 50,000 deep: a single argv string is capped at 128 KiB by the kernel.
    deep = '{"a": ' + "[" * 50_000 + "]" * 50_000 + "}"
    args = ["call"]
    run = run_measured(
        program, *args, "--url", "http://127.0.0.1:9/mcp", "--tool", "t", "--args", deep
    )
    assert "INVALID_ARGS" in run.stdout + run.stderr
    assert "Traceback" not in run.stderr
    assert len(run.stderr) < 1000, "the rejected argument is not echoed in full"
    assert run.code in (2, 3)
