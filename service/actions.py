"""Find ``recommended_next_action`` in a resource text (seed-behaviour §3.4).

Servers such as copilot-review-mcp put a machine-readable next step into the resource body,
sometimes as JSON, sometimes as YAML-ish text. We look in JSON first (depth-first, the first
string value under that key wins), then fall back to two patterns, exactly as the TypeScript
CLI does, so scripts that switch to us see the same action.
"""

from __future__ import annotations

import re

from service import jsondecode

TYPE_CHECKING = False  # typing costs more than socket+json: not imported at run time
if TYPE_CHECKING:
    from typing import Any

NON_TERMINAL_ACTIONS = frozenset({"POLL_AFTER"})
"""Actions that mean "not done yet, keep waiting". Case-sensitive, on purpose."""

_KEY = "recommended_next_action"
_PATTERN_A = re.compile(r'(?:^|[\s,{])recommended_next_action\s*[:=]\s*"?([^"\s,}]+)"?', re.M)
_PATTERN_B = re.compile(r'"recommended_next_action"\s*:\s*"([^"]+)"')


def _search(value: Any) -> str | None:
    if isinstance(value, dict):
        found = value.get(_KEY)
        if isinstance(found, str):
            return found
        for child in value.values():
            result = _search(child)
            if result is not None:
                return result
    elif isinstance(value, list):
        for child in value:
            result = _search(child)
            if result is not None:
                return result
    return None


def extract_next_action(text: str | None) -> str | None:
    if not text:
        return None
    if _KEY not in text and "\\u" not in text:
        # Neither the patterns nor a JSON key can find it: the key is not in the text, and
        # no escape could spell it. Most texts, and each ``probe --follow`` read asks.
        return None
    try:
        # Bounded depth: _search recurses, and the text comes from the server.
        parsed = jsondecode.loads(text)
    except jsondecode.InvalidJson:
        parsed = None
    if parsed is not None:
        found = _search(parsed)
        if found is not None:
            return found
    for pattern in (_PATTERN_A, _PATTERN_B):
        match = pattern.search(text)
        if match:
            return match.group(1)
    return None


def is_non_terminal(text: str | None) -> bool:
    return extract_next_action(text) in NON_TERMINAL_ACTIONS
