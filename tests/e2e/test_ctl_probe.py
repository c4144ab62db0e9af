"""``mcpsubctl probe`` / ``call``: the same engine with several URIs, --follow, exit codes."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.cli import finish, run_cli, spawn_cli
from tests.support.lab import LabServer

REVIEW = "test://review/status"


def _add(lab: LabServer, uri: str, text: str, notify: bool = True) -> None:
    lab.control(
        "PUT", "/lab/resources", json={"uri": uri, "text": text, "notify": notify}
    ).raise_for_status()


def test_probe_json_has_probe_keys_plus_extras(review_lab: LabServer) -> None:
    result = run_cli("mcpsubctl", "probe", "--url", review_lab.url, "--uri", REVIEW, "--json")
    assert result.code == 0, result.stderr
    data = result.json
    assert list(data)[:12] == [
        "route", "serverUrl", "resourceUri", "listenAcknowledged", "honoredUris",
        "notificationReceived", "notificationCount", "closeReason", "errorCode",
        "initialText", "finalText", "recommendedNextAction",
    ]  # fmt: skip
    assert data["resourceUris"] == [REVIEW]
    assert data["notificationUri"] == REVIEW


def test_several_uris_share_one_listen(lab_server_factory) -> None:
    lab = lab_server_factory({"MCP_TEST_UPDATE_DELAY_SECONDS": "600"})
    for n in (1, 2, 3):
        _add(lab, f"test://multi/{n}", f"item {n}: open")
    proc = spawn_cli(
        "mcpsubctl",
        "probe",
        "--url",
        lab.url,
        "--uri",
        "test://multi/1",
        "--uri",
        "test://multi/2",
        "--uri",
        "test://multi/3",
        "--json",
    )
    acks = lab.wait_event("listen.acknowledged", timeout=10)
    _add(lab, "test://multi/2", "item 2: closed")
    result = finish(proc)
    assert result.code == 0, result.stderr
    data = result.json
    assert data["resourceUri"] == "test://multi/2"
    assert data["finalText"] == "item 2: closed"
    assert sorted(data["honoredUris"]) == ["test://multi/1", "test://multi/2", "test://multi/3"]
    assert len([e for e in lab.log() if e["event"] == "listen.opened"]) == 1
    assert len(acks) == 1


def test_sub_resource_notification_is_reported_and_read(lab_server_factory) -> None:
    """Spec §3.3: a server may report a sub-resource; mcpsubctl reads it instead of dropping it."""
    lab = lab_server_factory({"MCP_TEST_UPDATE_DELAY_SECONDS": "600"})
    _add(lab, "file:///dir", "a directory")
    _add(lab, "file:///dir/a.txt", "old")
    proc = spawn_cli(
        "mcpsubctl",
        "probe",
        "--url",
        lab.url,
        "--uri",
        "file:///dir",
        "--json",
        "--timeout-ms",
        "10000",
    )
    lab.wait_event("listen.acknowledged", timeout=10)
    _add(lab, "file:///dir/a.txt", "new", notify=False)
    lab.control("POST", "/lab/notify", json={"uri": "file:///dir/a.txt", "via": "file:///dir"})
    result = finish(proc)
    data = result.json
    assert result.code == 0, result.stderr
    assert data["notificationUri"] == "file:///dir/a.txt"
    assert data["resourceUri"] == "file:///dir/a.txt"
    assert data["finalText"] == "new"


@pytest.mark.parametrize(
    ("config", "code", "exit_code"),
    [
        ({"dishonorUris": [REVIEW]}, "SUBSCRIPTION_NOT_HONORED", 8),
        ({"refuseListen": True}, "SUBSCRIPTION_FAILED", 8),
        ({"failMethods": {"subscriptions/listen": 503}}, "SUBSCRIPTION_FAILED", 8),
        ({"advertiseSubscribe": False}, "SUBSCRIPTION_NOT_HONORED", 8),
        ({"legacyMode": "method-not-found"}, "PROTOCOL_UNSUPPORTED", 4),
        ({"authToken": "s3cret"}, "AUTH_FAILED", 3),
        ({"failMethods": {"server/discover": 503}}, "SERVER_ERROR", 4),
    ],
)
def test_exit_code_per_failure_class(
    lab_server: LabServer, config, code: str, exit_code: int
) -> None:
    lab_server.configure(**config)
    result = run_cli("mcpsubctl", "probe", "--url", lab_server.url, "--uri", REVIEW, "--json")
    assert (result.json["errorCode"], result.code) == (code, exit_code)


@pytest.mark.parametrize(
    ("mode", "code", "exit_code"),
    [
        ("not-initialized", "PROTOCOL_UNSUPPORTED", 4),
        ("missing-session", "PROTOCOL_UNSUPPORTED", 4),
        ("discover-2025", "PROTOCOL_UNSUPPORTED", 4),
        ("unsupported-version", "PROTOCOL_UNSUPPORTED", 4),
        ("not-found", "ENDPOINT_NOT_FOUND", 7),
    ],
)
def test_pre_2026_servers(lab_server: LabServer, mode: str, code: str, exit_code: int) -> None:
    """Whatever a 2025-era server answers, mcpsubctl names the era (or the path)."""
    lab_server.configure(legacyMode=mode)
    result = run_cli("mcpsubctl", "probe", "--url", lab_server.url, "--uri", REVIEW, "--json")
    assert (result.json["errorCode"], result.code) == (code, exit_code), result
    hint = result.json["recommendedNextAction"]
    assert ("path" in hint) if mode == "not-found" else ("2026-07-28" in hint)
    assert "Traceback" not in result.stderr
    lines = run_cli("mcpsubctl", "probe", "--url", lab_server.url, "--uri", REVIEW)
    assert lines.field("error-code") == code
    call = run_cli("mcpsubctl", "call", "--url", lab_server.url, "--tool", "echo_tool", "--json")
    assert (call.json["errorCode"], call.code) == (code, exit_code)


def test_timeout_bounds_every_phase(lab_server: LabServer) -> None:
    lab_server.configure(silentMethods=["server/discover"])
    started = time.monotonic()
    result = run_cli(
        "mcpsubctl",
        "probe",
        "--url",
        lab_server.url,
        "--uri",
        REVIEW,
        "--timeout-ms",
        "700",
        "--json",
    )
    assert time.monotonic() - started < 8
    assert (result.json["errorCode"], result.code) == ("REQUEST_TIMEOUT", 6)


def test_not_found_and_timeout_exit_codes(lab_server_factory) -> None:
    lab = lab_server_factory({"MCP_TEST_UPDATE_DELAY_SECONDS": "600"})
    missing = run_cli("mcpsubctl", "probe", "--url", lab.url, "--uri", "test://none", "--json")
    assert (missing.json["errorCode"], missing.code) == ("RESOURCE_NOT_FOUND", 7)
    waited = run_cli(
        "mcpsubctl", "probe", "--url", lab.url, "--uri", REVIEW, "--json", "--timeout-ms", "1500"
    )
    assert (waited.json["errorCode"], waited.code) == ("NOTIFICATION_TIMEOUT", 6)


def test_disconnected_exit_code(lab_server_factory) -> None:
    lab = lab_server_factory({"MCP_TEST_UPDATE_DELAY_SECONDS": "600"})
    lab.configure(dropAfterAckMs=100)
    result = run_cli(
        "mcpsubctl", "probe", "--url", lab.url, "--uri", REVIEW, "--json", "--timeout-ms", "20000"
    )
    assert (result.json["errorCode"], result.code) == ("SUBSCRIPTION_DISCONNECTED", 9)


def test_usage_errors(lab_server: LabServer) -> None:
    no_url = run_cli("mcpsubctl", "probe", "--uri", REVIEW, "--json")
    assert (no_url.json["errorCode"], no_url.code) == ("SERVER_URL_UNKNOWN", 2)
    no_uri = run_cli("mcpsubctl", "probe", "--url", lab_server.url)
    assert no_uri.code == 2
    assert no_uri.field("error-code") == "RESOURCE_URI_REQUIRED"
    bad = run_cli(
        "mcpsubctl", "probe", "--url", lab_server.url, "--uri", REVIEW, "--bogus", "--json"
    )
    assert bad.code == 2
    assert bad.json["errorCode"] == "USAGE_ERROR"
    assert "Traceback" not in bad.stdout + bad.stderr


def test_follow_reconnects_and_rereads_after_every_ack(lab_server_factory) -> None:
    lab = lab_server_factory({"MCP_TEST_UPDATE_DELAY_SECONDS": "600"})
    uri = "test://follow/1"
    _add(lab, uri, "rev 1")
    proc = spawn_cli(
        "mcpsubctl",
        "probe",
        "--url",
        lab.url,
        "--uri",
        uri,
        "--follow",
        "--max-events",
        "3",
        "--json",
        env={"MCPSUB_BACKOFF_BASE_S": "0.05"},
    )
    lab.wait_event("resources.read", count=1, timeout=10)  # the read after the ack
    _add(lab, uri, "rev 2")
    lab.wait_event("resources.read", count=2, timeout=10)  # after the ack, after the update
    # The content changes without a notification reaching us, then the stream is lost.
    _add(lab, uri, "rev 3", notify=False)
    lab.control("POST", "/lab/streams/drop").raise_for_status()
    result = finish(proc, timeout=30)
    assert result.code == 0, result.stderr
    records = result.ndjson
    reads = [r for r in records if r["type"] == "read"]
    assert [r["text"] for r in reads][:2] == ["rev 1", "rev 2"]
    assert reads[-1]["text"] == "rev 3", "the reconnect must re-read: nothing is replayed"
    assert reads[-1]["trigger"] == "acknowledged"
    assert reads[-1]["generation"] > reads[0]["generation"]
    assert any(r["type"] == "lost" for r in records)


def _follow_json(lab: LabServer, events: int) -> list[dict]:
    result = run_cli(
        "mcpsubctl",
        "probe",
        "--url",
        lab.url,
        "--uri",
        REVIEW,
        "--follow",
        "--max-events",
        str(events),
        "--json",
        timeout=60,
    )
    assert result.code == 0, result.stderr
    return result.ndjson


def _spawn_follow(lab: LabServer, env: dict[str, str]) -> subprocess.Popen[str]:
    """``probe --follow --json`` on the review URI, running until the test ends it."""
    return spawn_cli(
        "mcpsubctl", "probe", "--url", lab.url, "--uri", REVIEW, "--follow", "--json", env=env
    )


def test_follow_relistens_at_once_after_each_close(lab_server_factory) -> None:
    """A stream that lived and was closed is not a failure: no backoff between re-listens."""
    lab = lab_server_factory({"MCP_TEST_UPDATE_DELAY_SECONDS": "600"})
    lab.configure(closeAfterAckMs=2000)
    records = _follow_json(lab, 3)
    reads = [r for r in records if r["type"] == "read"]
    lost = [r for r in records if r["type"] == "lost"]
    assert len(reads) == 3 and all(r["trigger"] == "acknowledged" for r in reads)
    assert [r["generation"] for r in reads] == [1, 2, 3]
    assert len(lost) == 2
    assert all(r["pause"] == "relisten" and r["retryInMs"] <= 250 for r in lost), lost


def test_follow_backs_off_while_streams_keep_dying_young(lab_server_factory) -> None:
    """A server that ends every stream right after its ack gets one quick re-listen, then a
    growing pause (the relisten policy), not a tight loop."""
    lab = lab_server_factory({"MCP_TEST_UPDATE_DELAY_SECONDS": "600"})
    lab.configure(closeAfterAckMs=10)
    records = _follow_json(lab, 3)
    lost = [r for r in records if r["type"] == "lost"]
    assert [r["pause"] for r in lost] == ["relisten", "young"], lost
    assert lost[0]["retryInMs"] <= 250
    assert 1000 <= lost[1]["retryInMs"] <= 2000  # the second young death: 1-2 s
    opened = [e["time"] for e in lab.log() if e["event"] == "listen.opened"]
    assert opened[2] - opened[1] >= 1.0


def test_follow_throttles_a_server_closing_in_a_loop(lab_server_factory) -> None:
    lab = lab_server_factory({"MCP_TEST_UPDATE_DELAY_SECONDS": "600"})
    lab.configure(closeAfterAckMs=0)
    proc = _spawn_follow(lab, {"MCPSUB_RELISTEN_PER_MINUTE": "3"})
    lab.wait_event("listen.acknowledged", count=3, timeout=10)
    try:
        first = ""
        while '"throttled"' not in first:
            assert proc.stdout is not None
            first = proc.stdout.readline()
            assert first, "follow ended without a throttled record"
        record = json.loads(first)
        assert record["retryInMs"] > 30_000
        assert len(lab.log()) > 0
        assert len([e for e in lab.log() if e["event"] == "listen.acknowledged"]) == 3
    finally:
        proc.send_signal(signal.SIGINT)
        finish(proc, timeout=10)


def test_follow_retries_a_refused_listen_as_the_daemon_does(lab_server_factory) -> None:
    """A full server refuses the listen ("Subscription limit reached", JSON-RPC -32603 on
    HTTP 200). The daemon's links back off and listen again; ``--follow`` ended with exit 4
    instead. It now reports the refusal as a failure to connect and listens again."""
    lab = lab_server_factory({"MCP_TEST_UPDATE_DELAY_SECONDS": "600"})
    lab.configure(refuseListen=True)
    proc = _spawn_follow(lab, {"MCPSUB_BACKOFF_BASE_S": "0.05"})
    try:
        assert proc.stdout is not None
        lost = json.loads(proc.stdout.readline())
        assert lost["type"] == "lost" and "Subscription limit reached" in lost["reason"], lost
        assert lost["pause"] == "failed", lost  # a failure to connect: full-jitter backoff
        lab.wait_event("listen.refused", count=2, timeout=10)  # and again, not once
        lab.configure(refuseListen=False)
        line = lost_line = ""
        while '"type":"read"' not in line:
            line = proc.stdout.readline()
            assert line, "follow ended without reading after the refusals: " + lost_line
            lost_line = line
        read = json.loads(line)
        assert read["trigger"] == "acknowledged" and read["text"].startswith("status: pending")
    finally:
        proc.send_signal(signal.SIGINT)
        assert finish(proc, timeout=10).code == 0


def test_follow_stops_cleanly_on_sigint(lab_server: LabServer) -> None:
    proc = spawn_cli("mcpsubctl", "probe", "--url", lab_server.url, "--uri", REVIEW, "--follow")
    [ack] = lab_server.wait_event("listen.acknowledged", timeout=10)
    # Its re-read after the ack is answered: it now sits in the listen, as it does for days.
    lab_server.wait_event("resources.read", timeout=10, since=ack["seq"])
    proc.send_signal(signal.SIGINT)
    result = finish(proc, timeout=10)
    assert result.code == 0
    assert "Traceback" not in result.stderr


def test_ctl_call(lab_server: LabServer) -> None:
    ok = run_cli(
        "mcpsubctl",
        "call",
        "--url",
        lab_server.url,
        "--tool",
        "echo_tool",
        "--args",
        '{"message":"x"}',
        "--json",
    )
    assert (ok.code, ok.json["content"]) == (0, [{"type": "text", "text": "x"}])
    rejected = run_cli("mcpsubctl", "call", "--url", lab_server.url, "--tool", "nope", "--json")
    assert (rejected.code, rejected.json["errorCode"]) == (4, "TOOL_REQUEST_REJECTED")
    failed = run_cli(
        "mcpsubctl",
        "call",
        "--url",
        lab_server.url,
        "--tool",
        "echo_tool",
        "--args",
        '{"shouldError":true}',
    )
    assert failed.code == 1
    assert failed.field("error-code") == "TOOL_ERROR"


UNENCODABLE_HOST = "ß" * 250 + ".com"  # an IDNA label over 63 characters: no resolver takes it


@pytest.mark.parametrize(
    "url",
    [
        "notaurl",
        "ftp://example.com/mcp",
        "http:///mcp",
        "http://h:0/",
        # Both transports (lean for plain http://, httpx for https://) give one answer.
        f"http://{UNENCODABLE_HOST}/mcp",
        f"https://{UNENCODABLE_HOST}/mcp",
    ],
)
def test_probe_input_errors_are_input_errors(url: str) -> None:
    """Not NETWORK_ERROR "retry later" but INVALID_URL, exit 2."""
    for args in (("probe", "--uri", REVIEW), ("call", "--tool", "echo_tool")):
        result = run_cli("mcpsubctl", *args, "--url", url, "--json")
        assert result.code == 2, result
        body = result.json
        assert body["errorCode"] == "INVALID_URL"
        assert "http://" in (body.get("recommendedNextAction") or result.stderr)
        assert "Traceback" not in result.stderr


def test_probe_missing_ca_cert_names_the_file(tmp_path) -> None:
    missing = tmp_path / "nope.pem"
    result = run_cli(
        "mcpsubctl", "probe", "--url", "https://127.0.0.1:9/mcp", "--uri", REVIEW,
        "--ca-cert", str(missing), "--json",
    )  # fmt: skip
    assert result.code == 2, result
    assert result.json["errorCode"] == "USAGE_ERROR"
    assert str(missing) in result.json["recommendedNextAction"]
    assert "Traceback" not in result.stderr


def test_https_against_a_plain_http_port_names_the_scheme(lab_server: LabServer) -> None:
    url = lab_server.url.replace("http://", "https://")
    result = run_cli("mcpsubctl", "probe", "--url", url, "--uri", REVIEW, "--json")
    assert result.code == 5, result
    assert result.json["errorCode"] == "TLS_HANDSHAKE_FAILED"
    assert "http://" in result.json["recommendedNextAction"]


def test_follow_keeps_its_stream_when_a_read_fails(lab_server_factory) -> None:
    """A 5xx on a read says nothing about the listen stream: it is reported and the stream
    kept, so the next update is not missed (before: the stream was dropped and re-listened)."""
    lab = lab_server_factory({"MCP_TEST_UPDATE_DELAY_SECONDS": "600"})
    lab.configure(failMethods={"resources/read": 500})
    proc = spawn_cli(
        "mcpsubctl", "probe", "--url", lab.url, "--uri", REVIEW,
        "--follow", "--max-events", "1", "--json",
    )  # fmt: skip
    lab.wait_event("http.error", timeout=10)  # its read after the ack, answered 500
    lab.configure(failMethods={})
    lab.control("POST", "/lab/update")
    result = finish(proc, timeout=30)
    assert result.code == 0, result.stderr
    records = result.ndjson
    assert [r["type"] for r in records] == ["read-failed", "read"], records
    assert records[0]["errorCode"] == "SERVER_ERROR" and records[0]["trigger"] == "acknowledged"
    assert records[1]["trigger"] == "notification" and records[1]["generation"] == 1
    assert len([e for e in lab.log() if e["event"] == "listen.opened"]) == 1


@pytest.mark.parametrize("config", [{"dishonorUris": [REVIEW]}, {"advertiseSubscribe": False}])
def test_follow_ends_at_once_on_a_subscription_not_honored(lab_server: LabServer, config) -> None:
    """Final for --follow as for the one-shot probe: no stream is held and no listen is sent
    again; a server that offers no subscriptions (seed 003) is not asked to listen at all."""
    lab_server.configure(**config)
    result = run_cli(
        "mcpsubctl",
        "probe",
        "--follow",
        "--url",
        lab_server.url,
        "--uri",
        REVIEW,
        "--json",
        timeout=60,
    )
    assert result.code == 8, (result.stdout, result.stderr)
    assert "SUBSCRIPTION_NOT_HONORED" in result.stdout + result.stderr
    listens = [e for e in lab_server.log() if e["event"] == "listen.opened"]
    assert len(listens) == (0 if "advertiseSubscribe" in config else 1), listens


def test_follow_runs_on_uvloop_and_refuses_an_unknown_loop(lab_server_factory) -> None:
    """``--follow`` runs for hours, so it runs on the daemon's loop (service/eventloop.py);
    ``MCPSUB_EVENT_LOOP`` naming no loop is a usage error before anything is sent."""
    lab = lab_server_factory({"MCP_TEST_UPDATE_DELAY_SECONDS": "600"})
    proc = _spawn_follow(lab, {})
    try:
        assert proc.stdout is not None
        first = json.loads(proc.stdout.readline())  # the first read: the loop is running
        assert first["type"] == "read", first
        maps = Path(f"/proc/{proc.pid}/maps").read_text()
        assert "/uvloop/loop." in maps
    finally:
        proc.send_signal(signal.SIGINT)
        finish(proc)
    bad = run_cli(
        "mcpsubctl", "probe", "--url", lab.url, "--uri", REVIEW, "--follow", "--json",
        env={"MCPSUB_EVENT_LOOP": "tokio"},
    )  # fmt: skip
    assert bad.code == 2, bad
    assert bad.json["errorCode"] == "INVALID_ARGUMENT"
    assert "MCPSUB_EVENT_LOOP='tokio'" in bad.json["recommendedNextAction"]
    assert "Traceback" not in bad.stderr and "Warning" not in bad.stderr
