"""JSON shapes of the API, which the face shows too: store records in, camelCase dicts out
(pure)."""

from __future__ import annotations

import dataclasses
from typing import Any

from service.app.changes import Change
from service.app.supervisor_protocol import SupervisorLike
from service.failures import state_hint as code_hint
from service.store.catalog import StatusCounts
from service.store.records import Event, Revision, Subscription
from service.triggers.outbox import Run, Trigger
from service.triggers.process import Finished
from service.webhooks.outbox import FINAL_STATES, OPEN_STATES, Delivery, Target


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


_SUBSCRIPTION_KEYS = tuple(
    (field.name, camel(field.name)) for field in dataclasses.fields(Subscription)
)


def subscription_json(sub: Subscription) -> dict[str, Any]:
    # Flat fields of plain values: no ``asdict`` deep copy, names converted once.
    out = {key: getattr(sub, name) for name, key in _SUBSCRIPTION_KEYS}
    # What to do about the state's code, shown with it.
    out["stateHint"] = code_hint(sub.state_code)
    return out


def event_json(event: Event) -> dict[str, Any]:
    """An event as every answer and stream shows it. Written out, not ``asdict``: it runs
    for each event each stream carries, and ``asdict`` deep-copies through ``data`` (here a
    shallow copy, so a caller that adds a key does not change the event the ring keeps)."""
    return {
        "id": event.id,
        "type": event.type,
        "subscriptionId": event.subscription_id,
        "serverUrl": event.server_url,
        "uri": event.uri,
        "revisionId": event.revision_id,
        "revision": event.revision,
        "data": dict(event.data),
        "createdAt": event.created_at,
    }


def revision_json(rev: Revision, *, contents: bool = True) -> dict[str, Any]:
    """One revision as every answer shows it (``/v1/content``, ``/v1/wait``, a revision of
    the history, ``current`` of a subscription, the ``content`` an event stream carries);
    without ``contents`` where an answer must stay small whatever the resource weighs."""
    out: dict[str, Any] = {
        "revision": rev.revision,
        "contentHash": rev.content_hash,
        "generation": rev.generation,
        "readAt": rev.read_at,
    }
    if contents:
        out["contents"] = rev.contents
    out["text"] = rev.text
    return out


def revision_summary(rev: Revision | None) -> dict[str, Any] | None:
    """A subscription's ``current`` revision: :func:`revision_json` without its contents."""
    return None if rev is None else revision_json(rev, contents=False)


def content_json(sub: Subscription, rev: Revision, event_id: int | None) -> dict[str, Any]:
    """``/v1/content``: the revision, whose it is, and the event that announced it."""
    return {
        "subscriptionId": sub.id,
        "serverUrl": sub.server_url,
        "uri": sub.uri,
        **revision_json(rev),
        "eventId": event_id,
    }


def change_json(change: Change | None) -> dict[str, Any]:
    """A change's two sides, as ``/v1/wait`` and the face show them: ``revision`` as
    ``/v1/content`` shows it, ``previous`` its baseline (``revision`` and ``text``)."""
    if change is None or change.revision is None:
        return {"revision": None, "previous": None}
    before = change.previous
    return {
        "revision": content_json(change.subscription, change.revision, change.event_id),
        "previous": None if before is None else {"revision": before.revision, "text": before.text},
    }


def event_from_json(event: dict[str, Any]) -> Event:
    """The record :func:`event_json` made ``event`` from (the face hands events around as
    the API's JSON)."""
    return Event(
        id=int(event["id"]),
        type=str(event.get("type")),
        subscription_id=event.get("subscriptionId"),
        server_url=event.get("serverUrl"),
        uri=event.get("uri"),
        revision_id=event.get("revisionId"),
        revision=event.get("revision"),
        data=event.get("data") or {},
        created_at=float(event.get("createdAt") or 0.0),
    )


def state_hint(sub: Subscription, link: dict[str, Any] | None) -> str | None:
    """The hint for the subscription's error code, else its link's (None when all is well)."""
    hint = code_hint(sub.state_code)
    if hint is not None:
        return hint
    if link and link.get("lastErrorCode") and link.get("state") != "open":
        hint = link.get("lastErrorHint")
        return str(hint) if hint else None
    return None


def link_of(supervisor: SupervisorLike, sub: Subscription) -> dict[str, Any] | None:
    """The status of ``sub``'s link: its own link's, by server id (one link's status, not
    all of them: at many links that was most of a subscription's page), else looked up by
    URL in ``link_status()``."""
    status = supervisor.link_status_of(sub.server_id)
    return status if status is not None else link_for(supervisor.link_status(), sub)


def link_for(links: list[dict[str, Any]], sub: Subscription) -> dict[str, Any] | None:
    """The supervisor's link entry for ``sub`` (by server id, else by URL)."""
    for link in links:
        if link.get("serverId") == sub.server_id:
            return link
    for link in links:
        if link.get("url") == sub.server_url:
            return link
    return None


def with_link(sub: Subscription, links: list[dict[str, Any]]) -> dict[str, Any]:
    """``subscription_json`` plus its link's status entry under ``link`` (the agent's view)."""
    return {**subscription_json(sub), "link": link_for(links, sub)}


def target_json(target: Target) -> dict[str, Any]:
    """Everything about a webhook target but its secret (which is not a field of Target)."""
    return {camel(k): v for k, v in target.to_json().items()}


def delivery_json(delivery: Delivery) -> dict[str, Any]:
    return {camel(k): v for k, v in delivery.to_json().items()}


def trigger_json(trigger: Trigger) -> dict[str, Any]:
    """Everything about a trigger but the values of its environment."""
    return {camel(k): v for k, v in trigger.to_json().items()}


def run_json(run: Run) -> dict[str, Any]:
    return {camel(k): v for k, v in run.to_json().items()}


def trigger_with_runs_json(
    trigger: Trigger, counts: dict[str, int], last: Run | None
) -> dict[str, Any]:
    """A trigger with its runs by state and its newest run (a listing's row)."""
    return {**trigger_json(trigger), "runs": counts, "lastRun": run_json(last) if last else None}


def finished_json(finished: Finished, stdout_tail: str, stderr_tail: str) -> dict[str, Any]:
    """One attempt of a trigger's program (``trigger test``'s answer)."""
    return {
        "ok": finished.ok,
        "startedAt": finished.started_at,
        "endedAt": finished.ended_at,
        "durationMs": finished.duration_ms,
        "exitCode": finished.exit_code,
        "signal": finished.signal,
        "timedOut": finished.timed_out,
        "error": finished.error,
        "stdoutTail": stdout_tail,
        "stderrTail": stderr_tail,
        "stdoutBytes": finished.stdout_bytes,
        "stderrBytes": finished.stderr_bytes,
    }


def next_after(ids: list[int], after: int, *, newest_first: bool) -> int:
    """The ``nextAfter`` of a page of ids (oldest first, or the newest first): what to pass
    back as ``after`` for the rows that follow."""
    if newest_first:
        return max(ids, default=after)
    return ids[-1] if ids else after


def figures_json(counts: StatusCounts) -> dict[str, Any]:
    """What ``/v1/status`` and ``/v1/overview`` both show of the stored figures."""
    return {
        "lastEventId": counts.last_event_id,
        "deliveries": {
            state: counts.deliveries.get(state, 0) for state in (*OPEN_STATES, *FINAL_STATES)
        },
        "webhooks": {"targets": counts.targets, "enabled": counts.targets_enabled},
    }
