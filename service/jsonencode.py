"""The one JSON encoder of the daemon: compact UTF-8, as bytes (``json_bytes``) for what goes
on a socket or into a body, as text (``json_text``) for what the store writes into a column.

orjson encodes a large answer (``/v1/status`` with a thousand links) and the hot path's small
frames several times faster than ``json.dumps`` (docs/benchmarks.md). It refuses a few values
JSON itself allows (an integer past 64 bits, nesting past 254 levels), and a server's
capabilities or a resource's contents may hold them: those go through ``json.dumps``, whose
compact, unescaped UTF-8 output is the same JSON. Outside JSON is decoded by
:mod:`service.jsondecode`.
"""

from __future__ import annotations

import json
from typing import Any

import orjson


def json_bytes(value: Any) -> bytes:
    try:
        return orjson.dumps(value)
    except (orjson.JSONEncodeError, TypeError):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def json_text(value: Any) -> str:
    return json_bytes(value).decode()
