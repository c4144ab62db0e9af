"""The face's one method table (``session.METHODS``) and what discovery says
agree: every method a client is told of (by ``initialize``'s or ``server/discover``'s
capabilities) dispatches in that era, and every method the table dispatches in an era is
advertised there; the others answer -32601.

The session is the real one over the real API backend pointed at a socket nobody listens
on: a handler that reaches the daemon answers DAEMON_UNAVAILABLE (-32603), which proves it
was dispatched."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from service.face import protocol as p
from service.face.handlers import Face
from service.face.remote import ApiBackend
from service.face.session import METHODS, Session, methods_in
from service.localclient import Endpoint

MODERN_META = {p.META_VERSION: p.MODERN, p.META_CAPS: {}}


def advertised(version: str, caps: dict[str, Any]) -> set[str]:
    """The methods a client may call in ``version`` after reading ``caps`` (the spec's
    rules: the era's base methods, and those of each capability)."""
    modern = version == p.MODERN
    methods = {"server/discover"} if modern else {"initialize", "ping"}
    if "tools" in caps:
        methods |= {"tools/list", "tools/call"}
    if "resources" in caps:
        methods |= {"resources/list", "resources/read", "resources/templates/list"}
        if caps["resources"].get("subscribe"):
            follow = {"subscriptions/listen"} if modern else {"resources/subscribe"}
            methods |= follow | (set() if modern else {"resources/unsubscribe"})
    if "logging" in caps:
        methods.add("logging/setLevel")
    return methods


async def discovery(session: Session, version: str) -> dict[str, Any]:
    """The capabilities the face tells a client of ``version``, by the era's own request."""
    if version == p.MODERN:
        msg = p.Incoming("server/discover", {"_meta": MODERN_META}, 0, True, False)
    else:
        init = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t"}}
        msg = p.Incoming("initialize", init, 0, True, False)
    answer = await session.handle(msg)
    assert answer is not None and "result" in answer, answer
    caps: dict[str, Any] = answer["result"]["capabilities"]
    return caps


async def code_of(session: Session, method: str, version: str) -> int | None:
    """The error code ``method`` answers in ``version`` (None: a result or no answer)."""
    params: dict[str, Any] = {"_meta": MODERN_META} if version == p.MODERN else {}
    if method == "initialize":
        params["protocolVersion"] = version
    answer = await session.handle(p.Incoming(method, params, 1, True, False))
    return None if answer is None or "result" in answer else int(answer["error"]["code"])


@pytest.mark.parametrize("version", p.SUPPORTED)
def test_discovery_and_dispatch_agree_in_every_era(version: str, tmp_path: Path) -> None:
    async def go() -> None:
        backend = ApiBackend(Endpoint(tmp_path / "nobody.sock"))
        session = Session(Face(backend), lambda _m: True)
        try:
            caps = await discovery(session, version)
            assert advertised(version, caps) == methods_in(version)
            for method in METHODS:
                if version != p.MODERN and method == "server/discover":
                    continue  # a discover is a 2026-07-28 request whatever the session
                code = await code_of(session, method, version)
                if method in methods_in(version):
                    assert code != p.METHOD_NOT_FOUND, (version, method)
                else:
                    assert code == p.METHOD_NOT_FOUND, (version, method)
            assert await code_of(session, "prompts/list", version) == p.METHOD_NOT_FOUND
        finally:
            await session.close()
            await backend.aclose()

    asyncio.run(go())


def test_channel_mode_dispatches_the_handshake_table_and_refuses_2026(tmp_path: Path) -> None:
    """``--channel``: the handshake era as the table has it; every 2026-07-28 method,
    discovery first, is -32601 (protocol.CHANNEL_ERAS says why)."""

    async def go() -> None:
        backend = ApiBackend(Endpoint(tmp_path / "nobody.sock"))
        session = Session(Face(backend), lambda _m: True, channel=True)
        try:
            caps = await discovery(session, "2025-11-25")
            assert caps["experimental"] == {"claude/channel": {}}
            assert advertised("2025-11-25", caps) == methods_in("2025-11-25")
            for method in methods_in(p.MODERN):
                assert await code_of(session, method, p.MODERN) == p.METHOD_NOT_FOUND, method
            for method in methods_in("2025-11-25"):
                assert await code_of(session, method, "2025-11-25") != p.METHOD_NOT_FOUND
        finally:
            await session.close()
            await backend.aclose()

    asyncio.run(go())
