"""Where mcpsub keeps its state and where its API socket is: the one rule that ``mcpsubd``,
``mcpsubctl`` (every daemon command, ``tail``, ``mcp``), ``mcpsubctl hook`` and the token
store follow (docs/operations.md, "Where things live").

* **The state directory**: ``MCPSUB_STATE_DIR``, else systemd's ``STATE_DIRECTORY`` (its
  first entry; set only inside a unit with ``StateDirectory=``), else ``$XDG_STATE_HOME/mcpsub``
  (``~/.local/state/mcpsub``; macOS ``~/Library/Application Support/mcpsub``).
* **The API socket**: ``<state dir>/api.sock`` when that path fits in a unix socket address
  (``sun_path``: 107 bytes on Linux, 103 on macOS and the BSDs). A longer one (a long
  ``HOME`` is enough) cannot be bound or connected to, so the socket goes to a short private
  directory named after the state dir instead: ``$XDG_RUNTIME_DIR/mcpsub-UID-DIGEST/api.sock``
  (DIGEST: 16 hex digits of the SHA-256 of the state dir's absolute path), or under ``/tmp``
  when ``XDG_RUNTIME_DIR`` is unset or itself too long. Anyone can compute that name, so who
  holds it is checked on both sides (:func:`socket_dir_problem`): the daemon makes the
  directory 0700 and refuses one that is not its user's own, and keeps it between runs
  (removing it would let another user claim the name before the next start); a client
  refuses to connect through a directory that is not its user's, and checks the peer's
  credentials too (:mod:`service.localclient`).
* **The API token** (the TCP listener's bearer token): ``<state dir>/api.token``, which the
  daemon writes; a client takes ``MCPSUB_API_TOKEN`` first.
* The systemd user unit's socket, ``$XDG_RUNTIME_DIR/mcpsubd/api.sock``, is where clients look
  when nothing is at the rule's path and something is there.

Imports only ``os`` and ``sys`` (both loaded by every interpreter): the CLIs' start-up is
measured, and a prompt hook runs before every prompt. ``hashlib`` is imported only for a
state dir whose socket path is too long.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # not typing's: the CLIs never import typing on their fast path
if TYPE_CHECKING:
    from collections.abc import Mapping

APP = "mcpsub"
SOCKET_NAME = "api.sock"
TOKEN_NAME = "api.token"
UNIT_SOCKET = ("mcpsubd", "api.sock")
"""Under ``$XDG_RUNTIME_DIR``: the systemd user unit's ``RuntimeDirectory=mcpsubd``."""
SHORT_DIR_PREFIX = "mcpsub-"
FALLBACK_RUNTIME = "/tmp"


def max_socket_path(platform: str | None = None) -> int:
    """The longest socket path (bytes, without the NUL) ``bind``/``connect`` accept."""
    platform = sys.platform if platform is None else platform
    return 107 if platform.startswith("linux") else 103


def fits(path: str, platform: str | None = None) -> bool:
    return len(os.fsencode(path)) <= max_socket_path(platform)


def state_base(
    env: Mapping[str, str] | None = None, platform: str | None = None, home: str | None = None
) -> str:
    """The per-user base for state (apps add their own directory under it)."""
    env = os.environ if env is None else env
    platform = sys.platform if platform is None else platform
    home = os.path.expanduser("~") if home is None else home
    if platform.startswith("win"):
        local = env.get("LOCALAPPDATA")
        return local if local else os.path.join(home, "AppData", "Local")
    if platform == "darwin":
        return os.path.join(home, "Library", "Application Support")
    xdg = env.get("XDG_STATE_HOME")
    return os.path.expanduser(xdg) if xdg else os.path.join(home, ".local", "state")


def default_state_dir(env: Mapping[str, str] | None = None) -> str:
    """The state dir when none is named: systemd's ``STATE_DIRECTORY``, else the base's."""
    env = os.environ if env is None else env
    unit = env.get("STATE_DIRECTORY")
    if unit:
        return unit.split(":")[0]
    return os.path.join(state_base(env), APP)


def state_dir(env: Mapping[str, str] | None = None) -> str:
    """``MCPSUB_STATE_DIR``, else :func:`default_state_dir`."""
    env = os.environ if env is None else env
    explicit = env.get("MCPSUB_STATE_DIR")
    return os.path.expanduser(explicit) if explicit else default_state_dir(env)


def short_dir(state: str, env: Mapping[str, str] | None = None) -> str:
    """The private directory that holds the socket of a state dir whose own path is too long."""
    import hashlib

    env = os.environ if env is None else env
    absolute = os.path.abspath(os.path.expanduser(state))
    digest = hashlib.sha256(os.fsencode(absolute)).hexdigest()[:16]
    name = f"{SHORT_DIR_PREFIX}{os.getuid()}-{digest}"
    runtime = env.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isabs(runtime) and fits(os.path.join(runtime, name, SOCKET_NAME)):
        return os.path.join(runtime, name)
    return os.path.join(FALLBACK_RUNTIME, name)


def socket_path(state: str, env: Mapping[str, str] | None = None) -> str:
    """The API socket of the daemon whose state dir is ``state`` (the rule above)."""
    beside = os.path.join(state, SOCKET_NAME)
    if fits(beside):
        return beside
    return os.path.join(short_dir(state, env), SOCKET_NAME)


def unit_socket(env: Mapping[str, str] | None = None) -> str | None:
    env = os.environ if env is None else env
    runtime = env.get("XDG_RUNTIME_DIR")
    return os.path.join(runtime, *UNIT_SOCKET) if runtime else None


def client_socket(state: str, env: Mapping[str, str] | None = None) -> str:
    """Where a client connects by default: the rule's socket, or the systemd user unit's
    when only that one exists."""
    path = socket_path(state, env)
    unit = unit_socket(env)
    if unit is not None and not _exists(path) and _exists(unit):
        return unit
    return path


def token_path(state: str) -> str:
    """The TCP API's bearer token file of the daemon whose state dir is ``state``."""
    return os.path.join(state, TOKEN_NAME)


def read_token(state: str, env: Mapping[str, str] | None = None) -> str | None:
    """The token a client sends over TCP: ``MCPSUB_API_TOKEN``, else ``state``'s token file
    (None when neither holds one)."""
    env = os.environ if env is None else env
    token = env.get("MCPSUB_API_TOKEN")
    if token:
        return token.strip()
    try:
        with open(token_path(state), encoding="utf-8") as handle:
            return handle.read().strip() or None
    except (OSError, ValueError):
        return None


def _exists(path: str) -> bool:
    """``os.path.exists`` that counts "cannot look" as "exists": the connect then says why."""
    try:
        os.stat(path)
    except PermissionError:
        return True
    except (OSError, ValueError):
        return False
    return True


OTHER_OWNER = "belongs to another user"


def socket_dir_problem(directory: str, owners: tuple[int, ...]) -> tuple[str, int] | None:
    """Why a socket in ``directory`` could be another user's (None: it cannot), with the
    directory's owner: a link (whoever made it chose where it leads), not a directory, owned
    by a uid not in ``owners``, or writable by group or others (they could put their own
    socket at the name). Raises OSError when the directory cannot be looked at."""
    import stat

    info = os.lstat(directory)
    if stat.S_ISLNK(info.st_mode):
        return "is a link, not a directory", info.st_uid
    if not stat.S_ISDIR(info.st_mode):
        return "is not a directory", info.st_uid
    if info.st_uid not in owners:
        return OTHER_OWNER, info.st_uid
    if info.st_mode & 0o022:
        return f"is writable by other users (mode {stat.S_IMODE(info.st_mode):04o})", info.st_uid
    return None


class UnusableDir(Exception):
    """The socket's short directory exists but is not this user's private directory."""


def ensure_private_dir(path: str) -> None:
    """Make ``path`` a 0700 directory of this user's (the daemon, before it binds there):
    a link, a file, or another user's directory at that name is refused, never used."""
    import stat

    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise UnusableDir(f"cannot create {path}: {exc.strerror}") from None
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode):
        raise UnusableDir(f"{path} is not a directory (a link or a file is there)")
    if info.st_uid != os.getuid():
        raise UnusableDir(f"{path} belongs to another user")
    if info.st_mode & 0o077:
        os.chmod(path, 0o700)
