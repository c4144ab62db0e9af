"""a link's last discover result, kept with its caching hints

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-03

``servers.discovered`` holds the ``server/discover`` result (versions, capabilities, server
info, ``ttlMs``, ``cacheScope`` and when it was received) of the session whose listen was last
acknowledged, written in the acknowledgement's transaction. A daemon that starts again within
``ttlMs`` reuses it instead of asking every server again (``service/mcp/discovercache.py``).
Existing rows have none: their next start discovers, as before.
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("servers") as batch:
        batch.add_column(sa.Column("discovered", sa.Text))


def downgrade() -> None:
    with op.batch_alter_table("servers") as batch:
        batch.drop_column("discovered")
