"""who made each subscription: a person or an agent through the MCP face

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-02

``subscriptions.created_by`` is ``person`` (``mcpsubctl``, the API, the console) or ``agent``
(the face: ``mcpsubctl mcp``, ``/mcp``). The face lets an agent remove only what an agent
made (``agent_unsubscribe``, docs/agents-face.md), so a prompt injection cannot delete what a
person watches. Existing rows were made before anyone recorded it: they are ``person``, the
side an agent may not remove.
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("subscriptions") as batch:
        batch.add_column(
            sa.Column("created_by", sa.String(16), nullable=False, server_default="person")
        )


def downgrade() -> None:
    with op.batch_alter_table("subscriptions") as batch:
        batch.drop_column("created_by")
