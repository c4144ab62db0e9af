"""Reload on SIGHUP: re-read the TOML config for ``log_level`` and the declared subscriptions.

Declared subscriptions come from a top-level ``[[subscriptions]]`` array (``url``, ``uri``) in
the config file (``--config`` / ``MCPSUB_CONFIG``; the settings then live in its
``[mcpsubd]`` table) and in ``<state_dir>/subscriptions.toml``::

    [[subscriptions]]
    url = "https://mcp.example.com/mcp"
    uri = "file:///notes/today.md"

At start and on every reload, each declared subscription is added (idempotent); one that an
earlier reload added *from a file* and that is no longer declared is removed. Subscriptions
made through the API are never touched, even when a file lists them too. The ids added from
files are kept in ``<state_dir>/managed-subscriptions.json`` (0600).

Everything is parsed before anything changes: an unreadable or invalid file logs an error and
keeps the old state (the daemon keeps running with it). Other settings that changed in the
file are reported with "restart to apply".
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Protocol

import structlog

from service.daemon.config import ConfigError, Settings, load_settings
from service.store import Subscription
from service.store.database import database_errors, describe

log = structlog.get_logger("mcpsubd.reload")

SUBSCRIPTIONS_FILE = "subscriptions.toml"
MANAGED_FILE = "managed-subscriptions.json"
RELOADABLE = frozenset({"log_level"})


class ReloadError(ValueError):
    """A file cannot be used; the message names the file and the entry."""


class SubscriptionTarget(Protocol):
    async def subscribe(self, url: str, uri: str) -> tuple[Subscription, bool]: ...

    async def unsubscribe(self, subscription_id: int) -> Subscription | None: ...


@dataclass(frozen=True)
class ConfigSource:
    """What the settings were built from, so that a reload builds them the same way."""

    flags: dict[str, Any] = field(default_factory=dict)
    config_file: Path | None = None

    @property
    def path(self) -> Path | None:
        if self.config_file is not None:
            return self.config_file
        env = os.environ.get("MCPSUB_CONFIG")
        return Path(env) if env else None

    def load(self) -> Settings:
        return load_settings(self.flags, config_file=self.config_file)


Declared = tuple[str, str]
"""``(url, uri)`` exactly as written in the file."""


def _validate_entry(where: str, index: int, entry: Any) -> Declared:
    from service.app import validate
    from service.app.errors import ApiError

    if not isinstance(entry, dict):
        raise ReloadError(f"{where}: subscriptions[{index}] must be a table with url and uri")
    unknown = sorted(set(entry) - {"url", "uri"})
    if unknown:
        raise ReloadError(f"{where}: subscriptions[{index}]: unknown key {unknown[0]!r}")
    try:
        return validate.server_url(entry.get("url")), validate.resource_uri(entry.get("uri"))
    except ApiError as exc:
        raise ReloadError(f"{where}: subscriptions[{index}]: {exc.message}") from None


def read_declared(path: Path, *, required: bool) -> list[Declared]:
    """The ``[[subscriptions]]`` of one TOML file ([] when absent and not required)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        if required:
            raise ReloadError(f"cannot read {path}: no such file") from None
        return []
    except OSError as exc:
        raise ReloadError(f"cannot read {path}: {exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ReloadError(f"{path}: invalid TOML: {exc}") from None
    raw = data.get("subscriptions", [])
    if not isinstance(raw, list):
        raise ReloadError(f"{path}: subscriptions must be an array of tables ([[subscriptions]])")
    return [_validate_entry(str(path), n, entry) for n, entry in enumerate(raw)]


def declared_subscriptions(config_file: Path | None, state_dir: Path) -> list[Declared]:
    """Every declared ``(url, uri)``, config file first, without duplicates."""
    found: list[Declared] = []
    if config_file is not None:
        found += read_declared(config_file, required=True)
    found += read_declared(state_dir / SUBSCRIPTIONS_FILE, required=False)
    return list(dict.fromkeys(found))


class ManagedSet:
    """The subscription ids added from files: ``{id: (url, uri)}``, persisted 0600."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: dict[int, Declared] = {}

    @classmethod
    def load(cls, path: Path) -> ManagedSet:
        managed = cls(path)
        try:
            data = json.loads(path.read_text())
            for item in data.get("subscriptions", []):
                managed.entries[int(item["id"])] = (str(item["url"]), str(item["uri"]))
        except FileNotFoundError:
            pass
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
            # Forgetting the list only means stale file entries are not removed: say so.
            log.error("cannot read the managed subscription list", path=str(path), error=str(exc))
        return managed

    def save(self) -> None:
        body = {
            "version": 1,
            "subscriptions": [
                {"id": sid, "url": url, "uri": uri}
                for sid, (url, uri) in sorted(self.entries.items())
            ],
        }
        tmp = self.path.with_name(self.path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            json.dump(body, handle, indent=2)
            handle.write("\n")
        os.chmod(tmp, 0o600)
        os.replace(tmp, self.path)


@dataclass
class ReloadResult:
    ok: bool
    added: list[int] = field(default_factory=list)
    removed: list[int] = field(default_factory=list)
    error: str | None = None
    settings: Settings | None = None


async def apply_declared(
    target: SubscriptionTarget, managed: ManagedSet, declared: Iterable[Declared]
) -> tuple[list[int], list[int]]:
    """Make the file-managed subscriptions match ``declared``; returns (added, removed) ids."""
    wanted = list(declared)
    wanted_set = set(wanted)
    added: list[int] = []
    removed: list[int] = []
    changed = False
    for sid, pair in list(managed.entries.items()):
        if pair in wanted_set:
            continue
        try:
            await target.unsubscribe(sid)
        except Exception as exc:
            log.error("cannot remove a file subscription", id=sid, error=str(exc))
            continue
        del managed.entries[sid]
        removed.append(sid)
        changed = True
    for url, uri in wanted:
        try:
            sub, created = await target.subscribe(url, uri)
        except Exception as exc:
            log.error("cannot add a file subscription", url=url, uri=uri, error=str(exc))
            continue
        if created:
            added.append(sub.id)
            for stale in [k for k, v in managed.entries.items() if v == (url, uri)]:
                del managed.entries[stale]  # deleted through the API, now declared again
                changed = True
        # A subscription made through the API is never taken over by a file.
        managed_here = created or sub.id in managed.entries
        if managed_here and managed.entries.get(sub.id) != (url, uri):
            managed.entries[sub.id] = (url, uri)
            changed = True
    if changed:
        managed.save()
    return added, removed


class Reloader:
    """Applies the files at start (:meth:`initial`) and on SIGHUP (:meth:`reload`)."""

    def __init__(
        self,
        target: SubscriptionTarget,
        settings: Settings,
        source: ConfigSource,
        set_log_level: Callable[[str], None] | None = None,
    ) -> None:
        self.target = target
        self.settings = settings
        self.source = source
        self.set_log_level = set_log_level
        self.managed = ManagedSet.load(settings.state_dir / MANAGED_FILE)
        self.last_error: str | None = None

    async def initial(self) -> ReloadResult:
        """Declared subscriptions at start: the settings were just loaded from the same files."""
        try:
            declared = declared_subscriptions(self.source.path, self.settings.state_dir)
        except ReloadError as exc:
            return self._failed(str(exc), "subscription files not applied")
        try:
            added, removed = await apply_declared(self.target, self.managed, declared)
        except database_errors() as exc:  # a full disk must not stop the start
            return self._failed(
                describe(exc), "subscription files not applied (send SIGHUP once writes work)"
            )
        if added or removed:
            log.info("subscription files applied", added=added, removed=removed)
        self.last_error = None
        return ReloadResult(True, added, removed, settings=self.settings)

    async def reload(self) -> ReloadResult:
        try:
            new = self.source.load()
            declared = declared_subscriptions(self.source.path, self.settings.state_dir)
        except (ConfigError, ReloadError) as exc:
            return self._failed(str(exc), "reload failed; keeping the running configuration")
        if new.log_level != self.settings.log_level and self.set_log_level is not None:
            self.set_log_level(new.log_level)
            log.info("log level changed", log_level=new.log_level)
        pending = [
            f.name
            for f in fields(Settings)
            if f.name not in RELOADABLE and getattr(new, f.name) != getattr(self.settings, f.name)
        ]
        if pending:
            log.warning("settings changed; restart mcpsubd to apply them", settings=pending)
        self.settings = replace(self.settings, log_level=new.log_level)
        added, removed = await apply_declared(self.target, self.managed, declared)
        self.last_error = None
        log.info("reloaded", added=added, removed=removed, declared=len(declared))
        log.debug("declared subscriptions", subscriptions=[list(d) for d in declared])
        return ReloadResult(True, added, removed, settings=self.settings)

    def _failed(self, error: str, event: str) -> ReloadResult:
        self.last_error = error
        log.error(event, error=error)
        return ReloadResult(False, error=error)
