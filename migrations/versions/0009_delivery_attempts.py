"""one row per webhook delivery attempt: the headers sent and the answer (the console's
attempt log)

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01

``delivery_attempts``: written in the same transaction as the attempt's outcome
(service/webhooks/repository.py). The request body is not stored: it is the delivery's,
rebuilt from its revision on demand; the answer is kept to its first 2 KiB.
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "delivery_attempts",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column(
            "delivery_id",
            sa.Integer,
            sa.ForeignKey("deliveries.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("started_at", sa.Float, nullable=False),
        sa.Column("duration_ms", sa.Float),
        sa.Column("request_headers", sa.Text, nullable=False, server_default="{}"),
        sa.Column("ok", sa.Integer, nullable=False, server_default="0"),
        sa.Column("status", sa.Integer),
        sa.Column("response_body", sa.Text),
        sa.Column("error", sa.Text),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_delivery_attempts_delivery", "delivery_attempts", ["delivery_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_delivery_attempts_delivery", table_name="delivery_attempts")
    op.drop_table("delivery_attempts")
