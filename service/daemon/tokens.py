"""One token look-up per origin and re-check interval, shared by every link of that origin.

Each link re-resolves its token every ``token_check_s`` (spec gap 14: a refreshed token means a
re-listen), and resolving opens the token store (a SQLite file: connect, two pragmas, a
select, close). With a store on disk, 1,000 links opened it 1,000 times a minute, and as
often at a cold start, although the links of one server origin all get the same row. Here the
first link of an origin to ask resolves; the others, while the store file is unchanged (same
inode, size and modification time) and the answer is younger than the interval, get that
answer, and links asking at the same moment wait for the one look-up in flight.

Without a store there is no token to find, and the provider is not asked. That absence is
kept for :data:`NO_STORE_KEEP_S`: a start of 10,000 links, each looking for a store that is
not there, spent 2.5 % of its event loop on a failed ``open`` per link and the provider's own
check. A login during that second is seen by a link starting after it at its first re-check,
as by a link that started just before the login (the supervisor's tick wakes a tokenless
link once a store exists). No failure is cached (a link whose login is required asks again
on its own schedule). A token that comes within the
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
"""Something that changes whenever the token store's content may have (None: no store, so
the provider would find no token)."""

NO_STORE_KEEP_S = 1.0
"""How long "no token store" answers every look-up without checking the disk again: a store
made in that time (a login) is one link re-check away anyway (see the module's docstring)."""


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
        self._no_store_until = float("-inf")
        """Until then (monotonic), the store was missing: no token, nothing checked."""

    async def __call__(self, url: str) -> str | None:
        now = time.monotonic()
        if now < self._no_store_until:
            return None
        try:
            origin = origin_of(url)
        except ValueError:
            return await self._ask(url)
        signature = self._signature()
        if signature is None:  # no store (never made, or a logout removed it): no token
            self._answers.clear()
            self._no_store_until = now + NO_STORE_KEEP_S
            return None
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
