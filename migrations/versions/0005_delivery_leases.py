"""per-delivery leases (webhook attempts across replicas)

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01

On PostgreSQL each delivery attempt is claimed by one replica (``FOR UPDATE SKIP LOCKED``)
for a lease that outlasts the attempt's timeout; a dead replica's claims expire and another
replica makes the attempt again, with the same ``webhook-id``.
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("deliveries") as batch:
        batch.add_column(sa.Column("lease_owner", sa.String(128)))
        batch.add_column(sa.Column("lease_until", sa.Float))


def downgrade() -> None:
    with op.batch_alter_table("deliveries") as batch:
        batch.drop_column("lease_until")
        batch.drop_column("lease_owner")
