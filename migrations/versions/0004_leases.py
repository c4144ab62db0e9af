"""replicas and server-link leases (scale-out on PostgreSQL)

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01

Each server link gets a lease (owner replica, expiry, epoch); each running ``mcpsubd`` a row
with its heartbeat. On SQLite the one daemon holds every lease (see service/store/leases.py).
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("servers") as batch:
        batch.add_column(sa.Column("lease_owner", sa.String(128)))
        batch.add_column(sa.Column("lease_until", sa.Float))
        batch.add_column(sa.Column("lease_epoch", sa.Integer, nullable=False, server_default="0"))
    op.create_index("ix_servers_lease_owner", "servers", ["lease_owner"])
    op.create_table(
        "replicas",
        sa.Column("id", sa.String(128), primary_key=True),
        sa.Column("host", sa.Text, nullable=False, server_default=""),
        sa.Column("pid", sa.Integer, nullable=False, server_default="0"),
        sa.Column("started_at", sa.Float, nullable=False),
        sa.Column("heartbeat_at", sa.Float, nullable=False),
        sa.Column("stopping", sa.Integer, nullable=False, server_default="0"),
    )


def downgrade() -> None:
    op.drop_table("replicas")
    op.drop_index("ix_servers_lease_owner", "servers")
    with op.batch_alter_table("servers") as batch:
        batch.drop_column("lease_epoch")
        batch.drop_column("lease_until")
        batch.drop_column("lease_owner")
