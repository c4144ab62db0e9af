"""An agent's unsubscribe racing a person's takeover, against a real daemon, both backends.

A person who subscribes to what an agent made takes it over (``createdBy`` becomes
``person``), and an agent may remove only what an agent made. Before, the creator was
looked at in one step and the row deleted in another, so a takeover that committed between
the two lost the person's subscription. Here the two requests are sent together, round after
round: whichever lands first, the URI stays watched by a person."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from tests.support.daemon import Daemon

ROUNDS = 40


async def race(d: Daemon, lab_url: str) -> list[str]:
    transport = httpx.AsyncHTTPTransport(uds=str(d.socket_path))
    lost: list[str] = []
    async with httpx.AsyncClient(
        transport=transport, base_url="http://localhost", timeout=30
    ) as api:
        # The person allows the server's origin for agents.
        first = await api.post("/v1/subscriptions", json={"url": lab_url, "uri": "test://race/0"})
        assert first.status_code in (200, 201), first.text
        for n in range(1, ROUNDS + 1):
            uri = f"test://race/{n}"
            made = await api.post("/v1/agent/subscriptions", json={"url": lab_url, "uris": [uri]})
            assert made.status_code == 200, made.text
            agent_id = made.json()["subscriptions"][0]["id"]
            removal, takeover = await asyncio.gather(
                api.delete(f"/v1/agent/subscriptions/{agent_id}"),
                api.post("/v1/subscriptions", json={"url": lab_url, "uri": uri}),
            )
            assert removal.status_code in (200, 403), removal.text
            assert takeover.status_code in (200, 201), takeover.text
            watched = await api.get(f"/v1/subscriptions/{takeover.json()['id']}")
            if watched.status_code != 200 or watched.json()["createdBy"] != "person":
                lost.append(f"{uri}: removal {removal.status_code}, takeover {takeover.text}")
    return lost


def test_an_agents_unsubscribe_never_removes_what_a_person_just_took_over(
    database_url: str, daemon_factory: Any, lab_server_factory: Any
) -> None:
    lab = lab_server_factory()
    d: Daemon = daemon_factory()
    lost = asyncio.run(race(d, lab.url))
    assert not lost, f"{len(lost)} of {ROUNDS} takeovers lost:\n" + "\n".join(lost)
