"""The face's ``/mcp`` as seed 001's publisher: a bounded number of listen streams (one more
is HTTP 503 with -32603), and a listen that can carry nothing ended right after its ack.
Served by uvicorn on a real unix socket (``tests/api/live.py``) over a real SQLite store."""

from __future__ import annotations

import json
from contextlib import ExitStack
from typing import Any

from service.face import protocol as p
from service.face.http import MAX_LISTENS
from tests.api.live import LiveApi
from tests.api.test_face_bounds import META, MODERN, client, modern, rpc
from tests.support.poll import until


def listen_request(msg_id: int, notifications: dict[str, Any]) -> dict[str, Any]:
    return {
        "json": rpc("subscriptions/listen", {"notifications": notifications, **META}, msg_id),
        "headers": {**MODERN, "Mcp-Method": "subscriptions/listen"},
    }


def frames(text: str) -> list[dict[str, Any]]:
    return [
        json.loads(line[len("data: ") :]) for line in text.splitlines() if line.startswith("data: ")
    ]


def test_one_listen_over_the_limit_gets_503_and_a_closed_one_frees_its_place(
    live: LiveApi,
) -> None:
    assert MAX_LISTENS == 100  # seed 001: subscriptions: { max: 100 }
    face_http = live.app.state.face_http
    face_http.max_listens = 2
    wanted = {"resourcesListChanged": True}
    with client(live) as c, ExitStack() as held:
        first = held.enter_context(c.stream("POST", "/mcp", **listen_request(1, wanted)))
        assert first.status_code == 200
        second = c.stream("POST", "/mcp", **listen_request(2, wanted))
        assert held.enter_context(second).status_code == 200
        refused = modern(c, "subscriptions/listen", {"notifications": wanted})
        assert refused.status_code == 503
        assert refused.json()["error"] == {
            "code": p.INTERNAL_ERROR,
            "message": "Subscription limit reached",
        }
        assert modern(c, "tools/list", {}).status_code == 200  # the face keeps answering
        held.close()
        until("the closed listens are counted out", lambda: face_http.listens == 0)
        with c.stream("POST", "/mcp", **listen_request(3, wanted)) as again:
            assert again.status_code == 200


def test_a_listen_that_can_carry_nothing_ends_after_its_ack(live: LiveApi) -> None:
    with client(live, timeout=5) as c:
        for asked in ({}, {"toolsListChanged": True}):
            answer = c.post("/mcp", **listen_request(7, asked))
            assert answer.status_code == 200
            ack, final = frames(answer.text)  # the body ended: no keep-alives, no hold
            assert ack["method"] == "notifications/subscriptions/acknowledged"
            assert ack["params"]["notifications"] == {}
            assert final["id"] == 7 and final["result"]["resultType"] == "complete"
