"""The daemon's settings, built once: flags, then ``MCPSUB_*`` env, then a TOML file, then defaults.

Every limit and timeout has a name here, a default, and a line in ``docs/operations.md``
(principle 6: bounded everything). The settings object is frozen and passed down; nothing
below reads the environment again.
"""

from __future__ import annotations

import math
import os
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from service import statepaths
from service.app.policy import parse_setting as parse_origins
from service.app.policy import parse_unsubscribe_setting
from service.backoff import Backoff
from service.store.database import DatabaseUrlError, parse, redact
from service.triggers.runner import TriggerSettings
from service.webhooks.dispatcher import WebhookSettings

LOG_LEVELS = ("debug", "info", "warning", "error")


class ConfigError(ValueError):
    """A setting has a value we cannot use; the message names the setting."""


def default_state_dir() -> Path:
    """systemd's ``STATE_DIRECTORY``, else ``$XDG_STATE_HOME/mcpsub`` (Linux),
    ``~/Library/Application Support/mcpsub`` (macOS): :mod:`service.statepaths`' rule."""
    return Path(statepaths.default_state_dir())


@dataclass(frozen=True)
class Settings:
    state_dir: Path = field(default_factory=default_state_dir)
    api: str = ""
    """``unix:///path/api.sock`` (default: ``<state_dir>/api.sock``, or a short private
    directory's when that is too long: :mod:`service.statepaths`) or ``tcp://127.0.0.1:PORT``
    (``http://127.0.0.1:PORT``, the documented spelling, is stored as ``tcp://``)."""
    database_url: str = ""
    """Default: SQLite ``<state_dir>/mcpsub.db``; ``postgresql://…`` for several replicas."""
    replica_id: str = ""
    """This replica's name in the ``replicas`` table; default ``<host>-<random>``, kept in
    ``<state_dir>/replica.id``."""
    lease_ttl_s: float = 15.0
    """How long a link's lease lasts unrenewed (renewed every third of it); a dead replica's
    links are re-listened by the others within about this long."""
    storage_recovery_s: float = 10.0
    """After the database refused writes (a full disk) or did not answer: how long writes
    must go through without a failure before the storage is reported ok again (one failing
    period, not a flap at every write that happens to fit)."""
    handover_timeout_s: float = 5.0
    """On SIGTERM, how long the other replicas get to listen to this replica's links and take
    them (make-before-break) before the rest are stopped and released; PostgreSQL only."""
    log_level: str = "info"
    log_format: str = "auto"
    """``json``, ``console`` or ``auto`` (JSON when stdout is not a TTY)."""
    keepalive_s: float = 15.0
    """Keep-alive interval we expect from servers; no bytes for 3x this = stream lost."""
    ack_timeout_s: float = 30.0
    request_timeout_s: float = 30.0
    connect_timeout_s: float = 10.0
    backoff_base_s: float = 1.0
    backoff_cap_s: float = 300.0
    healthy_reset_s: float = 60.0
    not_honored_retry_s: float = 300.0
    login_retry_s: float = 300.0
    relisten_per_minute: int = 60
    """Cap on listens per link per minute; a server that closes faster parks in ``throttled``."""
    relisten_jitter_s: float = 0.25
    """Upper bound of the random pause before re-listening after a close (spreads a stampede)."""
    protocol_recheck_s: float = 3600.0
    """A server that cannot speak 2026-07-28 is re-checked this often (and on resubscribe)."""
    token_check_s: float = 60.0
    """How often a link re-resolves its token (a refresh near expiry triggers a re-listen)."""
    read_concurrency: int = 64
    connect_concurrency: int = 1024
    """Links connecting at once (discover to the first listen's acknowledgement), all servers
    together; the others wait their turn, so a start with thousands of links does not queue
    every discover on the loop past its deadline."""
    trace_file: str = ""
    """Write the wire transcript of every link (and webhook POST) to this file, as
    ``--trace`` does for the CLIs (docs/cli.md "Wire transcript"); empty = none."""
    link_inbox_max: int = 1024
    """Distinct URIs pending re-read per link before its stream reader stops reading."""
    stream_max_frames_per_s: float = 5000.0
    """Frames (events and keep-alive comments) read per second per listen stream, at most."""
    unsubscribed_log_interval_s: float = 60.0
    """Updates for URIs a link did not subscribe are counted; logged at most this often."""
    keep_revisions: int = 100
    max_age_days: float = 30.0
    keep_events: int = 100_000
    prune_interval_s: float = 600.0
    shutdown_timeout_s: float = 5.0
    api_max_connections: int = 512
    """Open API connections at most (also capped at a quarter of the open-file limit); over
    it, the longest-idle connection is closed."""
    api_header_timeout_s: float = 10.0
    """A connection must send a complete request head within this, and a body within it."""
    fd_reserve: int = 64
    """Descriptors kept free for the database and the process, beyond the API's share: a
    server link that would use them waits with ``RESOURCE_LIMIT``."""
    console_session_idle_s: float = 8 * 3600.0
    """A console session no request used for this long ends (and what is open with it)."""
    console_session_max_age_s: float = 7 * 86400.0
    """A console session ends this long after login, however busy."""
    agent_progress_s: float = 5.0
    """How often a pending ``wait_for_change`` sends ``notifications/progress`` when the
    agent gave a progress token (at most 10 s: clients reset their timeouts on progress)."""
    agent_allowed_origins: str = ""
    """Server origins (``scheme://host[:port]``, comma-separated, or ``*``) on which agents may
    subscribe through the MCP face; empty = the origins the daemon already watches."""
    agent_unsubscribe: str = "own"
    """What an agent may remove through the MCP face: ``own`` (only subscriptions an agent made
    there) or ``any``."""
    webhook_schedule: str = "0,5,300,1800,7200,18000,36000,36000"
    """Seconds before each delivery attempt (comma list); its length is the attempt count."""
    webhook_jitter: float = 0.2
    webhook_timeout_s: float = 15.0
    webhook_max_body_bytes: int = 256 * 1024
    webhook_concurrency: int = 4
    webhook_disable_after_s: float = 5 * 86400.0
    webhook_breaker_failures: int = 5
    webhook_breaker_open_s: float = 30.0

    trigger_attempts: int = 5
    """Attempts per trigger run before it is dead-lettered (docs/triggers.md)."""
    trigger_retry_base_s: float = 10.0
    trigger_retry_cap_s: float = 900.0
    trigger_timeout_s: float = 600.0
    """A trigger's timeout per attempt unless it names its own (``--timeout``)."""
    trigger_kill_grace_s: float = 5.0
    trigger_max_triggers: int = 100
    trigger_max_running: int = 8
    trigger_tail_bytes: int = 8192
    trigger_max_input_bytes: int = 256 * 1024

    def trigger_settings(self) -> TriggerSettings:
        return TriggerSettings(
            attempts=max(1, self.trigger_attempts),
            retry=Backoff(base_s=self.trigger_retry_base_s, cap_s=self.trigger_retry_cap_s),
            timeout_s=self.trigger_timeout_s,
            kill_grace_s=self.trigger_kill_grace_s,
            max_triggers=self.trigger_max_triggers,
            max_running=max(1, self.trigger_max_running),
            tail_bytes=self.trigger_tail_bytes,
            max_input_bytes=self.trigger_max_input_bytes,
        )

    def webhook_settings(self) -> WebhookSettings:
        return WebhookSettings(
            schedule=tuple(float(x) for x in self.webhook_schedule.split(",") if x.strip()),
            jitter=self.webhook_jitter,
            timeout_s=self.webhook_timeout_s,
            max_body_bytes=self.webhook_max_body_bytes,
            concurrency=self.webhook_concurrency,
            disable_after_s=self.webhook_disable_after_s,
            breaker_failures=self.webhook_breaker_failures,
            breaker_open_s=self.webhook_breaker_open_s,
        )

    @property
    def db_path(self) -> Path:
        return self.state_dir / "mcpsub.db"

    @property
    def db_url(self) -> str:
        return self.database_url or f"sqlite+aiosqlite:///{self.db_path}"

    @property
    def db_display(self) -> str:
        """The database for messages and logs: the file path, or the URL without password."""
        return redact(self.database_url) if self.database_url else str(self.db_path)

    @property
    def api_socket(self) -> Path | None:
        """The socket named by ``api``, else the state dir's by the one rule (beside the
        state, or in a short private directory when that path is too long to bind)."""
        if not self.api:
            return Path(statepaths.socket_path(str(self.state_dir)))
        if self.api.startswith("unix://"):
            return Path(self.api[len("unix://") :])
        return None

    @property
    def api_tcp(self) -> tuple[str, int] | None:
        if self.api.startswith("tcp://"):
            host, _, port = self.api[len("tcp://") :].rpartition(":")
            return host, int(port)
        return None

    @property
    def token_path(self) -> Path:
        return Path(statepaths.token_path(str(self.state_dir)))


_FIELDS = {f.name: f for f in fields(Settings)}


def _coerce(name: str, raw: Any) -> Any:
    kind = _FIELDS[name].type
    try:
        if kind == "Path":
            return Path(str(raw)).expanduser()
        if kind == "float":
            value = float(raw)
            if not math.isfinite(value):  # nan would make every comparison False
                raise ValueError("must be a finite number")
            if value < 0:
                raise ValueError("must be >= 0")
            return value
        if kind == "int":
            value = int(raw)
            if value < 1:
                raise ValueError("must be >= 1")
            return value
        return str(raw)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"invalid value for {name}: {raw!r} ({exc})") from exc


def _validate(settings: Settings) -> Settings:
    api = settings.api
    if api.startswith("http://"):  # the spelling the docs and mcpsubctl use; tcp:// is the same
        api = "tcp://" + api[len("http://") :].rstrip("/")
        settings = replace(settings, api=api)
    if api and not api.startswith(("unix://", "tcp://")):
        raise ConfigError(
            f"invalid value for api: {api!r} (use unix:///PATH or http://127.0.0.1:PORT)"
        )
    if api.startswith("tcp://"):
        try:
            host, _port = settings.api_tcp or ("", 0)
        except ValueError as exc:
            raise ConfigError(f"invalid value for api: {api!r} (http://127.0.0.1:PORT)") from exc
        if host not in ("127.0.0.1", "localhost", "::1", "[::1]"):
            raise ConfigError("api: the TCP listener binds loopback only (http://127.0.0.1:PORT)")
    try:
        schedule = settings.webhook_settings().schedule
    except ValueError as exc:
        raise ConfigError(
            f"invalid value for webhook_schedule: {settings.webhook_schedule!r}"
        ) from exc
    if not schedule or any(x < 0 for x in schedule):
        raise ConfigError("webhook_schedule needs at least one delay, none negative")
    if settings.database_url:
        try:
            parse(settings.database_url)
        except DatabaseUrlError as exc:
            raise ConfigError(str(exc)) from exc
    try:
        parse_origins(settings.agent_allowed_origins)
        parse_unsubscribe_setting(settings.agent_unsubscribe)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    if settings.log_level.lower() not in LOG_LEVELS:
        raise ConfigError(
            f"invalid value for log_level: {settings.log_level!r} (use {', '.join(LOG_LEVELS)})"
        )
    if min(settings.console_session_idle_s, settings.console_session_max_age_s) <= 0:
        raise ConfigError("console_session_idle_s and console_session_max_age_s must be > 0")
    if settings.log_format not in ("auto", "json", "console"):
        raise ConfigError(f"invalid value for log_format: {settings.log_format!r}")
    return settings


def load_settings(
    flags: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
    config_file: Path | None = None,
) -> Settings:
    """Merge the sources; the first that names a setting wins."""
    env = dict(os.environ if env is None else env)
    values: dict[str, Any] = {}
    file_path = config_file or (Path(env["MCPSUB_CONFIG"]) if env.get("MCPSUB_CONFIG") else None)
    if file_path is not None:
        try:
            data = tomllib.loads(file_path.read_text())
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"cannot read config file {file_path}: {exc}") from exc
        section = data.get("mcpsubd", data)
        for key, raw in section.items():
            if key == "subscriptions" and section is data:
                continue  # declared subscriptions: read by service.daemon.reload
            name = key.replace("-", "_")
            if name not in _FIELDS:
                raise ConfigError(f"{file_path}: unknown setting {key!r}")
            values[name] = _coerce(name, raw)
    for name in _FIELDS:
        raw = env.get("MCPSUB_" + name.upper())
        if raw not in (None, ""):
            values[name] = _coerce(name, raw)
    for name, raw in (flags or {}).items():
        if raw is not None:
            values[name] = _coerce(name, raw)
    return _validate(replace(Settings(), **values))
