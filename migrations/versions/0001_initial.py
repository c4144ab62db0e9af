"""servers, subscriptions, revisions, events

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "servers",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("url", sa.Text, nullable=False),
        sa.Column("credential_key", sa.Text, nullable=False, server_default=""),
        sa.Column("state", sa.String(32), nullable=False, server_default="idle"),
        sa.Column("generation", sa.Integer, nullable=False, server_default="0"),
        sa.Column("last_error", sa.Text),
        sa.Column("last_error_code", sa.String(64)),
        sa.Column("reconnects", sa.Integer, nullable=False, server_default="0"),
        sa.Column("backoff_until", sa.Float),
        sa.Column("connected_at", sa.Float),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
        sa.UniqueConstraint("url", "credential_key", name="uq_servers_url_credential"),
    )
    op.create_table(
        "subscriptions",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column(
            "server_id", sa.Integer, sa.ForeignKey("servers.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("uri", sa.Text, nullable=False),
        sa.Column("state", sa.String(32), nullable=False, server_default="pending"),
        sa.Column("state_reason", sa.Text),
        sa.Column("content_hash", sa.String(64)),
        sa.Column("revision", sa.Integer, nullable=False, server_default="0"),
        sa.Column("read_generation", sa.Integer),
        sa.Column("last_read_at", sa.Float),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
        sa.UniqueConstraint("server_id", "uri", name="uq_subscriptions_server_uri"),
    )
    op.create_table(
        "revisions",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column(
            "subscription_id",
            sa.Integer,
            sa.ForeignKey("subscriptions.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("revision", sa.Integer, nullable=False),
        sa.Column("content_hash", sa.String(64), nullable=False),
        sa.Column("contents", sa.Text, nullable=False),
        sa.Column("text", sa.Text),
        sa.Column("generation", sa.Integer, nullable=False),
        sa.Column("read_at", sa.Float, nullable=False),
        sa.UniqueConstraint(
            "subscription_id", "revision", name="uq_revisions_subscription_revision"
        ),
    )
    op.create_index("ix_revisions_subscription", "revisions", ["subscription_id", "revision"])
    op.create_table(
        "events",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("type", sa.String(64), nullable=False),
        sa.Column("subscription_id", sa.Integer),
        sa.Column("server_url", sa.Text),
        sa.Column("uri", sa.Text),
        sa.Column("revision_id", sa.Integer),
        sa.Column("revision", sa.Integer),
        sa.Column("data", sa.Text),
        sa.Column("created_at", sa.Float, nullable=False),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_events_subscription", "events", ["subscription_id", "id"])
    op.create_index("ix_events_uri", "events", ["uri", "id"])


def downgrade() -> None:
    op.drop_table("events")
    op.drop_table("revisions")
    op.drop_table("subscriptions")
    op.drop_table("servers")
