"""What a person may change about the webhooks, done once for every front end: each change
to the webhook repository, then a wake of the dispatcher, so that a new or re-enabled target,
a rotated secret or a delivery sent again goes out at once instead of at the loop's next
pass. A front end that changed the repository and forgot the wake would work, only late.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from service.webhooks.outbox import Delivery, Target
from service.webhooks.repository import WebhookRepository


class Webhooks:
    def __init__(self, repo: WebhookRepository, wake: Callable[[], None]) -> None:
        self.repo = repo
        self._wake = wake

    async def create(
        self,
        url: str,
        *,
        allow_private_target: bool,
        uri_patterns: Sequence[str],
        subscription_ids: Sequence[int],
        mode: str,
        secret: str | None,
    ) -> tuple[Target, str]:
        """The new target and its secret (the only time it leaves the store)."""
        created = await self.repo.create_target(
            url,
            allow_private_target=allow_private_target,
            uri_patterns=uri_patterns,
            subscription_ids=subscription_ids,
            mode=mode,
            secret=secret,
        )
        self._wake()
        return created

    async def delete(self, target_id: int) -> Target | None:
        """The removed target, with its deliveries; None if there was none."""
        removed = await self.repo.delete_target(target_id)
        if removed is not None:
            self._wake()
        return removed

    async def set_enabled(self, target_id: int, enabled: bool, *, reason: str) -> bool:
        """False if there is no such target. ``reason`` is kept when disabling."""
        found = await self.repo.set_enabled(target_id, enabled, reason=reason)
        if found:
            self._wake()
        return found

    async def rotate_secret(self, target_id: int, secret: str | None) -> str | None:
        """The new secret (the old one keeps signing for the overlap); None: no target."""
        new_secret = await self.repo.rotate_secret(target_id, secret)
        if new_secret is not None:
            self._wake()
        return new_secret

    async def recover(self, target_id: int, since: float) -> int:
        """How many failed or dead deliveries of the target since ``since`` go out again."""
        count = await self.repo.recover(target_id, since)
        self._wake()
        return count

    async def retry(self, delivery_id: int) -> Delivery | None:
        """The delivery, pending again now; None if there is no such delivery."""
        found = await self.repo.retry(delivery_id)
        if found is not None:
            self._wake()
        return found
