"""What the face shows: URI names across servers, and text renderings (pure).

**Naming.** A URI watched on one server keeps its own name. When two or more servers are
watched for the same URI, each is shown as ``mcpsub://<subscription id>/<original URI>``
(the subscription id is stable while the subscription lives), so the agent can tell them
apart and read either; the original URI then names the newest revision among them.

Every piece of server text is untrusted: renderings escape control and bidi characters
(``service.safetext``), as the CLIs do before text reaches a terminal.
"""

from __future__ import annotations

import difflib
import fnmatch
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any, Final

from service.safetext import terminal_safe

SCOPED: Final = re.compile(r"^mcpsub://(\d{1,18})/(.+)$", re.DOTALL)
MAX_DIFF_CHARS: Final = 256 * 1024
"""Both texts together above this: no diff (difflib is quadratic in the worst case)."""


def face_names(subs: Iterable[dict[str, Any]]) -> dict[int, str]:
    """Subscription id → the URI the face shows for it."""
    subs = list(subs)
    counts = Counter(s["uri"] for s in subs)
    return {
        s["id"]: s["uri"] if counts[s["uri"]] == 1 else f"mcpsub://{s['id']}/{s['uri']}"
        for s in subs
    }


def resolve(name: str, subs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The subscriptions a face URI names: one for a scoped name, every watcher otherwise."""
    scoped = SCOPED.match(name)
    if scoped is not None:
        sub_id, uri = int(scoped.group(1)), scoped.group(2)
        return [s for s in subs if s["id"] == sub_id and s["uri"] == uri]
    return [s for s in subs if s["uri"] == name]


def matches(pattern: str | None, uri: str | None, face_name: str | None = None) -> bool:
    """``pattern`` is a glob (``*``, ``?``, ``[...]``) over the original or the face URI."""
    if pattern is None:
        return True
    return any(
        name is not None and (name == pattern or fnmatch.fnmatchcase(name, pattern))
        for name in (uri, face_name)
    )


def one_line(value: Any) -> str:
    return terminal_safe(str(value))


def block(text: str | None) -> str:
    return terminal_safe(text or "", keep_lines=True)


def unified_diff(
    uri: str, old: str | None, new: str | None, old_rev: Any, new_rev: Any
) -> str | None:
    """A unified diff when both sides are text and small enough, else None."""
    if old is None or new is None or len(old) + len(new) > MAX_DIFF_CHARS:
        return None
    lines = difflib.unified_diff(
        old.splitlines(keepends=True),
        new.splitlines(keepends=True),
        fromfile=f"{uri}@{old_rev}",
        tofile=f"{uri}@{new_rev}",
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def subscription_line(sub: dict[str, Any], name: str) -> str:
    link = sub.get("link") or {}
    parts = [
        one_line(name),
        f"on {one_line(sub.get('serverUrl'))}",
        f"state {sub.get('state')}",
        f"revision {sub.get('revision')}",
    ]
    if sub.get("lastReadAt"):
        parts.append(f"last read {sub['lastReadAt']:.0f}")
    if sub.get("stateCode"):
        parts.append(f"error {sub['stateCode']}")
    if link.get("state"):
        parts.append(f"link {link['state']}")
    return "  ".join(parts)


def listing(subs: Sequence[dict[str, Any]], names: dict[int, str]) -> str:
    if not subs:
        return "no subscriptions (use the subscribe tool)"
    return "\n".join(subscription_line(s, names.get(s["id"], s["uri"])) for s in subs)


def content_text(name: str, content: dict[str, Any]) -> str:
    head = f"{one_line(name)} revision {content.get('revision')} (event {content.get('eventId')})"
    text = content.get("text")
    if text is None:
        return head + "\n(no text content: see structuredContent.contents)"
    return head + "\n" + block(text)


def change_text(change: dict[str, Any]) -> str:
    if not change.get("changed"):
        return (
            f"no change within {change.get('waitedSeconds')} s; "
            f"call again with after={change.get('cursor')} to miss nothing"
        )
    head = (
        f"changed {one_line(change.get('uri'))} to revision {change.get('revision')} "
        f"(event {change.get('eventId')}); pass after={change.get('cursor')} next time"
    )
    if change.get("diff"):
        return head + "\n" + block(change["diff"])
    return head + "\n" + block(change.get("finalText"))


def event_line(event: dict[str, Any], name: str | None) -> str:
    parts = [f"#{event.get('id')}", str(event.get("type"))]
    if event.get("uri") is not None:
        parts.append(one_line(name or event["uri"]))
    if event.get("revision") is not None:
        parts.append(f"revision {event['revision']}")
    return " ".join(parts)


def events_text(events: Sequence[dict[str, Any]], names: dict[int, str], cursor: int) -> str:
    if not events:
        return f"no events after the cursor; cursor {cursor}"
    lines = [event_line(e, names.get(e.get("subscriptionId") or 0)) for e in events]
    return "\n".join([*lines, f"cursor {cursor}"])
