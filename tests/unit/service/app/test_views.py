"""service.app.views: store records in, the API's camelCase JSON out (pure)."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any

from service.app.views import (
    camel,
    content_json,
    event_json,
    link_for,
    link_of,
    revision_summary,
    state_hint,
    subscription_json,
)
from service.failures import RESOURCE_NOT_FOUND_HINT
from service.store.records import Event, Revision, Subscription

SUB = Subscription(
    id=7,
    server_id=3,
    server_url="http://127.0.0.1:9/mcp",
    uri="r://a",
    state="active",
    state_reason=None,
    state_code=None,
    content_hash="h",
    revision=2,
    last_read_at=5.0,
    created_at=1.0,
)
REV = Revision(
    id=40,
    subscription_id=7,
    revision=2,
    content_hash="h",
    contents=[{"text": "x"}],
    text="x",
    generation=4,
    read_at=5.0,
)


def test_camel() -> None:
    assert camel("server_url") == "serverUrl"
    assert camel("last_read_at") == "lastReadAt"
    assert camel("id") == "id"


def test_subscription_json_has_every_field_camel_cased_and_the_state_hint() -> None:
    out = subscription_json(SUB)
    assert out == {
        "id": 7,
        "serverId": 3,
        "serverUrl": "http://127.0.0.1:9/mcp",
        "uri": "r://a",
        "state": "active",
        "stateReason": None,
        "stateCode": None,
        "contentHash": "h",
        "revision": 2,
        "lastReadAt": 5.0,
        "createdAt": 1.0,
        "createdBy": "person",
        "stateHint": None,
    }
    failing = dataclasses.replace(SUB, state="error", state_code="RESOURCE_NOT_FOUND")
    assert subscription_json(failing)["stateHint"] == RESOURCE_NOT_FOUND_HINT


def test_event_json() -> None:
    event = Event(
        id=1,
        type="resource.updated",
        subscription_id=7,
        server_url="u",
        uri="r://a",
        revision_id=40,
        revision=2,
        data={"content_hash": "kept"},
        created_at=5.0,
    )
    out = event_json(event)
    assert out["subscriptionId"] == 7 and out["revisionId"] == 40 and out["createdAt"] == 5.0
    assert out["data"] == {"content_hash": "kept"}  # data is the server's: not renamed


def test_revision_summary_and_content() -> None:
    assert revision_summary(None) is None
    assert revision_summary(REV) == {
        "revision": 2, "contentHash": "h", "generation": 4, "readAt": 5.0, "text": "x"
    }  # fmt: skip
    content = content_json(SUB, REV, 99)
    assert content["subscriptionId"] == 7 and content["eventId"] == 99
    assert content["contents"] == [{"text": "x"}] and content["generation"] == 4


def test_state_hint_prefers_the_code_then_a_failing_link() -> None:
    link = {"state": "backoff", "lastErrorCode": "NETWORK_ERROR", "lastErrorHint": "check it"}
    assert state_hint(SUB, None) is None
    assert state_hint(SUB, link) == "check it"
    assert state_hint(SUB, {**link, "state": "open"}) is None  # recovered
    assert state_hint(SUB, {**link, "lastErrorHint": None}) is None
    coded = dataclasses.replace(SUB, state_code="RESOURCE_NOT_FOUND")
    assert state_hint(coded, link) == RESOURCE_NOT_FOUND_HINT


def test_link_for_by_server_id_then_url() -> None:
    by_id = {"serverId": 3, "url": "other"}
    by_url = {"serverId": 9, "url": "http://127.0.0.1:9/mcp"}
    assert link_for([by_url, by_id], SUB) is by_id
    assert link_for([by_url], SUB) is by_url
    assert link_for([{"serverId": 9, "url": "x"}], SUB) is None


def test_link_of_asks_for_its_own_link_and_scans_only_when_there_is_none() -> None:
    def no_scan() -> list[dict[str, Any]]:
        raise AssertionError("all links' status read for one subscription")

    own = {"serverId": 3, "state": "open"}
    daemon = SimpleNamespace(link_status_of={3: own}.get, link_status=no_scan)
    assert link_of(daemon, SUB) == own  # type: ignore[arg-type]
    by_url = {"serverId": 9, "url": SUB.server_url, "state": "idle"}
    elsewhere = SimpleNamespace(link_status_of=lambda _id: None, link_status=lambda: [by_url])
    assert link_of(elsewhere, SUB) == by_url  # type: ignore[arg-type]
    absent = SimpleNamespace(link_status_of=lambda _id: None, link_status=lambda: [])
    assert link_of(absent, SUB) is None  # type: ignore[arg-type]


def test_event_json_is_every_field_of_the_event_in_its_order_and_copies_data() -> None:
    event = Event(9, "resource.updated", 7, "http://127.0.0.1:9/mcp", "r://a", 4, 2,
                  {"contentHash": "h", "generation": 1}, 12.5)  # fmt: skip
    shown = event_json(event)
    fields = [field.name for field in dataclasses.fields(Event)]
    assert list(shown) == [camel(name) for name in fields]
    assert shown == {camel(name): getattr(event, name) for name in fields}
    shown["data"]["extra"] = True
    assert "extra" not in event.data
