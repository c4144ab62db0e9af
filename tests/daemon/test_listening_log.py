"""What a start logs about its links' streams: a count, not a line per link.

A start of 10,000 links logged "listening" 10,000 times at info, 2 % of its event loop. A
link's first stream is now logged at debug, and the supervisor's tick logs how many links
listen whenever that number changed; a stream opened again after a loss stays an info line
of its own (an operator watching a link recover sees it)."""

from __future__ import annotations

import json
from typing import Any

from tests.daemon.test_daemon import SLOW, put, subscribe, wait_text
from tests.support.poll import until

URIS = ("test://log/a", "test://log/b")


def _entries(lines: list[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in lines if line.startswith("{")]


def test_a_start_logs_how_many_links_listen_and_a_relisten_its_own_line(
    lab_server_factory: Any, daemon_factory: Any
) -> None:
    labs = [lab_server_factory(SLOW) for _ in range(2)]
    d = daemon_factory()
    for lab, uri in zip(labs, URIS, strict=True):
        put(lab, uri, "v1")
        subscribe(d, lab.url, uri)
    for uri in URIS:
        wait_text(d, uri, "v1")

    def counted() -> bool:
        return any(
            e["event"] == "links listening" and e["listening"] == 2 and e["links"] == 2
            for e in _entries(d.lines)
        )

    until("a 'links listening' line counts both links", counted, 15.0)
    first = [e for e in _entries(d.lines) if e["event"] == "listening"]
    assert first == []  # each link's first stream: debug, not written at the info level

    def relistened() -> list[dict[str, Any]]:
        return [e for e in _entries(d.lines) if e["event"] == "listening"]

    labs[0].control("POST", "/lab/streams/close").raise_for_status()  # the link listens again
    again = until("the re-opened stream's 'listening' line", relistened, 15.0)
    assert {e["level"] for e in again} == {"info"}
    assert all(labs[0].url.split("/mcp")[0] in e["url"] for e in again), again
    assert d.stop() == 0
