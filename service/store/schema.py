"""The daemon's tables. Alembic migrations in ``migrations/`` create exactly these.

One row per server link (URL + credential), one per subscribed URI, an append-only history of
revisions (content that changed), and an event log whose integer ids are the cursor for the
local SSE stream, ``mcpsubctl events --since`` and ``mcpsubctl wait --after``.
"""

from __future__ import annotations

from sqlalchemy import (
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

metadata = MetaData()

servers = Table(
    "servers",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("url", Text, nullable=False),  # as it may be shown: credentials redacted
    Column("url_secret", Text),  # the full URL when it carries credentials (the wire's)
    Column("credential_key", Text, nullable=False, server_default=""),
    Column("state", String(32), nullable=False, server_default="idle"),
    Column("generation", Integer, nullable=False, server_default="0"),
    Column("last_error", Text),
    Column("last_error_code", String(64)),
    Column("reconnects", Integer, nullable=False, server_default="0"),
    Column("backoff_until", Float),
    Column("connected_at", Float),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    # The link's lease (scale-out): which replica runs it, until when, and the epoch every
    # claim bumps (together with ``generation``: the fence a paused replica's writes hit).
    Column("lease_owner", String(128)),
    Column("lease_until", Float),
    Column("lease_epoch", Integer, nullable=False, server_default="0"),
    # Make-before-break handover: NULL, "*" (offered by its owner) or the replica that
    # listens in standby and takes the lease once its listen is acknowledged.
    Column("lease_successor", String(128)),
    # The last discover result that led to an acknowledged listen, kept with its caching
    # hints so a restart within its ttlMs does not ask again (service/mcp/discovercache.py).
    Column("discovered", Text),
    UniqueConstraint("url", "credential_key", name="uq_servers_url_credential"),
)
Index("ix_servers_lease_owner", servers.c.lease_owner)

replicas = Table(
    "replicas",
    metadata,
    Column("id", String(128), primary_key=True),
    Column("host", Text, nullable=False, server_default=""),
    Column("pid", Integer, nullable=False, server_default="0"),
    Column("started_at", Float, nullable=False),
    Column("heartbeat_at", Float, nullable=False),
    Column("stopping", Integer, nullable=False, server_default="0"),
)

subscriptions = Table(
    "subscriptions",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("server_id", Integer, ForeignKey("servers.id", ondelete="CASCADE"), nullable=False),
    Column("uri", Text, nullable=False),
    Column("state", String(32), nullable=False, server_default="pending"),
    Column("state_reason", Text),
    # state_code: the stable error code of an `error` state (RESOURCE_NOT_FOUND, …).
    Column("state_code", String(64)),
    Column("content_hash", String(64)),
    Column("revision", Integer, nullable=False, server_default="0"),
    Column("read_generation", Integer),
    Column("last_read_at", Float),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    # Who made it: "person" (the CLI, the API, the console) or "agent" (the MCP face). An
    # agent may remove only what an agent made (migration 0011, service/app/policy.py).
    Column("created_by", String(16), nullable=False, server_default="person"),
    UniqueConstraint("server_id", "uri", name="uq_subscriptions_server_uri"),
    # Ids are never reused (migration 0003): an old event never points at a new object.
    sqlite_autoincrement=True,
)
# The counts per state (/metrics, /v1/status) read the groups in order from it (migration 0015).
Index("ix_subscriptions_state", subscriptions.c.state)

revisions = Table(
    "revisions",
    metadata,
    Column("id", Integer, primary_key=True),
    Column(
        "subscription_id",
        Integer,
        ForeignKey("subscriptions.id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("revision", Integer, nullable=False),
    Column("content_hash", String(64), nullable=False),
    Column("contents", Text, nullable=False),
    Column("text", Text),
    Column("generation", Integer, nullable=False),
    Column("read_at", Float, nullable=False),
    # its index serves every lookup by subscription and revision (the only one: 0016)
    UniqueConstraint("subscription_id", "revision", name="uq_revisions_subscription_revision"),
)

events = Table(
    "events",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("type", String(64), nullable=False),
    Column("subscription_id", Integer),
    Column("server_url", Text),
    Column("uri", Text),
    Column("revision_id", Integer),
    Column("revision", Integer),
    Column("data", Text),
    Column("created_at", Float, nullable=False),
    sqlite_autoincrement=True,
)

Index("ix_events_subscription", events.c.subscription_id, events.c.id)
Index("ix_events_uri", events.c.uri, events.c.id)

webhook_targets = Table(
    "webhook_targets",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("url", Text, nullable=False),  # as it may be shown: credentials redacted
    Column("url_secret", Text),  # the full URL when it carries credentials (the wire's)
    Column("secret", Text, nullable=False),
    Column("previous_secret", Text),
    Column("previous_secret_until", Float),
    Column("mode", String(16), nullable=False, server_default="all"),
    Column("enabled", Integer, nullable=False, server_default="1"),
    Column("disabled_reason", Text),
    Column("uri_patterns", Text, nullable=False, server_default="[]"),
    Column("subscription_ids", Text, nullable=False, server_default="[]"),
    Column("consecutive_failures", Integer, nullable=False, server_default="0"),
    Column("failing_since", Float),
    Column("last_success_at", Float),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    Column("allow_private_target", Integer, nullable=False, server_default="0"),
    sqlite_autoincrement=True,
)

deliveries = Table(
    "deliveries",
    metadata,
    Column("id", Integer, primary_key=True),
    Column(
        "target_id", Integer, ForeignKey("webhook_targets.id", ondelete="CASCADE"), nullable=False
    ),
    Column("webhook_id", String(64), nullable=False),
    Column("event_id", Integer, nullable=False),
    Column("revision_id", Integer),
    Column("subscription_id", Integer),
    Column("uri", Text, nullable=False),
    Column("state", String(16), nullable=False, server_default="pending"),
    Column("attempts", Integer, nullable=False, server_default="0"),
    Column("next_attempt_at", Float, nullable=False),
    Column("last_status", Integer),
    Column("last_error", Text),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    Column("delivered_at", Float),
    # Which replica is making the current attempt, until when (scale-out; unused on SQLite).
    Column("lease_owner", String(128)),
    Column("lease_until", Float),
    UniqueConstraint("webhook_id", name="uq_deliveries_webhook_id"),
    sqlite_autoincrement=True,
)

Index("ix_deliveries_due", deliveries.c.state, deliveries.c.next_attempt_at)
Index("ix_deliveries_order", deliveries.c.target_id, deliveries.c.uri, deliveries.c.id)

delivery_attempts = Table(
    "delivery_attempts",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("delivery_id", Integer, ForeignKey("deliveries.id", ondelete="CASCADE"), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("started_at", Float, nullable=False),
    Column("duration_ms", Float),
    # The headers sent (signature included; never the secret); the body is the delivery's.
    Column("request_headers", Text, nullable=False, server_default="{}"),
    Column("ok", Integer, nullable=False, server_default="0"),
    Column("status", Integer),
    # The first RESPONSE_EXCERPT bytes of the answer, decoded with replacement characters.
    Column("response_body", Text),
    Column("error", Text),
    sqlite_autoincrement=True,
)
Index("ix_delivery_attempts_delivery", delivery_attempts.c.delivery_id, delivery_attempts.c.id)

# Triggers (migration 0013, docs/triggers.md): programs run on matching revisions, and their
# outbox of runs, filled in the revision's transaction like ``deliveries``.
triggers = Table(
    "triggers",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("name", Text),
    Column("program", Text, nullable=False),
    Column("args", Text, nullable=False, server_default="[]"),
    Column("uri_patterns", Text, nullable=False, server_default="[]"),
    Column("mode", String(16), nullable=False, server_default="all"),
    Column("concurrency", Integer, nullable=False, server_default="1"),
    Column("timeout_s", Float, nullable=False),
    # JSON list of "NAME" (passed through from the daemon's environment) or "NAME=VALUE".
    Column("env", Text, nullable=False, server_default="[]"),
    Column("cwd", Text),
    Column("enabled", Integer, nullable=False, server_default="1"),
    Column("created_by", String(16), nullable=False, server_default="person"),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    sqlite_autoincrement=True,
)

trigger_runs = Table(
    "trigger_runs",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("trigger_id", Integer, ForeignKey("triggers.id", ondelete="CASCADE"), nullable=False),
    Column("event_id", Integer),
    Column("revision_id", Integer),
    Column("subscription_id", Integer),
    Column("uri", Text, nullable=False),
    Column("state", String(16), nullable=False, server_default="pending"),
    Column("attempts", Integer, nullable=False, server_default="0"),
    # ``attempts`` when the current retry budget began (a replay starts a new one).
    Column("budget_from", Integer, nullable=False, server_default="0"),
    Column("next_attempt_at", Float, nullable=False),
    Column("last_exit", Integer),
    Column("last_signal", String(16)),
    Column("last_error", Text),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    Column("finished_at", Float),
    Column("lease_owner", String(128)),
    Column("lease_until", Float),
    sqlite_autoincrement=True,
)
Index("ix_trigger_runs_due", trigger_runs.c.state, trigger_runs.c.next_attempt_at)
Index("ix_trigger_runs_order", trigger_runs.c.trigger_id, trigger_runs.c.uri, trigger_runs.c.id)

trigger_attempts = Table(
    "trigger_attempts",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("run_id", Integer, ForeignKey("trigger_runs.id", ondelete="CASCADE"), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("started_at", Float, nullable=False),
    Column("ended_at", Float),
    Column("duration_ms", Float),
    Column("exit_code", Integer),
    Column("signal", String(16)),
    Column("timed_out", Integer, nullable=False, server_default="0"),
    Column("error", Text),
    # The last bytes of each stream, decoded with replacement characters and redacted.
    Column("stdout_tail", Text),
    Column("stderr_tail", Text),
    Column("stdout_bytes", Integer, nullable=False, server_default="0"),
    Column("stderr_bytes", Integer, nullable=False, server_default="0"),
    sqlite_autoincrement=True,
)
Index("ix_trigger_attempts_run", trigger_attempts.c.run_id, trigger_attempts.c.id)
