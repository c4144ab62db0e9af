"""Many ``POST /v1/subscriptions`` at once: the supervisor writes the requests that queue up
together (one transaction) and hands them to their links in one go. Whatever got batched
with what, every request must get its own answer, idempotency must hold across requests of
one batch, every link must end up listening to every URI added to it, and ``/v1/status``
must count them right after."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx

from service.daemon.config import Settings
from service.daemon.supervisor import Supervisor
from service.daemon.wiring import supervisor_collaborators
from tests.api.fakes import migrated_store
from tests.daemon.test_daemon import BOTH_BACKENDS, SLOW, put
from tests.support.daemon import Daemon
from tests.support.poll import until

LINKS = 4
URIS = 8


def _client(d: Daemon) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.AsyncHTTPTransport(uds=str(d.socket_path)),
        base_url="http://localhost",
        timeout=60.0,
    )


async def _post_all(d: Daemon, bodies: list[dict[str, Any]]) -> list[httpx.Response]:
    async with _client(d) as api:
        return list(await asyncio.gather(*(api.post("/v1/subscriptions", json=b) for b in bodies)))


def _wait_status(d: Daemon, done: Any, timeout: float = 30.0) -> dict[str, Any]:
    def settled() -> dict[str, Any] | None:
        status: dict[str, Any] = d.api("GET", "/v1/status").json()
        return status if done(status) else None

    found: dict[str, Any] = until("the status settles", settled, timeout)
    return found


@BOTH_BACKENDS
def test_concurrent_posts_each_get_their_answer_and_reach_their_link(
    lab_server_factory, daemon_factory
) -> None:
    lab = lab_server_factory(SLOW)
    uris = [f"test://many/{k}" for k in range(URIS)]
    for uri in uris:
        put(lab, uri, f"text of {uri}", notify=False)
    urls = [f"{lab.url}?link={n}" for n in range(LINKS)]
    d = daemon_factory()
    # Every (url, uri) twice, single form, all at once; plus the last link's URIs once
    # more in the batch form, racing with them.
    singles = [{"url": url, "uri": uri} for url in urls for uri in uris]
    bodies = [*singles, *singles, {"url": urls[-1], "uris": list(reversed(uris))}]
    responses = asyncio.run(_post_all(d, bodies))

    ids: dict[tuple[str, str], set[int]] = {}
    created: dict[tuple[str, str], int] = {}
    for body, response in zip(bodies, responses, strict=True):
        assert response.status_code in (200, 201), response.text
        items = response.json()["subscriptions"] if "uris" in body else [response.json()]
        wanted = body["uris"] if "uris" in body else [body["uri"]]
        assert [item["uri"] for item in items] == wanted, "answers in the request's order"
        for item in items:
            assert item["serverUrl"] == body["url"]
            key = (item["serverUrl"], item["uri"])
            ids.setdefault(key, set()).add(item["id"])
            created[key] = created.get(key, 0) + int(item["created"])
        if "uri" in body:
            assert response.status_code == (201 if response.json()["created"] else 200)
    assert len(ids) == LINKS * URIS
    assert all(len(found) == 1 for found in ids.values()), "one id per (server, uri)"
    assert set(created.values()) == {1}, "exactly one request created each subscription"

    total = LINKS * URIS
    status = _wait_status(
        d,
        lambda s: (
            s["subscriptionsByState"].get("active") == total
            and len(s["links"]) == LINKS
            and all(link["honoredUris"] == sorted(uris) for link in s["links"])
        ),
    )
    assert status["counts"]["subscriptions"] == total
    assert status["counts"]["servers"] == LINKS
    assert sorted(link["url"] for link in status["links"]) == sorted(urls)
    assert all(link["uris"] == sorted(uris) for link in status["links"])
    # every subscription was read: its current revision is there
    for (_url, uri), (sub_id,) in ids.items():
        shown = d.api("GET", f"/v1/subscriptions/{sub_id}").json()
        assert shown["current"] is not None and shown["current"]["text"] == f"text of {uri}"


@BOTH_BACKENDS
def test_a_uri_added_during_a_burst_is_listened_to_and_counted(
    lab_server_factory, daemon_factory
) -> None:
    lab = lab_server_factory(SLOW)
    for k in range(URIS + 1):
        put(lab, f"test://burst/{k}", f"v{k}", notify=False)
    d = daemon_factory()
    url = f"{lab.url}?link=burst"
    first = [{"url": url, "uri": f"test://burst/{k}"} for k in range(URIS)]
    asyncio.run(_post_all(d, first))
    _wait_status(d, lambda s: s["subscriptionsByState"].get("active") == URIS)

    # The link is busy re-listening for one burst when the late URI arrives in another.
    async def late() -> httpx.Response:
        async with _client(d) as api:
            burst = [api.post("/v1/subscriptions", json=b) for b in first]
            extra = api.post("/v1/subscriptions", json={"url": url, "uri": f"test://burst/{URIS}"})
            *_, answer = await asyncio.gather(*burst, extra)
            return answer

    answer = asyncio.run(late())
    assert answer.status_code == 201, answer.text
    status = d.api("GET", "/v1/status").json()
    assert status["counts"]["subscriptions"] == URIS + 1, "counted right after the POST"
    assert f"test://burst/{URIS}" in status["links"][0]["uris"]
    status = _wait_status(d, lambda s: s["subscriptionsByState"].get("active") == URIS + 1)
    assert status["links"][0]["honoredUris"] == sorted(f"test://burst/{k}" for k in range(9))
    assert status["subscriptionsByState"] == {"active": URIS + 1}


def test_a_request_the_database_refuses_fails_alone(tmp_path: Path) -> None:
    """The supervisor writes queued requests together; when that write fails for a reason
    other than the database refusing writes, each request is written on its own, so only
    the one at fault gets the error. (The fault is injected: input validation keeps real
    requests from reaching the database malformed.)"""

    async def run() -> None:
        store = migrated_store(tmp_path / "mcpsub.db")
        settings = Settings(state_dir=tmp_path, replica_id="test")
        supervisor = Supervisor(store, settings, *supervisor_collaborators(store, settings))
        real = store.add_subscriptions_batch
        batches: list[int] = []

        async def refusing(requests: Any, credential_key: str = "") -> Any:
            batches.append(len(requests))
            if any(url.endswith("/poison") for url, *_ in requests):
                raise ValueError("refused")
            return await real(requests, credential_key)

        store.add_subscriptions_batch = refusing  # type: ignore[method-assign]
        try:
            results = await asyncio.gather(
                supervisor.subscribe("http://127.0.0.1:1/a", "test://1"),
                supervisor.subscribe("http://127.0.0.1:1/poison", "test://1"),
                supervisor.subscribe_many("http://127.0.0.1:1/b", ["test://1", "test://2"]),
                return_exceptions=True,
            )
        finally:
            await supervisor.stop()
            await store.close()
        first, poisoned, third = results
        assert isinstance(poisoned, ValueError)
        assert isinstance(first, tuple) and first[0].server_url == "http://127.0.0.1:1/a"
        assert isinstance(third, list) and [s.uri for s, created in third if created] == [
            "test://1",
            "test://2",
        ]
        assert batches[0] == 3, "the three queued requests were tried as one write"

    asyncio.run(run())
