"""A unified diff between two revisions' texts, bounded (pure).

``difflib`` is quadratic in the worst case, so both sides are capped before it runs and the
answer is capped in lines; a revision without text (a blob) is compared as its contents'
JSON, one key per line, so a change still shows where it is.
"""

from __future__ import annotations

import difflib
import json
from typing import Any

MAX_SIDE_CHARS = 1_000_000
"""Characters per side; a larger revision gets DIFF_TOO_LARGE instead of a slow diff."""
MAX_LINES = 5_000
"""Lines of diff in one answer; the rest is cut and ``truncated`` is true."""


class DiffTooLarge(ValueError):
    """One side is longer than :data:`MAX_SIDE_CHARS`."""


def revision_text(text: str | None, contents: list[dict[str, Any]]) -> str:
    if text is not None:
        return text
    return json.dumps(contents, indent=1, sort_keys=True, ensure_ascii=False)


def unified(old: str, new: str, old_label: str, new_label: str) -> tuple[list[str], bool]:
    """The diff's lines (``---``/``+++`` header, ``@@`` hunks, then `` ``/``-``/``+`` lines,
    without line ends) and whether it was cut at :data:`MAX_LINES`."""
    for side in (old, new):
        if len(side) > MAX_SIDE_CHARS:
            raise DiffTooLarge(f"a revision is longer than {MAX_SIDE_CHARS} characters")
    lines: list[str] = []
    for line in difflib.unified_diff(
        old.splitlines(), new.splitlines(), old_label, new_label, lineterm=""
    ):
        if len(lines) == MAX_LINES:
            return lines, True
        lines.append(line)
    return lines, False
