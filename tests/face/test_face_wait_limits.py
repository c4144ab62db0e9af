"""wait_for_change under a client whose tool-call limit the face knows, through
the real session and backend over a real daemon. The hostile cases (a 3 MB resource, forged
face lines, lookalike URIs) are in tests/hostile/test_face_answers.py."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from service.face import protocol as p
from service.face import tools as t
from service.face.handlers import Face
from service.face.remote import ApiBackend
from service.face.session import Session
from service.localclient import Endpoint
from tests.support.daemon import Daemon


@pytest.mark.parametrize("era", ["2025-11-25", p.MODERN])
def test_a_wait_ends_under_the_clients_known_limit_with_the_cursor(
    daemon_factory: Any, monkeypatch: pytest.MonkeyPatch, era: str
) -> None:
    """Before: a 120 s wait under Codex (which cuts a call at 60 s) ended in the client's
    error and the model had no cursor. The table is shortened here so the test takes 2 s;
    Codex's own entry is checked in tests/unit/service/face."""
    monkeypatch.setitem(t.CLIENT_TOOL_LIMITS_S, "lab-agent", (12.0, "a test client"))
    d: Daemon = daemon_factory()

    async def go() -> tuple[dict[str, Any], float]:
        backend = ApiBackend(Endpoint(d.socket_path))
        session = Session(Face(backend), lambda _m: True)
        info = {"name": "lab-agent", "version": "1"}
        params: dict[str, Any] = {"name": "wait_for_change", "arguments": {"timeoutSeconds": 120}}
        try:
            if era == p.MODERN:
                params["_meta"] = {
                    p.META_VERSION: p.MODERN,
                    p.META_CAPS: {},
                    p.META_CLIENT_INFO: info,
                }
            else:
                init = {"protocolVersion": era, "capabilities": {}, "clientInfo": info}
                await session.handle(p.Incoming("initialize", init, 0, True, False))
            started = time.monotonic()
            answer = await session.handle(p.Incoming("tools/call", params, 1, True, False))
            assert answer is not None
            return answer["result"], time.monotonic() - started
        finally:
            await session.close()
            await backend.aclose()

    result, took = asyncio.run(go())
    body = result["structuredContent"]
    assert body["changed"] is False and isinstance(body["cursor"], int)
    assert body["clientLimitSeconds"] == 12.0
    assert 1.5 <= took < 10, took
    assert "your client ends a tool call at 12 s" in result["content"][0]["text"]
