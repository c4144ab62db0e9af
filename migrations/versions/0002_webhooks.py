"""webhook targets and the delivery outbox

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "webhook_targets",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("url", sa.Text, nullable=False),
        sa.Column("secret", sa.Text, nullable=False),
        sa.Column("previous_secret", sa.Text),
        sa.Column("previous_secret_until", sa.Float),
        sa.Column("mode", sa.String(16), nullable=False, server_default="all"),
        sa.Column("enabled", sa.Integer, nullable=False, server_default="1"),
        sa.Column("disabled_reason", sa.Text),
        sa.Column("uri_patterns", sa.Text, nullable=False, server_default="[]"),
        sa.Column("subscription_ids", sa.Text, nullable=False, server_default="[]"),
        sa.Column("consecutive_failures", sa.Integer, nullable=False, server_default="0"),
        sa.Column("failing_since", sa.Float),
        sa.Column("last_success_at", sa.Float),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
    )
    op.create_table(
        "deliveries",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column(
            "target_id",
            sa.Integer,
            sa.ForeignKey("webhook_targets.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("webhook_id", sa.String(64), nullable=False),
        sa.Column("event_id", sa.Integer, nullable=False),
        sa.Column("revision_id", sa.Integer),
        sa.Column("subscription_id", sa.Integer),
        sa.Column("uri", sa.Text, nullable=False),
        sa.Column("state", sa.String(16), nullable=False, server_default="pending"),
        sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("next_attempt_at", sa.Float, nullable=False),
        sa.Column("last_status", sa.Integer),
        sa.Column("last_error", sa.Text),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
        sa.Column("delivered_at", sa.Float),
        sa.UniqueConstraint("webhook_id", name="uq_deliveries_webhook_id"),
    )
    op.create_index("ix_deliveries_due", "deliveries", ["state", "next_attempt_at"])
    op.create_index("ix_deliveries_order", "deliveries", ["target_id", "uri", "id"])


def downgrade() -> None:
    op.drop_table("deliveries")
    op.drop_table("webhook_targets")
