"""The SQLite writer thread: one thread, one queue, results straight onto the event loop.

Every SQLite write transaction of the daemon runs here, in order (the store's write lock
lets only one be queued at a time). It replaces a one-worker ``ThreadPoolExecutor`` with
``run_in_executor``: py-spy of the daemon on a loaded machine put 11-16 % of its time in
``ThreadPoolExecutor.submit`` (a shutdown lock, a global lock and an idle-semaphore
condition per call, all Python-level locks the worker thread takes too), plus the
concurrent-future-to-asyncio-future wrapping around it. Here a hand-off is one
``SimpleQueue.put`` and, back, one ``call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


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
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody is waiting
                loop.call_soon_threadsafe(_settle, future, result, error)
            del item, fn, future, result, error

    def shutdown(self) -> None:
        """Finish what is queued, then stop the thread (idempotent)."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(None)
            thread.join()
