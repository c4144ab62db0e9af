"""Start-up settings of the lab server, read once from ``MCP_TEST_*`` environment variables.

Every parser here is a pure function of a string, so the exact rules of the original
TypeScript lab server (seed §6.1) are unit-tested without starting a process. The rules are
deliberately forgiving: a lab server that refuses to start over a typo in an env var is
less useful than one that falls back to the documented default.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

DEFAULT_PORT: Final = 8089
DEFAULT_PATH: Final = "/mcp"
DEFAULT_UPDATE_DELAY_SECONDS: Final = 5.0
DEFAULT_KEEPALIVE_SECONDS: Final = 15.0
# Seed 001's publisher: ``subscriptions: { max: 100 }``, one more is answered 503 + -32603.
DEFAULT_MAX_SUBSCRIPTIONS: Final = 100
# The Python SDK refuses bodies over 4 MiB with 413 (spec §2.3); we copy the limit.
DEFAULT_MAX_BODY_BYTES: Final = 4 * 1024 * 1024

LogLevel = Literal["debug", "info", "warn", "error", "silent"]
LOG_LEVELS: Final[tuple[LogLevel, ...]] = ("debug", "info", "warn", "error", "silent")
_TRUE_WORDS: Final = frozenset({"1", "true", "yes", "on"})


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything the environment decides; runtime knobs live in :mod:`labserver.labconfig`."""

    port: int = DEFAULT_PORT
    path: str = DEFAULT_PATH
    update_delay_seconds: float = DEFAULT_UPDATE_DELAY_SECONDS
    initial_status: str = "pending"
    updated_status: str = "reviewed"
    send_list_changed: bool = False
    log_level: LogLevel = "debug"
    keepalive_seconds: float = DEFAULT_KEEPALIVE_SECONDS
    max_subscriptions: int = DEFAULT_MAX_SUBSCRIPTIONS
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    control: bool = False
    auth_token: str | None = None

    def __repr__(self) -> str:
        # Keep the token out of logs and tracebacks, like starlette's ``Secret``.
        token = "None" if self.auth_token is None else "'**********'"
        return (
            f"Settings(port={self.port}, path={self.path!r}, "
            f"update_delay_seconds={self.update_delay_seconds}, control={self.control}, "
            f"auth_token={token})"
        )


def parse_number(raw: str | None, default: float, *, minimum: float = 0.0) -> float:
    """A finite number ≥ ``minimum`` (fractions and exponents allowed), else ``default``."""
    if raw is None or not raw.strip():
        return default
    try:
        value = float(raw.strip())
    except ValueError:
        return default
    if not math.isfinite(value) or value < minimum:
        return default
    return value


def parse_port(raw: str | None) -> int:
    """``MCP_TEST_PORT``: finite and ≥ 0, else 8089. ``0`` asks the OS for a free port."""
    value = parse_number(raw, DEFAULT_PORT)
    if value != int(value) or value > 65535:
        return DEFAULT_PORT
    return int(value)


def parse_positive_int(raw: str | None, default: int) -> int:
    """An integer ≥ 1, else ``default`` (used for caps, where 0 would disable the server)."""
    value = parse_number(raw, default, minimum=1)
    return int(value) if value == int(value) else default


def normalize_path(raw: str | None) -> str:
    """``MCP_TEST_PATH``: trim, add the leading ``/``, strip trailing slashes; blank → ``/mcp``."""
    if raw is None:
        return DEFAULT_PATH
    path = raw.strip()
    if not path.startswith("/"):
        path = "/" + path
    path = path.rstrip("/")
    return path or DEFAULT_PATH


def parse_bool(raw: str | None) -> bool:
    """True only for ``1``, ``true``, ``yes`` or ``on`` in any case; anything else is false."""
    return raw is not None and raw.strip().lower() in _TRUE_WORDS


def parse_log_level(raw: str | None) -> LogLevel:
    """One of ``debug|info|warn|error|silent`` (any case); anything else means ``debug``."""
    value = (raw or "").strip().lower()
    for level in LOG_LEVELS:
        if value == level:
            return level
    return "debug"


def parse_token(raw: str | None) -> str | None:
    """A blank token means "no authentication", so ``MCP_TEST_AUTH_TOKEN=`` disables it."""
    if raw is None or not raw.strip():
        return None
    return raw.strip()


def settings_from_env(env: Mapping[str, str]) -> Settings:
    """Build :class:`Settings` from an environment mapping (``os.environ`` in production)."""
    return Settings(
        port=parse_port(env.get("MCP_TEST_PORT")),
        path=normalize_path(env.get("MCP_TEST_PATH")),
        update_delay_seconds=parse_number(
            env.get("MCP_TEST_UPDATE_DELAY_SECONDS"), DEFAULT_UPDATE_DELAY_SECONDS
        ),
        initial_status=env.get("MCP_TEST_INITIAL_STATUS", "pending"),
        updated_status=env.get("MCP_TEST_UPDATED_STATUS", "reviewed"),
        send_list_changed=parse_bool(env.get("MCP_TEST_SEND_LIST_CHANGED")),
        log_level=parse_log_level(env.get("MCP_TEST_LOG_LEVEL")),
        keepalive_seconds=parse_number(
            env.get("MCP_TEST_KEEPALIVE_SECONDS"), DEFAULT_KEEPALIVE_SECONDS, minimum=0.001
        ),
        max_subscriptions=parse_positive_int(
            env.get("MCP_TEST_MAX_SUBSCRIPTIONS"), DEFAULT_MAX_SUBSCRIPTIONS
        ),
        max_body_bytes=parse_positive_int(
            env.get("MCP_TEST_MAX_BODY_BYTES"), DEFAULT_MAX_BODY_BYTES
        ),
        control=parse_bool(env.get("MCP_TEST_CONTROL")),
        auth_token=parse_token(env.get("MCP_TEST_AUTH_TOKEN")),
    )
