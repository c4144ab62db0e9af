"""ids are never reused; subscriptions keep the code of their state

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01

Events already had ``AUTOINCREMENT``; subscriptions, webhook targets and deliveries did not,
so on SQLite a deleted row's id could be handed out again and an old event (or a script
holding an id) would point at a new object. SQLite only accepts ``AUTOINCREMENT`` in
``CREATE TABLE``, so those three tables are rebuilt in batch mode (copy and move; rows,
indexes, unique and foreign keys are kept, and ``sqlite_sequence`` starts at the highest id
copied). Other databases (PostgreSQL: ``SERIAL``/identity columns) never reuse ids, so for
them only the new column is added.

``subscriptions.state_code`` holds the stable error code of an ``error`` state
(``RESOURCE_NOT_FOUND``, ``PROTOCOL_UNSUPPORTED``, …) next to the human ``state_reason``.
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

TABLES = ("subscriptions", "webhook_targets", "deliveries")


def upgrade() -> None:
    sqlite = op.get_bind().dialect.name == "sqlite"
    for table in TABLES:
        with op.batch_alter_table(
            table,
            recreate="always" if sqlite else "auto",
            table_kwargs={"sqlite_autoincrement": True} if sqlite else {},
        ) as batch:
            if table == "subscriptions":
                batch.add_column(sa.Column("state_code", sa.String(64)))


def downgrade() -> None:
    sqlite = op.get_bind().dialect.name == "sqlite"
    for table in reversed(TABLES):
        with op.batch_alter_table(table, recreate="always" if sqlite else "auto") as batch:
            if table == "subscriptions":
                batch.drop_column("state_code")
