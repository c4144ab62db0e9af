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

A caller that needs no task of its own to wait gives a callback instead of taking a future
(:meth:`WriterThread.submit`): the group commit settles its batch from the hand-back itself,
so a re-read costs the loop no committer task and no extra turn to wake one.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeAlias, TypeVar

T = TypeVar("T")

OnDone: TypeAlias = Callable[[Any, "BaseException | None"], None]
"""Called on the loop with a call's result, or None and its error."""
_Target: TypeAlias = "asyncio.Future[Any] | OnDone"
_Outcome: TypeAlias = tuple[_Target, Any, BaseException | None]


def _settle(target: _Target, result: Any, error: BaseException | None) -> None:
    if not isinstance(target, asyncio.Future):
        target(result, error)
        return
    if target.done():  # the caller went away (cancelled); the transaction ran anyway
        return
    if error is not None:
        target.set_exception(error)
    else:
        target.set_result(result)


class WriterThread:
    def __init__(self, name: str) -> None:
        self._name = name
        self._queue: queue.SimpleQueue[
            tuple[Callable[[], Any], _Target, asyncio.AbstractEventLoop] | None
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
        self._put(fn, future, loop)
        return future

    def submit(self, fn: Callable[[], Any], on_done: OnDone) -> None:
        """Queue ``fn``; ``on_done(result, error)`` runs on the running loop once it ran.

        ``on_done`` runs inside the loop's delivery of the thread's outcomes: it must not
        raise (what it raises goes to the loop's exception handler) and should be short."""
        self._put(fn, on_done, asyncio.get_running_loop())

    def _put(self, fn: Callable[[], Any], target: _Target, loop: asyncio.AbstractEventLoop) -> None:
        if self._thread is None:
            with self._lock:
                if self._thread is None:  # started on first use, like the executor was
                    self._thread = threading.Thread(target=self._work, name=self._name, daemon=True)
                    self._thread.start()
        self._queue.put((fn, target, loop))

    def _work(self) -> None:
        while (item := self._queue.get()) is not None:
            fn, target, loop = item
            if isinstance(target, asyncio.Future) and target.cancelled():
                continue  # its caller left before it started (as the executor did)
            result: Any = None
            error: BaseException | None = None
            try:
                result = fn()
            except BaseException as exc:  # handed to the caller, whatever it is
                error = exc
            self._hand_back(loop, (target, result, error))
            del item, fn, target, result, error

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
        for target, result, error in outcomes:
            try:
                _settle(target, result, error)
            except Exception as exc:  # one callback's defect must not strand the others
                loop.call_exception_handler(
                    {"message": "writer thread: an outcome's callback failed", "exception": exc}
                )

    def shutdown(self) -> None:
        """Finish what is queued, then stop the thread (idempotent)."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(None)
            thread.join()
