"""The lab's resources: the seed's ``test://review/status`` plus whatever control adds.

The review resource's text is a contract with the original lab server (seed §6.3): three
lines, no trailing newline, version 1 while "pending" and version 2 once "reviewed".
Every other change (control PUT, burst) just bumps ``version`` so tests can tell reads
apart.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any, Final

REVIEW_URI: Final = "test://review/status"
REVIEW_NAME: Final = "Review Status"
REVIEW_DESCRIPTION: Final = "A test resource that changes after subscription."
MESSAGE_V1: Final = "Waiting for simulated review result."
MESSAGE_V2: Final = "Simulated review result is now available."


def review_text(status: str, version: int) -> str:
    message = MESSAGE_V1 if version == 1 else MESSAGE_V2
    return f"status: {status}\nversion: {version}\nmessage: {message}"


@dataclass(slots=True)
class Resource:
    uri: str
    name: str
    text: str
    version: int = 1
    description: str | None = None
    mime_type: str = "text/plain"

    def listing(self) -> dict[str, Any]:
        """The ``Resource`` object of ``resources/list``."""
        entry: dict[str, Any] = {"uri": self.uri, "name": self.name}
        if self.description is not None:
            entry["description"] = self.description
        entry["mimeType"] = self.mime_type
        return entry

    def contents(self) -> dict[str, Any]:
        """The ``TextResourceContents`` of ``resources/read``."""
        return {"uri": self.uri, "mimeType": self.mime_type, "text": self.text}

    def state(self) -> dict[str, Any]:
        return {"uri": self.uri, "text": self.text, "version": self.version}


def initial_review(status: str) -> Resource:
    return Resource(
        uri=REVIEW_URI,
        name=REVIEW_NAME,
        text=review_text(status, 1),
        version=1,
        description=REVIEW_DESCRIPTION,
    )


class InvalidCursor(ValueError):
    """A ``resources/list`` cursor this server did not mint."""


def encode_cursor(offset: int) -> str:
    """Opaque to clients (spec §4.1), but a plain offset for us: the lab has no snapshots."""
    return base64.urlsafe_b64encode(json.dumps({"offset": offset}).encode()).decode()


def decode_cursor(cursor: Any) -> int:
    if not isinstance(cursor, str):
        raise InvalidCursor("cursor must be a string")
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor.encode()))
    except (ValueError, binascii.Error, UnicodeDecodeError) as exc:
        raise InvalidCursor("cursor was not minted by this server") from exc
    offset = data.get("offset") if isinstance(data, dict) else None
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise InvalidCursor("cursor was not minted by this server")
    return offset


def page(items: list[Resource], offset: int, size: int) -> tuple[list[Resource], str | None]:
    """One page of ``items`` and the cursor of the next page, if there is one."""
    chunk = items[offset : offset + size]
    end = offset + len(chunk)
    return chunk, (encode_cursor(end) if end < len(items) else None)
