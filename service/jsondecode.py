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
import sys

TYPE_CHECKING = False  # typing costs more than socket+json: not imported at run time
if TYPE_CHECKING:
    from typing import Any

MAX_DEPTH = 128
"""Deepest nesting accepted. An MCP message needs about 6; tool results rarely exceed 20."""


FAST_MAX_BYTES = 64 * 1024
"""Texts up to this size may go through orjson (after the search below, which is bounded by
it); larger ones, rare, through :mod:`json` directly."""
_DIGITS_AS_ZERO = bytes(0x30 if 0x30 <= b <= 0x39 else 0x78 for b in range(256))
_WIDE_NUMBER = b"0" * 19
r"""19 ASCII digits in a row: an integer orjson may turn into a float (below -2**63 or past
2**64 - 1). Also found in strings; those texts just take json's way. Found by mapping every
digit to ``0`` and searching for the run: a third of the time of ``re.search(r"\d{19}")``,
which cost more than orjson's own decode of a read's answer."""


class InvalidJson(ValueError):
    """Not valid JSON, or nested deeper than :data:`MAX_DEPTH`. ``too_deep`` says which."""

    def __init__(self, message: str, *, too_deep: bool = False) -> None:
        super().__init__(message)
        self.too_deep = too_deep


def loads(data: str | bytes | bytearray, *, max_depth: int = MAX_DEPTH) -> Any:
    """:func:`json.loads` with an explicit nesting bound; every failure is :class:`InvalidJson`.

    In a process that has orjson loaded already (the daemon, for its encoder) orjson decodes
    first: every listen frame and every read's answer passes here. What orjson refuses is
    decoded again by :func:`json.loads`, so what is accepted and what it becomes stay
    :mod:`json`'s (``NaN``, integers past 64 bits, lone surrogates, UTF-16). A one-shot CLI
    call does not import orjson for the few answers it decodes (its import costs more than
    they do). The nesting walk is skipped when the text has too few brackets to nest that
    deep (each container opens with one)."""
    fast = sys.modules.get("orjson")
    value: Any
    try:
        if fast is None or len(data) > FAST_MAX_BYTES or _has_wide_number(data):
            raise ValueError  # json's way
        value = fast.loads(data)
    except (ValueError, TypeError):  # orjson.JSONDecodeError is a ValueError
        try:
            value = json.loads(data)
        except RecursionError:
            raise InvalidJson(
                f"JSON nested deeper than {max_depth} levels", too_deep=True
            ) from None
        except (ValueError, TypeError) as exc:  # JSONDecodeError, UnicodeDecodeError
            raise InvalidJson(f"invalid JSON: {exc}") from None
    if isinstance(data, str):
        brackets = data.count("{") + data.count("[")
    else:
        brackets = data.count(b"{") + data.count(b"[")
    if brackets > max_depth and depth_exceeds(value, max_depth):
        raise InvalidJson(f"JSON nested deeper than {max_depth} levels", too_deep=True)
    return value


def _has_wide_number(data: str | bytes | bytearray) -> bool:
    if isinstance(data, str):  # digits are ASCII, so UTF-8's other bytes never look like one
        data = data.encode("utf-8", "surrogatepass")
    return _WIDE_NUMBER in data.translate(_DIGITS_AS_ZERO)


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
