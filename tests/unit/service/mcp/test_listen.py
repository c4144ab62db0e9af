"""service.mcp.listen: the subscriptions/listen state machine (spec §3)."""

from __future__ import annotations

from typing import Any

import pytest

from service.mcp import wire
from service.mcp.errors import ProtocolViolation
from service.mcp.listen import (
    Acknowledged,
    Closed,
    Failed,
    ListenMachine,
    ListenState,
    Lost,
    Notified,
    honored_uris,
    same_id,
)

TAG = "io.modelcontextprotocol/subscriptionId"
URI = "test://review/status"


def ack(tag: Any, notifications: Any = None) -> dict[str, Any]:
    params: dict[str, Any] = {"_meta": {TAG: tag}}
    if notifications is not None:
        params["notifications"] = notifications
    return {
        "jsonrpc": "2.0",
        "method": "notifications/subscriptions/acknowledged",
        "params": params,
    }


def updated(tag: Any, uri: Any = URI) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "method": "notifications/resources/updated",
        "params": {"_meta": {TAG: tag}, "uri": uri},
    }


def result(rid: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": {"resultType": "complete"}}


def error(rid: Any, code: Any = -32603, message: str = "Subscription limit reached") -> dict:
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}


def opened(listen_id: Any = 1) -> ListenMachine:
    machine = ListenMachine(listen_id)
    machine.receive(ack(listen_id, {"resourceSubscriptions": [URI]}))
    return machine


def test_ack_first_acknowledges_with_honored_filter() -> None:
    machine = ListenMachine("listen-1")
    honored = {"toolsListChanged": True, "resourceSubscriptions": [URI]}
    event = machine.receive(ack("listen-1", honored))
    assert event == Acknowledged(honored)
    assert machine.state is ListenState.OPEN
    assert machine.acknowledged


def test_ack_without_notifications_honors_nothing() -> None:
    machine = ListenMachine(1)
    assert machine.receive(ack(1)) == Acknowledged({})
    assert machine.acknowledged


def test_ack_with_non_object_filter_is_violation() -> None:
    machine = ListenMachine(1)
    with pytest.raises(ProtocolViolation, match="not an object"):
        machine.receive(ack(1, [URI]))
    assert machine.state is ListenState.AWAITING_ACK
    assert not machine.acknowledged


def test_notification_before_ack_is_violation_and_state_unchanged() -> None:
    machine = ListenMachine(1)
    with pytest.raises(ProtocolViolation, match="before the subscription was acknowledged"):
        machine.receive(updated(1))
    assert machine.state is ListenState.AWAITING_ACK
    # The machine still accepts the ack afterwards.
    assert isinstance(machine.receive(ack(1)), Acknowledged)


@pytest.mark.parametrize(
    ("listen_id", "tag"), [(1, "1"), ("1", 1), (1, True), (1, 1.0), (0, False)]
)
def test_ack_with_wrong_id_type_is_violation(listen_id: Any, tag: Any) -> None:
    machine = ListenMachine(listen_id)
    with pytest.raises(ProtocolViolation, match="subscriptionId"):
        machine.receive(ack(tag))
    assert machine.state is ListenState.AWAITING_ACK


@pytest.mark.parametrize(("listen_id", "tag"), [(1, "1"), ("1", 1), (1, True), (1, 2)])
def test_notification_with_wrong_id_is_violation(listen_id: Any, tag: Any) -> None:
    machine = opened(listen_id)
    with pytest.raises(ProtocolViolation, match="is not this listen's id"):
        machine.receive(updated(tag))
    assert machine.state is ListenState.OPEN


@pytest.mark.parametrize(
    "params",
    [
        None,
        "not-a-dict",
        {"uri": URI},
        {"_meta": {}, "uri": URI},
        {"_meta": "x", "uri": URI},
        {"_meta": {TAG: None}, "uri": URI},
    ],
)
def test_missing_params_meta_or_tag_is_violation(params: Any) -> None:
    machine = opened(1)
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": "notifications/resources/updated"}
    if params is not None:
        message["params"] = params
    with pytest.raises(ProtocolViolation):
        machine.receive(message)
    assert machine.state is ListenState.OPEN
    # And an untagged ack is refused too.
    fresh = ListenMachine(1)
    ack_message = dict(message, method=wire.ACKNOWLEDGED)
    with pytest.raises(ProtocolViolation):
        fresh.receive(ack_message)
    assert fresh.state is ListenState.AWAITING_ACK


def test_notification_after_ack() -> None:
    machine = opened("a")
    event = machine.receive(updated("a"))
    assert isinstance(event, Notified)
    assert event.method == "notifications/resources/updated"
    assert event.uri == URI
    assert machine.state is ListenState.OPEN
    listed = machine.receive(
        {"jsonrpc": "2.0", "method": wire.TOOLS_LIST_CHANGED, "params": {"_meta": {TAG: "a"}}}
    )
    assert isinstance(listed, Notified)
    assert listed.uri is None


def test_notified_uri_must_be_string() -> None:
    assert Notified("m", {"uri": 5}).uri is None
    assert Notified("m").uri is None


def test_result_after_ack_closes() -> None:
    machine = opened(7)
    event = machine.receive(result(7))
    assert event == Closed({"resultType": "complete"})
    assert machine.state is ListenState.CLOSED


def test_result_with_non_object_result_closes_with_empty_dict() -> None:
    machine = opened(7)
    assert machine.receive({"jsonrpc": "2.0", "id": 7, "result": None}) == Closed({})


@pytest.mark.parametrize("rid", ["7", 8, True, None])
def test_result_with_other_id_is_violation(rid: Any) -> None:
    machine = opened(7)
    with pytest.raises(ProtocolViolation, match="response for id"):
        machine.receive(result(rid))
    assert machine.state is ListenState.OPEN


def test_result_before_ack_is_violation() -> None:
    machine = ListenMachine(1)
    with pytest.raises(ProtocolViolation):
        machine.receive(result(1))
    assert machine.state is ListenState.AWAITING_ACK


def test_error_before_ack_fails() -> None:
    machine = ListenMachine("listen-1")
    event = machine.receive(error("listen-1", -32603, "Subscription limit reached"))
    assert isinstance(event, Failed)
    assert event.error.code == -32603
    assert event.error.rpc_message == "Subscription limit reached"
    assert event.error.method == "subscriptions/listen"
    assert machine.state is ListenState.FAILED


def test_error_after_ack_fails() -> None:
    machine = opened(1)
    event = machine.receive(error(1, -32601, "nope"))
    assert isinstance(event, Failed)
    assert event.error.code == -32601
    assert machine.state is ListenState.FAILED


def test_error_with_non_int_code_becomes_internal_error() -> None:
    machine = ListenMachine(1)
    event = machine.receive(error(1, "boom"))
    assert isinstance(event, Failed)
    assert event.error.code == -32603


def test_error_with_other_id_is_violation() -> None:
    machine = ListenMachine(1)
    with pytest.raises(ProtocolViolation):
        machine.receive(error("1"))
    assert machine.state is ListenState.AWAITING_ACK


def test_second_ack_is_violation() -> None:
    machine = opened(1)
    with pytest.raises(ProtocolViolation, match="second acknowledgement"):
        machine.receive(ack(1, {"resourceSubscriptions": ["other://x"]}))
    assert machine.state is ListenState.OPEN
    assert machine.acknowledged


@pytest.mark.parametrize("opened_first", [False, True])
def test_jsonrpc_request_is_violation(opened_first: bool) -> None:
    machine = opened(1) if opened_first else ListenMachine(1)
    before = machine.state
    request = {"jsonrpc": "2.0", "id": 99, "method": "sampling/createMessage", "params": {}}
    with pytest.raises(ProtocolViolation, match="JSON-RPC request"):
        machine.receive(request)
    assert machine.state is before


def test_garbage_is_violation() -> None:
    machine = opened(1)
    with pytest.raises(ProtocolViolation):
        machine.receive({"jsonrpc": "2.0"})
    assert machine.state is ListenState.OPEN


@pytest.mark.parametrize("opened_first", [False, True])
def test_eof_is_lost(opened_first: bool) -> None:
    machine = opened(1) if opened_first else ListenMachine(1)
    event = machine.eof("connection reset")
    assert event == Lost("connection reset")
    assert machine.state is ListenState.LOST


def test_eof_after_close_keeps_closed_state() -> None:
    machine = opened(1)
    machine.receive(result(1))
    assert isinstance(machine.eof(), Lost)
    assert machine.state is ListenState.CLOSED


def test_nothing_is_accepted_after_close() -> None:
    machine = opened(1)
    machine.receive(result(1))
    for message in (updated(1), result(1), error(1), ack(1)):
        with pytest.raises(ProtocolViolation):
            machine.receive(message)
    assert machine.state is ListenState.CLOSED


@pytest.mark.parametrize(
    ("honored", "expected"),
    [
        (None, []),
        ({}, []),
        ({"resourceSubscriptions": "a"}, []),
        ({"resourceSubscriptions": ["a", 1, None, "b"]}, ["a", "b"]),
        ({"toolsListChanged": True, "resourceSubscriptions": [URI]}, [URI]),
    ],
)
def test_honored_uris(honored: Any, expected: list[str]) -> None:
    assert honored_uris(honored) == expected


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [(1, 1, True), ("1", "1", True), (1, "1", False), (1, True, False), (0, False, False)],
)
def test_same_id_keeps_json_type(a: Any, b: Any, same: bool) -> None:
    assert same_id(a, b) is same
