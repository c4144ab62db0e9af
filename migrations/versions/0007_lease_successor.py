"""make-before-break handover of server links (scale-out on PostgreSQL)

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01

``servers.lease_successor``: NULL (the owner keeps the link), ``'*'`` (the owner offers it:
it is stopping, or holds more than its share) or the id of the replica that is listening to
it in standby and takes the lease once its own listen is acknowledged (see
service/store/leases.py and docs/scale-out.md, "Handover").
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("servers") as batch:
        batch.add_column(sa.Column("lease_successor", sa.String(128)))


def downgrade() -> None:
    with op.batch_alter_table("servers") as batch:
        batch.drop_column("lease_successor")
