"""``mcp-resource-subscriber`` as a subprocess against the real lab server (seed §1-§3)."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from tests.support.cli import finish, run_cli, spawn_cli
from tests.support.lab import LabServer
from tests.support.poll import until

PROG = "mcp-resource-subscriber"
REVIEW = "test://review/status"
KEYS = [
    "route", "serverUrl", "resourceUri", "listenAcknowledged", "honoredUris",
    "notificationReceived", "notificationCount", "closeReason", "errorCode",
    "initialText", "finalText", "recommendedNextAction",
]  # fmt: skip


def probe(lab: LabServer, *args: str, env: dict[str, str] | None = None):
    return run_cli(PROG, "--url", lab.url, *args, env=env)


def test_success_line_output(review_lab: LabServer) -> None:
    result = probe(review_lab, "--uri", REVIEW)
    assert result.code == 0, result
    lines = result.stdout.splitlines()
    assert lines[:5] == [
        'capabilities {"subscribe":true,"listChanged":false}',
        "resource-found true",
        f"resource-uri {REVIEW}",
        f"server-url {review_lab.url}",
        "initial",
    ]
    assert result.field("route") == "subscription"
    assert result.field("notification-count") == "1"
    assert result.field("close-reason") == "local"
    assert result.field("error-code") == "null"
    assert result.field("notification") == REVIEW
    assert "status: reviewed" in result.stdout.split("\nfinal\n", 1)[1]
    assert lines[-1] == f"phase-summary route=subscription url={review_lab.url} uri={REVIEW}"
    # The lab saw the order the algorithm promises: ack, then the update, then a re-read.
    events = [e["event"] for e in review_lab.log()]
    ack = events.index("listen.acknowledged")
    sent = events.index("notification.sent", ack)
    assert "resources.read" in events[sent:]


def test_success_json_is_one_object_with_fixed_keys(review_lab: LabServer) -> None:
    result = probe(review_lab, "--uri", REVIEW, "--json", "--auth-token", "t0ken-visible")
    assert result.code == 0
    data = result.json
    assert list(data) == KEYS
    assert data["route"] == "subscription"
    assert data["notificationReceived"] is True
    assert data["honoredUris"] == [REVIEW]
    assert data["initialText"].startswith("status: pending")
    assert data["finalText"].startswith("status: reviewed")
    assert "--auth-token value is visible" in result.stderr
    assert "t0ken-visible" not in result.stdout + result.stderr


def test_default_uri_warns_on_stderr(lab_server: LabServer) -> None:
    result = probe(lab_server, "--json")
    assert result.code == 0
    assert result.json["resourceUri"] == REVIEW
    assert "warning: using default URI test://review/status" in result.stderr


def test_env_vars_and_first_occurrence_wins(lab_server: LabServer) -> None:
    env = {"MCP_PROBE_URL": lab_server.url, "MCP_PROBE_URI": REVIEW}
    result = run_cli(PROG, "--json", "--timeout-ms=5000", "--timeout-ms", "1", env=env)
    assert result.code == 0, result.stderr
    assert result.json["serverUrl"] == lab_server.url
    assert "default URI" not in result.stderr


def test_repeated_probes_each_see_the_update(lab_server: LabServer) -> None:
    for _ in range(3):
        result = probe(lab_server, "--uri", REVIEW, "--json")
        assert result.code == 0
        assert result.json["finalText"].startswith("status: reviewed")


def _add(lab: LabServer, uri: str, text: str, notify: bool = True) -> None:
    lab.control(
        "PUT", "/lab/resources", json={"uri": uri, "text": text, "notify": notify}
    ).raise_for_status()


def test_pre_completion_route(lab_server_factory) -> None:
    lab = lab_server_factory({"MCP_TEST_UPDATE_DELAY_SECONDS": "600"})
    uri = "test://queue/pc"
    _add(lab, uri, "status: pending")
    lab.configure(ackDelayMs=400)
    proc = spawn_cli(PROG, "--url", lab.url, "--uri", uri, "--json")
    lab.wait_event("listen.opened", timeout=10)
    _add(lab, uri, "status: done", notify=False)  # changed before the ack, no notification
    result = finish(proc)
    assert result.code == 0, result.stderr
    data = result.json
    assert data["route"] == "pre-completion"
    assert data["notificationReceived"] is False
    assert data["notificationCount"] == 0
    assert data["finalText"] == "status: done"


def test_poll_after_chain_waits_for_a_terminal_action(lab_server_factory) -> None:
    lab = lab_server_factory({"MCP_TEST_UPDATE_DELAY_SECONDS": "600"})
    uri = "test://watch/1"
    _add(lab, uri, "review_status: PENDING")
    proc = spawn_cli(PROG, "--url", lab.url, "--uri", uri, "--json", "--timeout-ms", "20000")
    lab.wait_event("resources.read", count=2, timeout=10)  # initial + pre-completion read
    _add(lab, uri, "review_status: IN_PROGRESS\nrecommended_next_action: POLL_AFTER")
    lab.wait_event("resources.read", count=3, timeout=10)  # the re-read after the update
    _add(lab, uri, '{"review_status":"COMPLETED","recommended_next_action":"READ_REVIEW_THREADS"}')
    result = finish(proc)
    assert result.code == 0, result.stderr
    data = result.json
    assert data["route"] == "subscription"
    assert data["notificationCount"] == 2
    assert data["recommendedNextAction"] == "READ_REVIEW_THREADS"


def test_poll_after_timeout_reports_poll_after(lab_server_factory) -> None:
    lab = lab_server_factory({"MCP_TEST_UPDATE_DELAY_SECONDS": "600"})
    uri = "test://watch/2"
    _add(lab, uri, "review_status: PENDING")
    proc = spawn_cli(PROG, "--url", lab.url, "--uri", uri, "--json", "--timeout-ms", "1500")
    lab.wait_event("listen.acknowledged", timeout=10)
    _add(lab, uri, "recommended_next_action: POLL_AFTER")
    result = finish(proc)
    assert result.code == 1
    data = result.json
    assert data["errorCode"] == "NOTIFICATION_TIMEOUT"
    assert data["recommendedNextAction"] == "POLL_AFTER"
    assert data["closeReason"] == "local"


def test_notification_during_a_read_is_not_lost(lab_server_factory) -> None:
    lab = lab_server_factory({"MCP_TEST_UPDATE_DELAY_SECONDS": "600"})
    uri = "test://slow/1"
    _add(lab, uri, "v1")
    lab.configure(readDelayMs=600)  # every read is slow: the pre-completion read too ...
    proc = spawn_cli(PROG, "--url", lab.url, "--uri", uri, "--json", "--timeout-ms", "10000")
    [ack] = lab.wait_event("listen.acknowledged", timeout=10)

    def read_in_flight() -> bool:
        return any(
            e["event"] == "mcp.request" and e.get("method") == "resources/read"
            for e in lab.log(ack["seq"])
        )

    until("the pre-completion read arrives", read_in_flight, timeout=10)
    _add(lab, uri, "v2")  # ... and the update lands while it is in flight
    result = finish(proc)
    assert result.code == 0, result.stderr
    data = result.json
    assert data["route"] == "subscription"
    assert data["notificationCount"] == 1
    assert data["finalText"] == "v2"


def test_resource_not_found(lab_server: LabServer) -> None:
    result = probe(lab_server, "--uri", "test://nope")
    assert result.code == 1
    assert result.field("resource-found") == "false"
    assert result.field("route") == "timeout"
    assert result.field("error-code") == "RESOURCE_NOT_FOUND"
    assert result.stdout.splitlines()[-1].endswith("error-code=RESOURCE_NOT_FOUND")
    assert "resources.read" not in [e["event"] for e in lab_server.log()]


def test_skip_list_check_skips_the_list(lab_server: LabServer) -> None:
    result = probe(lab_server, "--uri", REVIEW, "--skip-resource-list-check", "--json")
    assert result.code == 0
    assert "resources.list" not in [e["event"] for e in lab_server.log()]
    env_result = run_cli(
        PROG,
        "--url",
        lab_server.url,
        "--uri",
        REVIEW,
        "--json",
        env={"MCP_PROBE_SKIP_LIST_CHECK": "TRUE"},
    )
    assert env_result.code == 0
    assert [e["event"] for e in lab_server.log()].count("resources.list") == 1


def test_notification_timeout(lab_server_factory) -> None:
    lab = lab_server_factory({"MCP_TEST_UPDATE_DELAY_SECONDS": "600"})
    started = time.monotonic()
    result = probe(lab, "--uri", REVIEW, "--json", "--timeout-ms", "700")
    assert time.monotonic() - started < 10
    assert result.code == 1
    data = result.json
    assert (data["route"], data["errorCode"], data["closeReason"]) == (
        "timeout",
        "NOTIFICATION_TIMEOUT",
        "local",
    )
    assert data["listenAcknowledged"] is True


def test_subscription_not_honored(lab_server: LabServer) -> None:
    lab_server.configure(dishonorUris=[REVIEW])
    result = probe(lab_server, "--uri", REVIEW, "--json")
    assert result.code == 1
    data = result.json
    assert data["errorCode"] == "SUBSCRIPTION_NOT_HONORED"
    assert data["listenAcknowledged"] is True
    assert data["honoredUris"] == []
    assert data["route"] == "timeout"


def _listens(lab: LabServer) -> list[dict[str, object]]:
    return [
        e
        for e in lab.log()
        if e.get("event") == "mcp.request" and e.get("method") == "subscriptions/listen"
    ]


def test_subscription_not_honored_when_subscribe_not_advertised(lab_server: LabServer) -> None:
    # Seed 003: a server whose resources.subscribe is not true is not asked to listen; the
    # answer is SUBSCRIPTION_NOT_HONORED at once, in the drop-in and in mcpsubctl probe.
    lab_server.configure(advertiseSubscribe=False)
    result = probe(lab_server, "--uri", REVIEW)
    assert result.code == 1
    assert result.field("capabilities") == '{"subscribe":false,"listChanged":false}'
    assert result.field("error-code") == "SUBSCRIPTION_NOT_HONORED"
    assert result.field("listen-acknowledged") == "false"
    data = probe(lab_server, "--uri", REVIEW, "--json").json
    assert (data["route"], data["errorCode"]) == ("timeout", "SUBSCRIPTION_NOT_HONORED")
    assert (data["listenAcknowledged"], data["honoredUris"]) == (False, [])
    assert data["initialText"].startswith("status: pending")
    ctl = run_cli("mcpsubctl", "probe", "--url", lab_server.url, "--uri", REVIEW, "--json")
    assert (ctl.code, ctl.json["errorCode"]) == (8, "SUBSCRIPTION_NOT_HONORED")
    assert "resources.subscribe" in ctl.stderr + ctl.json.get("message", "")
    assert _listens(lab_server) == []


def test_plain_text_503_on_listen_is_a_refused_subscription(lab_server: LabServer) -> None:
    lab_server.configure(failMethods={"subscriptions/listen": 503})
    result = probe(lab_server, "--uri", REVIEW, "--json")
    assert result.code == 1, result
    data = result.json
    assert (data["route"], data["errorCode"]) == ("timeout", "SUBSCRIPTION_FAILED")
    assert data["listenAcknowledged"] is False
    assert "HTTP 503" in result.stderr
    assert _listens(lab_server), "the listen was sent and refused"


def test_subscription_failed_when_listen_refused(lab_server: LabServer) -> None:
    lab_server.configure(refuseListen=True)
    result = probe(lab_server, "--uri", REVIEW, "--json")
    assert result.code == 1
    data = result.json
    assert data["errorCode"] == "SUBSCRIPTION_FAILED"
    assert data["listenAcknowledged"] is False


def test_subscription_disconnected(lab_server_factory) -> None:
    lab = lab_server_factory({"MCP_TEST_UPDATE_DELAY_SECONDS": "600"})
    lab.configure(dropAfterAckMs=100)
    started = time.monotonic()
    result = probe(lab, "--uri", REVIEW, "--json", "--timeout-ms", "30000")
    assert time.monotonic() - started < 15, "reported at once, not after the timeout"
    data = result.json
    assert result.code == 1
    assert (data["errorCode"], data["closeReason"]) == ("SUBSCRIPTION_DISCONNECTED", "remote")


def test_subscription_closed(lab_server_factory) -> None:
    lab = lab_server_factory({"MCP_TEST_UPDATE_DELAY_SECONDS": "600"})
    lab.configure(closeAfterAckMs=100)
    result = probe(lab, "--uri", REVIEW, "--json", "--timeout-ms", "30000")
    data = result.json
    assert result.code == 1
    assert (data["errorCode"], data["closeReason"]) == ("SUBSCRIPTION_CLOSED", "graceful")


LEGACY_MODES = [
    "method-not-found",
    "missing-session",
    "unsupported-version",
    "not-initialized",  # TypeScript SDK 1.x: 400, -32000, id null
    "discover-2025",  # a discover result listing only 2025 revisions
    "not-found",  # plain 404: the original says PROTOCOL_UNSUPPORTED too
]


@pytest.mark.parametrize("mode", LEGACY_MODES)
def test_protocol_unsupported(lab_server: LabServer, mode: str) -> None:
    lab_server.configure(legacyMode=mode)
    result = probe(lab_server, "--uri", REVIEW, "--json")
    assert result.code == 1
    data = result.json
    assert data["route"] == "failed"
    assert data["errorCode"] == "PROTOCOL_UNSUPPORTED"
    assert "2026-07-28" in data["recommendedNextAction"]
    call = run_cli(PROG, "call", "--url", lab_server.url, "--tool", "echo_tool", "--json")
    assert (call.code, call.json["errorCode"]) == (3, "PROTOCOL_UNSUPPORTED")
    lines = probe(lab_server, "--uri", REVIEW)
    assert lines.stdout.splitlines() == [
        "error-code PROTOCOL_UNSUPPORTED",
        f"recommended-next-action {data['recommendedNextAction']}",
        f"phase-summary route=failed url={lab_server.url} uri={REVIEW} "
        "error-code=PROTOCOL_UNSUPPORTED",
    ]


def test_server_url_unknown_both_modes() -> None:
    lines = run_cli(PROG)
    assert lines.code == 1
    assert lines.stdout.splitlines() == [
        "error-code SERVER_URL_UNKNOWN",
        "phase-summary route=failed url=unknown error-code=SERVER_URL_UNKNOWN",
    ]
    data = run_cli(PROG, "--json").json
    assert data["errorCode"] == "SERVER_URL_UNKNOWN"
    assert data["serverUrl"] is None
    assert list(data) == KEYS


@pytest.mark.parametrize(
    "args",
    [
        ["--json", "--uri"],
        ["--json", "--uri", "--timeout-ms", "5"],
        ["--json", "--timeout-ms", "abc"],
        ["--json", "--timeout-ms", "0"],
        ["--json", "--timeout-ms=-5"],
    ],
)
def test_usage_errors_still_give_json(args: list[str]) -> None:
    result = run_cli(PROG, "--url", "http://127.0.0.1:9/mcp", *args)
    assert result.code == 1
    data = result.json
    assert data["errorCode"] == "INTERNAL_ERROR"
    assert data["route"] == "failed"
    assert data["serverUrl"] == "http://127.0.0.1:9/mcp"
    assert "Traceback" not in result.stdout + result.stderr


def test_usage_error_line_mode() -> None:
    result = run_cli(PROG, "--url", "http://127.0.0.1:9/mcp", "--timeout-ms", "soon")
    assert result.code == 1
    assert result.stdout.splitlines()[0] == "error-code INTERNAL_ERROR"
    assert "Invalid --timeout-ms: soon" in result.stderr


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_connection_refused_both_modes() -> None:
    url = f"http://127.0.0.1:{_closed_port()}/mcp"
    data = run_cli(PROG, "--url", url, "--json").json
    assert data["errorCode"] == "CONNECTION_REFUSED"
    assert "--url" in data["recommendedNextAction"]
    lines = run_cli(PROG, "--url", url)
    assert lines.code == 1
    assert lines.field("error-code") == "CONNECTION_REFUSED"


def test_dns_lookup_failed() -> None:
    env = {"MCPSUB_TEST_UNRESOLVABLE": "mcp.unresolvable.test"}
    result = run_cli(PROG, "--url", "http://mcp.unresolvable.test/mcp", "--json", env=env)
    assert result.code == 1
    data = result.json
    assert data["errorCode"] == "DNS_LOOKUP_FAILED"
    assert "hostname" in data["recommendedNextAction"]


def test_version_and_help() -> None:
    from service._version import __version__

    assert run_cli(PROG, "--version").stdout == f"mcp-resource-subscriber v{__version__}\n"
    assert run_cli(PROG, "call", "-v").stdout == f"mcp-resource-subscriber v{__version__}\n"
    help_text = run_cli(PROG, "--url", "x", "-h").stdout
    for flag in (
        "--url",
        "--uri",
        "--auth-token",
        "--skip-resource-list-check",
        "--timeout-ms",
        "--json",
        "--tool",
        "--args",
        "--login",
        "--logout",
        "MCP_PROBE_TOKEN_STORE_PATH",
    ):
        assert flag in help_text


# ---- call mode ----------------------------------------------------------------------------
CALL_KEYS = ["serverUrl", "tool", "isError", "errorCode", "content", "recommendedNextAction"]


def test_call_success_json_and_lines(lab_server: LabServer) -> None:
    result = run_cli(
        PROG,
        "call",
        "--url",
        lab_server.url,
        "--tool",
        "echo_tool",
        "--args",
        '{"message":"héllo"}',
        "--json",
    )
    assert result.code == 0
    assert list(result.json) == CALL_KEYS
    assert result.json["content"] == [{"type": "text", "text": "héllo"}]
    lines = run_cli(PROG, "call", "--url", lab_server.url, "--tool", "get_review_status")
    assert lines.code == 0
    out = lines.stdout.splitlines()
    assert out[:6] == [
        f"server-url {lab_server.url}",
        "tool get_review_status",
        "is-error false",
        "error-code null",
        "recommended-next-action null",
        "content",
    ]
    assert "status: pending" in out[6]


def test_call_tool_error_exit_1(lab_server: LabServer) -> None:
    result = run_cli(
        PROG,
        "call",
        "--url",
        lab_server.url,
        "--tool",
        "echo_tool",
        "--args",
        '{"message":"bad","shouldError":true}',
        "--json",
    )
    assert result.code == 1
    assert result.json["errorCode"] == "TOOL_ERROR"
    assert result.json["isError"] is True
    assert result.json["content"] == [{"type": "text", "text": "bad"}]


def test_call_unknown_tool_is_rejected_exit_3(lab_server: LabServer) -> None:
    # Seed 000: recommendedNextAction is null except on network-level errors; the hint is
    # on stderr.
    result = run_cli(PROG, "call", "--url", lab_server.url, "--tool", "nope", "--json")
    assert result.code == 3
    assert result.json["errorCode"] == "TOOL_REQUEST_REJECTED"
    assert result.json["recommendedNextAction"] is None
    assert "hint: " in result.stderr and "--tool" in result.stderr
    assert result.json["content"] is None
    lines = run_cli(PROG, "call", "--url", lab_server.url, "--tool", "nope")
    assert (lines.code, lines.field("error-code")) == (3, "TOOL_REQUEST_REJECTED")
    assert lines.field("recommended-next-action") == "null"


def test_call_auth_failed_has_no_next_action() -> None:
    with LabServer({"MCP_TEST_AUTH_TOKEN": "right"}) as lab:
        for extra in (["--json"], []):
            result = run_cli(
                PROG, "call", "--url", lab.url, "--tool", "echo_tool", *extra,
                env={"MCP_PROBE_AUTH_TOKEN": "wrong"},
            )  # fmt: skip
            assert result.code == 2, result
            if extra:
                assert result.json["errorCode"] == "AUTH_FAILED"
                assert result.json["recommendedNextAction"] is None
            else:
                assert result.field("error-code") == "AUTH_FAILED"
                assert result.field("recommended-next-action") == "null"
            assert "hint: " in result.stderr


@pytest.mark.parametrize(
    ("args", "code"),
    [
        ([], "TOOL_NAME_REQUIRED"),
        (["--tool", "t", "--args", "[1]"], "INVALID_ARGS"),
        (["--tool", "t", "--args", "{oops"], "INVALID_ARGS"),
        (["--tool", "t", "--args", "null"], "INVALID_ARGS"),
        (["--tool", "t", "--timeout-ms", "-1"], "INTERNAL_ERROR"),
        (["--tool"], "INTERNAL_ERROR"),
    ],
)
def test_call_usage_errors_exit_3(args: list[str], code: str) -> None:
    result = run_cli(PROG, "call", "--url", "http://127.0.0.1:9/mcp", *args, "--json")
    assert result.code == 3
    assert result.json["errorCode"] == code
    lines = run_cli(PROG, "call", "--url", "http://127.0.0.1:9/mcp", *args)
    assert lines.field("error-code") == code
    assert lines.stdout.splitlines()[-1] == "null"


def test_call_without_url() -> None:
    result = run_cli(PROG, "call", "--tool", "x")
    assert result.code == 3
    assert result.field("server-url") == "unknown"
    assert result.field("error-code") == "SERVER_URL_UNKNOWN"


def test_call_against_a_server_that_never_answers_is_bounded() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    accepted: list[socket.socket] = []

    def accept() -> None:
        try:
            while True:
                accepted.append(listener.accept()[0])
        except OSError:
            pass

    threading.Thread(target=accept, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/mcp"
        started = time.monotonic()
        result = run_cli(PROG, "call", "--url", url, "--tool", "x", "--timeout-ms", "800", "--json")
        elapsed = time.monotonic() - started
    finally:
        listener.close()
        for conn in accepted:
            conn.close()
    assert result.code == 3
    assert result.json["errorCode"] == "CALL_FAILED"
    assert elapsed < 6, elapsed


def test_call_connection_refused_same_line_shape() -> None:
    url = f"http://127.0.0.1:{_closed_port()}/mcp"
    lines = run_cli(PROG, "call", "--url", url, "--tool", "x")
    assert lines.code == 3
    assert [line.split(" ")[0] for line in lines.stdout.splitlines()] == [
        "server-url",
        "tool",
        "is-error",
        "error-code",
        "recommended-next-action",
        "content",
        "null",
    ]
    assert lines.field("error-code") == "CONNECTION_REFUSED"
