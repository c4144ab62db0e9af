"""webhook targets remember --allow-private-target

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01

The private-target rule is applied again at delivery time, to the address a target's host
name resolves to (a name can point at 169.254.169.254 or be re-pointed there later); a
target registered with ``allowPrivateTarget: true`` is exempt, so the choice is stored.
Targets made before this migration passed the registration check, so they start at 0.
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("webhook_targets") as batch:
        batch.add_column(
            sa.Column("allow_private_target", sa.Integer, nullable=False, server_default="0")
        )


def downgrade() -> None:
    with op.batch_alter_table("webhook_targets") as batch:
        batch.drop_column("allow_private_target")
