"""service.daemon.statuscache: each link's part of /v1/status is rebuilt only when it changed."""

from __future__ import annotations

import dataclasses
import json

from service.daemon.linkstatus import LinkSnapshot, LinkState, render
from service.daemon.statuscache import StatusCache


def snapshot(server_id: int, **changes: object) -> LinkSnapshot:
    base = LinkSnapshot(
        server_id=server_id,
        url=f"http://127.0.0.1:9/{server_id}",
        state=LinkState.OPEN,
        generation=1,
        last_error=None,
        last_error_code=None,
        last_error_hint=None,
        backoff_until=None,
        reconnects=0,
        relistens=0,
        streams_ended_young=0,
        stream_open=True,
        honored=("r://a",),
        capabilities=None,
        wanted=("r://a",),
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def test_json_is_the_rendered_links_in_order() -> None:
    links = [snapshot(2), snapshot(1, state=LinkState.BACKOFF, reconnects=3)]
    assert json.loads(StatusCache().link_status_json(links)) == [render(s) for s in links]


def test_empty_is_an_empty_array() -> None:
    assert StatusCache().link_status_json([]) == b"[]"


def test_unchanged_link_reuses_its_part_and_a_change_rebuilds_it() -> None:
    cache = StatusCache()
    cache.link_status_json([snapshot(1), snapshot(2)])
    first = cache.parts[1][1]
    cache.link_status_json([snapshot(1), snapshot(2)])
    assert cache.parts[1][1] is first  # equal snapshot: the same bytes object
    body = cache.link_status_json([snapshot(1, state=LinkState.BACKOFF), snapshot(2)])
    assert cache.parts[1][1] is not first
    assert json.loads(body)[0]["state"] == "backoff"


def test_links_that_are_gone_are_forgotten() -> None:
    cache = StatusCache()
    cache.link_status_json([snapshot(1), snapshot(2), snapshot(3)])
    assert json.loads(cache.link_status_json([snapshot(2)])) == [render(snapshot(2))]
    assert set(cache.parts) == {2}
