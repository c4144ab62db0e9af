"""Decode JSON from someone we do not trust, with every failure as one ``ValueError`` (what we
send is encoded by :mod:`service.jsonencode`).

Why this exists: :func:`json.loads` raises ``RecursionError`` (not ``ValueError``) on deeply
nested input, so ``except ValueError`` around it lets a 200,000-deep ``[[[[...`` frame from
a server kill the task that read it. And input that parses just below the interpreter's
limit still breaks whatever walks it later (``json.dumps`` when we store it, a recursive
search of a resource text). So every decoder of outside JSON (listen frames, replies, the
API's request bodies, ``--args``) goes through :func:`loads`, which bounds the nesting
explicitly and reports anything wrong as :class:`InvalidJson`.

The depth check walks the decoded containers iteratively (cost: one step per container,
not per byte; a 16 MiB text resource is a handful of containers).
"""

from __future__ import annotations

import json

TYPE_CHECKING = False  # typing costs more than socket+json: not imported at run time
if TYPE_CHECKING:
    from typing import Any

MAX_DEPTH = 128
"""Deepest nesting accepted. An MCP message needs about 6; tool results rarely exceed 20."""


class InvalidJson(ValueError):
    """Not valid JSON, or nested deeper than :data:`MAX_DEPTH`. ``too_deep`` says which."""

    def __init__(self, message: str, *, too_deep: bool = False) -> None:
        super().__init__(message)
        self.too_deep = too_deep


def loads(data: str | bytes | bytearray, *, max_depth: int = MAX_DEPTH) -> Any:
    """:func:`json.loads` with an explicit nesting bound; every failure is :class:`InvalidJson`."""
    try:
        value = json.loads(data)
    except RecursionError:
        raise InvalidJson(f"JSON nested deeper than {max_depth} levels", too_deep=True) from None
    except (ValueError, TypeError) as exc:  # JSONDecodeError, UnicodeDecodeError
        raise InvalidJson(f"invalid JSON: {exc}") from None
    if depth_exceeds(value, max_depth):
        raise InvalidJson(f"JSON nested deeper than {max_depth} levels", too_deep=True)
    return value


def depth_exceeds(value: Any, max_depth: int) -> bool:
    """True when ``value`` nests containers more than ``max_depth`` deep (a scalar is 0)."""
    if not isinstance(value, (dict, list)):
        return False
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > max_depth:
            return True
        children = node.values() if isinstance(node, dict) else node
        for child in children:
            if isinstance(child, (dict, list)):
                stack.append((child, depth + 1))
    return False
