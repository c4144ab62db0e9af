"""Runtime knobs of the lab server: what ``PATCH /lab/config`` may change while it runs.

The knobs are fault injection for client tests (late acks, refused listens, dropped
streams, 2025-era servers, ...). :func:`apply_patch` is pure: it validates a JSON patch
against the current config and returns a new config or raises :class:`ConfigError`, so a
bad patch never leaves the server half-reconfigured.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from labserver.settings import Settings

LegacyMode = Literal[
    "method-not-found",
    "missing-session",
    "unsupported-version",
    "not-initialized",
    "discover-2025",
    "not-found",
]
LEGACY_MODES: Final[tuple[LegacyMode, ...]] = (
    "method-not-found",
    "missing-session",
    "unsupported-version",
    "not-initialized",
    "discover-2025",
    "not-found",
)


class ConfigError(ValueError):
    """A control request asked for a config value the lab server cannot use."""


@dataclass(frozen=True, slots=True)
class LabConfig:
    """JSON names are the camelCase field names returned by :meth:`to_json`."""

    ack_delay_ms: int = 0
    dishonor_uris: tuple[str, ...] = ()
    advertise_subscribe: bool = True
    advertise_list_changed: bool = False
    refuse_listen: bool = False
    read_delay_ms: int = 0
    call_delay_ms: int = 0
    auth_token: str | None = None
    keepalive_seconds: float = 15.0
    update_delay_seconds: float = 5.0
    page_size: int = 50
    legacy_mode: LegacyMode | None = None
    fail_methods: dict[str, int] = field(default_factory=dict)
    silent_methods: tuple[str, ...] = ()
    drop_after_ack_ms: int | None = None
    close_after_ack_ms: int | None = None
    max_subscriptions: int = 100
    max_body_bytes: int = 4 * 1024 * 1024
    discover_ttl_ms: int = 0
    """``ttlMs`` of the discover result: 0 (immediately stale) unless a test needs a client
    that keeps it across restarts."""

    def to_json(self) -> dict[str, Any]:
        return {_CAMEL[f.name]: _jsonable(getattr(self, f.name)) for f in dataclasses.fields(self)}


def _jsonable(value: Any) -> Any:
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, dict):
        return dict(value)
    return value


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


_CAMEL: Final = {f.name: _camel(f.name) for f in dataclasses.fields(LabConfig)}
_SNAKE: Final = {camel: snake for snake, camel in _CAMEL.items()}


def config_from_settings(settings: Settings) -> LabConfig:
    """The config a fresh (or ``/lab/reset``) server starts with."""
    return LabConfig(
        advertise_list_changed=settings.send_list_changed,
        auth_token=settings.auth_token,
        keepalive_seconds=settings.keepalive_seconds,
        update_delay_seconds=settings.update_delay_seconds,
        max_subscriptions=settings.max_subscriptions,
        max_body_bytes=settings.max_body_bytes,
    )


def _int(name: str, value: Any, *, minimum: int = 0, nullable: bool = False) -> int | None:
    if value is None and nullable:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{name} must be an integer >= {minimum}")
    return value


def _float(name: str, value: Any, *, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{name} must be a number")
    if value < 0 or (positive and value == 0):
        raise ConfigError(f"{name} must be {'> 0' if positive else '>= 0'}")
    return float(value)


def _bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{name} must be a boolean")
    return value


def _strings(name: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ConfigError(f"{name} must be an array of strings")
    return tuple(value)


def _check(name: str, value: Any) -> Any:
    """Validate one knob; returns the value in its stored Python form."""
    match name:
        case "ackDelayMs" | "readDelayMs" | "callDelayMs" | "discoverTtlMs":
            return _int(name, value)
        case "dropAfterAckMs" | "closeAfterAckMs":
            return _int(name, value, nullable=True)
        case "pageSize" | "maxSubscriptions" | "maxBodyBytes":
            return _int(name, value, minimum=1)
        case "advertiseSubscribe" | "advertiseListChanged" | "refuseListen":
            return _bool(name, value)
        case "keepaliveSeconds":
            return _float(name, value, positive=True)
        case "updateDelaySeconds":
            return _float(name, value)
        case "dishonorUris" | "silentMethods":
            return _strings(name, value)
        case "authToken":
            if value is not None and (not isinstance(value, str) or not value):
                raise ConfigError("authToken must be a non-empty string or null")
            return value
        case "legacyMode":
            if value is not None and value not in LEGACY_MODES:
                raise ConfigError(f"legacyMode must be null or one of {list(LEGACY_MODES)}")
            return value
        case "failMethods":
            if not isinstance(value, dict) or not all(
                isinstance(k, str) and isinstance(v, int) and 100 <= v <= 599
                for k, v in value.items()
            ):
                raise ConfigError("failMethods must map method names to HTTP statuses")
            return dict(value)
    raise ConfigError(f"unknown config key: {name}")


def apply_patch(config: LabConfig, patch: Any) -> LabConfig:
    """Return ``config`` with the keys of ``patch`` replaced; all-or-nothing."""
    if not isinstance(patch, dict):
        raise ConfigError("the config patch must be a JSON object")
    changes: dict[str, Any] = {}
    for key, value in patch.items():
        changes[_SNAKE.get(str(key), str(key))] = _check(str(key), value)
    return dataclasses.replace(config, **changes)
