"""A link's state is written out as its value everywhere a person or a script reads it:
``str()`` of a plain Enum would count ``{"LinkState.OPEN": 1}`` in ``/v1/overview``, show
``open 0`` beside a row ``LinkState.OPEN 1`` in the console, and log ``"state":
"<LinkState.ERROR: 'error'>"`` in "link down" lines. On both backends, with a real daemon."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from typing import Any

import structlog

from service.daemon.linkstatus import LinkState
from service.daemon.logs import plain_values
from service.mcp.listen import ListenState
from tests.support.daemon import Daemon
from tests.support.lab import LabServer
from tests.support.poll import until

STATE_NAMES = {state.value for state in LinkState}


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_overview_links_and_log_name_states_by_value(
    daemon_factory: Callable[..., Daemon], database_url: str, lab_server: LabServer
) -> None:
    d = daemon_factory()
    lab_server.control(
        "PUT", "/lab/resources", json={"uri": "test://names/a", "text": "a"}
    ).raise_for_status()
    ok = d.api("POST", "/v1/subscriptions", json={"url": lab_server.url, "uri": "test://names/a"})
    assert ok.status_code in (200, 201), ok.text
    down_url = f"http://127.0.0.1:{_closed_port()}/mcp"
    down = d.api("POST", "/v1/subscriptions", json={"url": down_url, "uri": "test://names/b"})
    assert down.status_code in (200, 201), down.text

    def counted() -> dict[str, Any] | None:
        links = d.api("GET", "/v1/overview").json()["links"]
        return links if links["byState"].get("open") == 1 and links["total"] == 2 else None

    links = until("the overview counts one open link", counted, 15)
    assert set(links["byState"]) <= STATE_NAMES, links
    assert sum(links["byState"].values()) == 2

    # The figures agree with the per-link states /v1/links shows and filters by. The down
    # link moves between connecting and backoff on its own, so one pair of reads can straddle
    # a move: compare pairs until one is taken between two moves.
    def agreeing() -> tuple[dict[str, int], dict[str, int]] | None:
        counts = d.api("GET", "/v1/overview").json()["links"]["byState"]
        by_hand: dict[str, int] = {}
        for link in d.api("GET", "/v1/links").json()["links"]:
            by_hand[link["state"]] = by_hand.get(link["state"], 0) + 1
        return (counts, by_hand) if counts == by_hand else None

    until("the overview and /v1/links agree", agreeing, 15)
    opened = d.api("GET", "/v1/links", params={"state": "open"}).json()["links"]
    assert [link["url"] for link in opened] == [lab_server.url]

    until("a link-down line", lambda: any('"link down"' in line for line in d.lines), 15)
    assert d.stop() == 0
    entries = [json.loads(line) for line in d.lines if line.startswith("{")]
    downs = [e for e in entries if e.get("event") == "link down"]
    assert downs and all(e["state"] in STATE_NAMES for e in downs), downs
    assert not any("LinkState" in line or "ListenState" in line for line in d.lines)


def test_enum_members_are_written_as_their_values() -> None:
    assert str(LinkState.OPEN) == "open" and f"{LinkState.ERROR}" == "error"
    assert str(ListenState.AWAITING_ACK) == "awaiting_ack"
    assert json.dumps({"s": LinkState.BACKOFF}) == '{"s": "backoff"}'
    rendered = structlog.processors.JSONRenderer()(
        None, "warning", plain_values(None, "warning", {"event": "x", "state": LinkState.ERROR})
    )
    assert json.loads(rendered)["state"] == "error"
