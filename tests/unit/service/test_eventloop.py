"""``service.eventloop.choose``: which loop a name (or none) picks."""

from __future__ import annotations

import asyncio
import builtins
from typing import Any

import pytest

from service import eventloop


def test_uvloop_by_default_and_on_request() -> None:
    assert eventloop.choose({}) == "uvloop"
    assert eventloop.choose({"MCPSUB_EVENT_LOOP": " UVLoop "}) == "uvloop"
    assert eventloop.choose({"MCPSUB_EVENT_LOOP": ""}) == "uvloop"


def test_asyncio_on_request() -> None:
    assert eventloop.choose({"MCPSUB_EVENT_LOOP": "asyncio"}) == "asyncio"


def test_unknown_name_is_refused() -> None:
    with pytest.raises(eventloop.EventLoopError, match="expected one of uvloop, asyncio"):
        eventloop.choose({"MCPSUB_EVENT_LOOP": "trio"})


def test_without_uvloop_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Windows has no uvloop: asyncio's loop runs; asking for uvloop there is an error."""
    real_import = builtins.__import__

    def no_uvloop(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "uvloop":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_uvloop)
    assert eventloop.choose({}) == "asyncio"
    with pytest.raises(eventloop.EventLoopError, match="not installed"):
        eventloop.choose({"MCPSUB_EVENT_LOOP": "uvloop"})


def test_run_and_name_of() -> None:
    async def which() -> str:
        return eventloop.name_of(asyncio.get_running_loop())

    assert eventloop.run(which(), {}) == "uvloop"
    assert eventloop.run(which(), {"MCPSUB_EVENT_LOOP": "asyncio"}) == "asyncio"
