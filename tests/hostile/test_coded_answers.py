"""Servers that compress although we ask for ``Accept-Encoding: identity``.

The daemon's re-reads and ``probe --follow`` go through the shared lean path, which asks for
no coding (inflating costs CPU on every re-read). Some frameworks and proxies gzip every
JSON answer regardless; such a server used to get ``PROTOCOL_ERROR`` on every read. One
layer is now undone through the same bounded decoder as everywhere else (16 MiB, one
layer): these tests drive the real daemon and CLI against the hostile server's ``gzip`` and
``deflate`` modes, and the zoo test (test_daemon_attacks.py) keeps the bombs refused.
"""

from __future__ import annotations

import pytest

from tests.hostile.helpers import links, subscribe, wait_text
from tests.support.cli import run_cli
from tests.support.poll import until


@pytest.mark.parametrize("mode", ["gzip", "deflate"])
def test_daemon_reads_a_server_that_compresses_anyway(
    daemon_factory, hostile_factory, mode: str
) -> None:
    hostile = hostile_factory({"HOSTILE_KEEPALIVE_S": "0.2"})
    d = daemon_factory()
    uri = f"hostile://{mode}/doc"
    subscribe(d, hostile.url(mode), uri)
    wait_text(d, uri, "initial")
    until("the listen stream is acknowledged", lambda: links(d)[hostile.url(mode)]["streamOpen"])
    hostile.set(mode, "second, compressed")  # notifies the open stream: a re-read
    wait_text(d, uri, "second, compressed")
    link = links(d)[hostile.url(mode)]
    assert link["lastErrorCode"] is None, link
    assert hostile.stats()[f"{mode}.served"] >= 2


@pytest.mark.parametrize("mode", ["gzip", "deflate"])
def test_probe_follow_reads_a_server_that_compresses_anyway(hostile_factory, mode: str) -> None:
    hostile = hostile_factory()
    uri = f"hostile://{mode}/doc"
    run = run_cli(
        "mcpsubctl",
        "probe",
        "--url",
        hostile.url(mode),
        "--uri",
        uri,
        "--follow",
        "--max-events",
        "1",
        "--timeout-ms",
        "20000",
    )
    assert run.code == 0, run
    (line,) = run.ndjson
    assert line["type"] == "read" and line["text"] == "initial", line
