"""What a person does with the webhooks, done once for every front end: the targets
(``/v1/webhooks``) and their deliveries (``/v1/deliveries``), read and changed.

Every change to the webhook repository is followed by a wake of the dispatcher, so that a new
or re-enabled target, a rotated secret or a delivery sent again goes out at once instead of at
the loop's next pass (a front end that changed the repository and forgot the wake would work,
only late). Every body is checked here, field by field, before anything is written. A target's
secret leaves the daemon twice only: in the answers of :meth:`Webhooks.create` and
:meth:`Webhooks.rotate_secret`.
"""

from __future__ import annotations

import time
from typing import Any, Final
from urllib.parse import urlsplit

from service.app import validate
from service.app.errors import (
    DeliveryNotFound,
    InvalidParameter,
    InvalidSecret,
    PrivateTarget,
    WebhookNotFound,
)
from service.netguard import METADATA_HOSTS, address_problem
from service.webhooks.dispatcher import Dispatcher, Outcome
from service.webhooks.outbox import FINAL_STATES, MODES, OPEN_STATES, Delivery, Target
from service.webhooks.repository import ROTATION_OVERLAP_S
from service.webhooks.signing import InvalidSecret as BadSecret
from service.webhooks.signing import checked_secret

DELIVERY_STATES: Final = (*OPEN_STATES, *FINAL_STATES)
TARGET_MODES: Final = MODES
MAX_PAGE = 1000
"""Deliveries in one page of :meth:`Webhooks.deliveries`."""
DISABLED_REASON = "disabled through the API"


# ---- input checks (pure) ---------------------------------------------------------------
def private_target_problem(url: str) -> str | None:
    """Why ``url`` points at a link-local or cloud-metadata address (None when it does not).

    Loopback targets are allowed: the daemon serves one user on one machine, and a receiver
    on 127.0.0.1 is the common case. Link-local (169.254.0.0/16, fe80::/10) and metadata
    addresses hold credentials a webhook body must never be able to reach by accident.
    Only literal addresses and well-known metadata names are judged here (no DNS lookup);
    a name is judged after resolution, at every delivery (:mod:`service.netguard`).
    """
    host = (urlsplit(url).hostname or "").rstrip(".").lower()
    if host in METADATA_HOSTS:
        return f"{host} is a cloud metadata service"
    address = validate.host_address(url)
    return None if address is None else address_problem(address)


def webhook_url(value: Any, *, allow_private: bool = False) -> str:
    """http(s) only; scheme, host, port and the private-target rule are checked here, once."""
    url = validate.http_url(value)
    problem = private_target_problem(url)
    if problem and not allow_private:
        raise PrivateTarget(f"url refused: {problem}", field="url")
    return url


def secret(value: Any) -> str | None:
    """A person's own signing secret, in the scheme's canonical form; None: generate one."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidSecret("secret must be a string", field="secret")
    try:
        return checked_secret(value)
    except BadSecret as exc:
        raise InvalidSecret(str(exc), field="secret") from None


def target_param(value: Any) -> int:
    number = validate.whole_number(value)
    if number is None or not 1 <= number <= validate.MAX_ID:
        raise InvalidParameter("target must be a webhook target id (integer >= 1)", field="target")
    return number


# ---- the use case ------------------------------------------------------------------------
class Webhooks:
    def __init__(self, dispatcher: Dispatcher) -> None:
        self.dispatcher = dispatcher
        self.repo = dispatcher.repo

    def _wake(self) -> None:
        self.dispatcher.wake()

    # ---- targets
    async def create(self, body: dict[str, Any]) -> tuple[Target, str]:
        """A new target from a request body (``url``, ``uriPatterns``, ``subscriptionIds``,
        ``mode``, ``secret``, ``allowPrivateTarget``), and its secret."""
        allow_private = validate.flag(body.get("allowPrivateTarget"), "allowPrivateTarget")
        url = webhook_url(body.get("url"), allow_private=allow_private)
        patterns = validate.uri_patterns(body.get("uriPatterns"))
        sub_ids = validate.subscription_ids(body.get("subscriptionIds"))
        mode = validate.choice(body.get("mode"), "mode", MODES, "all")
        own_secret = secret(body.get("secret"))
        created = await self.repo.create_target(
            url,
            allow_private_target=allow_private,
            uri_patterns=patterns,
            subscription_ids=sub_ids,
            mode=mode,
            secret=own_secret,
        )
        self._wake()
        return created

    async def targets(self) -> list[Target]:
        return await self.repo.list_targets()

    async def target(self, target_id: int) -> Target:
        """WebhookNotFound when there is none."""
        found = await self.repo.get_target(target_id)
        if found is None:
            raise WebhookNotFound(f"no webhook target {target_id}")
        return found

    async def target_with_counts(self, target_id: int) -> tuple[Target, dict[str, int]]:
        """The target and its deliveries by state."""
        target = await self.target(target_id)
        return target, await self.repo.counts(target_id=target_id)

    async def delete(self, target_id: int) -> Target:
        """The removed target, with its deliveries."""
        removed = await self.repo.delete_target(target_id)
        if removed is None:
            raise WebhookNotFound(f"no webhook target {target_id}")
        self._wake()
        return removed

    async def set_enabled(self, target_id: int, enabled: bool) -> Target:
        """The target, enabled or disabled (a person's disabling keeps its reason)."""
        if not await self.repo.set_enabled(target_id, enabled, reason=DISABLED_REASON):
            raise WebhookNotFound(f"no webhook target {target_id}")
        self._wake()
        return await self.target(target_id)

    async def rotate_secret(self, target_id: int, body: dict[str, Any]) -> tuple[str, float]:
        """The new secret (the body's ``secret``, else generated), and until when the old one
        keeps signing too (Unix seconds)."""
        own_secret = secret(body.get("secret"))
        new_secret = await self.repo.rotate_secret(target_id, own_secret)
        if new_secret is None:
            raise WebhookNotFound(f"no webhook target {target_id}")
        self._wake()
        return new_secret, time.time() + ROTATION_OVERLAP_S

    async def send_test(self, target_id: int) -> tuple[Outcome, float]:
        """A signed ``webhook.test`` ping sent now (nothing stored or retried): its outcome
        and how long it took, in seconds."""
        await self.target(target_id)
        started = time.monotonic()
        outcome = await self.dispatcher.send_test(target_id)
        return outcome, time.monotonic() - started

    # ---- deliveries
    async def deliveries(
        self,
        *,
        target_id: int | None = None,
        state: str | None = None,
        after: int = 0,
        limit: int = 100,
        since: float | None = None,
        newest_first: bool = False,
    ) -> list[Delivery]:
        """Deliveries with an id above ``after``, oldest first (or the newest ``limit``,
        newest first), at most :data:`MAX_PAGE`."""
        return await self.repo.list_deliveries(
            target_id=target_id,
            state=validate.state_in(state, DELIVERY_STATES),
            after=after,
            limit=min(limit, MAX_PAGE),
            since=since,
            newest_first=newest_first,
        )

    async def delivery(self, delivery_id: int) -> Delivery:
        """DeliveryNotFound when there is none."""
        found = await self.repo.get_delivery(delivery_id)
        if found is None:
            raise DeliveryNotFound(f"no delivery {delivery_id}")
        return found

    async def attempts(self, delivery_id: int) -> tuple[Delivery, bytes, list[dict[str, Any]]]:
        """The delivery, its request body (rebuilt from its revision: the same for every
        attempt) and each logged attempt."""
        found = await self.delivery(delivery_id)
        body = await self.dispatcher.body(found)
        return found, body, await self.repo.attempts(delivery_id)

    async def recover(self, body: dict[str, Any]) -> tuple[int, float, int]:
        """Every failed or dead delivery of the body's ``target`` created since ``since`` sent
        again: (target id, since, how many)."""
        target_id = target_param(body.get("target"))
        since = validate.since_time(body.get("since"))
        await self.target(target_id)
        count = await self.repo.recover(target_id, since)
        self._wake()
        return target_id, since, count

    async def retry(self, delivery_id: int) -> Delivery:
        """The delivery, pending again now (any state), with the same ``webhook-id``."""
        found = await self.repo.retry(delivery_id)
        if found is None:
            raise DeliveryNotFound(f"no delivery {delivery_id}")
        self._wake()
        return found
