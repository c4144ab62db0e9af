"""Who owns a path: for hints like "permission denied on … (the daemon runs as alice?)".

Shared by ``mcpsubd`` (an unusable state directory) and ``mcpsubctl`` (a socket it may not
open); both name the owner of the path or of its nearest existing ancestor.
"""

from __future__ import annotations

from pathlib import Path


def owner_of(path: Path) -> str | None:
    """The user owning ``path`` or its nearest existing ancestor; None when nothing exists."""
    for candidate in (path, *path.parents):
        try:
            uid = candidate.stat().st_uid
        except OSError:
            continue
        return user_name(uid)
    return None


def user_name(uid: int) -> str:
    """``alice``, or ``uid 1234`` for a uid with no name (a container, a dynamic user)."""
    try:
        import pwd

        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        return f"uid {uid}"
