"""credentials in server and webhook URLs are stored apart from the URL that is shown

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01

A URL may carry credentials: ``user:password@`` or a secret query parameter
(``?token=…``, see ``service.safetext.SECRET_QUERY_PARAMETERS``). ``url`` now holds only the
form that may be shown (``http://***@host/mcp?token=***``): every answer, event and log line
is built from it. ``url_secret`` holds the full URL, NULL when there is nothing to hide, and is
read only where a connection is made. A server whose URL has secrets gets a
``credential_key`` derived from them, so two credentials for one host stay two links.

Existing rows are rewritten the same way, and the places a URL may have been copied into are
redacted in place: ``events.server_url``, ``servers.last_error``,
``subscriptions.state_reason`` and ``deliveries.last_error``.
"""

import sqlalchemy as sa
from alembic import op

from service.safetext import redact_urls, split_secret
from service.store.catalog import secret_credential_key

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

MAYBE_SECRET = "({column} LIKE '%@%' OR {column} LIKE '%=%')"
REDACTED = (
    ("events", "id", "server_url"),
    ("events", "id", "data"),
    ("servers", "id", "last_error"),
    ("subscriptions", "id", "state_reason"),
    ("deliveries", "id", "last_error"),
)


def upgrade() -> None:
    for table in ("servers", "webhook_targets"):
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("url_secret", sa.Text))
    conn = op.get_bind()
    where = MAYBE_SECRET.format(column="url")
    for row in conn.execute(sa.text(f"SELECT id, url FROM servers WHERE {where}")).all():
        shown, secret = split_secret(row.url)
        if secret is not None:
            conn.execute(
                sa.text(
                    "UPDATE servers SET url = :url, url_secret = :secret, credential_key = :key "
                    "WHERE id = :id"
                ),
                {
                    "url": shown,
                    "secret": secret,
                    "key": secret_credential_key(secret),
                    "id": row.id,
                },
            )
    for row in conn.execute(sa.text(f"SELECT id, url FROM webhook_targets WHERE {where}")).all():
        shown, secret = split_secret(row.url)
        if secret is not None:
            conn.execute(
                sa.text(
                    "UPDATE webhook_targets SET url = :url, url_secret = :secret WHERE id = :id"
                ),
                {"url": shown, "secret": secret, "id": row.id},
            )
    for table, key, column in REDACTED:
        where = MAYBE_SECRET.format(column=column)
        for row in conn.execute(sa.text(f"SELECT {key}, {column} FROM {table} WHERE {where}")):
            shown = redact_urls(row[1])
            if shown != row[1]:
                conn.execute(
                    sa.text(f"UPDATE {table} SET {column} = :value WHERE {key} = :key"),
                    {"value": shown, "key": row[0]},
                )


def downgrade() -> None:
    conn = op.get_bind()
    conn.execute(
        sa.text(
            "UPDATE servers SET url = url_secret, credential_key = '' WHERE url_secret IS NOT NULL"
        )
    )
    conn.execute(
        sa.text("UPDATE webhook_targets SET url = url_secret WHERE url_secret IS NOT NULL")
    )
    for table in ("servers", "webhook_targets"):
        with op.batch_alter_table(table) as batch:
            batch.drop_column("url_secret")
