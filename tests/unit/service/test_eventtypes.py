"""One list of event types (service/eventtypes.py) for the writers, the API, the CLI and docs."""

from __future__ import annotations

import re
from pathlib import Path

from cli.event_cmds import event_types
from service.eventtypes import EVENT_TYPES

ROOT = Path(__file__).resolve().parents[3]


def test_every_type_the_daemon_writes_is_listed() -> None:
    """Any string literal passed where an event is inserted names a listed type."""
    written: set[str] = set()
    for path in (ROOT / "service").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        written |= set(re.findall(r'insert_event\(\s*\w+,\s*"([a-z]+\.[a-z]+)"', text))
        written |= set(re.findall(r'type="([a-z]+\.[a-z]+)"', text))
    written.discard("webhook.test")  # the test ping: signed and sent, never in the log
    assert written, "the pattern found no writer: update this test"
    assert written <= set(EVENT_TYPES), written - set(EVENT_TYPES)


def test_docs_table_lists_exactly_the_types() -> None:
    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    section = text[text.index("### Events") : text.index("`GET /v1/events?")]
    documented = re.findall(r"^\| `([a-z]+\.[a-z]+)` \|", section, re.M)
    assert documented == list(EVENT_TYPES)


def test_cli_accepts_every_type() -> None:
    assert event_types(",".join(EVENT_TYPES)) == ",".join(EVENT_TYPES)
    assert event_types("daemon.storage, delivery.dead") == "daemon.storage,delivery.dead"
