"""Re-read retries: server errors are retried like transport errors; "unknown URI" is not."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from service.backoff import Backoff
from service.daemon import refresher as refresher_module
from service.daemon.refresher import ReadTarget, UriRefresher, read_error_code, retryable
from service.mcp import wire
from service.mcp.errors import HttpStatusError, JsonRpcError, McpError, TransportError

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def fast_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(refresher_module, "READ_RETRY", Backoff(base_s=0.001, jitter=0))


class FakeStore:
    def __init__(self) -> None:
        self.texts: list[str | None] = []

    async def record_read(self, *args: Any, **kwargs: Any) -> Any:
        self.texts.append(args[4])
        return SimpleNamespace(revision=len(self.texts))


def make(answers: list[Any]) -> tuple[UriRefresher, FakeStore, list[str]]:
    store = FakeStore()
    errors: list[str] = []

    async def read(uri: str) -> dict[str, Any]:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return {"contents": [{"uri": uri, "text": answer}]}

    async def on_error(target: ReadTarget, exc: McpError) -> None:
        errors.append(f"{read_error_code(exc)}: {exc}")

    refresher = UriRefresher(
        ReadTarget(1, 1, "test://a"),
        store,  # type: ignore[arg-type]
        read,
        lambda: 1,
        asyncio.Semaphore(4),
        {},
        on_error,
    )
    return refresher, store, errors


def internal() -> JsonRpcError:
    return JsonRpcError(wire.INTERNAL_ERROR, "transient backend error")


async def run(refresher: UriRefresher) -> None:
    refresher.trigger()
    assert refresher._task is not None
    await asyncio.wait_for(refresher._task, 5)


async def test_internal_error_on_a_reread_is_retried_until_it_succeeds() -> None:
    refresher, store, errors = make([internal(), internal(), "v2"])
    await run(refresher)
    assert store.texts == ["v2"]
    assert errors == [], "two failures stay below the error threshold"


async def test_persistent_server_errors_show_error_and_keep_retrying() -> None:
    refresher, store, errors = make([internal()] * 4 + ["v2"])
    await run(refresher)
    assert store.texts == ["v2"]
    # shown from the third failure on, each time (the store logs an event only on a change)
    assert errors == ["SERVER_ERROR: transient backend error (JSON-RPC -32603)"] * 2


async def test_unknown_uri_is_resource_not_found_and_not_retried() -> None:
    gone = JsonRpcError(wire.INVALID_PARAMS, "Unknown resource: test://a")
    refresher, store, errors = make([gone, "never read"])
    await run(refresher)
    assert store.texts == []
    assert errors == ["RESOURCE_NOT_FOUND: Unknown resource: test://a (JSON-RPC -32602)"]


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (JsonRpcError(wire.INTERNAL_ERROR, "x"), True),
        (JsonRpcError(-32000, "server busy"), True),
        (TransportError("reset", kind="read"), True),
        (HttpStatusError(503), True),
        (JsonRpcError(wire.INVALID_PARAMS, "x"), False),
        (JsonRpcError(wire.LEGACY_RESOURCE_NOT_FOUND, "x"), False),
        (JsonRpcError(wire.METHOD_NOT_FOUND, "x"), False),
        (JsonRpcError(wire.INTERNAL_ERROR, "x", http_status=401), False),
        (HttpStatusError(403), False),
    ],
)
def test_retryable(exc: McpError, expected: bool) -> None:
    assert retryable(exc) is expected


async def test_a_trigger_while_retrying_is_kept_and_read_under_the_new_generation() -> None:
    """A reconnect re-triggers every URI while a failed re-read waits for its retry: the
    pending re-read is neither lost nor doubled, and it runs under the current generation."""
    generation = [1]
    seen: list[int] = []
    refresher, store, errors = make([internal(), "v2"])
    refresher._generation = lambda: generation[0]
    record = store.record_read

    async def record_with_generation(*args: Any, **kwargs: Any) -> Any:
        seen.append(args[2])
        return await record(*args, **kwargs)

    store.record_read = record_with_generation  # type: ignore[method-assign]
    refresher.trigger()
    task = refresher._task
    await asyncio.sleep(0)
    generation[0] = 2  # the link reconnected...
    refresher.trigger()  # ...and re-read everything: this refresher is busy retrying
    assert refresher._task is task, "no second reader for the same URI"
    assert task is not None
    await asyncio.wait_for(task, 5)
    assert store.texts == ["v2"]
    assert seen == [2]
    assert errors == []


async def test_an_idle_refresher_keeps_no_finished_task() -> None:
    """10,000 idle refreshers kept 10,000 done tasks; a finished read leaves none behind,
    and the next trigger still reads."""
    refresher, store, _ = make(["one", "two"])
    refresher.trigger()
    task = refresher._task
    assert task is not None
    await task
    await asyncio.sleep(0)  # the done callback
    assert refresher._task is None and not refresher.busy
    refresher.trigger()
    assert refresher._task is not None
    await refresher._task
    assert store.texts == ["one", "two"]


async def test_an_idle_refresher_is_handed_back_unless_it_is_failing() -> None:
    """``on_idle`` fires when a read ends with nothing pending (the link then forgets the
    refresher), and not while the subscription shows a failure that only this refresher's
    next good read clears."""
    answers: list[Any] = ["one", JsonRpcError(wire.INVALID_PARAMS, "unknown"), "back"]
    refresher, store, errors = make(answers)
    idle: list[UriRefresher] = []
    refresher._on_idle = idle.append
    refresher.trigger()
    task = refresher._task
    assert task is not None
    await task
    await asyncio.sleep(0)
    assert store.texts == ["one"] and idle == [refresher]
    refresher.trigger()  # "unknown URI": not retried, failing
    assert refresher._task is not None
    await refresher._task
    await asyncio.sleep(0)
    assert refresher.failing and len(errors) == 1 and idle == [refresher]
    refresher.trigger()
    assert refresher._task is not None
    await refresher._task
    await asyncio.sleep(0)
    assert not refresher.failing and store.texts == ["one", "back"]
    assert idle == [refresher, refresher]


async def test_a_crash_in_a_read_is_classified_shown_and_retried() -> None:
    """An exception that is no McpError (a bug, or an answer a parser failed on) must not end
    the read task with only a traceback in the log: it is INTERNAL_ERROR on the subscription,
    and the read is tried again."""
    refresher, store, errors = make([RuntimeError("boom")] * 3 + ["v2"])
    await run(refresher)
    assert store.texts == ["v2"]
    assert errors == ["INTERNAL_ERROR: read crashed: RuntimeError('boom')"]


async def test_a_failing_state_write_does_not_end_the_read_task() -> None:
    refresher, store, _errors = make([internal()] * 3 + ["v2"])

    async def broken(target: ReadTarget, exc: McpError) -> None:
        raise RuntimeError("state write broke")

    refresher._on_error = broken
    await run(refresher)
    assert store.texts == ["v2"]


async def test_a_subscription_with_no_stored_read_shows_its_first_failure_at_once() -> None:
    """Nothing to fall back on: the first failed read is shown (subscribe returns with it),
    the read goes on being retried, and the first stored read is reported to the owner."""
    refresher, store, errors = make([TransportError("timed out", kind="timeout"), "v1"])
    unread = [True]
    stored: list[int] = []

    async def on_ok(target: ReadTarget, generation: int) -> None:
        unread[0] = False
        stored.append(generation)

    refresher._unread = lambda target: unread[0]
    refresher._on_ok = on_ok
    await run(refresher)
    assert errors == ["REQUEST_TIMEOUT: timed out"]
    assert store.texts == ["v1"] and stored == [1]


async def test_an_acknowledgement_ends_the_wait_before_a_retry(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A read failing while the link was down waits out a long backoff; a new listen's
    acknowledgement retries it at once instead (and the schedule starts over)."""
    monkeypatch.setattr(refresher_module, "READ_RETRY", Backoff(base_s=60.0, jitter=0))
    refresher, store, errors = make([TransportError("refused"), "v1"])
    refresher._unread = lambda target: True
    refresher.trigger()
    task = refresher._task
    assert task is not None
    while refresher._retry is None:
        await asyncio.sleep(0)
    refresher.trigger("acknowledged")
    await asyncio.wait_for(task, 5)
    assert store.texts == ["v1"] and errors == ["NETWORK_ERROR: refused"]
