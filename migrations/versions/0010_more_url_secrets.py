"""credentials under more parameter names are stored apart from the shown URL

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02

The redaction rule (``service.safetext.is_secret_parameter``) grew from five query parameter
names to a maintained list (``password``, ``secret``, ``client_secret``, ``apikey``,
``auth`` …) plus any name containing ``token``, ``secret``, ``password`` or ``key``, in the
query, in the path's ``;name=value`` parameters and in the fragment. Rows written under the
old rule may show such a value in clear: they are rewritten as 0008 did, from the full URL
(``url_secret`` when there is one), keeping a credential key already set; the copies of URLs
in events, errors and delivery attempts are redacted in place.

Downgrade keeps the rewritten rows: 0009's schema is the same, and the full URLs stay in
``url_secret`` where the wire reads them.
"""

import sqlalchemy as sa
from alembic import op

from service.safetext import redact_urls, split_secret
from service.store.catalog import secret_credential_key

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

MAYBE_SECRET = "({column} LIKE '%@%' OR {column} LIKE '%=%')"
REDACTED = (
    ("events", "id", "server_url"),
    ("events", "id", "data"),
    ("servers", "id", "last_error"),
    ("subscriptions", "id", "state_reason"),
    ("deliveries", "id", "last_error"),
    ("delivery_attempts", "id", "error"),
)


def upgrade() -> None:
    conn = op.get_bind()
    where = MAYBE_SECRET.format(column="COALESCE(url_secret, url)")
    rows = conn.execute(
        sa.text(f"SELECT id, url, url_secret, credential_key FROM servers WHERE {where}")
    ).all()
    for row in rows:
        shown, secret = split_secret(row.url_secret or row.url)
        if shown == row.url:
            continue
        key = row.credential_key or (secret_credential_key(secret) if secret else "")
        conn.execute(
            sa.text(
                "UPDATE servers SET url = :url, url_secret = :secret, credential_key = :key "
                "WHERE id = :id"
            ),
            {"url": shown, "secret": secret, "key": key, "id": row.id},
        )
    rows = conn.execute(
        sa.text(f"SELECT id, url, url_secret FROM webhook_targets WHERE {where}")
    ).all()
    for row in rows:
        shown, secret = split_secret(row.url_secret or row.url)
        if shown != row.url:
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
    pass
