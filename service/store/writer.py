"""The SQLite writer thread: one thread, one queue, results straight onto the event loop.

Every SQLite write transaction of the daemon runs here, in order (the store's write lock
lets only one be queued at a time). It replaces a one-worker ``ThreadPoolExecutor`` with
``run_in_executor``: a profile of the daemon on a loaded machine put a large share of its time
in ``ThreadPoolExecutor.submit`` (a shutdown lock, a global lock and an idle-semaphore
condition per call, all Python-level locks the worker thread takes too), plus the
concurrent-future-to-asyncio-future wrapping around it. Here a hand-off is one
``SimpleQueue.put``.

Back, the loop is woken once per batch of completions, not once per call: every
``call_soon_threadsafe`` writes to the loop's self-pipe and costs the loop a wake-up and a
read of that pipe. The thread appends each outcome to a list; only the outcome that finds
the list empty schedules :meth:`WriterThread._deliver`, which settles everything that has
accumulated by the time the loop runs it (group commit's batch, and whatever else finished
while the loop was busy).
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

_Outcome = tuple["asyncio.Future[Any]", Any, BaseException | None]


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():  # the caller went away (cancelled); the transaction ran anyway
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


class WriterThread:
    def __init__(self, name: str) -> None:
        self._name = name
        self._queue: queue.SimpleQueue[
            tuple[Callable[[], Any], asyncio.Future[Any], asyncio.AbstractEventLoop] | None
        ] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._done: dict[asyncio.AbstractEventLoop, list[_Outcome]] = {}
        """Outcomes the loop has not settled yet, by loop (a store serves one loop; tests
        may run several one after another). Guarded by ``_done_lock``."""
        self._done_lock = threading.Lock()

    def run(self, fn: Callable[[], T]) -> asyncio.Future[T]:
        """Queue ``fn``; the returned future (of the running loop) gets its result or error."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        if self._thread is None:
            with self._lock:
                if self._thread is None:  # started on first use, like the executor was
                    self._thread = threading.Thread(target=self._work, name=self._name, daemon=True)
                    self._thread.start()
        self._queue.put((fn, future, loop))
        return future

    def _work(self) -> None:
        while (item := self._queue.get()) is not None:
            fn, future, loop = item
            if future.cancelled():  # its caller left before it started (as the executor did)
                continue
            result: Any = None
            error: BaseException | None = None
            try:
                result = fn()
            except BaseException as exc:  # handed to the caller, whatever it is
                error = exc
            self._hand_back(loop, (future, result, error))
            del item, fn, future, result, error

    def _hand_back(self, loop: asyncio.AbstractEventLoop, outcome: _Outcome) -> None:
        with self._done_lock:
            pending = self._done.get(loop)
            if pending is not None:
                pending.append(outcome)  # a delivery is already on its way
                return
            self._done[loop] = [outcome]
        try:
            loop.call_soon_threadsafe(self._deliver, loop)
        except RuntimeError:  # a closed loop: nobody is waiting
            with self._done_lock:
                self._done.pop(loop, None)

    def _deliver(self, loop: asyncio.AbstractEventLoop) -> None:
        """On the loop: settle every outcome handed back since the last delivery."""
        with self._done_lock:
            outcomes = self._done.pop(loop, [])
        for future, result, error in outcomes:
            _settle(future, result, error)

    def shutdown(self) -> None:
        """Finish what is queued, then stop the thread (idempotent)."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(None)
            thread.join()
