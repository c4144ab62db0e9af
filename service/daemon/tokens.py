"""One token look-up per origin and re-check interval, shared by every link of that origin.

Each link re-resolves its token every ``token_check_s`` (spec gap 14: a refreshed token means a
re-listen), and resolving opens the token store (a SQLite file: connect, two pragmas, a
select, close). With a store on disk, 1,000 links opened it 1,000 times a minute, and as
often at a cold start, although the links of one server origin all get the same row. Here the
first link of an origin to ask resolves; the others, while the store file is unchanged (same
inode, size and modification time) and the answer is younger than the interval, get that
answer, and links asking at the same moment wait for the one look-up in flight.

Nothing is cached without a store (the provider then opens nothing) and no failure is cached
(a link whose login is required asks again on its own schedule). A token that comes within the
provider's refresh margin is refreshed at most one interval later than a link of its own
would have noticed, which each link's own minute already allowed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from service.auth.rules import origin_of

StoreSignature = Callable[[], Any]
"""Something that changes whenever the token store's content may have (None: no store)."""


class SharedTokens:
    def __init__(
        self,
        provider: Callable[[str], Awaitable[str | None]],
        signature: StoreSignature,
        max_age_s: float,
    ) -> None:
        self._provider = provider
        self._signature = signature
        self._max_age_s = max_age_s
        self._answers: dict[str, tuple[Any, float, str | None]] = {}
        """origin -> (store signature, monotonic time asked, token)."""
        self._asking: dict[str, asyncio.Future[str | None]] = {}
        self.lookups = 0
        """Look-ups that reached the provider (tests, ``/metrics`` if wanted)."""

    async def __call__(self, url: str) -> str | None:
        try:
            origin = origin_of(url)
        except ValueError:
            return await self._ask(url)
        signature = self._signature()
        if signature is None:  # no store: the provider opens nothing, nothing to share
            self._answers.pop(origin, None)
            return await self._ask(url)
        kept = self._answers.get(origin)
        if (
            kept is not None
            and kept[0] == signature
            and time.monotonic() - kept[1] < self._max_age_s
        ):
            return kept[2]
        asking = self._asking.get(origin)
        if asking is None:
            # Its own task: a link stopped while it waits does not cancel the others' answer.
            asking = asyncio.get_running_loop().create_task(self._ask(url))
            self._asking[origin] = asking
            asking.add_done_callback(lambda done: self._answered(origin, signature, done))
        return await asyncio.shield(asking)

    def _answered(self, origin: str, signature: Any, done: asyncio.Task[str | None]) -> None:
        del self._asking[origin]
        if done.cancelled() or done.exception() is not None:  # retrieved: each waiter raises it
            return
        self._answers[origin] = (signature, time.monotonic(), done.result())

    async def _ask(self, url: str) -> str | None:
        self.lookups += 1
        return await self._provider(url)
