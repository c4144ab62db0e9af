"""``--trace FILE``: the wire transcript of the drop-in and ``mcpsubctl probe``/``call``
against the real lab (seed 003's canonical transcript). Every JSON-RPC message and SSE event
in order, HTTP status and headers, the token cut, the file 0600 and bounded. The httpx
transport's trace (https) is in tests/e2e/test_tls.py; both wrap the same seam."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from service.daemon.exitcodes import EXIT_CONFIG
from tests.support.cli import run_cli
from tests.support.daemon import daemon_factory  # noqa: F401
from tests.support.lab import LabServer
from tests.support.poll import until

PROG = "mcp-resource-subscriber"
REVIEW = "test://review/status"
TOKEN = "lab-bearer-7f3c9a"


@pytest.fixture(scope="module")
def lab() -> Iterator[LabServer]:
    with LabServer(
        {"MCP_TEST_UPDATE_DELAY_SECONDS": "0.3", "MCP_TEST_AUTH_TOKEN": TOKEN}
    ) as server:
        yield server


def lines_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def sequence(records: list[dict[str, Any]]) -> list[str]:
    """``type`` plus the JSON-RPC method (or ``result``) of each line, for order checks."""
    out: list[str] = []
    for record in records:
        message = record.get("message")
        what = ""
        if isinstance(message, dict):
            what = message.get("method") or ("result" if "result" in message else "error")
        out.append(f"{record['type']} {what}".strip())
    return out


def test_drop_in_subscribe_trace(lab: LabServer, tmp_path: Path) -> None:
    trace = tmp_path / "wire.jsonl"
    result = run_cli(
        PROG, "--url", lab.url, "--uri", REVIEW, "--trace", str(trace), "--json",
        env={"MCP_PROBE_AUTH_TOKEN": TOKEN},
    )  # fmt: skip
    assert result.code == 0, result
    assert stat.S_IMODE(trace.stat().st_mode) == 0o600
    text = trace.read_text(encoding="utf-8")
    assert TOKEN not in text
    records = lines_of(trace)
    order = sequence(records)
    assert order[:10] == [
        "trace-start",
        "request server/discover",
        "response result",
        "request resources/list",
        "response result",
        "request resources/read",
        "response result",
        "request subscriptions/listen",
        "stream-open",
        "sse notifications/subscriptions/acknowledged",
    ]
    assert "sse notifications/resources/updated" in order
    updated = order.index("sse notifications/resources/updated")
    assert order[updated + 1 : updated + 3] == ["request resources/read", "response result"]
    assert order[-1] == "stream-end"
    discover = records[1]
    assert discover["dir"] == "out" and discover["url"] == lab.url
    assert discover["headers"]["mcp-method"] == "server/discover"
    assert discover["headers"]["authorization"] == "***"
    assert records[2]["status"] == 200 and records[2]["dir"] == "in"
    assert records[8]["headers"]["content-type"].startswith("text/event-stream")
    stamps = [r["ms"] for r in records]
    assert stamps == sorted(stamps)
    assert all(r["t"].endswith("Z") for r in records)


def test_call_traces_in_both_clis(lab: LabServer, tmp_path: Path) -> None:
    for program in (PROG + " call", "mcpsubctl call"):
        trace = tmp_path / f"{program.split()[0]}.jsonl"
        result = run_cli(
            *program.split(), "--url", lab.url, "--tool", "echo_tool",
            "--args", '{"message":"hi","api_key":"k-123456"}', "--json", "--trace", str(trace),
            env={"MCP_PROBE_AUTH_TOKEN": TOKEN, "MCPSUB_AUTH_TOKEN": TOKEN},
        )  # fmt: skip
        assert result.code == 0, result
        records = lines_of(trace)
        assert sequence(records) == [
            "trace-start",
            "request server/discover",
            "response result",
            "request tools/call",
            "response result",
        ]
        arguments = records[3]["message"]["params"]["arguments"]
        assert arguments == {"message": "hi", "api_key": "***"}  # a credential-named key
        assert TOKEN not in trace.read_text()


def test_ctl_probe_trace_of_a_refused_listen(lab: LabServer, tmp_path: Path) -> None:
    lab.configure(failMethods={"subscriptions/listen": 503})
    try:
        trace = tmp_path / "probe.jsonl"
        result = run_cli(
            "mcpsubctl", "probe", "--url", lab.url, "--uri", REVIEW, "--json",
            "--trace", str(trace), env={"MCPSUB_AUTH_TOKEN": TOKEN},
        )  # fmt: skip
    finally:
        lab.configure(failMethods={})
    assert result.json["errorCode"] == "SUBSCRIPTION_FAILED", result
    records = lines_of(trace)
    assert sequence(records)[-4:] == [
        "request subscriptions/listen",
        "stream-open",
        "body",
        "stream-end",
    ]
    assert records[-3]["status"] == 503
    assert records[-2]["raw"]  # the plain-text body, as sent
    assert TOKEN not in trace.read_text()


def test_the_trace_is_bounded(lab: LabServer, tmp_path: Path) -> None:
    trace = tmp_path / "small.jsonl"
    trace.write_text("an older file, world-readable\n")
    trace.chmod(0o644)
    result = run_cli(
        PROG, "--url", lab.url, "--uri", REVIEW, "--trace", str(trace), "--json",
        env={"MCP_PROBE_AUTH_TOKEN": TOKEN, "MCPSUB_TRACE_MAX_BYTES": "2000"},
    )  # fmt: skip
    assert result.code == 0, result  # the run goes on; only the file stops
    assert stat.S_IMODE(trace.stat().st_mode) == 0o600
    records = lines_of(trace)
    assert records[0]["type"] == "trace-start"
    assert records[-1] == {**records[-1], "type": "trace-truncated", "maxBytes": 2000}
    body = trace.read_bytes()
    marker = len(body.splitlines(keepends=True)[-1])
    assert len(body) - marker <= 2000


def test_an_unusable_trace_path_is_a_usage_error(lab: LabServer, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.jsonl"
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)
    before = len(lab.log())
    for path in (tmp_path / "missing-dir" / "t.jsonl", link):
        dropin = run_cli(PROG, "--url", lab.url, "--uri", REVIEW, "--trace", str(path), "--json")
        assert (dropin.code, dropin.json["errorCode"]) == (1, "INTERNAL_ERROR"), dropin
        assert "--trace" in dropin.stderr and "Traceback" not in dropin.stderr
        ctl = run_cli("mcpsubctl", "probe", "--url", lab.url, "--uri", REVIEW, "--trace", str(path))
        assert ctl.code == 2 and "--trace" in ctl.stderr, ctl
    assert not target.exists()
    sent = [e for e in lab.log()[before:] if e.get("event") == "mcp.request"]
    assert sent == [], "nothing is sent when the trace cannot be written"
    assert os.path.islink(link)


def test_mcpsubd_traces_every_link_with_trace_file(
    daemon_factory: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The daemon's documented setting ``trace_file`` (MCPSUB_TRACE_FILE): the same transcript
    for every link, each line naming its server's URL."""
    trace = tmp_path / "daemon-wire.jsonl"
    with LabServer({"MCP_TEST_UPDATE_DELAY_SECONDS": "0.3"}) as plain_lab:
        d = daemon_factory(env={"MCPSUB_TRACE_FILE": str(trace)})
        sub = d.ctl("subscribe", "--url", plain_lab.url, "--uri", REVIEW, "--json")
        assert sub.code == 0, sub
        plain_lab.wait_event("resources.read", count=2, timeout=30)  # the re-read after v2
        until(
            "the update in the transcript",
            lambda: "notifications/resources/updated" in trace.read_text(),
            timeout=30,
        )
        d.stop()
    assert stat.S_IMODE(trace.stat().st_mode) == 0o600
    records = lines_of(trace)
    assert records[0] == {**records[0], "type": "trace-start", "program": "mcpsubd"}
    order = sequence(records)
    for step in (
        "request server/discover",
        "request subscriptions/listen",
        "stream-open",
        "sse notifications/subscriptions/acknowledged",
        "sse notifications/resources/updated",
    ):
        assert step in order, (step, order)
    assert order.index("sse notifications/subscriptions/acknowledged") > order.index(
        "request subscriptions/listen"
    )
    assert all(r["url"] == plain_lab.url for r in records[1:] if "url" in r)


def test_mcpsubd_refuses_an_unusable_trace_file(tmp_path: Path) -> None:
    result = run_cli(
        "mcpsubd", "--state-dir", str(tmp_path / "state"),
        env={"MCPSUB_TRACE_FILE": str(tmp_path / "no-such-dir" / "t.jsonl")}, timeout=30,
    )  # fmt: skip
    assert result.code == EXIT_CONFIG, result
    assert "trace_file" in result.stderr and "Traceback" not in result.stderr
