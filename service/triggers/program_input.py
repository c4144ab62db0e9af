"""What a trigger's program is given: argv, the environment, stdin (pure).

Server text (a URI, a server URL, the content) is data. It reaches the program on stdin, as
the JSON of a webhook body, and in the ``MCPSUB_*`` values, which are made safe for a shell
that expands them unquoted or even ``eval``s them: every character outside a small set is
percent-encoded (the URI stays the same URI to a reader that decodes it; the exact text is
on stdin). Placeholders in the arguments are whole arguments only (``{uri}``, never
``--uri={uri}``) and take those same values; nothing re-parses them.

The environment is an allowlist: ``PATH``, ``HOME``, ``LANG`` (and the ``LC_*`` of the
daemon), what the trigger names (``--env NAME`` passes the daemon's value through, ``--env
NAME=VALUE`` sets one), and the ``MCPSUB_*`` values. Nothing else of the daemon's
environment (its own ``MCPSUB_*`` settings included) reaches the program.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

BASE_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "USER", "LOGNAME")
"""Passed through from the daemon's environment when it has them."""
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
RESERVED_PREFIX = "MCPSUB_"
_UNSAFE = re.compile(r"[^A-Za-z0-9._~:/@+=,%-]")
PLACEHOLDERS = ("{uri}", "{revision}", "{event_id}", "{server}", "{attempt}", "{run_id}")


def shell_safe(text: str) -> str:
    """``text`` with every character a shell could act on percent-encoded (UTF-8 bytes):
    quotes, ``$``, backquotes, spaces, globs, separators, control characters. ``%`` itself
    stays: already-encoded URIs are not encoded twice."""
    return _UNSAFE.sub(lambda m: "".join(f"%{b:02X}" for b in m.group().encode()), text)


@dataclass(frozen=True, slots=True)
class Change:
    """What a run is about (a stored revision, or ``test``'s synthetic one)."""

    run_id: int
    uri: str
    revision: int | None
    event_id: int | None
    server: str | None
    attempt: int


def mcpsub_values(change: Change) -> dict[str, str]:
    return {
        "MCPSUB_URI": shell_safe(change.uri),
        "MCPSUB_REVISION": "" if change.revision is None else str(change.revision),
        "MCPSUB_EVENT_ID": "" if change.event_id is None else str(change.event_id),
        "MCPSUB_SERVER": shell_safe(change.server or ""),
        "MCPSUB_ATTEMPT": str(change.attempt),
        "MCPSUB_RUN_ID": str(change.run_id),
    }


def program_env(
    daemon_env: Mapping[str, str], entries: Sequence[str], change: Change
) -> dict[str, str]:
    """The allowlisted environment for one attempt (see the module's docstring)."""
    env = {name: daemon_env[name] for name in BASE_ENV if name in daemon_env}
    for entry in entries:
        name, has_value, value = entry.partition("=")
        if has_value:
            env[name] = value
        elif name in daemon_env:
            env[name] = daemon_env[name]
    env.update(mcpsub_values(change))
    return env


def program_argv(program: str, args: Sequence[str], change: Change) -> list[str]:
    """``program`` and ``args``; an argument that is exactly a placeholder is replaced by
    its value as one whole argument."""
    values = mcpsub_values(change)
    by_placeholder = {
        "{uri}": values["MCPSUB_URI"],
        "{revision}": values["MCPSUB_REVISION"],
        "{event_id}": values["MCPSUB_EVENT_ID"],
        "{server}": values["MCPSUB_SERVER"],
        "{attempt}": values["MCPSUB_ATTEMPT"],
        "{run_id}": values["MCPSUB_RUN_ID"],
    }
    return [program, *(by_placeholder.get(arg, arg) for arg in args)]


def env_entry_problem(entry: str) -> str | None:
    """Why ``entry`` cannot be a trigger's ``--env`` (None when it can)."""
    name, _has_value, value = entry.partition("=")
    if not ENV_NAME.fullmatch(name):
        return f"{name!r} is not an environment variable name"
    if name.upper().startswith(RESERVED_PREFIX):
        return f"{name} is reserved: the daemon sets the MCPSUB_* values itself"
    if "\x00" in value:
        return f"the value of {name} holds a NUL byte"
    return None
