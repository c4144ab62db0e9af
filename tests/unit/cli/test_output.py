"""cli.output: golden tests pinning every printed shape (seed §3.1-§3.3, §3.7)."""

from __future__ import annotations

import json

from cli.output import (
    call_json,
    call_lines,
    failure_json,
    failure_lines,
    json_text,
    probe_json,
    probe_lines,
)
from service.probe import ProbeResult

URL = "http://localhost:3000/mcp"
URI = "queue://review/re-review-requests"
PROBE_KEYS = [
    "route",
    "serverUrl",
    "resourceUri",
    "listenAcknowledged",
    "honoredUris",
    "notificationReceived",
    "notificationCount",
    "closeReason",
    "errorCode",
    "initialText",
    "finalText",
    "recommendedNextAction",
]


def subscription_result() -> ProbeResult:
    return ProbeResult(
        URL,
        URI,
        [URI],
        route="subscription",
        capabilities={"subscribe": True, "listChanged": False},
        resource_found=True,
        listen_acknowledged=True,
        honored_uris=[URI],
        notification_count=1,
        close_reason="local",
        initial_text="status: PENDING\nitems: 0",
        final_text="status: COMPLETED\nitems: 2",
        notification_uri=URI,
    )


def test_subscription_lines_golden() -> None:
    assert probe_lines(subscription_result()) == (
        'capabilities {"subscribe":true,"listChanged":false}\n'
        "resource-found true\n"
        "resource-uri queue://review/re-review-requests\n"
        "server-url http://localhost:3000/mcp\n"
        "initial\n"
        "status: PENDING\n"
        "items: 0\n"
        "route subscription\n"
        "listen-acknowledged true\n"
        'honored-uris ["queue://review/re-review-requests"]\n'
        "notification-received true\n"
        "notification-count 1\n"
        "close-reason local\n"
        "error-code null\n"
        "notification queue://review/re-review-requests\n"
        "final\n"
        "status: COMPLETED\n"
        "items: 2\n"
        "phase-summary route=subscription url=http://localhost:3000/mcp "
        "uri=queue://review/re-review-requests"
    )


def test_subscription_json_golden() -> None:
    data = probe_json(subscription_result())
    assert list(data) == PROBE_KEYS
    assert json_text(data) == (
        '{"route":"subscription","serverUrl":"http://localhost:3000/mcp",'
        '"resourceUri":"queue://review/re-review-requests","listenAcknowledged":true,'
        '"honoredUris":["queue://review/re-review-requests"],"notificationReceived":true,'
        '"notificationCount":1,"closeReason":"local","errorCode":null,'
        '"initialText":"status: PENDING\\nitems: 0","finalText":"status: COMPLETED\\nitems: 2",'
        '"recommendedNextAction":null}'
    )


def test_probe_json_extra_keys_go_last() -> None:
    data = probe_json(subscription_result(), {"resourceUris": [URI]})
    assert list(data) == [*PROBE_KEYS, "resourceUris"]


def test_pre_completion_lines_golden() -> None:
    result = ProbeResult(
        URL,
        URI,
        [URI],
        route="pre-completion",
        capabilities=None,
        resource_found=True,
        listen_acknowledged=True,
        honored_uris=[URI],
        close_reason="local",
        initial_text="old",
        final_text="new",
    )
    assert probe_lines(result) == (
        "capabilities null\n"
        "resource-found true\n"
        "resource-uri queue://review/re-review-requests\n"
        "server-url http://localhost:3000/mcp\n"
        "initial\n"
        "old\n"
        "route pre-completion\n"
        "listen-acknowledged true\n"
        'honored-uris ["queue://review/re-review-requests"]\n'
        "notification-received false\n"
        "notification-count 0\n"
        "close-reason local\n"
        "error-code null\n"
        "final\n"
        "new\n"
        "phase-summary route=pre-completion url=http://localhost:3000/mcp "
        "uri=queue://review/re-review-requests"
    )


def test_action_line_right_before_error_code_and_timeout_summary() -> None:
    final = "review_status: IN_PROGRESS\nrecommended_next_action: POLL_AFTER"
    result = ProbeResult(
        URL,
        URI,
        [URI],
        route="subscription",
        capabilities={},
        resource_found=True,
        listen_acknowledged=True,
        honored_uris=[URI],
        notification_count=2,
        close_reason="local",
        error_code="NOTIFICATION_TIMEOUT",
        initial_text="review_status: PENDING",
        final_text=final,
        notification_uri=URI,
    )
    assert probe_lines(result) == (
        "capabilities {}\n"
        "resource-found true\n"
        "resource-uri queue://review/re-review-requests\n"
        "server-url http://localhost:3000/mcp\n"
        "initial\n"
        "review_status: PENDING\n"
        "route subscription\n"
        "listen-acknowledged true\n"
        'honored-uris ["queue://review/re-review-requests"]\n'
        "notification-received true\n"
        "notification-count 2\n"
        "close-reason local\n"
        "recommended_next_action POLL_AFTER\n"
        "error-code NOTIFICATION_TIMEOUT\n"
        "notification queue://review/re-review-requests\n"
        "final\n"
        "review_status: IN_PROGRESS\n"
        "recommended_next_action: POLL_AFTER\n"
        "phase-summary route=subscription url=http://localhost:3000/mcp "
        "uri=queue://review/re-review-requests error-code=NOTIFICATION_TIMEOUT"
    )
    data = probe_json(result)
    assert data["recommendedNextAction"] == "POLL_AFTER"
    assert data["errorCode"] == "NOTIFICATION_TIMEOUT"


def test_notification_timeout_with_empty_initial_golden() -> None:
    result = ProbeResult(
        URL,
        URI,
        [URI],
        route="timeout",
        capabilities={"subscribe": True},
        resource_found=True,
        listen_acknowledged=True,
        honored_uris=[URI],
        close_reason="local",
        error_code="NOTIFICATION_TIMEOUT",
        initial_text="",
        final_text=None,
    )
    assert probe_lines(result) == (
        'capabilities {"subscribe":true}\n'
        "resource-found true\n"
        "resource-uri queue://review/re-review-requests\n"
        "server-url http://localhost:3000/mcp\n"
        "route timeout\n"
        "listen-acknowledged true\n"
        'honored-uris ["queue://review/re-review-requests"]\n'
        "notification-received false\n"
        "notification-count 0\n"
        "close-reason local\n"
        "error-code NOTIFICATION_TIMEOUT\n"
        "phase-summary route=timeout url=http://localhost:3000/mcp "
        "uri=queue://review/re-review-requests error-code=NOTIFICATION_TIMEOUT"
    )
    assert json_text(probe_json(result)) == (
        '{"route":"timeout","serverUrl":"http://localhost:3000/mcp",'
        '"resourceUri":"queue://review/re-review-requests","listenAcknowledged":true,'
        '"honoredUris":["queue://review/re-review-requests"],"notificationReceived":false,'
        '"notificationCount":0,"closeReason":"local","errorCode":"NOTIFICATION_TIMEOUT",'
        '"initialText":null,"finalText":null,"recommendedNextAction":null}'
    )


def test_no_stream_opened_close_reason_null() -> None:
    result = ProbeResult(URL, URI, [URI], error_code="RESOURCE_NOT_FOUND")
    lines = probe_lines(result).split("\n")
    assert "close-reason null" in lines
    assert "honored-uris []" in lines
    assert "resource-found false" in lines
    assert lines[-1] == (
        "phase-summary route=timeout url=http://localhost:3000/mcp "
        "uri=queue://review/re-review-requests error-code=RESOURCE_NOT_FOUND"
    )
    assert probe_json(result)["closeReason"] is None


def test_failure_lines_server_url_unknown_is_exactly_two_lines() -> None:
    assert failure_lines("SERVER_URL_UNKNOWN", "ignored hint", None, "test://review/status") == (
        "error-code SERVER_URL_UNKNOWN\n"
        "phase-summary route=failed url=unknown error-code=SERVER_URL_UNKNOWN"
    )


def test_failure_lines_other_code_three_lines() -> None:
    hint = "pass --ca-cert FILE"
    assert failure_lines("TLS_CERT_UNTRUSTED", hint, "https://x/mcp", "test://review/status") == (
        "error-code TLS_CERT_UNTRUSTED\n"
        "recommended-next-action pass --ca-cert FILE\n"
        "phase-summary route=failed url=https://x/mcp uri=test://review/status "
        "error-code=TLS_CERT_UNTRUSTED"
    )


def test_failure_lines_without_hint_url_or_uri() -> None:
    assert failure_lines("INTERNAL_ERROR", None, None, None) == (
        "error-code INTERNAL_ERROR\n"
        "recommended-next-action null\n"
        "phase-summary route=failed url=unknown uri= error-code=INTERNAL_ERROR"
    )


def test_failure_json_golden() -> None:
    data = failure_json("PROTOCOL_UNSUPPORTED", "upgrade the server", URL, URI)
    assert list(data) == PROBE_KEYS
    assert json_text(data) == (
        '{"route":"failed","serverUrl":"http://localhost:3000/mcp",'
        '"resourceUri":"queue://review/re-review-requests","listenAcknowledged":false,'
        '"honoredUris":[],"notificationReceived":false,"notificationCount":0,'
        '"closeReason":null,"errorCode":"PROTOCOL_UNSUPPORTED","initialText":null,'
        '"finalText":null,"recommendedNextAction":"upgrade the server"}'
    )


def test_failure_json_unknown_url() -> None:
    data = failure_json("SERVER_URL_UNKNOWN", None, None, "test://review/status")
    assert data["serverUrl"] is None
    assert data["recommendedNextAction"] is None
    assert json.loads(json_text(data)) == data


def test_call_lines_success_golden() -> None:
    content = [{"type": "text", "text": "queued ✓"}]
    assert call_lines("https://gw/mcp", "enqueue_review", False, None, content, None) == (
        "server-url https://gw/mcp\n"
        "tool enqueue_review\n"
        "is-error false\n"
        "error-code null\n"
        "recommended-next-action null\n"
        "content\n"
        '[{"type":"text","text":"queued ✓"}]'
    )


def test_call_lines_tool_error_golden() -> None:
    content = [{"type": "text", "text": "boom"}]
    assert call_lines("https://gw/mcp", "t", True, "TOOL_ERROR", content, None) == (
        "server-url https://gw/mcp\n"
        "tool t\n"
        "is-error true\n"
        "error-code TOOL_ERROR\n"
        "recommended-next-action null\n"
        "content\n"
        '[{"type":"text","text":"boom"}]'
    )


def test_call_lines_never_reached_golden() -> None:
    assert call_lines(None, None, True, "SERVER_URL_UNKNOWN", None, None) == (
        "server-url unknown\n"
        "tool unknown\n"
        "is-error true\n"
        "error-code SERVER_URL_UNKNOWN\n"
        "recommended-next-action null\n"
        "content\n"
        "null"
    )


def test_call_lines_empty_content_is_empty_array() -> None:
    assert call_lines("u", "t", False, None, [], None).split("\n")[-1] == "[]"


def test_call_json_golden() -> None:
    data = call_json("https://gw/mcp", "t", False, None, [{"type": "text", "text": "ok"}], None)
    assert list(data) == [
        "serverUrl",
        "tool",
        "isError",
        "errorCode",
        "content",
        "recommendedNextAction",
    ]
    assert json_text(data) == (
        '{"serverUrl":"https://gw/mcp","tool":"t","isError":false,"errorCode":null,'
        '"content":[{"type":"text","text":"ok"}],"recommendedNextAction":null}'
    )
    failed = call_json(None, "t", True, "TOOL_REQUEST_REJECTED", None, "check --tool")
    assert json_text(failed) == (
        '{"serverUrl":null,"tool":"t","isError":true,"errorCode":"TOOL_REQUEST_REJECTED",'
        '"content":null,"recommendedNextAction":"check --tool"}'
    )


def test_json_text_is_compact_and_keeps_non_ascii() -> None:
    assert json_text({"a": [1, "é"], "b": None}) == '{"a":[1,"é"],"b":null}'
