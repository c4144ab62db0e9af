"""Issue 22 §3 against the real daemon: host names no resolver can take, credentials in URLs,
ambiguous HTTP framing, and what the log says when tasks stop or clients go away."""

from __future__ import annotations

import itertools
from typing import Any

from tests.support.daemon import Daemon

UNENCODABLE = {
    "an IDNA label over 63 characters": "ß" * 250 + ".com",
    "an ASCII label over 63 characters": "a" * 250 + ".com",
    "an empty label": "a..example",
}
PATHS = ("/v1/webhooks", "/v1/subscriptions")


def _nothing_stored(d: Daemon) -> None:
    assert d.api("GET", "/v1/subscriptions").json()["subscriptions"] == []
    assert d.api("GET", "/v1/webhooks").json()["webhooks"] == []


def test_a_host_no_resolver_can_encode_is_refused_at_creation(daemon_factory: Any) -> None:
    """Before: 201, then the target showed INTERNAL_ERROR and its test ping answered 500."""
    d = daemon_factory()
    for (what, host), path in itertools.product(UNENCODABLE.items(), PATHS):
        body: dict[str, Any] = {"url": f"http://{host}/h"}
        if path == "/v1/subscriptions":
            body["uri"] = "test://x"
        response = d.api("POST", path, json=body)
        assert response.status_code == 400, (what, response.text)
        error = response.json()
        assert error["errorCode"] == "INVALID_URL" and error["field"] == "url", (what, error)
        assert "not a valid DNS name" in error["message"], (what, error)
        assert error["hint"], error
    _nothing_stored(d)
    # A name that encodes (IDNA) is still accepted.
    assert d.api("POST", "/v1/webhooks", json={"url": "http://bücher.example/h"}).status_code == 201
