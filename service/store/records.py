"""Frozen domain records the store hands out; SQLAlchemy rows never leave the store."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from typing import Any, TypeVar

R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Server:
    id: int
    url: str
    credential_key: str
    state: str
    generation: int
    last_error: str | None
    last_error_code: str | None
    reconnects: int
    backoff_until: float | None
    connected_at: float | None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("credential_key")
        return data


@dataclass(frozen=True, slots=True)
class Subscription:
    id: int
    server_id: int
    server_url: str
    uri: str
    state: str
    state_reason: str | None
    state_code: str | None
    content_hash: str | None
    revision: int
    last_read_at: float | None
    created_at: float
    created_by: str = "person"
    """``person`` (CLI, API, console) or ``agent`` (the MCP face): see ``CREATORS``."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


CREATORS = ("person", "agent")
"""Who may have made a subscription: a person (``mcpsubctl``, the API, the console) or an
agent through the MCP face (``mcpsubctl mcp``, ``/mcp``)."""


@dataclass(frozen=True, slots=True)
class Revision:
    id: int
    subscription_id: int
    revision: int
    content_hash: str
    contents: list[dict[str, Any]]
    text: str | None
    generation: int
    read_at: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class Event:
    id: int
    type: str
    subscription_id: int | None
    server_url: str | None
    uri: str | None
    revision_id: int | None
    revision: int | None
    data: dict[str, Any]
    created_at: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def loads_object(raw: str | None) -> dict[str, Any]:
    if not raw:
        return {}
    value = json.loads(raw)
    return value if isinstance(value, dict) else {}


def from_row(cls: type[R], row: Any, **overrides: Any) -> R:
    """Build record ``cls`` from a row whose column names are the record's field names.

    ``overrides`` supply the fields whose column is named differently or needs decoding.
    """
    mapping = row._mapping
    values = {f.name: mapping[f.name] for f in fields(cls) if f.name not in overrides}  # type: ignore[arg-type]
    return cls(**values, **overrides)
